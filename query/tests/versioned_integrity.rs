//! Dataset directories whose metadata is damaged or inconsistent are refused, never read as
//! different data: a byte flipped anywhere in a manifest or the files it names, a manifest
//! naming a file twice or ids that overlap, a file leading outside the directory, ids and
//! version numbers that would overflow. And a cleanup running beside edits in another process
//! never removes what a committed version names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};

use beton_query::versioned::{commit, verify_dir, Manifest, RowIds, VersionRef, VersionedDataset};
use beton_query::SqlEdits;
use beton_query::{Error, IndexSet};
use beton_testkit::write_labels_and_blobs as write;

/// Everything a version shows: row ids, every field of every row, every split's rows.
fn contents(v: &VersionedDataset) -> Result<Vec<String>, Error> {
    let view = v.view()?;
    let table = view.table()?;
    let batch = beton_query::query(&table, "SELECT row_id, label, blob FROM samples")?;
    let mut out = beton_testkit::text_rows(&batch);
    for name in v.manifest().splits.keys() {
        out.push(format!("{name}: {:?}", table.split(name)?.as_slice()));
    }
    Ok(out)
}

/// A dataset whose latest version names every kind of file: two data files, a deletion file, a
/// patch column file, a full column file and a split; then, compacted, a row-id file.
/// Returns the folder, the directory and the two versions (before and after compaction).
fn every_kind_of_file() -> (tempfile::TempDir, PathBuf, VersionedDataset, VersionedDataset) {
    let (tmp, file) = beton_testkit::temp_file("a.beton", |file| write(file, 0, 12));
    let train = IndexSet::from_sorted(vec![1, 3, 5, 7]).unwrap();
    beton_query::splits::save(&file, None, [("train", &train)]).unwrap();
    let dir = tmp.path().join("ds");
    let v = VersionedDataset::import(&dir, &file).unwrap();
    let more = tmp.path().join("b.beton");
    write(&more, 100, 5);
    let v = v.append_file(&more, "more").unwrap();
    let v = v.delete(&IndexSet::from_sorted(vec![0, 4, 13]).unwrap(), None, "").unwrap();
    let v = v.update(Some("label > 100"), &[("label".into(), "label * 2".into())], "double").unwrap();
    let v = v.add_column_sql("big", "label > 5", "").unwrap();
    let before = v
        .update_rows(
            &IndexSet::from_sorted(vec![1]).unwrap(),
            vec![("label".into(), Arc::new(Int64Array::from(vec![-1])) as ArrayRef)],
            "",
        )
        .unwrap();
    let after = before.compact(&beton_query::versioned::ExportOptions::with_threads(1), "").unwrap();
    assert!(matches!(after.manifest().fragments[0].row_ids, RowIds::File { .. }));
    (tmp, dir, before, after)
}

/// Opens version `v` of `dir` and reads all of it.
fn open_and_read(dir: &Path, v: u64) -> Result<(Manifest, Vec<String>), Error> {
    let opened = VersionedDataset::open(dir, VersionRef::Number(v))?;
    let contents = contents(&opened)?;
    Ok((opened.manifest().clone(), contents))
}

/// Flips each byte of `file` in turn with each mask; every flip must either fail to open
/// version `v` or open it exactly as it was. Returns how many flips opened.
fn sweep(dir: &Path, v: u64, file: &Path, masks: &[u8]) -> usize {
    let original = std::fs::read(file).unwrap();
    let expected = open_and_read(dir, v).unwrap();
    let mut opened = 0;
    for pos in 0..original.len() {
        for &mask in masks {
            let mut bytes = original.clone();
            bytes[pos] ^= mask;
            std::fs::write(file, &bytes).unwrap();
            if let Ok(got) = open_and_read(dir, v) {
                assert_eq!(
                    got,
                    expected,
                    "{}: byte {pos} ^ {mask:#x} opened as different data",
                    file.display()
                );
                opened += 1;
            }
        }
    }
    std::fs::write(file, &original).unwrap();
    assert_eq!(open_and_read(dir, v).unwrap(), expected);
    opened
}

