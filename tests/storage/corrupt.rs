//! Corrupt input never panics: every fixture cut at 200+ lengths and mutated thousands of times
//! goes through open, every read, `Summary` and `verify` (images decoded) without a panic; a cut
//! file is never taken as whole; targeted corruptions give the named error; and every file of the
//! bad-file registry (tests/data/bad) has its expected error.

use beton_storage::{Dataset, Error, OpenOptions, Summary};

use crate::common::*;

fn open_options(name: &str) -> OpenOptions {
    if name == "custom_field" {
        OpenOptions::new().custom_layout("ext", 6, 1)
    } else {
        OpenOptions::new()
    }
}

/// Opens and reads everything; `Err` with the first error, `Ok` if the file is whole. Never
/// panics (the test harness turns a panic into a failure naming the input).
fn exercise(bytes: Vec<u8>, options: &OpenOptions) -> Result<(), Error> {
    let ds: Dataset = options.open_bytes(bytes)?;
    let mut first = None;
    for i in 0..ds.num_samples().min(64) {
        for k in 0..ds.fields().len() {
            match ds.get(i, k) {
                Ok(v) => {
                    if let Some(img) = v.as_image() {
                        if let Err(e) = img.decode() {
                            first.get_or_insert(e);
                        }
                    }
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    first.get_or_insert(e);
                }
            }
        }
        let _ = ds.sample_allocations(i);
    }
    let _ = Summary::of(&ds);
    let verified = beton_storage::verify(&ds, true);
    match (first, verified) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(_)) => Ok(()),
    }
}

fn cut_lengths(len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..=64.min(len)).collect();
    let step = (len / 200).max(1);
    cuts.extend((64..len).step_by(step));
    cuts.push(len.saturating_sub(1));
    cuts.sort();
    cuts.dedup();
    cuts.retain(|&c| c < len);
    cuts
}

