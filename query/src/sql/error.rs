//! SQL errors placed in the text: [`sql_error`] at a span, [`at`] for errors that come without
//! one (Arrow's, unknown columns). Every module of `sql` reports through these, so they live apart
//! from the entry points in `mod.rs`, which import the modules that use them.

use sqlparser::tokenizer::Span;

use crate::error::Error;

/// An [`Error::Sql`] at the start of `span`.
pub(crate) fn sql_error(message: impl Into<String>, span: Span) -> Error {
    Error::Sql { message: message.into(), line: span.start.line, column: span.start.column }
}

/// Attaches `span` to errors that have no SQL position (Arrow errors, unknown columns).
pub(crate) fn at(span: Span) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::Sql { .. } | Error::Storage(_) => e,
        Error::NoSuchColumn { .. } => sql_error(e.to_string(), span),
        Error::Arrow(a) => sql_error(a.to_string(), span),
        other => sql_error(other.to_string(), span),
    }
}
