//! Every FFCV 1.0.2 fixture opens, and every value FFCV's own Reader saw is reproduced exactly.

use beton_storage::{Dataset, Error, FieldType, ImageMode, OpenOptions, Value};
use serde_json::Value as Json;

use crate::common::*;

fn open_fixture(name: &str) -> Dataset {
    let options = if name == "custom_field" {
        // [('a', '<u4'), ('b', '<u2')]: 6 bytes, a structured dtype, so aligned to 1.
        OpenOptions::new().custom_layout("ext", 6, 1)
    } else {
        OpenOptions::new()
    };
    options.open_bytes(fixture_bytes(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check_value(name: &str, i: u64, field: &str, ds: &Dataset, k: usize, want: &Json) {
    let ctx = format!("{name} sample {i} field {field}");
    let v = ds.get(i, k).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    match (ds.fields()[k].field_type(), v) {
        (FieldType::Int, Value::Int(x)) => assert_eq!(Some(x), want.as_i64(), "{ctx}"),
        (FieldType::Float, Value::Float(x)) => {
            let w = parse_py_float_hex(want["hex"].as_str().unwrap());
            assert_eq!(x.to_bits(), w.to_bits(), "{ctx}: {x} vs {}", want["repr"]);
        }
        (FieldType::RgbImage, Value::Image(img)) => {
            let mode = if img.mode == ImageMode::Jpg { 0 } else { 1 };
            assert_eq!(mode, want["mode"], "{ctx} mode");
            assert_eq!(img.width, want["width"].as_u64().unwrap() as u16, "{ctx} width");
            assert_eq!(img.height, want["height"].as_u64().unwrap() as u16, "{ctx} height");
            assert_eq!(img.data.len() as u64, want["nbytes"].as_u64().unwrap(), "{ctx} nbytes");
            assert_eq!(sha256(img.data), want["payload_sha256"], "{ctx} payload");
            if let Some(decoded) = want.get("decoded_sha256") {
                // FFCV's pixels, exactly: its loader decodes with the fast integer IDCT.
                let px = img.decode_like_ffcv().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(sha256(&px.data), *decoded, "{ctx} decoded");
                // The accurate decode (the default) stays within a few levels of it.
                let accurate = img.decode().unwrap();
                let max_diff =
                    accurate.data.iter().zip(&px.data).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
                assert!(max_diff <= 8, "{ctx}: accurate and fast IDCT differ by {max_diff}");
            }
        }
        (FieldType::Bytes, Value::Bytes(b)) => {
            assert_eq!(b.len() as u64, want["nbytes"].as_u64().unwrap(), "{ctx}");
            assert_eq!(sha256(b), want["sha256"], "{ctx}");
        }
        (FieldType::Json, Value::Json(s)) => {
            assert_eq!(s.len() as u64 + 1, want["nbytes"].as_u64().unwrap(), "{ctx}");
            let parsed: Json = serde_json::from_str(s).unwrap();
            assert_eq!(parsed, want["value"], "{ctx}");
        }
        (FieldType::NDArray(spec) | FieldType::TorchTensor(spec), Value::NDArray(b)) => {
            assert_eq!(spec.dtype.name(), want["dtype"], "{ctx}");
            let shape: Vec<u64> =
                want["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
            assert_eq!(spec.shape, shape, "{ctx}");
            assert_eq!(b.len() as u64, want["nbytes"].as_u64().unwrap(), "{ctx}");
            assert_eq!(sha256(b), want["sha256"], "{ctx}");
        }
        (FieldType::Custom(_), Value::Custom(b)) => {
            assert_eq!(hex::encode(b), want["metadata_hex"], "{ctx}")
        }
        (ty, v) => panic!("{ctx}: unexpected {ty:?} / {v:?}"),
    }
}

#[test]
fn every_ffcv_fixture_reads_back_exactly() {
    for name in fixture_names().iter().filter(|n| *n != "crashed_write") {
        let want = expected(name);
        let ds = open_fixture(name);
        let h = ds.header();
        let wh = &want["header"];
        assert_eq!(h.version as u64, wh["version"].as_u64().unwrap(), "{name}");
        assert_eq!(h.num_fields as u64, wh["num_fields"].as_u64().unwrap(), "{name}");
        assert_eq!(h.page_size as u64, wh["page_size"].as_u64().unwrap(), "{name}");
        assert_eq!(h.num_samples, wh["num_samples"].as_u64().unwrap(), "{name}");
        assert_eq!(h.alloc_table_ptr, wh["alloc_table_ptr"].as_u64().unwrap(), "{name}");
        assert_eq!(ds.file_len(), wh["file_size"].as_u64().unwrap(), "{name}");
        assert_eq!(ds.row_size() as u64, want["metadata_row_size"].as_u64().unwrap(), "{name}");
        assert_eq!(ds.num_allocations(), want["alloc_table_entries"].as_u64().unwrap(), "{name}");
        for (f, wf) in ds.fields().iter().zip(want["fields"].as_array().unwrap()) {
            assert_eq!(f.name(), wf["name"], "{name}");
            assert_eq!(f.type_id() as u64, wf["type_id"].as_u64().unwrap(), "{name}");
            let args = f.arguments();
            let used = args.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            assert_eq!(hex::encode(&args[..used]), wf["arguments_hex"], "{name} {}", f.name());
        }
        let samples = want["samples"].as_array().unwrap();
        assert_eq!(samples.len() as u64, ds.num_samples(), "{name}");
        for (i, s) in samples.iter().enumerate() {
            for (k, f) in ds.fields().iter().enumerate() {
                check_value(name, i as u64, f.name(), &ds, k, &s[f.name()]);
            }
        }
        beton_storage::verify(&ds, true).unwrap_or_else(|e| panic!("{name}: verify: {e}"));
    }
}

#[test]
fn crashed_ffcv_write_is_named_as_such() {
    let err = OpenOptions::new().open_bytes(fixture_bytes("crashed_write")).unwrap_err();
    assert!(matches!(err, Error::InterruptedWrite { .. }), "{err}");
    assert!(err.to_string().contains("alloc_table_ptr is 0"), "{err}");
}

#[test]
fn foreign_custom_field_without_layout_is_a_clear_error() {
    let err = OpenOptions::new().open_bytes(fixture_bytes("custom_field")).unwrap_err();
    assert!(matches!(&err, Error::UnknownCustomField { field, .. } if field == "ext"), "{err}");
}

#[test]
fn fixtures_open_from_disk_through_the_map() {
    let (_dir, path) = fixture_file("photos_jpg");
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.num_samples(), 12);
    assert_eq!(ds.path(), path);
}
