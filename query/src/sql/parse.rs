//! SQL text to a [`Parsed`] predicate or [`SelectPlan`]: sqlparser does the grammar, this module
//! rejects what beton does not run (joins, subqueries, `DISTINCT`, `HAVING`, …) with a position.
//!
//! The text is tokenized first ([`tokenize`]) so that nesting past [`MAX_NESTING`] is refused at
//! the token that goes past it, before sqlparser's recursion sees it, and so that the entry points
//! know how much stack the syntax tree can need ([`Tokens::stack_bytes`]).

use sqlparser::ast::{
    Expr, GroupByExpr, LimitClause, OrderByKind, OrderBySort, SelectItem, SelectItemQualifiedWildcardKind,
    SetExpr, Spanned, Statement, TableFactor, Value,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Tokenizer};

use super::ast::{dismantle_in_place, or_span, pos, query_start, set_expr_start, table_factor_start};
use super::error::sql_error;
use crate::error::{Error, Result};

/// How deep an expression may nest: open parentheses and brackets, open `CASE`s and runs of prefix
/// operators (`NOT`, unary `-` and `+`) together. PostgreSQL's default `max_stack_depth` allows
/// some thousands; 256 is far past any hand-written predicate and keeps the parser's and the
/// evaluator's recursion (a few KB a level) small.
pub const MAX_NESTING: usize = 256;

/// How many operator tokens (anything but names, numbers, strings, commas and whitespace) a text
/// may have: 2^21, about 10 MB of `a OR a OR …`. Each may add a level to the syntax tree, and every
/// entry point reserves stack for the deepest tree its text could give (512 bytes a level, so at
/// most 1 GiB of address space, of which only the touched pages are memory).
pub const MAX_OPERATORS: usize = 1 << 21;

/// sqlparser's recursion budget. It spends one level per parenthesis in most forms and two in some
/// (`1 + (…)`, `NOT (…)`, `(SELECT …)`), and its errors past the budget say little ("recursion
/// limit exceeded", or a wrong "Expected: end of statement" where it backtracks), so [`tokenize`]
/// refuses deep nesting first and this budget is never the one that stops a text: 4 levels for
/// each of [`MAX_NESTING`] plus what a statement spends before its first expression.
const PARSER_RECURSION_LIMIT: usize = 4 * MAX_NESTING + 64;

/// Stack every entry point has before parsing: the parser and the evaluator recurse through
/// `stacker` (sqlparser's `recursive-protection`, [`super::ast::deeper`]) and need little more.
const BASE_STACK_BYTES: usize = 1 << 20;

/// Stack a level of the syntax tree can need where it is still walked recursively (sqlparser's
/// derived `Drop` of forms beton refuses, about 75 bytes a level in a test build).
const STACK_BYTES_PER_LEVEL: usize = 512;

/// The tokens of an SQL text, checked for nesting.
pub(crate) struct Tokens {
    tokens: Vec<TokenWithSpan>,
    operators: usize,
}

/// A value for a query parameter: `$name` in the text stands for it as the literal it is (a
/// number, a string, TRUE/FALSE or NULL), so values never need quoting into the text.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL's NULL.
    Null,
    /// TRUE or FALSE.
    Bool(bool),
    /// A BIGINT.
    Int(i64),
    /// A DOUBLE (NaN and infinities included).
    Float(f64),
    /// A string.
    Text(String),
    /// A vector (`[x, y, ...]`): what `l2_distance(emb, $q)` compares a vector column with.
    Vector(Vec<f64>),
}

impl Param {
    /// The literal tokens the parameter stands for (a vector: `[`, its numbers, `]`).
    fn tokens(&self) -> Vec<Token> {
        match self {
            Param::Null => vec![Token::make_keyword("NULL")],
            Param::Bool(b) => vec![Token::make_keyword(if *b { "TRUE" } else { "FALSE" })],
            Param::Int(i) => vec![Token::Number(i.to_string(), false)],
            Param::Float(x) => vec![float_token(*x)],
            Param::Text(s) => vec![Token::SingleQuotedString(s.clone())],
            Param::Vector(v) => {
                let mut out = vec![Token::LBracket];
                for (k, x) in v.iter().enumerate() {
                    if k > 0 {
                        out.push(Token::Comma);
                    }
                    out.push(float_token(*x));
                }
                out.push(Token::RBracket);
                out
            }
        }
    }
}

