//! Walks over sqlparser's expression trees that do not recurse along a chain of operators, so that
//! no SQL text, however long, overflows the stack or takes quadratic time.
//!
//! sqlparser parses a flat chain (`a OR b OR …`, `x + x + …`, `x IS NULL IS NULL …`) in a loop into
//! a left-deep tree as deep as the chain is long: 20,000 terms are 20,000 levels, and its parser's
//! recursion limit does not see them. Its own walks over such a tree recurse once per level:
//! `Spanned::span` (about 1.6 KB of stack a level in a test build, so 32 MB for 20,000 terms, and
//! O(n²) when called at every node), the derived `Drop` (about 75 bytes a level) and `Clone`.
//! The helpers here follow the chain of first operands (the "left spine") in a loop and recurse
//! only into the other operands, whose depth the parser's recursion limit bounds; each recursion
//! goes through [`deeper`], which moves to a fresh stack segment when the current one runs low.
//! `Display` is safe to call: sqlparser grows the stack in it (its `recursive-protection`).

use std::fmt::Write as _;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, Query, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Spanned, TableFactor, UnaryOperator, Value,
};
use sqlparser::tokenizer::Span;

/// Stack that must be left when a recursive walk goes one level deeper; below it, [`deeper`]
/// continues on a new segment. Generous next to one level's frame (a few KB in a test build).
const RED_ZONE: usize = 256 * 1024;

/// Size of each stack segment [`deeper`] allocates (mmap: pages cost only when touched).
const STACK_SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `f` where at least [`RED_ZONE`] bytes of stack are free: on this stack when they are, on a
/// new segment otherwise. Every recursive walk over an expression calls its next level through this.
pub(crate) fn deeper<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, f)
}

/// The operand of `e` that comes first in the text and whose span starts where `e`'s does, for the
/// forms the evaluator runs as a chain: binary operators, unary operators, parentheses, `IS …`,
/// `CAST`, `IN (list)`, `BETWEEN` and `LIKE`/`ILIKE`. `None` for anything else, and for `-` before a
/// number, which is one literal (`-9223372036854775808` is the smallest BIGINT, as in PostgreSQL).
pub(crate) fn first_operand(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } if negated_number(expr).is_some() => None,
        Expr::BinaryOp { left: x, .. }
        | Expr::UnaryOp { expr: x, .. }
        | Expr::Nested(x)
        | Expr::IsNull(x)
        | Expr::IsNotNull(x)
        | Expr::IsTrue(x)
        | Expr::IsNotTrue(x)
        | Expr::IsFalse(x)
        | Expr::IsNotFalse(x)
        | Expr::Cast { expr: x, .. }
        | Expr::InList { expr: x, .. }
        | Expr::Between { expr: x, .. }
        | Expr::Like { expr: x, .. }
        | Expr::ILike { expr: x, .. } => Some(x),
        _ => None,
    }
}

/// The digits of a number literal (`expr` of a unary minus).
pub(crate) fn negated_number(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(n),
            _ => None,
        },
        _ => None,
    }
}

