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

#[test]
fn verify_progress_is_monotone_and_ends_at_the_sample_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.beton");
    let fields = vec![FieldSpec::new("a", FieldType::Bytes)];
    Writer::new(&path, fields, WriterOptions::default())
        .unwrap()
        .write_indexed(1000, |i| Ok(vec![SampleValue::Bytes(vec![i as u8; 3])]))
        .unwrap();
    let ds = beton_storage::Dataset::open(&path).unwrap();
    let seen = std::cell::RefCell::new(Vec::new());
    let report =
        beton_storage::verify_with_progress(&ds, true, &|done, total| seen.borrow_mut().push((done, total)))
            .unwrap();
    assert_eq!(report.samples, 1000);
    let seen = seen.into_inner();
    assert!(seen.len() > 2, "reports along the way, not only at the end: {seen:?}");
    assert!(seen.iter().all(|&(_, total)| total == 1000), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "monotone: {seen:?}");
    assert_eq!((seen[0], *seen.last().unwrap()), ((0, 1000), (1000, 1000)));

    // A corrupt sample stops the reports before the end.
    let (mut bytes, table) = two_blobs();
    let row = table + 2 * 32;
    let a_ptr: [u8; 8] = bytes[row..row + 8].try_into().unwrap();
    bytes[row + 16..row + 24].copy_from_slice(&a_ptr);
    let ds = OpenOptions::new().open_bytes(bytes).unwrap();
    let last = std::cell::Cell::new(None);
    assert!(beton_storage::verify_with_progress(&ds, false, &|done, total| last.set(Some((done, total))))
        .is_err());
    assert_eq!(last.get(), Some((0, 4)));
}
