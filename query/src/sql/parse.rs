//! SQL text to a [`Parsed`] predicate or [`SelectPlan`]: sqlparser does the grammar, this module
//! rejects what beton does not run (joins, subqueries, `DISTINCT`, `HAVING`, …) with a position.

use sqlparser::ast::{
    Expr, GroupByExpr, LimitClause, OrderByKind, OrderBySort, SelectItem, SetExpr, Spanned, Statement,
    TableFactor, Value,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Token};

use super::sql_error;
use crate::error::{Error, Result};

/// The one table name a query may read.
pub(crate) const TABLE_NAME: &str = "samples";

/// What the text was.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A bare boolean expression.
    Predicate(Box<Expr>),
    /// A `SELECT` statement.
    Select(Box<SelectPlan>),
}

/// One `ORDER BY` key.
#[derive(Debug)]
pub(crate) struct OrderKey {
    pub expr: Expr,
    pub descending: bool,
    pub nulls_first: bool,
}

/// A `SELECT … FROM samples` with the clauses beton runs.
#[derive(Debug)]
pub(crate) struct SelectPlan {
    pub projection: Vec<SelectItem>,
    pub selection: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    pub order_by: Vec<OrderKey>,
    pub limit: Option<usize>,
    pub offset: usize,
}

/// Parses `sql` as a `SELECT` (when it starts with `SELECT`) or a bare predicate.
///
/// # Errors
/// [`Error::Sql`] with sqlparser's position for syntax errors, or the position of the clause
/// beton does not support.
pub(crate) fn parse(sql: &str) -> Result<Parsed> {
    let dialect = GenericDialect {};
    // A statement starts with the keyword SELECT or WITH (not a column such as `selection`).
    let text = sql.trim_start().trim_start_matches('(').trim_start();
    let word: String = text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let is_statement = word.eq_ignore_ascii_case("select") || word.eq_ignore_ascii_case("with");
    if !is_statement {
        let mut parser = Parser::new(&dialect).try_with_sql(sql).map_err(|e| parser_error(sql, e))?;
        let expr = parser.parse_expr().map_err(|e| parser_error(sql, e))?;
        let next = parser.peek_token();
        if next.token != Token::EOF {
            return Err(sql_error(format!("unexpected '{}' after the predicate", next.token), next.span));
        }
        return Ok(Parsed::Predicate(Box::new(expr)));
    }
    let mut statements = Parser::parse_sql(&dialect, sql).map_err(|e| parser_error(sql, e))?;
    if statements.len() != 1 {
        let span = statements.get(1).map_or(Span::empty(), |s| s.span());
        return Err(sql_error(format!("expected one statement, got {}", statements.len()), span));
    }
    let q = match statements.remove(0) {
        Statement::Query(q) => q,
        other => return Err(unsupported("statements other than SELECT", other.span())),
    };
    let mut q = *q;
    // `(SELECT …)`: the parenthesised query, when the outer one adds nothing.
    while matches!(*q.body, SetExpr::Query(_))
        && q.with.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none()
    {
        let SetExpr::Query(inner) = *q.body else { break };
        q = *inner;
    }
    if let Some(with) = &q.with {
        return Err(unsupported("WITH", with.span()));
    }
    if let Some(f) = &q.fetch {
        return Err(unsupported("FETCH", f.quantity.as_ref().map_or(Span::empty(), |e| e.span())));
    }
    if !q.locks.is_empty() || q.for_clause.is_some() || q.settings.is_some() || q.format_clause.is_some() {
        return Err(unsupported("this clause", q.span()));
    }
    if !q.pipe_operators.is_empty() {
        return Err(unsupported("pipe operators", q.span()));
    }
    let select = match *q.body {
        SetExpr::Select(s) => s,
        SetExpr::SetOperation { op, left, .. } => {
            return Err(unsupported(&format!("{op} (set operations)"), left.span()))
        }
        other => return Err(unsupported("this query form (only SELECT … FROM samples)", other.span())),
    };
    if select.distinct.is_some() {
        return Err(unsupported("DISTINCT", select.select_token.0.span));
    }
    if select.top.is_some() {
        return Err(unsupported("TOP", select.select_token.0.span));
    }
    if select.into.is_some() {
        return Err(unsupported("SELECT INTO", select.select_token.0.span));
    }
    if let Some(qe) = &select.qualify {
        return Err(unsupported("QUALIFY", qe.span()));
    }
    if let Some(p) = &select.prewhere {
        return Err(unsupported("PREWHERE", p.span()));
    }
    if !select.named_window.is_empty() {
        return Err(unsupported("WINDOW", select.select_token.0.span));
    }
    if !select.lateral_views.is_empty() || !select.cluster_by.is_empty() || !select.sort_by.is_empty() {
        return Err(unsupported("this clause", select.span()));
    }
    match select.from.as_slice() {
        [] => return Err(sql_error(format!("expected FROM {TABLE_NAME}"), select.select_token.0.span)),
        [t] => {
            if let Some(j) = t.joins.first() {
                return Err(unsupported("JOIN", j.relation.span()));
            }
            match &t.relation {
                TableFactor::Table { name, alias: None, args: None, .. }
                    if name.to_string().eq_ignore_ascii_case(TABLE_NAME) => {}
                TableFactor::Table { name, alias: None, .. } => {
                    return Err(sql_error(
                        format!("no table named '{name}'; the table is '{TABLE_NAME}'"),
                        name.span(),
                    ))
                }
                TableFactor::Derived { .. } => return Err(unsupported("subqueries", t.relation.span())),
                other => return Err(unsupported(&format!("FROM {other}"), other.span())),
            }
        }
        [_, second, ..] => return Err(unsupported("more than one table in FROM", second.relation.span())),
    }
    let group_by = match select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
        _ => return Err(unsupported("GROUP BY ALL / ROLLUP / CUBE", select.select_token.0.span)),
    };
    let mut order_by = Vec::new();
    if let Some(o) = q.order_by {
        match o.kind {
            OrderByKind::All(_) => return Err(unsupported("ORDER BY ALL", select.select_token.0.span)),
            OrderByKind::Expressions(exprs) => {
                for e in exprs {
                    if e.with_fill.is_some() {
                        return Err(unsupported("WITH FILL", e.expr.span()));
                    }
                    let descending = match e.options.sort {
                        None | Some(OrderBySort::Asc) => false,
                        Some(OrderBySort::Desc) => true,
                        Some(OrderBySort::Using(_)) => {
                            return Err(unsupported("ORDER BY USING", e.expr.span()))
                        }
                    };
                    // SQL's default: NULLS LAST ascending, NULLS FIRST descending.
                    let nulls_first = e.options.nulls_first.unwrap_or(descending);
                    order_by.push(OrderKey { expr: e.expr, descending, nulls_first });
                }
            }
        }
    }
    let (limit, offset) = match q.limit_clause {
        None => (None, 0),
        Some(LimitClause::LimitOffset { limit, offset, limit_by }) => {
            if let Some(b) = limit_by.first() {
                return Err(unsupported("LIMIT BY", b.span()));
            }
            (limit.as_ref().map(count).transpose()?, offset.as_ref().map_or(Ok(0), |o| count(&o.value))?)
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => (Some(count(&limit)?), count(&offset)?),
    };
    Ok(Parsed::Select(Box::new(SelectPlan {
        projection: select.projection,
        selection: select.selection,
        group_by,
        having: select.having,
        order_by,
        limit,
        offset,
    })))
}