/// Where `e` starts: the start of the span sqlparser gives it (the earliest position of its
/// tokens), found by following first operands in a loop instead of sqlparser's `span()`, which
/// walks the whole tree. Only the start is meaningful (errors point at starts); the end is that of
/// the token found. Empty for the forms sqlparser gives no span (`RLIKE`, `STRUCT`, lambdas, …).
pub(crate) fn pos(e: &Expr) -> Span {
    let mut e = e;
    loop {
        e = match e {
            Expr::Identifier(i) => return i.span,
            Expr::CompoundIdentifier(parts) => return parts.first().map_or(Span::empty(), |i| i.span),
            Expr::Value(v) => return v.span,
            Expr::TypedString(t) => return t.value.span,
            Expr::Wildcard(t) => return t.0.span,
            Expr::QualifiedWildcard(name, t) => return name.0.first().map_or(t.0.span, |p| p.span()),
            Expr::Case { case_token, .. } => return case_token.0.span,
            Expr::Function(f) => match f.name.0.first() {
                Some(part) => return part.span(),
                None => return Span::empty(),
            },
            Expr::Subquery(q) | Expr::Exists { subquery: q, .. } => return query_start(q),
            Expr::Tuple(items) | Expr::Array(sqlparser::ast::Array { elem: items, .. }) => {
                match items.first() {
                    Some(x) => x,
                    None => return Span::empty(),
                }
            }
            Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
                match sets.iter().flatten().next() {
                    Some(x) => x,
                    None => return Span::empty(),
                }
            }
            Expr::CompoundFieldAccess { root: x, .. }
            | Expr::JsonAccess { value: x, .. }
            | Expr::IsFalse(x)
            | Expr::IsNotFalse(x)
            | Expr::IsTrue(x)
            | Expr::IsNotTrue(x)
            | Expr::IsNull(x)
            | Expr::IsNotNull(x)
            | Expr::IsUnknown(x)
            | Expr::IsNotUnknown(x)
            | Expr::IsDistinctFrom(x, _)
            | Expr::IsNotDistinctFrom(x, _)
            | Expr::IsJson { expr: x, .. }
            | Expr::IsNormalized { expr: x, .. }
            | Expr::InList { expr: x, .. }
            | Expr::InSubquery { expr: x, .. }
            | Expr::InUnnest { expr: x, .. }
            | Expr::Between { expr: x, .. }
            | Expr::BinaryOp { left: x, .. }
            | Expr::Like { expr: x, .. }
            | Expr::ILike { expr: x, .. }
            | Expr::SimilarTo { expr: x, .. }
            | Expr::AnyOp { left: x, .. }
            | Expr::AllOp { left: x, .. }
            | Expr::UnaryOp { expr: x, .. }
            | Expr::Convert { expr: x, .. }
            | Expr::Cast { expr: x, .. }
            | Expr::AtTimeZone { timestamp: x, .. }
            | Expr::Extract { expr: x, .. }
            | Expr::Ceil { expr: x, .. }
            | Expr::Floor { expr: x, .. }
            | Expr::Position { expr: x, .. }
            | Expr::Substring { expr: x, .. }
            | Expr::Trim { expr: x, .. }
            | Expr::Overlay { expr: x, .. }
            | Expr::Collate { expr: x, .. }
            | Expr::Nested(x)
            | Expr::Prefixed { value: x, .. }
            | Expr::OuterJoin(x)
            | Expr::Prior(x) => x,
            Expr::Interval(i) => &i.value,
            Expr::MemberOf(m) => &m.value,
            _ => return Span::empty(),
        };
    }
}

/// Where a query starts: its `WITH` or its first `SELECT` keyword (empty for other bodies).
pub(crate) fn query_start(q: &Query) -> Span {
    match &q.with {
        Some(with) => with.with_token.0.span,
        None => set_expr_start(&q.body),
    }
}

/// Where a query body starts: its first `SELECT` keyword (empty for other bodies). A chain of set
/// operations is followed in a loop (the parser builds it in one, as deep as it is long).
pub(crate) fn set_expr_start(body: &SetExpr) -> Span {
    let mut body = body;
    while let SetExpr::SetOperation { left, .. } = body {
        body = left;
    }
    match body {
        SetExpr::Select(s) => s.select_token.0.span,
        SetExpr::Query(q) => deeper(|| query_start(q)),
        _ => Span::empty(),
    }
}

/// Where a FROM item starts: its table name or its subquery (empty for other forms).
pub(crate) fn table_factor_start(t: &TableFactor) -> Span {
    match t {
        TableFactor::Table { name, .. } => name.0.first().map_or(Span::empty(), |p| p.span()),
        TableFactor::Derived { subquery, .. } => query_start(subquery),
        _ => Span::empty(),
    }
}

/// Where a select item starts.
pub(crate) fn select_item_start(item: &SelectItem) -> Span {
    match item {
        SelectItem::UnnamedExpr(e)
        | SelectItem::ExprWithAlias { expr: e, .. }
        | SelectItem::ExprWithAliases { expr: e, .. } => pos(e),
        SelectItem::Wildcard(opts) => opts.wildcard_token.0.span,
        SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), opts) => {
            name.0.first().map_or(opts.wildcard_token.0.span, |p| p.span())
        }
        SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::Expr(e), _) => pos(e),
    }
}

/// `a` when it is not empty, else `b`.
pub(crate) fn or_span(a: Span, b: Span) -> Span {
    if a == Span::empty() {
        b
    } else {
        a
    }
}

/// The column a (compound) identifier names: parts joined with '.'.
pub(crate) fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(parts) => {
            Some(parts.iter().map(|p| p.value.as_str()).collect::<Vec<_>>().join("."))
        }
        _ => None,
    }
}

/// The text sqlparser's `Display` gives `e` (the key of group values and the name of output
/// columns), written without recursing along chains of binary operators.
pub(crate) fn expr_text(e: &Expr) -> String {
    let mut out = String::new();
    write_text(e, &mut out);
    out
}