/// A DOUBLE literal: Debug keeps a fraction or an exponent ("2.0", "1e-7"), so it is never read
/// back as a BIGINT.
fn float_token(x: f64) -> Token {
    Token::Number(format!("{x:?}"), false)
}

impl Tokens {
    /// Puts each parameter's value where the text names it (`$name`), as the literal token it
    /// stands for (at the name's position, for errors).
    ///
    /// # Errors
    /// [`Error::Sql`] at a `$name` with no value, at a positional placeholder (`?`, `$1`), and
    /// for a parameter the text never names (a misspelt name would otherwise be ignored).
    pub(crate) fn bind(&mut self, params: &[(String, Param)]) -> Result<()> {
        if !self.tokens.iter().any(|t| matches!(t.token, Token::Placeholder(_))) && params.is_empty() {
            return Ok(());
        }
        let mut used = vec![false; params.len()];
        let mut out = Vec::with_capacity(self.tokens.len());
        // The keyword before the token (whitespace skipped): LIMIT and OFFSET take a bare number.
        let mut last_keyword = Keyword::NoKeyword;
        for t in std::mem::take(&mut self.tokens) {
            let Token::Placeholder(p) = &t.token else {
                match &t.token {
                    Token::Whitespace(_) => {}
                    Token::Word(w) => last_keyword = w.keyword,
                    _ => last_keyword = Keyword::NoKeyword,
                }
                out.push(t);
                continue;
            };
            let named =
                p.strip_prefix('$').filter(|n| n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'));
            let Some(name) = named else {
                return Err(sql_error(
                    format!(
                        "parameter '{p}': parameters are named, as $name, with params={{\"name\": value}}"
                    ),
                    t.span,
                ));
            };
            let Some(k) = params.iter().position(|(n, _)| n == name) else {
                let given: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
                let given = match given.is_empty() {
                    true => "no params were given".to_string(),
                    false => format!("params has {}", given.join(", ")),
                };
                return Err(sql_error(format!("parameter ${name} has no value ({given})"), t.span));
            };
            used[k] = true;
            let value = &params[k].1;
            // A number stands in parentheses, as an expression: `ORDER BY $k` sorts by a
            // constant, never by the k-th column as `ORDER BY 2` does (PostgreSQL's rule).
            let bare = !matches!(value, Param::Int(_) | Param::Float(_))
                || matches!(last_keyword, Keyword::LIMIT | Keyword::OFFSET);
            if !bare {
                out.push(TokenWithSpan::new(Token::LParen, t.span));
            }
            out.extend(value.tokens().into_iter().map(|token| TokenWithSpan::new(token, t.span)));
            if !bare {
                out.push(TokenWithSpan::new(Token::RParen, t.span));
            }
            last_keyword = Keyword::NoKeyword;
        }
        self.tokens = out;
        if let Some(k) = used.iter().position(|u| !u) {
            let name = &params[k].0;
            return Err(sql_error(
                format!("params has '{name}', which the query never names as ${name}"),
                Span::empty(),
            ));
        }
        Ok(())
    }

    /// The stack to run the text on: enough for a syntax tree as deep as the text has operators.
    pub fn stack_bytes(&self) -> usize {
        BASE_STACK_BYTES + STACK_BYTES_PER_LEVEL * self.operators
    }
}

/// Tokenizes `sql` and checks its nesting.
///
/// # Errors
/// [`Error::Sql`] at a token that does not tokenize (an unterminated string), at the token that
/// nests deeper than [`MAX_NESTING`], or at the operator past [`MAX_OPERATORS`].
pub(crate) fn tokenize(sql: &str) -> Result<Tokens> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| parser_error(sql, ParserError::from(e), None))?;
    // Open parentheses, brackets and CASEs, and the run of prefix operators just before.
    let (mut open, mut run, mut operators) = (0usize, 0usize, 0usize);
    for t in &tokens {
        let keyword = match &t.token {
            Token::Word(w) => w.keyword,
            _ => Keyword::NoKeyword,
        };
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::LParen | Token::LBracket => open += 1,
            Token::RParen | Token::RBracket => open = open.saturating_sub(1),
            Token::Word(_) if keyword == Keyword::CASE => open += 1,
            Token::Word(_) if keyword == Keyword::END => open = open.saturating_sub(1),
            _ => {}
        }
        let prefix = matches!(t.token, Token::Minus | Token::Plus) || keyword == Keyword::NOT;
        run = if prefix { run + 1 } else { 0 };
        if open + run > MAX_NESTING {
            return Err(sql_error(
                format!(
                    "expression nested deeper than {MAX_NESTING} levels (parentheses, CASE and runs of \
                     NOT or unary minus count)"
                ),
                t.span,
            ));
        }
        let operand = match &t.token {
            Token::Number(..) | Token::SingleQuotedString(_) | Token::Comma => true,
            Token::Word(_) => keyword == Keyword::NoKeyword,
            _ => false,
        };
        if !operand {
            operators += 1;
            if operators > MAX_OPERATORS {
                return Err(sql_error(format!("more than {MAX_OPERATORS} operators"), t.span));
            }
        }
    }
    Ok(Tokens { tokens, operators })
}

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