/// A non-negative integer literal (LIMIT, OFFSET).
fn count(e: &Expr) -> Result<usize> {
    if let Expr::Value(v) = e {
        if let Value::Number(n, _) = &v.value {
            if let Ok(k) = n.parse::<usize>() {
                return Ok(k);
            }
        }
    }
    Err(sql_error(format!("expected a non-negative integer, got {e}"), e.span()))
}

/// "… not supported" at `span`.
pub(crate) fn unsupported(what: &str, span: Span) -> Error {
    sql_error(format!("{what} not supported"), span)
}

/// sqlparser's error, with the position it writes as "at Line: x, Column: y" lifted out.
fn parser_error(sql: &str, e: ParserError) -> Error {
    let message = e.to_string();
    let find = |key: &str| {
        let at = message.rfind(key)? + key.len();
        message[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u64>().ok()
    };
    let (line, column) = match (find("Line: "), find("Column: ")) {
        (Some(l), Some(c)) => (l, c),
        // sqlparser gives no position at the end of the text: point just past its last character.
        _ if message.contains("EOF") => {
            let last = sql.rsplit('\n').next().unwrap_or("");
            (sql.matches('\n').count() as u64 + 1, last.chars().count() as u64 + 1)
        }
        _ => (0, 0),
    };
    Error::Sql { message, line, column }
}