#[test]
fn a_byte_flipped_anywhere_in_a_manifest_is_refused() {
    let (_tmp, dir, before, after) = every_kind_of_file();
    for v in [&before, &after] {
        let manifest = dir.join(commit::manifest_name(v.version()));
        let opened = sweep(&dir, v.version(), &manifest, &[0x01, 0x20, 0xff]);
        // The manifest's checksum covers every byte of its value; a flip in its whitespace
        // breaks the JSON or its pretty layout's syntax: nothing opens changed.
        assert_eq!(opened, 0, "version {}: {opened} flips opened", v.version());
    }
    // The error says what is wrong.
    let manifest = dir.join(commit::manifest_name(before.version()));
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen("\"train\"", "\"trail\"", 1)).unwrap();
    let err = VersionedDataset::open(&dir, VersionRef::Number(before.version())).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains("checksum") && err.contains(&format!("version {}", before.version())), "{err}");
}

#[test]
fn a_byte_flipped_in_a_deletion_row_id_split_or_column_file_is_refused() {
    let (_tmp, dir, before, after) = every_kind_of_file();
    let m = before.manifest();
    let mut files: Vec<(u64, String)> = Vec::new();
    files.push((before.version(), m.fragments[0].deletions.as_ref().unwrap().file.clone()));
    files.push((before.version(), m.splits["train"].file.clone()));
    for f in &m.fragments {
        for c in &f.columns {
            files.push((before.version(), c.file.clone()));
        }
    }
    match &after.manifest().fragments[0].row_ids {
        RowIds::File { file, checksum } => {
            assert!(checksum.is_some());
            files.push((after.version(), file.clone()));
        }
        RowIds::Range { .. } => unreachable!(),
    }
    let kinds: Vec<&str> = files.iter().map(|(_, f)| f.split('/').next().unwrap()).collect();
    for kind in ["deletions", "splits", "columns", "row_ids"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    for (v, rel) in &files {
        let opened = sweep(&dir, *v, &dir.join(rel), &[0x01]);
        assert_eq!(opened, 0, "{rel}: {opened} flips opened");
    }
}

#[test]
fn manifests_written_before_checksums_still_open() {
    let (_tmp, dir, before, _after) = every_kind_of_file();
    let v = before.version();
    let path = dir.join(commit::manifest_name(v));
    let expected = open_and_read(&dir, v).unwrap();
    // As an earlier beton wrote it: whole, format 1, no checksums anywhere.
    let mut value: serde_json::Value = serde_json::from_slice(&before.manifest().to_json()).unwrap();
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(o) => {
                o.remove("checksum");
                o.remove("data_bytes");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value["format_version"] = 1.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let (m, rows) = open_and_read(&dir, v).unwrap();
    assert_eq!(rows, expected.1);
    assert_eq!(m.format_version, 1);
    // Restored and edited, it is written as format 3, checksummed (the references it keeps
    // have none).
    let restored = VersionedDataset::open(&dir, VersionRef::Latest).unwrap().restore(v).unwrap();
    let edited = restored.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap();
    assert_eq!(edited.manifest().format_version, 3);
    let written = std::fs::read_to_string(dir.join(commit::manifest_name(edited.version()))).unwrap();
    assert!(written.ends_with("}\n") && written.contains("\"checksum\":\"crc32:"), "{written}");
    assert_eq!(open_and_read(&dir, edited.version()).unwrap().1.len(), rows.len() - 1);
    // A format-2 manifest without its checksum is damage, not an old manifest.
    value["format_version"] = 2.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let err = open_and_read(&dir, v).unwrap_err().to_string();
    assert!(err.contains("has no checksum"), "{err}");
}

/// Writes `m` (checksummed, as a writer would) as the manifest of its version.
fn put_manifest(dir: &Path, m: &Manifest) {
    std::fs::write(dir.join(commit::manifest_name(m.version)), m.to_json()).unwrap();
}

/// A change made to a manifest.
type Damage = Box<dyn Fn(&mut Manifest)>;

#[test]
fn manifests_naming_a_file_twice_or_contradicting_their_files_are_refused() {
    let (_tmp, dir, before, _after) = every_kind_of_file();
    let base = before.manifest().clone();
    let v = base.version;
    let cases: Vec<(&str, Damage)> = vec![
        (
            "the data file of fragment 0",
            Box::new(|m| {
                let mut twice = m.fragments[1].clone();
                twice.data_file = m.fragments[0].data_file.clone();
                m.fragments[1] = twice;
            }),
        ),
        ("both have id", Box::new(|m| m.fragments[1].id = m.fragments[0].id)),
        ("overlapping row ids", Box::new(|m| m.fragments[1].row_ids = RowIds::Range { start: 5 })),
        (
            "is both",
            Box::new(|m| {
                let split = m.splits["train"].clone();
                m.splits.insert("again".into(), split);
            }),
        ),
        ("in the schema twice", Box::new(|m| m.schema.push(m.schema[0].clone()))),
        (
            "not in the schema",
            Box::new(|m| {
                let c = m.fragments.find_mut(|f| !f.columns.is_empty()).unwrap();
                c.columns[0].fields = vec!["nope".into()];
            }),
        ),
        ("deletes 99 rows", Box::new(|m| m.fragments[0].deletions.as_mut().unwrap().count = 99)),
    ];
    for (expected, damage) in &cases {
        let mut m = base.clone();
        damage(&mut m);
        put_manifest(&dir, &m);
        let err = open_and_read(&dir, v).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{expected}: {err}");
        let err = err.to_string();
        assert!(err.contains(expected) && err.contains(&format!("version {v}")), "{expected}: {err}");
    }
    // Counts that contradict the files they name, found when the files are read.
    let bytes = base.fragments[0].data_bytes.unwrap();
    let read_cases: Vec<(String, Damage)> = vec![
        (
            "the deletion file of fragment 0 holds 2 rows".into(),
            Box::new(|m| m.fragments[0].deletions.as_mut().unwrap().count = 3),
        ),
        (
            "split 'train' holds 4 row ids, the manifest says 1".into(),
            Box::new(|m| m.splits.get_mut("train").unwrap().count = 1),
        ),
        ("has 12 rows".into(), Box::new(|m| m.fragments[0].num_rows = 11)),
        (
            format!("the manifest says 12 rows and {} bytes", bytes + 1),
            Box::new(|m| *m.fragments[0].data_bytes.as_mut().unwrap() += 1),
        ),
    ];
    for (expected, damage) in &read_cases {
        let mut m = base.clone();
        damage(&mut m);
        put_manifest(&dir, &m);
        let err = open_and_read(&dir, v).unwrap_err().to_string();
        assert!(err.contains(expected), "{expected}: {err}");
    }
    put_manifest(&dir, &base);
    open_and_read(&dir, v).unwrap();
    // An edit that would name a data file twice is refused before anything is committed.
    let latest = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    let err = latest
        .commit(beton_query::versioned::Operation::Append { rows: 0 }, "", &Default::default(), |_, new| {
            let mut twice = new.fragments[0].clone();
            twice.id = new.next_fragment_id;
            new.next_fragment_id += 1;
            new.fragments.push(twice);
            Ok(())
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("is both") && err.contains("nothing was committed"), "{err}");
    assert_eq!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().version(), latest.version());
}

#[cfg(unix)]
#[test]
fn a_file_leading_outside_the_directory_is_refused() {
    let (tmp, dir, before, _after) = every_kind_of_file();
    let v = before.version();
    let expected = open_and_read(&dir, v).unwrap();
    let m = before.manifest();
    let column = m.fragments.iter().find_map(|f| f.columns.first()).unwrap().file.clone();
    for rel in [m.fragments[0].data_file.clone(), column] {
        let inside = dir.join(&rel);
        // The same bytes, outside: still refused, being outside.
        let outside = tmp.path().join("outside");
        std::fs::rename(&inside, &outside).unwrap();
        std::os::unix::fs::symlink(&outside, &inside).unwrap();
        let err = open_and_read(&dir, v).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("leads outside the dataset directory"), "{err}");
        // A link that stays inside the directory is fine.
        std::fs::remove_file(&inside).unwrap();
        let moved = dir.join("data/elsewhere");
        std::fs::rename(&outside, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &inside).unwrap();
        assert_eq!(open_and_read(&dir, v).unwrap(), expected);
        std::fs::remove_file(&inside).unwrap();
        std::fs::rename(&moved, &inside).unwrap();
    }
    // verify names it too.
    let data = dir.join(&m.fragments[1].data_file);
    let outside = tmp.path().join("outside");
    std::fs::rename(&data, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &data).unwrap();
    let report = verify_dir(&dir, false, &|_| {}).unwrap();
    assert!(report.problems.iter().any(|p| p.contains("leads outside")), "{report:?}");
    std::fs::remove_file(&data).unwrap();
    std::fs::rename(&outside, &data).unwrap();
    assert_eq!(open_and_read(&dir, v).unwrap(), expected);
    // The folder of every data file a link outside (looked at once for all of them).
    assert!(m.fragments.len() > 1);
    let folder = dir.join("data");
    let outside = tmp.path().join("outside-data");
    std::fs::rename(&folder, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &folder).unwrap();
    let err = open_and_read(&dir, v).unwrap_err();
    assert!(err.to_string().contains("leads outside the dataset directory"), "{err}");
}

/// The names in each folder of a dataset directory, to see that nothing was written.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for folder in ["_versions", "_tags", "data", "deletions", "columns", "splits", "row_ids"] {
        for e in std::fs::read_dir(dir.join(folder)).into_iter().flatten().flatten() {
            out.push(format!("{folder}/{}", e.file_name().to_string_lossy()));
        }
    }
    out.sort();
    out
}