/// Parses `sql` (tokenized as `tokens`) as a `SELECT` (when it starts with `SELECT`) or a bare
/// predicate.
///
/// # Errors
/// [`Error::Sql`] with sqlparser's position for syntax errors, or the position of the clause
/// beton does not support.
pub(crate) fn parse(sql: &str, tokens: Tokens) -> Result<Parsed> {
    let dialect = GenericDialect {};
    // A statement starts with the keyword SELECT or WITH (not a column such as `selection`).
    let text = sql.trim_start().trim_start_matches('(').trim_start();
    let word: String = text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let is_statement = word.eq_ignore_ascii_case("select") || word.eq_ignore_ascii_case("with");
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens.tokens);
    if !is_statement {
        let mut expr = match parser.parse_expr() {
            Ok(expr) => expr,
            Err(e) => return Err(parser_error(sql, e, Some(&parser))),
        };
        let next = parser.peek_token();
        if next.token != Token::EOF {
            dismantle_in_place(&mut expr);
            return Err(sql_error(format!("unexpected '{}' after the predicate", next.token), next.span));
        }
        return Ok(Parsed::Predicate(Box::new(expr)));
    }
    // sqlparser's `parse_statements`, keeping where each statement starts.
    let (mut statements, mut starts) = (Vec::new(), Vec::new());
    let mut expecting_delimiter = false;
    loop {
        while parser.consume_token(&Token::SemiColon) {
            expecting_delimiter = false;
        }
        let next = parser.peek_token();
        match &next.token {
            Token::EOF => break,
            Token::Word(w) if expecting_delimiter && w.keyword == Keyword::END => break,
            _ => {}
        }
        if expecting_delimiter {
            let e = parser.expected::<()>("end of statement", next).unwrap_err();
            return Err(parser_error(sql, e, Some(&parser)));
        }
        starts.push(next.span);
        match parser.parse_statement() {
            Ok(statement) => statements.push(statement),
            Err(e) => return Err(parser_error(sql, e, Some(&parser))),
        }
        expecting_delimiter = true;
    }
    let start = starts.first().copied().unwrap_or(Span::empty());
    if statements.len() != 1 {
        let span = starts.get(1).copied().unwrap_or(Span::empty());
        return Err(sql_error(format!("expected one statement, got {}", statements.len()), span));
    }
    let q = match statements.remove(0) {
        Statement::Query(q) => q,
        _ => return Err(unsupported("statements other than SELECT", start)),
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
        return Err(unsupported("WITH", with.with_token.0.span));
    }
    if let Some(f) = &q.fetch {
        return Err(unsupported("FETCH", or_span(f.quantity.as_ref().map_or(Span::empty(), pos), start)));
    }
    if !q.locks.is_empty() || q.for_clause.is_some() || q.settings.is_some() || q.format_clause.is_some() {
        return Err(unsupported("this clause", or_span(query_start(&q), start)));
    }
    if !q.pipe_operators.is_empty() {
        return Err(unsupported("pipe operators", or_span(query_start(&q), start)));
    }
    let select = match *q.body {
        SetExpr::Select(s) => s,
        SetExpr::SetOperation { op, left, .. } => {
            return Err(unsupported(&format!("{op} (set operations)"), or_span(set_expr_start(&left), start)))
        }
        other => {
            let span = or_span(set_expr_start(&other), start);
            return Err(unsupported("this query form (only SELECT … FROM samples)", span));
        }
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
        return Err(unsupported("QUALIFY", pos(qe)));
    }
    if let Some(p) = &select.prewhere {
        return Err(unsupported("PREWHERE", pos(p)));
    }
    if !select.named_window.is_empty() {
        return Err(unsupported("WINDOW", select.select_token.0.span));
    }
    if !select.lateral_views.is_empty() || !select.cluster_by.is_empty() || !select.sort_by.is_empty() {
        return Err(unsupported("this clause", select.select_token.0.span));
    }
    match select.from.as_slice() {
        [] => return Err(sql_error(format!("expected FROM {TABLE_NAME}"), select.select_token.0.span)),
        [t] => {
            if let Some(j) = t.joins.first() {
                return Err(unsupported("JOIN", or_span(table_factor_start(&j.relation), start)));
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
                TableFactor::Derived { .. } => {
                    return Err(unsupported("subqueries", or_span(table_factor_start(&t.relation), start)))
                }
                other => return Err(unsupported(&format!("FROM {other}"), start)),
            }
        }
        [_, second, ..] => {
            let span = or_span(table_factor_start(&second.relation), start);
            return Err(unsupported("more than one table in FROM", span));
        }
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
                        return Err(unsupported("WITH FILL", pos(&e.expr)));
                    }
                    let descending = match e.options.sort {
                        None | Some(OrderBySort::Asc) => false,
                        Some(OrderBySort::Desc) => true,
                        Some(OrderBySort::Using(_)) => {
                            return Err(unsupported("ORDER BY USING", pos(&e.expr)))
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
                return Err(unsupported("LIMIT BY", pos(b)));
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
    Err(sql_error(format!("expected a non-negative integer, got {e}"), pos(e)))
}

/// "… not supported" at `span`.
pub(crate) fn unsupported(what: &str, span: Span) -> Error {
    sql_error(format!("{what} not supported"), span)
}

/// sqlparser's error, with the position it writes as "at Line: x, Column: y" lifted out. Errors it
/// gives no position are placed at the token the parser stopped at, or just past the end of the
/// text when it stopped there.
fn parser_error(sql: &str, e: ParserError, parser: Option<&Parser>) -> Error {
    let message = match e {
        ParserError::RecursionLimitExceeded => format!(
            "expression nested too deeply for the parser (its budget is {PARSER_RECURSION_LIMIT} levels; \
             at most {MAX_NESTING} levels of nesting are supported)"
        ),
        e => e.to_string(),
    };
    let find = |key: &str| {
        let at = message.rfind(key)? + key.len();
        message[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u64>().ok()
    };
    let (line, column) = match (find("Line: "), find("Column: ")) {
        (Some(l), Some(c)) if l >= 1 && c >= 1 => (l, c),
        _ => match parser.map(Parser::peek_token) {
            Some(t) if t.span.start.line >= 1 && t.span.start.column >= 1 => {
                (t.span.start.line, t.span.start.column)
            }
            // No position, or the end of the text (EOF has none): point just past its last character.
            _ => {
                let last = sql.rsplit('\n').next().unwrap_or("");
                (sql.matches('\n').count() as u64 + 1, last.chars().count() as u64 + 1)
            }
        },
    };
    Error::Sql { message, line, column }
}

impl Drop for Parsed {
    fn drop(&mut self) {
        if let Parsed::Predicate(e) = self {
            dismantle_in_place(e);
        }
    }
}

impl Drop for SelectPlan {
    fn drop(&mut self) {
        let items = self.projection.iter_mut().filter_map(|item| match item {
            SelectItem::UnnamedExpr(e)
            | SelectItem::ExprWithAlias { expr: e, .. }
            | SelectItem::ExprWithAliases { expr: e, .. } => Some(e),
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::Expr(e), _) => Some(e),
            _ => None,
        });
        items
            .chain(&mut self.selection)
            .chain(&mut self.group_by)
            .chain(&mut self.having)
            .chain(self.order_by.iter_mut().map(|k| &mut k.expr))
            .for_each(dismantle_in_place);
    }
}
