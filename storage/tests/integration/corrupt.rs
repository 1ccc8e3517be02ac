//! Corrupt input never panics: every fixture cut at 200+ lengths and mutated thousands of times
//! goes through open, every read, the allocation index, `Summary` and `verify` (images decoded)
//! without a panic; a cut file is never taken as whole; targeted corruptions give the named error
//! at the named offset; every file of the bad-file registry (tests/data/bad) has its expected
//! error; and the fuzzer's crash inputs (fuzz/regressions) stay harmless.

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use beton_storage::{verify, Dataset, Error, OpenOptions, Summary};

use crate::common::*;

fn open_options(name: &str) -> OpenOptions {
    if name == "custom_field" {
        OpenOptions::new().custom_layout("ext", 6, 1)
    } else {
        OpenOptions::new()
    }
}

/// Every fixture but `crashed_write` (which must not open at all).
fn whole_fixtures() -> Vec<String> {
    fixture_names().into_iter().filter(|n| n != "crashed_write").collect()
}

/// An error must say what is wrong, and a `Corrupt` error must point into the file.
fn check_error(e: &Error, file_len: usize) {
    let text = e.to_string();
    assert!(!text.trim().is_empty(), "empty message: {e:?}");
    if let Error::Corrupt { offset, what, .. } = e {
        assert!(!what.trim().is_empty(), "empty `what`: {e:?}");
        assert!(*offset <= file_len as u64, "offset {offset} past the end of a {file_len}-byte file: {e}");
    }
}

/// Opens `bytes` and walks everything a reader can touch: every field of every sample (images
/// decoded), every sample's allocations, `Summary` and `verify` with image decoding. `Err` with
/// the first error, `Ok` when the file is whole. A panic fails the test naming `what`.
fn exercise(what: impl Display, bytes: Vec<u8>, options: &OpenOptions) -> Result<(), Error> {
    let len = bytes.len();
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
        let ds: Dataset = options.open_bytes(bytes)?;
        let mut first = None;
        for i in 0..ds.num_samples() {
            for k in 0..ds.fields().len() {
                match ds.get(i, k) {
                    Ok(v) => {
                        if let Some(Err(e)) = v.as_image().map(|img| img.decode()) {
                            first.get_or_insert(e);
                        }
                    }
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
            let _ = ds.sample_allocations(i);
        }
        if let Err(e) = Summary::of(&ds) {
            first.get_or_insert(e);
        }
        let verified = verify(&ds, true);
        match (first, verified) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(_)) => Ok(()),
        }
    }));
    let result = result.unwrap_or_else(|_| panic!("{what}: the reader panicked (see the message above)"));
    if let Err(e) = &result {
        check_error(e, len);
    }
    result
}

/// The structure boundaries of a whole file: end of header, of each descriptor, of the data table,
/// first data page, allocation table and its first entries.
fn boundaries(bytes: &[u8], options: &OpenOptions) -> Vec<usize> {
    let ds = options.open_bytes(bytes.to_vec()).expect("fixture opens");
    let mut b = vec![24];
    b.extend((1..=ds.fields().len()).map(|k| 24 + 1041 * k));
    let table_end = ds.data_table_offset() as usize + ds.data_table().len();
    let alloc = ds.header().alloc_table_ptr as usize;
    b.extend([table_end, ds.data_start() as usize, alloc, alloc + 24, alloc + 48]);
    b
}

/// All lengths 0..=64, then a step giving at least 200 cuts, each structure boundary ±1, and
/// `len - 1`; only strict cuts (< len).
fn cut_lengths(len: usize, boundaries: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..=64.min(len)).collect();
    let step = (len / 200).max(1);
    cuts.extend((64..len).step_by(step));
    for &b in boundaries {
        cuts.extend([b.saturating_sub(1), b, b + 1]);
    }
    cuts.push(len.saturating_sub(1));
    cuts.sort_unstable();
    cuts.dedup();
    cuts.retain(|&c| c < len);
    cuts
}

#[test]
fn every_fixture_cut_at_200_lengths_is_an_error_never_a_panic() {
    let (fixtures, mut total) = (whole_fixtures(), 0);
    for name in &fixtures {
        let bytes = fixture_bytes(name);
        let options = open_options(name);
        let cuts = cut_lengths(bytes.len(), &boundaries(&bytes, &options));
        assert!(cuts.len() >= 200, "{name}: {} cuts", cuts.len());
        for &cut in &cuts {
            let what = format!("{name} cut to {cut} of {} bytes", bytes.len());
            // A cut removes needed bytes: open, a read, Summary or verify must say so.
            assert!(exercise(&what, bytes[..cut].to_vec(), &options).is_err(), "{what} was taken as whole");
        }
        total += cuts.len();
    }
    assert!(fixtures.len() >= 17 && total >= 200 * fixtures.len(), "{total} cuts");
    eprintln!("{total} cuts of {} fixtures", fixtures.len());
}

