//! A dataset directory on object storage (`file://`, object_store's local store) whose files a
//! cleanup elsewhere removed: a restore that would name them puts back the copy its mirror has,
//! or is refused before it commits; `verify` and `missing_files` see the store, not the mirror.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};

use beton_query::versioned::{verify_dir, VersionRef, VersionedDataset};
use beton_query::IndexSet;
use beton_storage::{FieldSpec, FieldType, SampleValue, Writer, WriterOptions};

fn write(path: &Path, n: u64) {
    let fields = vec![FieldSpec::new("label", FieldType::Int)];
    Writer::new(path, fields, WriterOptions::default())
        .unwrap()
        .write_indexed(n, |i| Ok(vec![SampleValue::Int(i as i64)]))
        .unwrap();
}

/// Sets this process's cache folder (mirrors), once, before a test touches a URL: the cache
/// folder comes from the environment.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cache = std::env::temp_dir().join(format!("beton-remote-integrity-{}", std::process::id()));
        // Edition 2021: set_var is safe; every test calls this before anything else.
        std::env::set_var("BETON_CACHE_DIR", cache);
    });
}

#[test]
fn files_gone_from_the_store_are_put_back_or_never_committed_to_and_are_reported() {
    init();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let url = format!("file://{}/ds", store.display());
    let file = tmp.path().join("a.beton");
    write(&file, 10);
    let v1 = VersionedDataset::import(Path::new(&url), &file).unwrap();
    let label: ArrayRef = Arc::new(Int64Array::from(vec![99]));
    let v2 =
        v1.update_rows(&IndexSet::from_sorted(vec![3]).unwrap(), vec![("label".into(), label)], "").unwrap();
    let column = v2.manifest().fragments[0].columns[0].file.clone();
    let v3 = v2.restore(1).unwrap();
    assert_eq!(verify_dir(Path::new(&url), false, &|_| {}).unwrap().problems, Vec::<String>::new());

    // A cleanup on another machine removed version 2's column file; this process's mirror has
    // a copy, which restoring version 2 puts back.
    std::fs::remove_file(store.join("ds").join(&column)).unwrap();
    assert!(v3.dir().join(&column).is_file(), "the mirror keeps its copy");
    let v2 = VersionedDataset::open(Path::new(&url), VersionRef::Number(2)).unwrap();
    assert_eq!(v2.missing_files().unwrap(), vec![column.clone()]);
    let report = verify_dir(Path::new(&url), false, &|_| {}).unwrap();
    assert_eq!(report.versions, 3);
    assert!(report.problems.iter().any(|p| p.starts_with("version 2:") && p.contains(&column)), "{report:?}");
    assert!(!report.problems.iter().any(|p| p.starts_with("version 3:")), "{report:?}");
    let v4 = v3.restore(2).unwrap();
    assert!(store.join("ds").join(&column).is_file(), "put back");
    assert!(v4.missing_files().unwrap().is_empty());
    assert!(verify_dir(Path::new(&url), false, &|_| {}).unwrap().problems.is_empty());

    // Gone from the store and the mirror: a restore naming it is refused, nothing committed.
    let v5 = v4.restore(1).unwrap();
    std::fs::remove_file(store.join("ds").join(&column)).unwrap();
    std::fs::remove_file(v5.dir().join(&column)).unwrap();
    let err = v5.restore(2).unwrap_err().to_string();
    assert!(
        err.contains(&column)
            && err.contains("no longer in the store")
            && err.contains("nothing was committed"),
        "{err}"
    );
    assert_eq!(VersionedDataset::open(Path::new(&url), VersionRef::Latest).unwrap().version(), 5);
}

/// The other process of [`a_cleanup_on_another_machine_never_leaves_a_committed_version_unreadable`]
/// (its own cache folder, so no lock is shared): cleans up, keeping one version, no grace
/// period, until `stop` exists.
#[test]
#[ignore = "the other process of a_cleanup_on_another_machine_never_leaves_a_committed_version_unreadable"]
fn race_cleanup_child_remote() {
    let (Ok(url), Ok(stop)) = (std::env::var("BETON_TEST_RACE_URL"), std::env::var("BETON_TEST_RACE_STOP"))
    else {
        return;
    };
    let mut rounds = 0u64;
    while !Path::new(&stop).exists() {
        let v = VersionedDataset::open(Path::new(&url), VersionRef::Latest).unwrap();
        v.cleanup(1, std::time::Duration::ZERO).unwrap();
        rounds += 1;
    }
    std::fs::write(format!("{stop}.cleanups"), rounds.to_string()).unwrap();
}

/// Two machines on one dataset in a store: edits (append, update, restores of versions the
/// cleanup is removing, tags) here, cleanup with no grace period in another process with its
/// own mirror. Every version still listed afterwards reads whole.
#[test]
fn a_cleanup_on_another_machine_never_leaves_a_committed_version_unreadable() {
    init();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let url = format!("file://{}/ds", store.display());
    let file = tmp.path().join("a.beton");
    write(&file, 16);
    VersionedDataset::import(Path::new(&url), &file).unwrap();
    let stop = tmp.path().join("stop");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["race_cleanup_child_remote", "--exact", "--ignored", "--nocapture"])
        .env("BETON_CACHE_DIR", tmp.path().join("other-cache"))
        .env("BETON_TEST_RACE_URL", &url)
        .env("BETON_TEST_RACE_STOP", &stop)
        .spawn()
        .unwrap();
    let at = Path::new(&url);
    for round in 0..20u64 {
        let v = VersionedDataset::open(at, VersionRef::Latest).unwrap();
        let appended = v.append_file(&file, "").unwrap();
        let label: ArrayRef = Arc::new(Int64Array::from(vec![1000 + round as i64]));
        let rows = IndexSet::from_sorted(vec![round % appended.num_rows()]).unwrap();
        let updated = appended.update_rows(&rows, vec![("label".into(), label)], "").unwrap();
        for back in [appended.version(), updated.version()] {
            if let Err(e) = updated.restore(back) {
                assert!(e.to_string().contains(&format!("no version {back}")), "{e}");
            }
        }
        if round % 3 == 0 {
            VersionedDataset::open(at, VersionRef::Latest).unwrap().tag(&format!("t{round}")).unwrap();
        }
    }
    std::fs::write(&stop, "").unwrap();
    assert!(child.wait().unwrap().success());
    let cleanups: u64 = std::fs::read_to_string(tmp.path().join("stop.cleanups")).unwrap().parse().unwrap();
    assert!(cleanups >= 2, "the cleanup ran {cleanups} times");
    let report = verify_dir(at, false, &|_| {}).unwrap();
    assert!(report.problems.is_empty() && report.versions >= 7, "{report:?}");
}