/// Appends [`expr_text`] of `e` to `out`. sqlparser writes `BinaryOp` as `{left} {op} {right}`
/// and `Nested` as `({inner})`; both are written here, every other form by `Display`.
pub(crate) fn write_text(e: &Expr, out: &mut String) {
    deeper(|| {
        let mut spine = Vec::new();
        let mut bottom = e;
        while let Expr::BinaryOp { left, .. } = bottom {
            spine.push(bottom);
            bottom = left;
        }
        match bottom {
            Expr::Nested(inner) => {
                out.push('(');
                write_text(inner, out);
                out.push(')');
            }
            other => {
                let _ = write!(out, "{other}");
            }
        }
        for node in spine.iter().rev() {
            if let Expr::BinaryOp { op, right, .. } = node {
                let _ = write!(out, " {op} ");
                write_text(right, out);
            }
        }
    })
}

/// A leaf that owns nothing, put where an operand was moved out.
fn placeholder() -> Expr {
    Expr::Value(Value::Null.with_empty_span())
}

/// Drops `e` without recursing: operands are moved out onto a list before each node is dropped, so
/// every node's own `Drop` is shallow. Forms not listed keep their operands (and drop them
/// recursively): the parser's recursion limit bounds their depth unless they hold a chain, and the
/// entry points run on a stack sized for the text ([`super::parse::Tokens::stack_bytes`]).
pub(crate) fn dismantle(e: Expr) {
    let mut todo = vec![e];
    while let Some(mut e) = todo.pop() {
        take_operands(&mut e, &mut todo);
    }
}

/// Moves the operands of `e` onto `out`, leaving placeholders.
fn take_operands(e: &mut Expr, out: &mut Vec<Expr>) {
    fn take(b: &mut Expr, out: &mut Vec<Expr>) {
        out.push(std::mem::replace(b, placeholder()));
    }
    match e {
        Expr::BinaryOp { left: a, right: b, .. }
        | Expr::IsDistinctFrom(a, b)
        | Expr::IsNotDistinctFrom(a, b)
        | Expr::AnyOp { left: a, right: b, .. }
        | Expr::AllOp { left: a, right: b, .. }
        | Expr::InUnnest { expr: a, array_expr: b, .. }
        | Expr::RLike { expr: a, pattern: b, .. }
        | Expr::AtTimeZone { timestamp: a, time_zone: b }
        | Expr::Position { expr: a, r#in: b } => {
            take(a, out);
            take(b, out);
        }
        Expr::Like { expr, pattern, escape_char, .. }
        | Expr::ILike { expr, pattern, escape_char, .. }
        | Expr::SimilarTo { expr, pattern, escape_char, .. } => {
            take(expr, out);
            take(pattern, out);
            if let Some(c) = escape_char {
                take(c, out);
            }
        }
        Expr::Between { expr, low, high, .. } => {
            take(expr, out);
            take(low, out);
            take(high, out);
        }
        Expr::InList { expr, list, .. } => {
            take(expr, out);
            out.append(list);
        }
        Expr::CompoundFieldAccess { root: x, .. }
        | Expr::JsonAccess { value: x, .. }
        | Expr::IsFalse(x)
        | Expr::IsNotFalse(x)
        | Expr::IsTrue(x)
        | Expr::IsNotTrue(x)
        | Expr::IsNull(x)
        | Expr::IsNotNull(x)
        | Expr::IsUnknown(x)
        | Expr::IsNotUnknown(x)
        | Expr::IsJson { expr: x, .. }
        | Expr::IsNormalized { expr: x, .. }
        | Expr::InSubquery { expr: x, .. }
        | Expr::UnaryOp { expr: x, .. }
        | Expr::Cast { expr: x, .. }
        | Expr::Extract { expr: x, .. }
        | Expr::Ceil { expr: x, .. }
        | Expr::Floor { expr: x, .. }
        | Expr::Collate { expr: x, .. }
        | Expr::Nested(x)
        | Expr::Prefixed { value: x, .. }
        | Expr::Named { expr: x, .. }
        | Expr::OuterJoin(x)
        | Expr::Prior(x) => take(x, out),
        Expr::Convert { expr, styles, .. } => {
            take(expr, out);
            out.append(styles);
        }
        Expr::Substring { expr, substring_from, substring_for, .. } => {
            take(expr, out);
            substring_from.iter_mut().chain(substring_for).for_each(|x| take(x, out));
        }
        Expr::Trim { expr, trim_what, trim_characters, .. } => {
            take(expr, out);
            trim_what.iter_mut().for_each(|x| take(x, out));
            trim_characters.iter_mut().for_each(|v| out.append(v));
        }
        Expr::Overlay { expr, overlay_what, overlay_from, overlay_for } => {
            take(expr, out);
            take(overlay_what, out);
            take(overlay_from, out);
            overlay_for.iter_mut().for_each(|x| take(x, out));
        }
        Expr::Case { operand, conditions, else_result, .. } => {
            operand.iter_mut().chain(else_result.iter_mut()).for_each(|x| take(x, out));
            for when in conditions.drain(..) {
                out.push(when.condition);
                out.push(when.result);
            }
        }
        Expr::Function(f) => {
            f.filter.iter_mut().for_each(|x| take(x, out));
            for args in [&mut f.args, &mut f.parameters] {
                let FunctionArguments::List(list) = args else { continue };
                for arg in list.args.drain(..) {
                    match arg {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(x))
                        | FunctionArg::Named { arg: FunctionArgExpr::Expr(x), .. } => out.push(x),
                        FunctionArg::ExprNamed { name, arg, .. } => {
                            out.push(name);
                            if let FunctionArgExpr::Expr(x) = arg {
                                out.push(x);
                            }
                        }
                        _ => {}
                    }
                }
                for clause in list.clauses.drain(..) {
                    if let FunctionArgumentClause::Where(x) | FunctionArgumentClause::Limit(x) = clause {
                        out.push(x);
                    }
                }
            }
        }
        Expr::Tuple(items) | Expr::Struct { values: items, .. } => out.append(items),
        Expr::Array(a) => out.append(&mut a.elem),
        Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
            sets.drain(..).for_each(|mut v| out.append(&mut v));
        }
        Expr::Interval(i) => take(&mut i.value, out),
        Expr::MemberOf(m) => {
            take(&mut m.value, out);
            take(&mut m.array, out);
        }
        _ => {}
    }
}