#[test]
fn ids_and_version_numbers_that_would_overflow_are_refused_before_anything_is_written() {
    let (tmp, file) = beton_testkit::temp_file("a.beton", |file| write(file, 0, 10));
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    // Row ids: the next is 2^64 - 5, and 10 rows are appended.
    let mut m = v1.manifest().child(beton_query::versioned::Operation::Create, "");
    m.next_row_id = u64::MAX - 5;
    put_manifest(&dir, &m);
    let v2 = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    let files = listing(&dir);
    let err = v2.append_file(&file, "").unwrap_err().to_string();
    assert!(
        err.contains("10 more rows would take row ids past 2^64 - 1") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(listing(&dir), files);
    // The version number: the latest is 2^64 - 1.
    let mut last = v2.manifest().clone();
    last.next_row_id = 10;
    last.version = u64::MAX;
    last.parent = Some(u64::MAX - 1);
    put_manifest(&dir, &last);
    let top = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    assert_eq!(top.version(), u64::MAX);
    let files = listing(&dir);
    let one = IndexSet::from_sorted(vec![0]).unwrap();
    let label = || vec![("label".to_string(), Arc::new(Int64Array::from(vec![7])) as ArrayRef)];
    let errors = [
        top.append_file(&file, "").unwrap_err(),
        top.delete(&one, None, "").unwrap_err(),
        top.update_rows(&one, label(), "").unwrap_err(),
        top.add_column_sql("x", "label + 1", "").unwrap_err(),
        top.restore(1).unwrap_err(),
        top.drop_column("blob", "").unwrap_err(),
        top.compact(&Default::default(), "").unwrap_err(),
    ];
    for err in errors {
        let err = err.to_string();
        assert!(err.contains("largest version number"), "{err}");
    }
    assert_eq!(listing(&dir), files, "nothing was written");
    // A version that far is still read, and cleanup copes with any keep_versions.
    assert_eq!(contents(&top).unwrap().len(), 10);
    top.cleanup(usize::MAX, std::time::Duration::ZERO).unwrap();
}

#[test]
fn verify_lists_every_problem_of_every_version() {
    let (_tmp, dir, before, after) = every_kind_of_file();
    let sound = verify_dir(&dir, false, &|_| {}).unwrap();
    assert!(sound.problems.is_empty(), "{sound:?}");
    assert_eq!(sound.versions, after.version());
    assert!(sound.data_files >= 3 && sound.other_files >= 4 && sound.samples > 0, "{sound:?}");
    // A data file removed, a column file changed, a manifest damaged.
    let m = before.manifest();
    std::fs::remove_file(dir.join(&m.fragments[1].data_file)).unwrap();
    let column = m.fragments.iter().find_map(|f| f.columns.first()).unwrap().file.clone();
    let mut bytes = std::fs::read(dir.join(&column)).unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 1;
    std::fs::write(dir.join(&column), bytes).unwrap();
    let manifest = dir.join(commit::manifest_name(1));
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen("\"label\"", "\"lab3l\"", 1)).unwrap();
    let report = verify_dir(&dir, false, &|_| {}).unwrap();
    let all = report.problems.join("\n");
    assert!(all.contains(&format!("data file {} is missing", m.fragments[1].data_file)), "{all}");
    assert!(all.contains(&column) && all.contains("checksum"), "{all}");
    assert!(all.contains("version 1:") && all.contains("its checksum is"), "{all}");
    // Only the versions naming the missing file report it; the compacted one is whole.
    assert!(!all.contains(&format!("version {}:", after.version())), "{all}");
    // What `beton info` checks: the files a version names.
    let missing =
        VersionedDataset::open(&dir, VersionRef::Number(before.version())).unwrap().missing_files().unwrap();
    assert_eq!(missing, vec![m.fragments[1].data_file.clone()]);
    assert!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().missing_files().unwrap().is_empty());
}

