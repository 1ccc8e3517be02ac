//! Named splits: round trip through the file, use in SQL, errors, and crash safety (an update
//! killed between its two writes, every torn prefix of an update, concurrent updates).

use std::path::{Path, PathBuf};

use beton_query::{select_indices, splits, Error, IndexSet, Table};
use beton_storage::splits::{SplitRegion, SLOT_HEADER_SIZE};
use beton_storage::{
    Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, Writer, WriterOptions,
};

fn scalar_dataset(dir: &Path, n: u64, reserve: Option<u64>) -> PathBuf {
    let path = dir.join("scalars.beton");
    let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("score", FieldType::Float)];
    let options = WriterOptions { page_size: 1 << 21, splits_reserve: reserve, ..WriterOptions::default() };
    Writer::new(&path, fields, options)
        .unwrap()
        .write_indexed(n, |i| Ok(vec![SampleValue::Int((i % 10) as i64), SampleValue::Float(i as f64)]))
        .unwrap();
    path
}

fn image_dataset(dir: &Path, n: u64) -> PathBuf {
    let path = dir.join("images.beton");
    let fields =
        vec![FieldSpec::rgb_image("image", ImageOptions::default()), FieldSpec::new("label", FieldType::Int)];
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    Writer::new(&path, fields, options)
        .unwrap()
        .write_indexed(n, |i| {
            let pixels = Pixels { width: 8, height: 4, channels: 3, data: vec![(i * 7) as u8; 96] };
            Ok(vec![SampleValue::Image(ImageSource::Pixels(pixels)), SampleValue::Int((i % 3) as i64)])
        })
        .unwrap();
    path
}

fn ids(r: std::ops::Range<u64>) -> IndexSet {
    r.collect()
}

#[test]
fn round_trip_and_sql() {
    let dir = tempfile::tempdir().unwrap();
    for path in [scalar_dataset(dir.path(), 1000, None), image_dataset(dir.path(), 300)] {
        let ds = Dataset::open(&path).unwrap();
        assert!(splits::all(&ds).unwrap().is_empty());
        let n = ds.num_samples();
        let parts = IndexSet::all(n).split(&[0.8, 0.2], 3).unwrap();
        splits::save(&path, None, [("train", &parts[0]), ("val", &parts[1])]).unwrap();

        // A handle opened before the update sees it (the split region is read afresh).
        assert_eq!(splits::names(&ds).unwrap(), ["train", "val"]);
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(splits::get(&ds, "train").unwrap(), parts[0]);
        assert_eq!(splits::get(&ds, "val").unwrap(), parts[1]);
        beton_storage::verify(&ds, true).unwrap();

        let table = Table::new(&ds);
        assert_eq!(select_indices(&table, "in_split('val')").unwrap(), parts[1]);
        let want: IndexSet = parts[0].iter().filter(|i| i % (if n == 1000 { 10 } else { 3 }) < 2).collect();
        assert_eq!(select_indices(&table, "label < 2 AND in_split('train')").unwrap(), want);
        assert_eq!(
            select_indices(&table, "SELECT * FROM samples WHERE NOT in_split('train')").unwrap(),
            parts[1]
        );
        let count = beton_query::query(&table, "SELECT count(*) FROM samples WHERE in_split('val')").unwrap();
        let count = count.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap().value(0);
        assert_eq!(count as usize, parts[1].len());

        // Replace one, add one, remove one: the others stay.
        splits::save(&path, None, [("val", &ids(0..10)), ("fold-1", &ids(5..7))]).unwrap();
        assert_eq!(splits::get(&ds, "val").unwrap(), ids(0..10));
        assert_eq!(splits::get(&ds, "train").unwrap(), parts[0]);
        splits::remove(&path, None, ["fold-1"]).unwrap();
        assert_eq!(splits::names(&ds).unwrap(), ["train", "val"]);
        splits::remove(&path, None, ["train", "val"]).unwrap();
        assert!(splits::names(&ds).unwrap().is_empty());
        beton_storage::verify(&Dataset::open(&path).unwrap(), true).unwrap();
    }
}

