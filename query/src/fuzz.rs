//! The fuzz harness of target `sql` (`fuzz/fuzz_targets/sql.rs`), here so that the regression
//! test (`loader/tests/fuzz_regressions.rs`) replays crash inputs through exactly the same
//! code. It must return (any result is fine) and never panic, abort, hang or raise a signal,
//! whatever `data` holds.

use std::sync::OnceLock;

use beton_storage::{Dataset, FieldSpec, FieldType, SampleValue, Writer, WriterOptions};

use crate::{select_indices, Table};

/// The fixed table of target `sql`: 64 rows of every column type SQL reads (ints, floats with
/// NaN, -0.0 and infinities, bools, text, JSON, bytes), written once per process.
fn sql_table() -> &'static Dataset {
    static TABLE: OnceLock<Dataset> = OnceLock::new();
    TABLE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("beton-fuzz-sql-{}.beton", std::process::id()));
        let fields = vec![
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("score", FieldType::Float),
            FieldSpec::new("flag", FieldType::Bool),
            FieldSpec::new("name", FieldType::Text),
            FieldSpec::new("meta", FieldType::Json),
            FieldSpec::new("blob", FieldType::Bytes),
        ];
        let floats = [0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5, -2.25, 1e300];
        let ints = [0, 1, -1, i64::MIN, i64::MAX, 7, 42, 3];
        Writer::new(&path, fields, WriterOptions::default())
            .and_then(|w| {
                w.write_indexed(64, |i| {
                    let k = i as usize;
                    Ok(vec![
                        SampleValue::Int(ints[k % 8].wrapping_add(i as i64 / 8)),
                        SampleValue::Float(floats[k % 8]),
                        SampleValue::Bool(i % 3 == 0),
                        SampleValue::Text(["", "cat", "Dog", "ünï", "a%b_c", "x\\y"][k % 6].to_string()),
                        SampleValue::Json(format!("{{\"a\": {{\"b\": {i}}}, \"s\": \"v{}\"}}", i % 5)),
                        SampleValue::Bytes(vec![i as u8; k % 9]),
                    ])
                })
            })
            .and_then(|_| Dataset::open(&path))
            .inspect(|_| {
                let _ = std::fs::remove_file(&path);
            })
            .unwrap_or_else(|e| panic!("the fuzz table could not be written: {e}"))
    })
}

/// Target `sql`: `data` as SQL text (lossy UTF-8), run as a row filter and as a query over a
/// fixed table.
pub fn sql(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let table = Table::new(sql_table());
    let _ = select_indices(&table, &text);
    let _ = crate::query(&table, &text);
}