/// [`dismantle`] for an expression held in place: it is replaced by a placeholder.
pub(crate) fn dismantle_in_place(e: &mut Expr) {
    dismantle(std::mem::replace(e, placeholder()));
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::Statement;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn parse_expr(sql: &str) -> Option<Expr> {
        Parser::new(&GenericDialect {}).try_with_sql(sql).and_then(|mut p| p.parse_expr()).ok()
    }

    /// The expressions of the SQL cases: predicates, and the select items, WHERE, GROUP BY and
    /// HAVING of queries.
    fn case_exprs() -> Vec<Expr> {
        let mut out = Vec::new();
        for block in include_str!("../../tests/sql_cases.txt").split("\n\n") {
            let sql: Vec<&str> =
                block.lines().filter(|l| !l.starts_with('#') && !l.starts_with("->")).collect();
            let sql = sql.join("\n");
            if sql.trim().is_empty() {
                continue;
            }
            if let Some(e) = parse_expr(&sql) {
                out.push(e);
                continue;
            }
            let Ok(statements) = Parser::parse_sql(&GenericDialect {}, &sql) else { continue };
            for statement in statements {
                let Statement::Query(q) = statement else { continue };
                let SetExpr::Select(s) = *q.body else { continue };
                for item in s.projection {
                    if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                        out.push(e);
                    }
                }
                out.extend(s.selection);
                out.extend(s.having);
                if let sqlparser::ast::GroupByExpr::Expressions(keys, _) = s.group_by {
                    out.extend(keys);
                }
            }
        }
        out
    }

    /// `e` and its sub-expressions (small trees: recursion is fine here).
    fn visit(e: &Expr, f: &mut impl FnMut(&Expr)) {
        f(e);
        let mut operands = Vec::new();
        take_operands(&mut e.clone(), &mut operands);
        for x in &operands {
            visit(x, f);
        }
    }

    #[test]
    fn text_and_start_agree_with_sqlparser_on_every_case() {
        let exprs = case_exprs();
        assert!(exprs.len() > 100, "{}", exprs.len());
        let mut checked = 0;
        for root in &exprs {
            visit(root, &mut |e| {
                assert_eq!(expr_text(e), e.to_string());
                assert_eq!(pos(e).start, e.span().start, "{e}");
                checked += 1;
            });
        }
        assert!(checked > 500, "{checked}");
    }

    #[test]
    fn long_chains_are_walked_and_dropped_on_a_small_stack() {
        let chain = parse_expr(&vec!["(a + 1)"; 100_000].join(" + ")).unwrap();
        let is_null = parse_expr(&format!("a{}", " IS NULL".repeat(100_000))).unwrap();
        // 256 KB: a recursive walk of 100,000 levels needs tens of MB.
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                assert_eq!(pos(&chain).start, sqlparser::tokenizer::Location::new(1, 2));
                assert_eq!(pos(&is_null).start, sqlparser::tokenizer::Location::new(1, 1));
                let text = expr_text(&chain);
                assert_eq!(text.len(), "(a + 1)".len() * 100_000 + " + ".len() * 99_999);
                dismantle(chain);
                dismantle(is_null);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