/// A reader holding an old version while compaction and cleanup run gets its data (its data
/// files are mapped) or a clear error naming a missing file, never other data.
#[test]
fn a_reader_of_an_old_version_gets_data_or_a_clear_error_through_compact_and_cleanup() {
    let (_tmp, dir, before, _after) = every_kind_of_file();
    let old = VersionedDataset::open(&dir, VersionRef::Number(before.version())).unwrap();
    let expected = contents(&old).unwrap();
    let view = old.view().unwrap();
    let table = view.table().unwrap();
    let latest = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    latest.compact(&Default::default(), "").unwrap().cleanup(1, std::time::Duration::ZERO).unwrap();
    // The open table reads what it read before.
    let batch = beton_query::query(&table, "SELECT row_id, label, blob FROM samples").unwrap();
    assert_eq!(batch.num_rows() + 1, expected.len());
    // Opening it again: its manifest is gone, a clear error.
    let err = VersionedDataset::open(&dir, VersionRef::Number(before.version())).unwrap_err().to_string();
    assert!(err.contains(&format!("no version {}", before.version())), "{err}");
    // A view opened before the cleanup whose data and column files are first read after (data
    // files are opened on first use): a missing file, named.
    let (_tmp2, dir2, before2, _) = every_kind_of_file();
    let view = before2.view().unwrap();
    let latest = VersionedDataset::open(&dir2, VersionRef::Latest).unwrap();
    latest.compact(&Default::default(), "").unwrap().cleanup(1, std::time::Duration::ZERO).unwrap();
    let err = view.table().unwrap_err().to_string();
    assert!(err.contains("No such file") && err.contains("data/"), "{err}");
}