/// A uniform draw in `0..n` (0 when `n` is 0) from proptest's seeded generator.
fn below(rng: &mut TestRng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// A small valid copy of a fixture, so that thousands of mutations stay cheap: the first samples
/// (payloads up to 256 KiB in all, at least one sample), re-laid on the smallest power-of-two page
/// of at least 4 KiB that holds the largest sample, row pointers and allocation table moved along.
/// Header, descriptors and row layout are the fixture's.
fn compact(bytes: &[u8], options: &OpenOptions) -> Vec<u8> {
    let ds = options.open_bytes(bytes.to_vec()).expect("fixture opens");
    let totals: Vec<u64> =
        (0..ds.num_samples()).map(|i| ds.sample_allocations(i).iter().map(|a| a.size).sum()).collect();
    let (mut keep, mut sum) = (0, 0);
    while keep < totals.len() && (keep == 0 || sum + totals[keep] <= 256 << 10) {
        sum += totals[keep];
        keep += 1;
    }
    let page = totals[..keep].iter().copied().max().unwrap_or(0).max(4096).next_power_of_two() as usize;
    let row = ds.row_size();
    let table = ds.data_table_offset() as usize;
    let mut out = bytes[..table].to_vec();
    out.extend_from_slice(&ds.data_table()[..keep * row]);
    let data_start = out.len().next_multiple_of(page);
    let (mut pages, mut allocs, mut used) = (Vec::<u8>::new(), Vec::new(), page);
    for (i, &total) in totals[..keep].iter().enumerate() {
        if used + total as usize > page {
            pages.resize(pages.len() + page, 0);
            used = 0;
        }
        let mut moved = Vec::new();
        for a in ds.sample_allocations(i as u64) {
            let at = pages.len() - page + used;
            pages[at..at + a.size as usize]
                .copy_from_slice(&bytes[a.ptr as usize..(a.ptr + a.size) as usize]);
            let new = (data_start + at) as u64;
            allocs.push([i as u64, new, a.size]);
            moved.push((a.ptr, new));
            used += a.size as usize;
        }
        for f in ds.fields() {
            if let Some(p) = f.field_type().payload_ptr_offset() {
                let at = table + i * row + f.offset() + p;
                let old = u64::from_le_bytes(out[at..at + 8].try_into().unwrap());
                let new = moved.iter().find(|m| m.0 == old).expect("row pointer has an allocation").1;
                out[at..at + 8].copy_from_slice(&new.to_le_bytes());
            }
        }
    }
    if !allocs.is_empty() {
        out.resize(data_start, 0);
        out.extend_from_slice(&pages);
    }
    let alloc_table_ptr = out.len() as u64;
    out.extend(allocs.iter().flatten().flat_map(|v| v.to_le_bytes()));
    out[4..8].copy_from_slice(&(page as u32).to_le_bytes());
    out[8..16].copy_from_slice(&(keep as u64).to_le_bytes());
    out[16..24].copy_from_slice(&alloc_table_ptr.to_le_bytes());
    out
}

/// `count` mutated copies of `bytes` per region (header, descriptors, data table, data pages,
/// allocation table), each with 1-4 changed bytes (random, one bit flipped, 0xFF or 0), through
/// [`exercise`]. Returns the number of runs.
fn mutate_regions(name: &str, bytes: &[u8], options: &OpenOptions, count: usize, rng: &mut TestRng) -> usize {
    let ds = options.open_bytes(bytes.to_vec()).expect("whole file opens");
    let table = ds.data_table_offset() as usize;
    let alloc = ds.header().alloc_table_ptr as usize;
    let regions = [
        ("header", 0..24),
        ("descriptors", 24..table),
        ("data table", table..table + ds.data_table().len()),
        ("data pages", ds.data_start() as usize..alloc.max(ds.data_start() as usize)),
        ("allocation table", alloc..bytes.len()),
    ];
    drop(ds);
    let mut runs = 0;
    for (region, range) in regions.iter().filter(|r| !r.1.is_empty()) {
        for _ in 0..count {
            let mut m = bytes.to_vec();
            let mut changes = Vec::new();
            for _ in 0..1 + below(rng, 4) {
                let at = range.start + below(rng, range.len());
                m[at] = match below(rng, 4) {
                    0 => rng.next_u64() as u8,
                    1 => m[at] ^ (1 << below(rng, 8)),
                    2 => 0xFF,
                    _ => 0,
                };
                changes.push((at, m[at]));
            }
            let what = format!("{name}, {region} changed at (byte, new value) {changes:?}");
            let eager = exercise(&what, m.clone(), options);
            // Deferring the allocation checks finds the same damage, by the end of `verify`.
            let deferred = exercise(&what, m, &options.clone().defer_allocation_checks(true));
            assert_eq!(eager.is_err(), deferred.is_err(), "{what}: eager {eager:?}, deferred {deferred:?}");
            runs += 1;
        }
    }
    runs
}

#[test]
fn random_byte_changes_in_every_structure_never_panic() {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let (mut small_runs, mut full_runs) = (0, 0);
    for name in whole_fixtures() {
        let bytes = fixture_bytes(&name);
        let options = open_options(&name);
        let small = compact(&bytes, &options);
        // The compact copy is itself a whole, valid file.
        exercise(format_args!("{name} compact"), small.clone(), &options)
            .unwrap_or_else(|e| panic!("{name}: compact copy does not verify: {e}"));
        small_runs += mutate_regions(&format!("{name} (compact)"), &small, &options, 50, &mut rng);
        // A few on the real file too, with FFCV's own page geometry.
        full_runs += mutate_regions(&name, &bytes, &options, 3, &mut rng);
    }
    assert!(small_runs >= 3000 && full_runs >= 150, "{small_runs} + {full_runs} mutations");
    eprintln!("{small_runs} mutations of compact copies, {full_runs} of the full fixtures");
}

fn patched(name: &str, at: usize, new: &[u8]) -> Vec<u8> {
    let mut b = fixture_bytes(name);
    b[at..at + new.len()].copy_from_slice(new);
    b
}

fn open_err(bytes: Vec<u8>) -> Error {
    OpenOptions::new().open_bytes(bytes).expect_err("must not open")
}

/// `(offset, what)` of a `Corrupt` error; any other variant fails the test.
fn corrupt(e: &Error) -> (u64, &str) {
    match e {
        Error::Corrupt { offset, what, .. } => (*offset, what.as_str()),
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

fn alloc_ptr(name: &str) -> usize {
    u64::from_le_bytes(fixture_bytes(name)[16..24].try_into().unwrap()) as usize
}

/// Byte offset of the data table: right after `num_fields` descriptors.
fn table_start(num_fields: usize) -> usize {
    24 + 1041 * num_fields
}

#[test]
fn rejects_version_3() {
    let e = open_err(patched("scalars", 0, &3u16.to_le_bytes()));
    assert!(matches!(e, Error::UnsupportedVersion { version: 3, expected: 2, .. }), "{e:?}");
    assert!(e.to_string().contains("unsupported .beton version 3"), "{e}");
}

#[test]
fn rejects_file_shorter_than_header() {
    let e = open_err(fixture_bytes("scalars")[..10].to_vec());
    assert_eq!(corrupt(&e), (0, "file is 10 bytes, shorter than the 24-byte header"), "{e}");
}

#[test]
fn rejects_interrupted_write() {
    let e = open_err(patched("pages_2mib", 16, &0u64.to_le_bytes()));
    assert!(matches!(e, Error::InterruptedWrite { .. }), "{e:?}");
    let e = open_err(fixture_bytes("crashed_write"));
    assert!(matches!(e, Error::InterruptedWrite { .. }), "{e:?}");
}

#[test]
fn rejects_page_size_not_power_of_two() {
    let e = open_err(patched("pages_2mib", 4, &3_000_000u32.to_le_bytes()));
    assert_eq!(corrupt(&e), (4, "page_size 3000000 is not a power of two"), "{e}");
    let e = open_err(patched("pages_2mib", 4, &0u32.to_le_bytes()));
    assert_eq!(corrupt(&e), (4, "page_size 0 is not a power of two"), "{e}");
}

#[test]
fn rejects_descriptors_past_end() {
    let e = open_err(patched("scalars", 2, &500u16.to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, 24, "{e}");
    assert!(what.contains("header announces 500 field descriptors (520500 bytes)"), "{e}");
}

#[test]
fn rejects_unknown_type_id() {
    let e = open_err(patched("odd5", table_start(1), &[9]));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, table_start(1) as u64, "{e}");
    assert!(what.starts_with("field 1 'bb': unknown field type id 9"), "{e}");
}

#[test]
fn rejects_non_ascii_name() {
    let e = open_err(patched("odd5", 24 + 1, "é".as_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, 25, "{e}");
    assert!(what.starts_with("field 0: name") && what.ends_with("is not ASCII"), "{e}");
}

#[test]
fn rejects_bad_ndarray_descriptor() {
    // ndarrays' field 2 ('f32'): a dtype JSON length of 2^64 - 1 (once an overflow panic).
    let at = table_start(2) + 17 + 256;
    let e = open_err(patched("ndarrays", at, &u64::MAX.to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, table_start(2) as u64, "{e}");
    assert!(
        what.starts_with("field 2 'f32': dtype description length 18446744073709551615 runs past"),
        "{e}"
    );
}

#[test]
fn rejects_custom_field_without_layout() {
    let e = open_err(fixture_bytes("custom_field"));
    assert!(matches!(&e, Error::UnknownCustomField { field, .. } if field == "ext"), "{e:?}");
    assert!(e.to_string().contains("custom_layout(\"ext\", size, align)"), "{e}");
}

#[test]
fn rejects_table_past_end() {
    let e = open_err(patched("scalars", 8, &u64::MAX.to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, table_start(2) as u64, "{e}");
    assert!(
        what.starts_with("data table of 18446744073709551615 rows × 16 bytes from byte 2106 runs past"),
        "{e}"
    );
    // One row more than the file holds.
    let e = open_err(patched("scalars", 8, &1001u64.to_le_bytes()));
    assert_eq!(corrupt(&e).0, table_start(2) as u64, "{e}");
    assert!(corrupt(&e).1.contains("1001 rows"), "{e}");
}

#[test]
fn rejects_alloc_table_ptr_past_end() {
    let e = open_err(patched("bytes_json", 16, &(1u64 << 40).to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, 16, "{e}");
    assert!(what.contains("alloc_table_ptr 1099511627776 is past the end of the file"), "{e}");
}

#[test]
fn rejects_alloc_table_ptr_inside_data_table() {
    let e = open_err(patched("bytes_json", 16, &(table_start(2) as u64 + 8).to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, 16, "{e}");
    assert!(what.contains("points inside the data table"), "{e}");
}

#[test]
fn rejects_alloc_table_not_multiple_of_24() {
    let mut b = fixture_bytes("bytes_json");
    let t = alloc_ptr("bytes_json");
    b.push(0);
    let e = open_err(b);
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, t as u64, "{e}");
    assert!(
        what.contains("(2401 bytes from byte 16777216 to the end) is not a whole number of 24-byte"),
        "{e}"
    );
}

#[test]
fn deferred_allocation_checks_report_at_first_payload_read() {
    let t = alloc_ptr("bytes_json");
    let bad = patched("bytes_json", t + 24 * 3 + 16, &(1u64 << 33).to_le_bytes());
    let eager = open_err(bad.clone());
    let ds = OpenOptions::new().defer_allocation_checks(true).open_bytes(bad).unwrap();
    // The data table reads fine: the allocation table was never read.
    assert_eq!(ds.row(49).unwrap().len(), ds.row_size());
    let blob = ds.field_index("blob").unwrap();
    let e = ds.get(1, blob).unwrap_err();
    assert_eq!(e.to_string(), eager.to_string(), "the same error as open gives");
    assert_eq!(verify(&ds, false).unwrap_err().to_string(), eager.to_string());
}

#[test]
fn rejects_alloc_entry_past_end() {
    let t = alloc_ptr("bytes_json");
    let e = open_err(patched("bytes_json", t + 24 * 3 + 16, &(1u64 << 33).to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, (t + 72) as u64, "{e}");
    assert!(what.starts_with("allocation entry 3 (sample 1,"), "{e}");
    assert!(what.ends_with("runs past the last data page, which ends at byte 16777216"), "{e}");
    // A size that overflows u64 with its pointer.
    let e = open_err(patched("bytes_json", t + 16, &u64::MAX.to_le_bytes()));
    assert_eq!(corrupt(&e).0, t as u64, "{e}");
}

#[test]
fn rejects_alloc_entry_before_first_page() {
    let t = alloc_ptr("bytes_json");
    let e = open_err(patched("bytes_json", t + 8, &100u64.to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, t as u64, "{e}");
    assert!(what.ends_with("points before the first data page at byte 8388608"), "{e}");
}

#[test]
fn rejects_alloc_entry_for_missing_sample() {
    let t = alloc_ptr("bytes_json");
    let e = open_err(patched("bytes_json", t, &50u64.to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, t as u64, "{e}");
    assert!(what.starts_with("allocation entry 0 (sample 50,"), "{e}");
    assert!(what.ends_with("belongs to sample 50, past the last sample 49"), "{e}");
}

#[test]
fn rejects_alloc_straddling_page() {
    let t = alloc_ptr("pages_2mib");
    let page = 2u64 << 20;
    // Entry 1 (a 300 000-byte blob) moved to start 100 bytes before the end of the second page.
    let e = open_err(patched("pages_2mib", t + 24 + 8, &(2 * page - 100).to_le_bytes()));
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, (t + 24) as u64, "{e}");
    assert!(what.starts_with("allocation entry 1 (sample 1, ptr 4194204, size 300000)"), "{e}");
    assert!(what.ends_with("straddles a page boundary (page size 2097152)"), "{e}");
}

/// Row pointers are checked against the allocation table on every read.
#[test]
fn rejects_row_pointer_not_in_alloc_table() {
    // odd3: x Int @0, abcdefghijklmnop Float @8, b Bytes {ptr, size} @16; rows of 32 bytes.
    let at = table_start(3) + 32 * 5 + 16;
    let ds = OpenOptions::new().open_bytes(patched("odd3", at, &12345u64.to_le_bytes())).unwrap();
    let e = ds.get(5, 2).unwrap_err();
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, at as u64, "{e}");
    assert!(what.starts_with("sample 5, field 'b': no allocation of this sample at pointer 12345"), "{e}");
    assert!(ds.get(4, 2).is_ok() && ds.get(5, 0).is_ok());
    let e = verify(&ds, false).unwrap_err();
    assert!(e.to_string().contains("sample 5, field 'b'"), "{e}");
    // Another sample's allocation is not this sample's.
    let other = ds.sample_allocations(6)[0];
    let mut b = patched("odd3", at, &other.ptr.to_le_bytes());
    b[at + 8..at + 16].copy_from_slice(&other.size.to_le_bytes());
    let e = OpenOptions::new().open_bytes(b).unwrap().get(5, 2).unwrap_err();
    assert!(corrupt(&e).1.contains("sample 5, field 'b': no allocation of this sample at pointer"), "{e}");
}

#[test]
fn rejects_bad_image_mode() {
    let at = table_start(1) + 13 * 2; // images_raw: one image field, 13-byte rows
    let ds = OpenOptions::new().open_bytes(patched("images_raw", at, &[7])).unwrap();
    let e = ds.get(2, 0).unwrap_err();
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, at as u64, "{e}");
    assert_eq!(what, "sample 2, field 'image': image mode 7 is neither 0 (jpg) nor 1 (raw)", "{e}");
}

#[test]
fn rejects_raw_image_size_mismatch() {
    // Sample 4 of images_raw is 16×16 raw; claim 17 wide.
    let at = table_start(1) + 13 * 4;
    let ds = OpenOptions::new().open_bytes(patched("images_raw", at + 1, &17u16.to_le_bytes())).unwrap();
    let e = ds.get(4, 0).unwrap_err();
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, at as u64, "{e}");
    assert_eq!(
        what, "sample 4, field 'image': raw 17×16 image needs 816 bytes, its allocation has 768",
        "{e}"
    );
}

#[test]
fn rejects_json_without_nul() {
    // bytes_json: blob Bytes @0, meta JSON @16 ({ptr, size}); the payload's last byte is its NUL.
    let ds = OpenOptions::new().open_bytes(fixture_bytes("bytes_json")).unwrap();
    let json = ds.get(3, 1).unwrap().as_str().unwrap();
    let nul = json.as_ptr() as usize - ds.file_bytes().as_ptr() as usize + json.len();
    let ds = OpenOptions::new().open_bytes(patched("bytes_json", nul, b"}")).unwrap();
    let e = ds.get(3, 1).unwrap_err();
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, (table_start(2) + 32 * 3 + 16) as u64, "{e}");
    assert_eq!(what, "sample 3, field 'meta': JSON payload does not end with its NUL byte", "{e}");
}

#[test]
fn rejects_ndarray_size_mismatch() {
    // ndarrays: field 0 is u8 4×4 (16 bytes); point sample 0's pointer at sample 0's i16 payload
    // (6 bytes), a real allocation of that sample with the wrong size.
    let ds = OpenOptions::new().open_bytes(fixture_bytes("ndarrays")).unwrap();
    let small = ds.sample_allocations(0).iter().find(|a| a.size == 6).unwrap().ptr;
    let at = table_start(5);
    let ds = OpenOptions::new().open_bytes(patched("ndarrays", at, &small.to_le_bytes())).unwrap();
    let e = ds.get(0, 0).unwrap_err();
    let (offset, what) = corrupt(&e);
    assert_eq!(offset, at as u64, "{e}");
    assert_eq!(
        what,
        "sample 0, field 'u8': array of shape [4, 4] and dtype uint8 needs 16 bytes, its allocation has 6",
        "{e}"
    );
}

/// The bad-file registry, like arrow-rs's parquet `bad_data` test: every file in tests/data/bad
/// (made by tests/data/bad/make.py, at most 4 KB each) has an entry here and vice versa, and each
/// fails, from disk and from memory, with an error containing its text: on open, or (the last two)
/// on reading its one sample.
const BAD_FILES: &[(&str, &str)] = &[
    ("alloc-table-ptr-zero-no-data.beton", "interrupted write: alloc_table_ptr is 0"),
    ("crashed-ffcv-write.beton", "interrupted write: alloc_table_ptr is 0"),
    ("custom-field-no-layout.beton", "field 'ext' is a custom field (type id 255)"),
    ("empty.beton", "corrupt file at byte 0: file is 0 bytes, shorter than the 24-byte header"),
    (
        "extension-bad-slot.beton",
        "corrupt file at byte 24: field 0 'caption': TextField extension declares a 4-byte slot",
    ),
    (
        "json-without-nul.beton",
        "corrupt file at byte 1065: sample 0, field 'meta': JSON payload does not end",
    ),
    ("name-not-ascii.beton", "corrupt file at byte 25: field 0: name \"ébel\" is not ASCII"),
    ("ndarray-blob-bad-json.beton", "corrupt file at byte 24: field 0 'arr': dtype description \"[[oops"),
    (
        "row-pointer-not-allocated.beton",
        "corrupt file at byte 1065: sample 0, field 'blob': no allocation of this sample at pointer 2049",
    ),
    ("version-1.beton", "unsupported .beton version 1"),
];

/// The first error of opening `path` (mapped) and reading every field of every sample.
fn first_error_from_disk(path: &std::path::Path) -> Option<Error> {
    let ds = match OpenOptions::new().open(path) {
        Ok(ds) => ds,
        Err(e) => return Some(e),
    };
    (0..ds.num_samples())
        .flat_map(|i| (0..ds.fields().len()).map(move |k| (i, k)))
        .find_map(|(i, k)| ds.get(i, k).err())
}

#[test]
fn registry_is_complete() {
    let dir = data_dir().join("bad");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/data/bad")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".beton"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = BAD_FILES.iter().map(|(f, _)| f.to_string()).collect();
    assert!(listed.is_sorted(), "keep BAD_FILES sorted");
    assert_eq!(on_disk, listed, "every file in tests/data/bad needs a BAD_FILES entry and vice versa");
    for (file, want) in BAD_FILES {
        let path = dir.join(file);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() <= 4096, "{file}: {} bytes, keep bad files small", bytes.len());
        let e = first_error_from_disk(&path).unwrap_or_else(|| panic!("{file} opens and reads"));
        assert!(e.to_string().contains(want), "{file}: {e}");
        let e = exercise(file, bytes, &OpenOptions::new()).expect_err(file);
        assert!(e.to_string().contains(want), "{file}: {e}");
    }
}

/// Inputs that once crashed the fuzzer (fuzz/regressions, raw fuzzer inputs) stay harmless: each
/// replayed as the target reads it, and as a plain file.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = repo_root().join("fuzz/regressions/open_read");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions/open_read") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        // Through the target's own harness, then as `exercise` reads it.
        beton_storage::fuzz::open_read(&data);
        let (options, file) = beton_storage::fuzz::options(&data);
        let _ = exercise(path.display(), file.to_vec(), &options);
        let _ = exercise(path.display(), data.clone(), &OpenOptions::new());
        replayed += 1;
    }
    assert!(replayed >= 1, "no fuzz regression replayed from {}", dir.display());
    eprintln!("{replayed} fuzz regressions replayed");
}