#[test]
fn errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = scalar_dataset(dir.path(), 100, None);
    splits::save(&path, None, [("train", &ids(0..50))]).unwrap();
    let ds = Dataset::open(&path).unwrap();
    match splits::get(&ds, "test") {
        Err(Error::NoSuchSplit { name, available }) => {
            assert_eq!((name.as_str(), available.as_str()), ("test", "train"))
        }
        other => panic!("{other:?}"),
    }
    let table = Table::new(&ds);
    let err = select_indices(&table, "label = 1 AND in_split('tset')").unwrap_err().to_string();
    assert!(
        err.contains("column 24") && err.contains("no split named 'tset'") && err.contains("train"),
        "{err}"
    );
    let err = select_indices(&table, "in_split(label)").unwrap_err().to_string();
    assert!(err.contains("column 1") && err.contains("in_split('val')"), "{err}");

    let err = splits::save(&path, None, [("bad name", &ids(0..2))]).unwrap_err().to_string();
    assert!(err.contains("split name \"bad name\""), "{err}");
    let err = splits::save(&path, None, [("big", &ids(0..101))]).unwrap_err().to_string();
    assert!(err.contains("row 100 is past the last row") && err.contains("100 rows"), "{err}");
    let err = splits::remove(&path, None, ["train", "nope"]).unwrap_err();
    assert!(matches!(&err, Error::NoSuchSplit { name, .. } if name == "nope"), "{err}");
    assert_eq!(splits::names(&ds).unwrap(), ["train"], "a failed remove removes nothing");
}

