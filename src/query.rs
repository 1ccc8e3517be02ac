//! `beton query FILE SQL`: runs a query on the data table and prints the rows as a table, JSON
//! lines, or (`--ids`) the matching sample indices.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use arrow_array::{Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use beton_query::{Param, Table};

/// How `beton query` prints its result.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// An aligned text table.
    Table,
    /// One JSON object a row.
    Json,
    /// The indices of the matching samples, one a line.
    Ids,
}

/// Runs `sql` on the data table of `file` (a version of it, for a dataset directory); returns
/// what to print.
pub fn run(
    file: &Path,
    version: Option<&str>,
    custom: &[String],
    sql: &str,
    params: &[(String, Param)],
    output: Output,
) -> Result<String> {
    if crate::versions::is_dataset(file) {
        let v = beton_query::versioned::VersionedDataset::open(file, crate::versions::version_ref(version))?;
        let view = v.view()?;
        return render(&view.table()?, sql, params, output);
    }
    crate::versions::file_version(file, version)?;
    let ds = crate::open::open_for_query(file, custom)?;
    render(&Table::new(&ds), sql, params, output)
}

/// `NAME=VALUE` of `--param`: VALUE as JSON when it is a JSON number (a BIGINT when it is an
/// integer in range, else a DOUBLE), `true`, `false`, `null` or a quoted string; else the text
/// itself, as a string.
pub fn parse_param(text: &str) -> std::result::Result<(String, Param), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("'{text}' is not NAME=VALUE"))?;
    let name = name.trim_start_matches('$');
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return Err(format!("'{name}' is not a parameter name (a letter or _ first, as $name in the SQL)"));
    }
    let param = match serde_json::from_str::<serde_json::Value>(value) {
        Ok(serde_json::Value::Null) => Param::Null,
        Ok(serde_json::Value::Bool(b)) => Param::Bool(b),
        Ok(serde_json::Value::Number(n)) => match n.as_i64() {
            Some(i) => Param::Int(i),
            None => Param::Float(n.as_f64().ok_or_else(|| format!("{value} is out of range"))?),
        },
        Ok(serde_json::Value::String(s)) => Param::Text(s),
        // A vector: a JSON array of numbers (`--param q=[0.1,0.2,0.3]`).
        Ok(serde_json::Value::Array(items)) if !items.is_empty() && items.iter().all(|x| x.is_number()) => {
            Param::Vector(items.iter().filter_map(serde_json::Value::as_f64).collect())
        }
        _ => Param::Text(value.to_string()),
    };
    Ok((name.to_string(), param))
}

fn render(table: &Table<'_>, sql: &str, params: &[(String, Param)], output: Output) -> Result<String> {
    if output == Output::Ids {
        let ids = beton_query::select_indices_with(table, sql, params)?;
        let mut out = String::with_capacity(ids.len() * 8);
        for id in ids.iter() {
            let _ = writeln!(out, "{id}");
        }
        return Ok(out);
    }
    let batch = beton_query::query_with(table, sql, params)?;
    Ok(match output {
        Output::Json => json_lines(&batch)?,
        _ => text_table(&batch)?,
    })
}

fn formatted(batch: &RecordBatch) -> Result<Vec<Vec<String>>> {
    let options = FormatOptions::default().with_null("NULL");
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..batch.num_rows()).map(|r| formatters.iter().map(|f| f.value(r).to_string()).collect()).collect())
}

fn text_table(batch: &RecordBatch) -> Result<String> {
    let header: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    let rows = formatted(batch)?;
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter().map(|r| r[c].chars().count()).chain([header[c].chars().count()]).max().unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(out, "({} rows)", batch.num_rows());
    Ok(out)
}

fn json_lines(batch: &RecordBatch) -> Result<String> {
    let schema = batch.schema();
    let rows = formatted(batch)?;
    let mut out = String::new();
    for (r, row) in rows.iter().enumerate() {
        let mut obj = serde_json::Map::new();
        for (c, text) in row.iter().enumerate() {
            let column = batch.column(c);
            let value = if column.is_null(r) {
                serde_json::Value::Null
            } else {
                match schema.field(c).data_type() {
                    DataType::Boolean
                    | DataType::Int8
                    | DataType::Int16
                    | DataType::Int32
                    | DataType::Int64
                    | DataType::UInt8
                    | DataType::UInt16
                    | DataType::UInt32
                    | DataType::UInt64
                    | DataType::Float32
                    | DataType::Float64 => {
                        // Numbers and bools print as JSON already; NaN and infinities become strings.
                        serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.clone()))
                    }
                    _ => serde_json::Value::String(text.clone()),
                }
            };
            obj.insert(schema.field(c).name().clone(), value);
        }
        let _ = writeln!(out, "{}", serde_json::Value::Object(obj));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_from_the_command_line_are_json_scalars_or_text() {
        let p = parse_param;
        assert_eq!(p("k=3"), Ok(("k".into(), Param::Int(3))));
        assert_eq!(p("$x=-2.5"), Ok(("x".into(), Param::Float(-2.5))));
        assert_eq!(p("big=1e300"), Ok(("big".into(), Param::Float(1e300))));
        assert_eq!(p("c=dog"), Ok(("c".into(), Param::Text("dog".into()))));
        assert_eq!(p("c=\"007\""), Ok(("c".into(), Param::Text("007".into()))));
        assert_eq!(p("c=a=b"), Ok(("c".into(), Param::Text("a=b".into()))));
        assert_eq!(p("n=null"), Ok(("n".into(), Param::Null)));
        assert_eq!(p("f=false"), Ok(("f".into(), Param::Bool(false))));
        assert_eq!(p("q=[1, -2.5]"), Ok(("q".into(), Param::Vector(vec![1.0, -2.5]))));
        assert!(p("novalue").unwrap_err().contains("NAME=VALUE"));
        assert!(p("1x=2").unwrap_err().contains("not a parameter name"));
    }
}