// --- a cleanup in one process, edits in another ------------------------------------------------

/// Rounds of edits the race runs (each: append, update, restore, and a tag every third).
const RACE_ROUNDS: usize = 24;

/// The child process of [`cleanup_in_another_process_never_removes_what_a_committed_version_names`]:
/// cleans up (keeping one version, no grace period) until `stop` exists.
#[test]
#[ignore = "the other process of cleanup_in_another_process_never_removes_what_a_committed_version_names"]
fn race_cleanup_child() {
    let Ok(dir) = std::env::var("BETON_TEST_RACE_DIR") else { return };
    let dir = PathBuf::from(dir);
    let stop = dir.with_extension("stop");
    let mut rounds = 0u64;
    while !stop.exists() {
        let v = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
        v.cleanup(1, std::time::Duration::ZERO).unwrap();
        rounds += 1;
    }
    std::fs::write(dir.with_extension("cleanups"), rounds.to_string()).unwrap();
}

#[test]
fn cleanup_in_another_process_never_removes_what_a_committed_version_names() {
    let (tmp, file) = beton_testkit::temp_file("a.beton", |file| write(file, 0, 20));
    let dir = tmp.path().join("ds");
    VersionedDataset::import(&dir, &file).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["race_cleanup_child", "--exact", "--ignored", "--nocapture"])
        .env("BETON_TEST_RACE_DIR", &dir)
        .spawn()
        .unwrap();
    // Edits and what each committed version holds, to compare after.
    let mut committed: Vec<(u64, Vec<String>)> = Vec::new();
    let mut gone = 0;
    for round in 0..RACE_ROUNDS {
        let v = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
        let appended = v.append_file(&file, "").unwrap();
        committed.push((appended.version(), contents(&appended).unwrap()));
        let rows = IndexSet::from_sorted(vec![round as u64 % appended.num_rows()]).unwrap();
        let label =
            vec![("label".to_string(), Arc::new(Int64Array::from(vec![1000 + round as i64])) as ArrayRef)];
        let updated = appended.update_rows(&rows, label, "").unwrap();
        committed.push((updated.version(), contents(&updated).unwrap()));
        // Restore the version before the update (dropping its column file), then the update
        // again: its column file, which the latest no longer names, is what the cleanup in the
        // other process removes, unless it sees the restore first.
        for back in [appended.version(), updated.version()] {
            match updated.restore(back) {
                Ok(r) => committed.push((r.version(), contents(&r).unwrap())),
                // Removed by the cleanup before the restore read it: named, nothing committed.
                Err(e) => {
                    assert!(e.to_string().contains(&format!("no version {back}")), "{e}");
                    gone += 1;
                }
            }
        }
        if round % 3 == 0 {
            let latest = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
            latest.tag(&format!("t{round}")).unwrap();
        }
    }
    std::fs::write(dir.with_extension("stop"), "").unwrap();
    assert!(child.wait().unwrap().success());
    let cleanups: u64 = std::fs::read_to_string(dir.with_extension("cleanups")).unwrap().parse().unwrap();
    assert!(cleanups >= 2, "the cleanup ran {cleanups} times");
    // Every version still listed opens and reads whole, as it was committed.
    let versions = commit::list_versions(&beton_query::store::LocalStore::new(&dir)).unwrap();
    for &v in &versions {
        let opened = VersionedDataset::open(&dir, VersionRef::Number(v)).unwrap();
        let rows = contents(&opened).unwrap_or_else(|e| panic!("version {v} (of {versions:?}): {e}"));
        if let Some((_, expected)) = committed.iter().find(|(c, _)| *c == v) {
            assert_eq!(&rows, expected, "version {v}");
        }
    }
    let report = verify_dir(&dir, false, &|_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report:?} (restores of removed versions: {gone})");
}
