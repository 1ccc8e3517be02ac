//! A dataset directory on object storage (`file://`, object_store's local store) whose files a
//! cleanup elsewhere removed: a restore that would name them puts back the copy its mirror has,
//! or is refused before it commits; `verify` and `missing_files` see the store, not the mirror.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};

use beton_query::versioned::{verify_dir, VersionRef, VersionedDataset};
use beton_query::IndexSet;
use beton_testkit::write_labels as write_from;

/// This process's cache folder (mirrors): a fresh temporary folder, its own (not the user's
/// cache, not another process's), removed when the process exits.
static CACHE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Removes [`CACHE`]; registered with `atexit`, so it runs once the tests are done (the harness
/// exits the process whether they passed or not).
extern "C" fn remove_cache() {
    if let Some(cache) = CACHE.get() {
        let _ = std::fs::remove_dir_all(cache);
    }
}

/// Sets this process's cache folder, once, before a test touches a URL: the cache folder comes
/// from the environment, so one folder serves every test of the process.
fn init() {
    CACHE.get_or_init(|| {
        let cache = tempfile::Builder::new().prefix("beton-remote-integrity-").tempdir().unwrap().keep();
        // Edition 2021: set_var is safe; every test calls this before anything else.
        std::env::set_var("BETON_CACHE_DIR", &cache);
        // SAFETY: `remove_cache` is a plain `extern "C"` function with no preconditions; it
        // never unwinds (it ignores the removal's error and `OnceLock::get` does not panic).
        let registered = unsafe { libc::atexit(remove_cache) };
        assert_eq!(registered, 0, "atexit failed; the cache folder would be left behind");
        cache
    });
}

/// After [`init`], a temporary folder with an empty store in it (`store`) and the `file://` URL
/// of dataset `ds` in that store.
fn empty_store() -> (tempfile::TempDir, PathBuf, String) {
    init();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let url = format!("file://{}/ds", store.display());
    (tmp, store, url)
}

#[test]
fn files_gone_from_the_store_are_put_back_or_never_committed_to_and_are_reported() {
    let (tmp, store, url) = empty_store();
    let file = tmp.path().join("a.beton");
    write_from(&file, 0, 10);
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
    let (tmp, _, url) = empty_store();
    let file = tmp.path().join("a.beton");
    write_from(&file, 0, 16);
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

/// Every row of version `v` of the dataset at `at` (row id and label), read from its files.
fn rows(at: &Path, v: u64) -> Result<Vec<(i64, i64)>, beton_query::Error> {
    let version = VersionedDataset::open(at, VersionRef::Number(v))?;
    let view = version.view()?;
    let table = view.table()?;
    let batch = beton_query::query(&table, "SELECT CAST(row_id AS BIGINT), label FROM samples")?;
    let ids = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    let labels = batch.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
    Ok((0..batch.num_rows()).map(|r| (ids.value(r), labels.value(r))).collect())
}

/// A dataset in a store (`file://`): version 1 imported from `a` (16 rows) and tagged `base`,
/// version 2 appending `b` (16 rows, labels from 100), version 3 restoring version 1. Version
/// 2's data file (returned) is named by no other version, and this process's mirror has no
/// copy of it, as on a machine that did not write it: only the store has it.
fn old_version_only_the_store_holds() -> (tempfile::TempDir, PathBuf, String, VersionedDataset, String) {
    let (tmp, store, url) = empty_store();
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    write_from(&a, 0, 16);
    write_from(&b, 100, 16);
    let v1 = VersionedDataset::import(Path::new(&url), &a).unwrap();
    v1.tag("base").unwrap();
    let v2 = v1.append_file(&b, "").unwrap();
    let data = v2.manifest().fragments[1].data_file.clone();
    forget_mirror_copy(&v2, &data);
    let v3 = v2.restore(1).unwrap();
    (tmp, store.join("ds"), url, v3, data)
}

/// Removes the mirror's copy of data file `rel` (and its columnar copy): reads and commits of
/// this process then have only the store's.
fn forget_mirror_copy(v: &VersionedDataset, rel: &str) {
    let local = v.dir().join(rel);
    for path in [local.clone(), PathBuf::from(format!("{}.columns.arrow", local.display()))] {
        if let Err(e) = std::fs::remove_file(&path) {
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{}: {e}", path.display());
        }
    }
}

/// The names in folder `folder` of the store's copy of a dataset (none when it is missing).
fn names_in(ds: &Path, folder: &str) -> Vec<String> {
    match std::fs::read_dir(ds.join(folder)) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Waits until `cond` holds, up to 30 s (a fallback only: no assertion depends on the time).
fn wait_for(cond: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    true
}

/// A cleanup on another machine keeps a file a commit in progress names in a keep marker
/// (`_keeping/<id>.json`, docs/FORMAT.md §13), though no version names it; a marker older than
/// an hour is a dead commit's: ignored and removed. A marker that is not one stops the cleanup
/// before it deletes anything, naming it.
#[test]
fn cleanup_keeps_what_a_live_keep_marker_names_and_ignores_a_stale_one() {
    let (_tmp, ds, url, _v3, data) = old_version_only_the_store_holds();
    let at = Path::new(&url);
    let keeping = ds.join("_keeping");
    std::fs::create_dir_all(&keeping).unwrap();
    let marker = keeping.join("0123456789abcdef0123456789abcdef.json");
    std::fs::write(&marker, format!(r#"{{"version": 4, "written_ms": 0, "files": ["{data}"]}}"#)).unwrap();

    let report = VersionedDataset::open(at, VersionRef::Latest)
        .unwrap()
        .cleanup(1, std::time::Duration::ZERO)
        .unwrap();
    assert_eq!(report.versions, vec![2], "versions go; the files a marker names stay");
    assert!(!report.files.contains(&data), "{report:?}");
    assert!(ds.join(&data).is_file());
    assert!(marker.is_file());
    assert!(names_in(&ds, "_deleting").is_empty(), "the cleanup removed its marks");

    // Not a keep marker: nothing more is deleted, and the error names it.
    let bad = keeping.join("bad.json");
    std::fs::write(&bad, b"{\"files\": 7}").unwrap();
    let err = VersionedDataset::open(at, VersionRef::Latest)
        .unwrap()
        .cleanup(1, std::time::Duration::ZERO)
        .unwrap_err();
    assert!(
        err.to_string().contains("_keeping/bad.json") && err.to_string().contains("not a keep marker"),
        "{err}"
    );
    assert!(ds.join(&data).is_file());
    assert!(names_in(&ds, "_deleting").is_empty(), "the cleanup removed its mark");

    // Both an hour and a second old (by their last-modified time): a dead commit's.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3601);
    for path in [&marker, &bad] {
        std::fs::File::options().write(true).open(path).unwrap().set_modified(old).unwrap();
    }
    let report = VersionedDataset::open(at, VersionRef::Latest)
        .unwrap()
        .cleanup(1, std::time::Duration::ZERO)
        .unwrap();
    assert!(report.files.contains(&data), "{report:?}");
    assert!(!ds.join(&data).exists());
    assert!(names_in(&ds, "_keeping").is_empty(), "stale markers are removed");
}

/// The interleaving a keep marker closes, step by step: a restore of an old version whose data
/// file only the store has meets two cleanups' marks on that file. It puts its keep marker,
/// then waits for the marks: when the cleanups delete the file meanwhile, it commits nothing
/// and says so; when they keep it (they read the marker), it commits a version that reads.
#[test]
fn a_restore_waits_for_the_cleanups_marking_its_files_and_commits_only_what_is_there() {
    let (_tmp, ds, url, v3, data) = old_version_only_the_store_holds();
    let at = Path::new(&url);
    let mark = |cleanup: &str| ds.join("_deleting").join(format!("{}.{cleanup}", data.replace('/', "~")));
    std::fs::create_dir_all(ds.join("_deleting")).unwrap();

    // Two cleanups marked the file before the restore's keep marker, so neither saw it. One
    // keeps the file (it saw the version it is in, say) and removes its mark; the other deletes
    // the file, then removes its mark.
    let (a, b) = (mark("aaaa"), mark("bbbb"));
    std::fs::write(&a, b"").unwrap();
    std::fs::write(&b, b"").unwrap();
    let cleanups = {
        let ds = ds.clone();
        let data = data.clone();
        std::thread::spawn(move || {
            let marked = wait_for(|| !names_in(&ds, "_keeping").is_empty());
            std::fs::remove_file(&a).unwrap();
            // The restore's keep marker is up, so it is past putting it: give it the chance to
            // take the first mark's removal for the end of the cleanups.
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::remove_file(ds.join(&data)).unwrap();
            std::fs::remove_file(&b).unwrap();
            marked
        })
    };
    let err = v3.restore(2).unwrap_err().to_string();
    assert!(cleanups.join().unwrap(), "the restore put a keep marker");
    assert!(
        err.contains(&format!("version 2's data file {data}"))
            && err.contains("a cleanup removed it")
            && err.contains("nothing was committed"),
        "{err}"
    );
    assert_eq!(VersionedDataset::open(at, VersionRef::Latest).unwrap().version(), 3, "nothing was committed");
    assert!(names_in(&ds, "_keeping").is_empty(), "the restore removed its keep marker");

    // The same with the file kept: the restore commits once the marks are gone, and reads.
    let (_tmp, ds, url, v3, data) = old_version_only_the_store_holds();
    let at = Path::new(&url);
    let mark = ds.join("_deleting").join(format!("{}.cccc", data.replace('/', "~")));
    std::fs::create_dir_all(ds.join("_deleting")).unwrap();
    std::fs::write(&mark, b"").unwrap();
    let cleanup = {
        let ds = ds.clone();
        std::thread::spawn(move || {
            let marked = wait_for(|| !names_in(&ds, "_keeping").is_empty());
            std::fs::remove_file(&mark).unwrap();
            marked
        })
    };
    let v4 = v3.restore(2).unwrap();
    assert!(cleanup.join().unwrap(), "the restore put a keep marker");
    assert_eq!(v4.version(), 4);
    let expected: Vec<(i64, i64)> =
        (0..16).map(|i| (i, i)).chain((0..16).map(|i| (16 + i, 100 + i))).collect();
    assert_eq!(rows(at, 4).unwrap(), expected);
    assert!(names_in(&ds, "_keeping").is_empty(), "the restore removed its keep marker");
}

/// The other processes of
/// [`restores_of_an_old_version_racing_two_cleanups_elsewhere_commit_only_versions_that_read`]:
/// [`race_cleanup_child_remote`], each with its own cache folder.
fn spawn_cleanup(url: &str, cache: &Path, stop: &Path) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["race_cleanup_child_remote", "--exact", "--ignored", "--nocapture"])
        .env("BETON_CACHE_DIR", cache)
        .env("BETON_TEST_RACE_URL", url)
        .env("BETON_TEST_RACE_STOP", stop)
        // Between its last look and each delete (commit::pause_point): a restore's check and
        // put fall there often, as when a cleanup's machine is slow.
        .env("BETON_TEST_PAUSE_MS", "50")
        .spawn()
        .unwrap()
}

/// Stop files, written when dropped: a failing test stops the processes it started.
struct Stops([PathBuf; 2]);

impl Drop for Stops {
    fn drop(&mut self) {
        for stop in &self.0 {
            let _ = std::fs::write(stop, "");
        }
    }
}

/// Three machines on one dataset in a store: two clean up with no grace period, keeping one
/// version; this one appends a data file, restores the tagged first version (so that only the
/// appended version names that file), then restores the appended version, whose data file it
/// has no copy of, while the cleanups remove that version and its file (each round starts
/// again from the first version; the cleanups pause between their last look and each delete,
/// as a slow machine would, and every other restore starts when one has marked the file). Each restore either
/// commits a version that reads whole, or fails saying nothing was committed and commits
/// nothing.
#[test]
fn restores_of_an_old_version_racing_two_cleanups_elsewhere_commit_only_versions_that_read() {
    let (tmp, store, url) = empty_store();
    let at = Path::new(&url);
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    write_from(&a, 0, 16);
    write_from(&b, 100, 16);
    VersionedDataset::import(at, &a).unwrap().tag("base").unwrap();
    let stops = Stops([tmp.path().join("stop0"), tmp.path().join("stop1")]);
    let mut children: Vec<_> = (0..2)
        .map(|i| spawn_cleanup(&url, &tmp.path().join(format!("other-cache-{i}")), &stops.0[i]))
        .collect();
    let (mut committed, mut refused) = (0, 0);
    for round in 0..30 {
        let start = VersionedDataset::open(at, VersionRef::Latest).unwrap().restore(1).unwrap();
        let appended = start.append_file(&b, "").unwrap();
        let data = appended.manifest().fragments.last().unwrap().data_file.clone();
        forget_mirror_copy(&appended, &data);
        let back = appended.restore(1).unwrap();
        // The cleanups find the data file unreferenced from now on. Every other round restores
        // at once; the others when a cleanup has marked the file (about to delete it: the worst
        // moment) or removed it.
        if round % 2 == 1 {
            let flat = data.replace('/', "~");
            let ds = store.join("ds");
            wait_for(|| {
                names_in(&ds, "_deleting").iter().any(|m| m.starts_with(&flat)) || !ds.join(&data).exists()
            });
        }
        match back.restore(appended.version()) {
            Ok(restored) => {
                committed += 1;
                // The latest version: no cleanup may remove it or what it names. Read from the
                // store (this process never read that data file before).
                assert!(store.join("ds").join(&data).is_file(), "round {round}: {data} is gone");
                let labels: Vec<i64> = match rows(at, restored.version()) {
                    Ok(rows) => rows.into_iter().map(|(_, label)| label).collect(),
                    Err(e) => panic!("round {round}: version {} does not read: {e}", restored.version()),
                };
                assert_eq!(labels, (0..16).chain(100..116).collect::<Vec<i64>>(), "round {round}");
            }
            Err(e) => {
                refused += 1;
                let e = e.to_string();
                assert!(e.contains(&data) && e.contains("nothing was committed"), "round {round}: {e}");
                let now = VersionedDataset::open(at, VersionRef::Latest).unwrap().version();
                assert_eq!(now, back.version(), "round {round}: a failed restore committed nothing");
            }
        }
    }
    drop(stops);
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    for i in 0..2 {
        let cleanups: u64 =
            std::fs::read_to_string(tmp.path().join(format!("stop{i}.cleanups"))).unwrap().parse().unwrap();
        assert!(cleanups >= 1, "a cleanup ran {cleanups} times");
    }
    eprintln!("{committed} restores committed, {refused} refused");
    let report = verify_dir(at, false, &|_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(names_in(&store.join("ds"), "_keeping").is_empty(), "every keep marker was removed");
}

/// A local dataset directory is untouched by the object-storage protocol: no marks, no keep
/// markers, through restores and cleanups.
#[test]
fn local_datasets_write_no_marks() {
    let (tmp, a, b) = beton_testkit::two_files(write_from, 16, 16);
    let dir = tmp.path().join("ds");
    let v2 = VersionedDataset::import(&dir, &a).unwrap().append_file(&b, "").unwrap();
    let v3 = v2.restore(1).unwrap();
    v3.cleanup(1, std::time::Duration::ZERO).unwrap();
    let err = v3.restore(2).unwrap_err().to_string();
    assert!(err.contains("no version 2"), "{err}");
    assert!(!dir.join("_keeping").exists() && !dir.join("_deleting").exists());
    assert_eq!(rows(&dir, 3).unwrap(), (0..16).map(|i| (i, i)).collect::<Vec<_>>());
}