#[test]
fn every_fixture_cut_at_200_lengths_is_an_error_never_a_panic() {
    for name in fixture_names().iter().filter(|n| *n != "crashed_write") {
        let bytes = fixture_bytes(name);
        let options = open_options(name);
        let cuts = cut_lengths(bytes.len());
        assert!(cuts.len() >= 200, "{name}: {} cuts", cuts.len());
        for cut in cuts {
            let result = exercise(bytes[..cut].to_vec(), &options);
            assert!(result.is_err(), "{name} cut to {cut} of {} bytes was taken as whole", bytes.len());
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_byte_changes_in_every_structure_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut runs = 0;
    for name in fixture_names().iter().filter(|n| *n != "crashed_write") {
        let bytes = fixture_bytes(name);
        let options = open_options(name);
        let ds = options.open_bytes(bytes.clone()).unwrap();
        let desc_end = 24 + 1041 * ds.fields().len();
        let table = ds.data_table_offset() as usize..ds.data_table_offset() as usize + ds.data_table().len();
        let alloc = ds.header().alloc_table_ptr as usize..bytes.len();
        let regions = [0..24, 24..desc_end, table, alloc];
        for region in regions.iter().filter(|r| !r.is_empty()) {
            for _ in 0..60 {
                let mut m = bytes.clone();
                for _ in 0..1 + rng.below(4) {
                    let at = region.start + rng.below(region.len());
                    m[at] = match rng.below(4) {
                        0 => rng.next() as u8,
                        1 => m[at] ^ (1 << rng.below(8)),
                        2 => 0xFF,
                        _ => 0,
                    };
                }
                if let Err(e) = exercise(m, &options) {
                    assert!(!e.to_string().is_empty());
                }
                runs += 1;
            }
        }
    }
    assert!(runs > 3000, "{runs} mutations");
}

fn patched(name: &str, at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut b = fixture_bytes(name);
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

fn open_err(bytes: Vec<u8>) -> Error {
    OpenOptions::new().open_bytes(bytes).expect_err("must not open")
}

fn alloc_ptr(name: &str) -> usize {
    let b = fixture_bytes(name);
    u64::from_le_bytes(b[16..24].try_into().unwrap()) as usize
}

#[test]
fn rejects_version_3() {
    let e = open_err(patched("scalars", 0, &3u16.to_le_bytes()));
    assert!(matches!(e, Error::UnsupportedVersion { version: 3, .. }), "{e}");
}

#[test]
fn rejects_file_shorter_than_header() {
    let e = open_err(fixture_bytes("scalars")[..10].to_vec());
    assert!(e.to_string().contains("shorter than the 24-byte header"), "{e}");
}

#[test]
fn rejects_page_size_not_power_of_two() {
    let e = open_err(patched("pages_2mib", 4, &3_000_000u32.to_le_bytes()));
    assert!(matches!(e, Error::Corrupt { offset: 4, .. }) && e.to_string().contains("power of two"), "{e}");
}

#[test]
fn rejects_unknown_type_id() {
    let e = open_err(patched("odd5", 24 + 1041, &[9]));
    assert!(matches!(e, Error::Corrupt { offset: 1065, .. }), "{e}");
    assert!(e.to_string().contains("field 1 'bb': unknown field type id 9"), "{e}");
}

#[test]
fn rejects_non_ascii_name() {
    let e = open_err(patched("odd5", 24 + 1, &[0xC3, 0xA9]));
    assert!(e.to_string().contains("field 0: name") && e.to_string().contains("not ASCII"), "{e}");
}

#[test]
fn rejects_descriptors_past_end() {
    let e = open_err(patched("scalars", 2, &500u16.to_le_bytes()));
    assert!(e.to_string().contains("500 field descriptors"), "{e}");
}

#[test]
fn rejects_table_past_end() {
    let e = open_err(patched("scalars", 8, &u64::MAX.to_le_bytes()));
    assert!(e.to_string().contains("data table of 18446744073709551615 rows"), "{e}");
}

#[test]
fn rejects_alloc_table_ptr_past_end() {
    let e = open_err(patched("bytes_json", 16, &(1u64 << 40).to_le_bytes()));
    assert!(e.to_string().contains("past the end of the file"), "{e}");
}

#[test]
fn rejects_alloc_table_not_multiple_of_24() {
    let mut b = fixture_bytes("bytes_json");
    b.push(0);
    let e = open_err(b);
    assert!(e.to_string().contains("not a whole number of 24-byte entries"), "{e}");
}

#[test]
fn rejects_alloc_entry_past_end() {
    let t = alloc_ptr("bytes_json");
    let e = open_err(patched("bytes_json", t + 24 * 3 + 16, &(1u64 << 33).to_le_bytes()));
    assert!(matches!(e, Error::Corrupt { offset, .. } if offset == (t + 72) as u64), "{e}");
    assert!(
        e.to_string().contains("allocation entry 3") && e.to_string().contains("past the last data page")
    );
}

#[test]
fn rejects_alloc_entry_for_missing_sample() {
    let t = alloc_ptr("bytes_json");
    let e = open_err(patched("bytes_json", t, &50u64.to_le_bytes()));
    assert!(e.to_string().contains("allocation entry 0 (sample 50"), "{e}");
}

#[test]
fn rejects_alloc_straddling_page() {
    let t = alloc_ptr("pages_2mib");
    let page = 2u64 << 20;
    // Entry 1 (a 300 000-byte blob) moved to start 100 bytes before the second page.
    let e = open_err(patched("pages_2mib", t + 24 + 8, &(2 * page - 100).to_le_bytes()));
    assert!(e.to_string().contains("straddles a page boundary"), "{e}");
}

#[test]
fn rejects_interrupted_write() {
    let e = open_err(patched("pages_2mib", 16, &0u64.to_le_bytes()));
    assert!(matches!(e, Error::InterruptedWrite { .. }), "{e}");
}

/// Row pointers are checked against the allocation table on every read.
#[test]
fn rejects_row_pointer_not_in_alloc_table() {
    // odd3: x Int @0, abcdefghijklmnop Float @8, b Bytes {ptr, size} @16; row 32.
    let row0 = 24 + 3 * 1041;
    let ds =
        OpenOptions::new().open_bytes(patched("odd3", row0 + 32 * 5 + 16, &12345u64.to_le_bytes())).unwrap();
    let e = ds.get(5, 2).unwrap_err();
    assert!(matches!(e, Error::Corrupt { offset, .. } if offset == (row0 + 32 * 5 + 16) as u64), "{e}");
    assert!(
        e.to_string().contains("sample 5, field 'b': no allocation of this sample at pointer 12345"),
        "{e}"
    );
    assert!(ds.get(4, 2).is_ok());
    assert!(beton_storage::verify(&ds, false).is_err());
}

#[test]
fn rejects_bad_image_mode() {
    let row0 = 24 + 1041; // images_raw: one image field, 13-byte rows
    let ds = OpenOptions::new().open_bytes(patched("images_raw", row0 + 13 * 2, &[7])).unwrap();
    let e = ds.get(2, 0).unwrap_err();
    assert!(
        e.to_string().contains("sample 2, field 'image': image mode 7 is neither 0 (jpg) nor 1 (raw)"),
        "{e}"
    );
}

#[test]
fn rejects_raw_image_size_mismatch() {
    let row0 = 24 + 1041;
    // Sample 4 of images_raw is 16x16 raw; claim 17 wide.
    let ds = OpenOptions::new().open_bytes(fixture_bytes("images_raw")).unwrap();
    let img = ds.get(4, 0).unwrap().as_image().unwrap();
    let w = img.width + 1;
    let ds =
        OpenOptions::new().open_bytes(patched("images_raw", row0 + 13 * 4 + 1, &w.to_le_bytes())).unwrap();
    let e = ds.get(4, 0).unwrap_err();
    assert!(e.to_string().contains("raw") && e.to_string().contains("needs"), "{e}");
}

#[test]
fn rejects_json_without_nul() {
    // bytes_json: blob Bytes @0, meta JSON @16 ({ptr, size}); the payload's last byte is its NUL.
    let ds = OpenOptions::new().open_bytes(fixture_bytes("bytes_json")).unwrap();
    let json = ds.get(3, 1).unwrap().as_str().unwrap();
    let end = json.as_ptr() as usize - ds.file_bytes().as_ptr() as usize + json.len();
    let ds = OpenOptions::new().open_bytes(patched("bytes_json", end, b"}")).unwrap();
    let e = ds.get(3, 1).unwrap_err();
    assert!(e.to_string().contains("does not end with its NUL"), "{e}");
}

#[test]
fn rejects_ndarray_size_mismatch() {
    // ndarrays: the first field is u8 4x4 (16 bytes); point sample 0's pointer at sample 0's i16
    // payload (6 bytes), a real allocation of that sample with the wrong size.
    let ds = OpenOptions::new().open_bytes(fixture_bytes("ndarrays")).unwrap();
    let allocs = ds.sample_allocations(0);
    let small = allocs.iter().find(|a| a.size == 6).unwrap().ptr;
    let row0 = ds.data_table_offset() as usize;
    let ds = OpenOptions::new().open_bytes(patched("ndarrays", row0, &small.to_le_bytes())).unwrap();
    let e = ds.get(0, 0).unwrap_err();
    assert!(e.to_string().contains("shape [4, 4] and dtype uint8 needs 16 bytes"), "{e}");
}

/// The bad-file registry: every file in tests/data/bad has an expected error here and vice versa.
#[test]
fn bad_file_registry_is_complete_and_each_file_fails_as_expected() {
    let registry: &[(&str, &str)] = &[
        ("crashed-ffcv-write.beton", "interrupted write"),
        ("empty.beton", "shorter than the 24-byte header"),
        ("version-1.beton", "unsupported .beton version 1"),
        ("custom-field-no-layout.beton", "field 'ext' is a custom field"),
        ("alloc-table-ptr-zero-no-data.beton", "interrupted write"),
        ("name-not-ascii.beton", "is not ASCII"),
        ("ndarray-blob-bad-json.beton", "is not JSON"),
        ("extension-bad-slot.beton", "extension declares a 4-byte slot"),
    ];
    let dir = data_dir().join("bad");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".beton"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = registry.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "every bad file needs a registry entry and vice versa");
    for (file, want) in registry {
        let e = OpenOptions::new().open(dir.join(file)).expect_err(file);
        assert!(e.to_string().contains(want), "{file}: {e}");
    }
}

/// Inputs that once crashed the fuzzer (fuzz/regressions) stay harmless.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let _ = exercise(std::fs::read(&path).unwrap(), &OpenOptions::new());
        let _ = exercise(std::fs::read(&path).unwrap(), &OpenOptions::new().custom_layout("ext", 6, 1));
    }
}