#[test]
fn no_room_leaves_the_file_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    // FFCV's layout and no pages: the region is the 8-byte alignment slack at most.
    let path = scalar_dataset(dir.path(), 100, Some(0));
    let before = std::fs::read(&path).unwrap();
    let err = splits::save(&path, None, [("train", &ids(0..50))]).unwrap_err().to_string();
    assert!(err.contains("the splits need") && err.contains("room for 0"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // A reserve fits splits up to half of it, and no more.
    let path = scalar_dataset(dir.path(), 100, Some(1024));
    let ds = Dataset::open(&path).unwrap();
    let region = SplitRegion::of(&ds);
    assert_eq!(region.slot_len, 512);
    let fits: IndexSet = (0..100).step_by(3).collect();
    splits::save(&path, None, [("a", &fits)]).unwrap();
    let before = std::fs::read(&path).unwrap();
    let many: Vec<(String, IndexSet)> = (0..40).map(|k| (format!("fold-{k}"), ids(k..k + 1))).collect();
    let err = splits::save(&path, None, many.iter().map(|(n, s)| (n.as_str(), s))).unwrap_err().to_string();
    assert!(err.contains("room for 512"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn refuses_to_overwrite_foreign_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = scalar_dataset(dir.path(), 100, None);
    let ds = Dataset::open(&path).unwrap();
    let region = SplitRegion::of(&ds);
    drop(ds);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[region.start as usize] = 0x42;
    std::fs::write(&path, &bytes).unwrap();
    let err = splits::save(&path, None, [("train", &ids(0..5))]).unwrap_err().to_string();
    assert!(err.contains(&format!("byte {}", region.start)) && err.contains("refusing"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// Every state a crash can leave: the old file with a prefix of the update's payload write, or
/// with all of it and a prefix of its header write, and (a disk reordering writes) the header
/// with a prefix of the payload. Each reads as the old splits or the new ones, never an error.
#[test]
fn every_torn_update_reads_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = scalar_dataset(dir.path(), 2000, None);
    let old_a = ids(0..1000);
    splits::save(&path, None, [("a", &old_a)]).unwrap();
    // Two generations so the target slot holds an older, valid generation too.
    let old_b: IndexSet = (0..2000).step_by(7).collect();
    splits::save(&path, None, [("b", &old_b)]).unwrap();
    let old = std::fs::read(&path).unwrap();
    let new_c: IndexSet = (0..2000).step_by(3).collect();
    splits::save(&path, None, [("c", &new_c)]).unwrap();
    let new = std::fs::read(&path).unwrap();

    let ds = Dataset::open(&path).unwrap();
    let region = SplitRegion::of(&ds);
    // Generation 1 went to slot 0, 2 to slot 1, so 3 (the update under test) to slot 0.
    let slot = region.start as usize;
    let header = slot..slot + SLOT_HEADER_SIZE as usize;
    let payload_len = u64::from_le_bytes(new[slot + 16..slot + 24].try_into().unwrap()) as usize;
    let payload = header.end..header.end + payload_len;
    assert!(old[..slot] == new[..slot] && old[payload.end..] == new[payload.end..]);

    let read = |bytes: &[u8]| {
        let ds = beton_storage::OpenOptions::new().open_bytes(bytes.to_vec()).unwrap();
        splits::all(&ds).unwrap_or_else(|e| panic!("torn state does not read: {e}"))
    };
    let old_splits = read(&old);
    let new_splits = read(&new);
    assert_eq!(old_splits.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(new_splits.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    let check = |state: &[u8], what: &str| {
        let got = read(state);
        assert!(got == old_splits || got == new_splits, "{what}: neither old nor new");
    };
    let step = (payload_len / 97).max(1);
    for k in (0..=payload_len).step_by(step).chain([payload_len]) {
        let mut state = old.clone();
        state[payload.start..payload.start + k].copy_from_slice(&new[payload.start..payload.start + k]);
        check(&state, &format!("payload prefix {k}"));
        let mut reordered = state.clone();
        reordered[header.clone()].copy_from_slice(&new[header.clone()]);
        check(&reordered, &format!("header + payload prefix {k}"));
        if k < payload_len {
            assert_eq!(read(&reordered), old_splits, "an incomplete payload must not be taken");
        }
    }
    for h in 0..=SLOT_HEADER_SIZE as usize {
        let mut state = old.clone();
        state[payload.clone()].copy_from_slice(&new[payload.clone()]);
        state[slot..slot + h].copy_from_slice(&new[slot..slot + h]);
        check(&state, &format!("payload + header prefix {h}"));
    }
}

/// The injected crash: a child process aborts between the payload and the header write.
#[test]
fn killed_update_keeps_old_splits() {
    if let Some(path) = std::env::var_os("BETON_SPLITS_TEST_CHILD") {
        // In the child: this update dies at the fail point.
        splits::save(Path::new(&path), None, [("new", &ids(0..3))]).unwrap();
        unreachable!("the fail point aborts the process");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = image_dataset(dir.path(), 200);
    splits::save(&path, None, [("old", &ids(0..100))]).unwrap();
    for (mode, want_abort) in [("abort", true), ("error", false)] {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "killed_update_keeps_old_splits", "--nocapture", "--test-threads=1"])
            .env("BETON_SPLITS_TEST_CHILD", &path)
            .env("BETON_SPLITS_FAIL_AFTER_PAYLOAD", mode)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "{mode}: the child must not finish its update");
        #[cfg(unix)]
        if want_abort {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(6), "the child died by SIGABRT");
        }
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(splits::names(&ds).unwrap(), ["old"], "{mode}");
        assert_eq!(splits::get(&ds, "old").unwrap(), ids(0..100));
        beton_storage::verify(&ds, true).unwrap();
        // The next update goes through and reuses the torn slot.
        splits::save(&path, None, [(mode, &ids(1..2))]).unwrap();
        assert_eq!(splits::get(&ds, mode).unwrap(), ids(1..2));
        splits::remove(&path, None, [mode]).unwrap();
    }
}

#[test]
fn concurrent_updates_are_serialised() {
    let dir = tempfile::tempdir().unwrap();
    let path = scalar_dataset(dir.path(), 500, None);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let path = &path;
            s.spawn(move || {
                for k in 0..10u64 {
                    splits::save(path, None, [(format!("t{t}-{k}").as_str(), &ids(t..t + k + 1))]).unwrap();
                }
            });
        }
    });
    let ds = Dataset::open(&path).unwrap();
    let all = splits::all(&ds).unwrap();
    assert_eq!(all.len(), 40, "no update was lost");
    assert_eq!(all["t3-9"], ids(3..13));
}
