//! `verify` finds what opening and reading cannot: payloads shared between fields, allocations
//! no row points to.

use beton_storage::{Error, FieldSpec, FieldType, OpenOptions, SampleValue, Writer, WriterOptions};

/// A file with two Bytes fields; returns its bytes and the row offset of the data table.
fn two_blobs() -> (Vec<u8>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.beton");
    let fields = vec![FieldSpec::new("a", FieldType::Bytes), FieldSpec::new("b", FieldType::Bytes)];
    Writer::new(&path, fields, WriterOptions { page_size: 1 << 21, ..WriterOptions::default() })
        .unwrap()
        .write_indexed(4, |i| {
            Ok(vec![SampleValue::Bytes(vec![1; 10]), SampleValue::Bytes(vec![i as u8; 10])])
        })
        .unwrap();
    (std::fs::read(&path).unwrap(), 24 + 2 * 1041)
}

#[test]
fn rejects_two_fields_sharing_one_allocation() {
    let (mut bytes, table) = two_blobs();
    // Row 2 (32 bytes: a {ptr, size} @0, b {ptr, size} @16): point b at a's payload.
    let row = table + 2 * 32;
    let a_ptr: [u8; 8] = bytes[row..row + 8].try_into().unwrap();
    bytes[row + 16..row + 24].copy_from_slice(&a_ptr);
    let ds = OpenOptions::new().open_bytes(bytes).unwrap();
    assert!(ds.get(2, 1).is_ok(), "each read alone is fine");
    let err = beton_storage::verify(&ds, false).unwrap_err();
    assert!(matches!(err, Error::Corrupt { offset, .. } if offset == row as u64), "{err}");
    assert!(err.to_string().contains("sample 2: its row points to 2 payloads"), "{err}");
}

#[test]
fn accepts_what_the_writer_writes() {
    let (bytes, _) = two_blobs();
    let ds = OpenOptions::new().open_bytes(bytes).unwrap();
    let report = beton_storage::verify(&ds, true).unwrap();
    assert_eq!((report.samples, report.allocations), (4, 8));
}
