//! A dataset directory on object storage, behind `file://` URLs (object_store's local store,
//! with the same conditional puts as S3): import, edits and tags uploaded, a cold mirror that
//! sees them all from the store, a data file committed in place, writers racing, and cleanup
//! deleting what no kept version lists from the store.

use std::path::{Path, PathBuf};

use beton_query::versioned::{VersionRef, VersionedDataset};
use beton_query::IndexSet;
use beton_testkit::write_labels_and_blobs as write;

fn labels(v: &VersionedDataset) -> Vec<i64> {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    let rows: Vec<u64> = (0..v.num_rows()).collect();
    let batch = beton_query::take(&table, &rows, Some(&["label".to_string()])).unwrap();
    batch.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap().values().to_vec()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// One test: the cache folder comes from the environment, set once for this binary.
#[test]
fn a_dataset_directory_behind_a_url() {
    let tmp = tempfile::tempdir().unwrap();
    // Edition 2021: set_var is safe; no other thread of this binary runs yet.
    std::env::set_var("BETON_CACHE_DIR", tmp.path().join("cache"));
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let url = format!("file://{}/ds", store.display());
    let file = tmp.path().join("a.beton");
    write(&file, 0, 10);

    assert!(!VersionedDataset::is_dataset_dir(Path::new(&url)));
    let v1 = VersionedDataset::import(Path::new(&url), &file).unwrap();
    assert_eq!(v1.location(), format!("{url}/"));
    // In the store: the manifest and the data file.
    assert_eq!(listing(&store.join("ds/_versions")), ["00000000000000000001.json"]);
    assert_eq!(listing(&store.join("ds/data")).len(), 1);
    assert!(VersionedDataset::is_dataset_dir(Path::new(&url)));

    let v2 = v1.delete(&IndexSet::from_sorted(vec![0, 5]).unwrap(), None, "drop two").unwrap();
    v2.tag("clean").unwrap();
    assert!(v2.tag("clean").unwrap_err().to_string().contains("already names version 2"));
    assert_eq!(listing(&store.join("ds/deletions")).len(), 1);
    assert_eq!(listing(&store.join("ds/_tags")), ["clean.json"]);

    // A cold mirror: everything from the store (the data file by range requests).
    std::fs::remove_dir_all(v2.dir()).unwrap();
    let again = VersionedDataset::open(Path::new(&url), VersionRef::Tag("clean".into())).unwrap();
    assert_eq!(again.version(), 2);
    assert_eq!(labels(&again), vec![1, 2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(again.tags().unwrap().get("clean"), Some(&2));
    assert!(VersionedDataset::open(Path::new(&url), VersionRef::Number(9))
        .unwrap_err()
        .to_string()
        .contains(&format!("{url}/ has no version 9; it has versions 1 to 2")));

    // A data file a worker put into the store's data/ itself: committed where it is.
    let in_store = store.join("ds/data/worker-part.beton");
    write(&in_store, 100, 3);
    let v3 = VersionedDataset::commit_files(
        Path::new(&url),
        &[PathBuf::from(format!("{url}/data/worker-part.beton"))],
        "from a worker",
    )
    .unwrap();
    assert_eq!(v3.manifest().fragments.last().unwrap().data_file, "data/worker-part.beton");
    assert_eq!(labels(&v3)[8..], [100, 101, 102]);
    assert_eq!(listing(&store.join("ds/data")).len(), 2);

    // Two writers racing from the same version: each append lands, once.
    let parts: Vec<PathBuf> = (0..2)
        .map(|k| {
            let f = tmp.path().join(format!("p{k}.beton"));
            write(&f, 1000 * (k + 1), 2);
            f
        })
        .collect();
    std::thread::scope(|s| {
        for part in &parts {
            let base = v3.clone();
            s.spawn(move || {
                for _ in 0..4 {
                    base.append_file(part, "racing").unwrap();
                }
            });
        }
    });
    let last = VersionedDataset::open(Path::new(&url), VersionRef::Latest).unwrap();
    assert_eq!(last.version(), 3 + 8);
    let got = labels(&last);
    assert_eq!(got.len(), 11 + 16);
    assert_eq!(got.iter().filter(|&&l| l == 1000).count(), 4);
    assert_eq!(got.iter().filter(|&&l| l == 2001).count(), 4);
    assert_eq!(listing(&store.join("ds/_versions")).len(), 11);

    // Cleanup in the store: two more deletions (the first one's file only version 12 lists),
    // and a data file a failed writer uploaded but never committed.
    let v12 = last.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "one").unwrap();
    let v13 = v12.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "another").unwrap();
    let only_12: Vec<String> = v12
        .manifest()
        .files()
        .filter(|f| !v13.manifest().files().any(|g| g == *f))
        .map(str::to_string)
        .collect();
    assert_eq!(only_12.len(), 1, "a deletion file: {only_12:?}");
    write(&store.join("ds/data/orphan.beton"), 7, 2);
    // Within the grace period: old manifests go, files stay (an uncommitted upload is young).
    let report = v13.cleanup(1, std::time::Duration::from_secs(3600)).unwrap();
    let dropped: Vec<u64> = (1..=12).filter(|&v| v != 2).collect();
    assert_eq!(report.versions, dropped, "all but the tagged and the newest");
    assert!(report.files.is_empty(), "{:?}", report.files);
    assert_eq!(
        listing(&store.join("ds/_versions")),
        ["00000000000000000002.json", "00000000000000000013.json"]
    );
    // Past it: what no kept version lists, in the store and the mirror.
    let report = v13.cleanup(1, std::time::Duration::ZERO).unwrap();
    let mut expected = vec!["data/orphan.beton".to_string(), only_12[0].clone()];
    expected.sort();
    let mut removed = report.files.clone();
    removed.sort();
    assert_eq!(removed, expected);
    assert!(report.bytes > 0);
    assert!(!store.join("ds").join(&only_12[0]).exists() && !v13.dir().join(&only_12[0]).exists());
    assert!(!listing(&store.join("ds/data")).contains(&"orphan.beton".to_string()));
    // What is left reads, from a cold mirror too.
    std::fs::remove_dir_all(v13.dir()).unwrap();
    // Opened by several threads at once: each makes or finds the mirror, and reads the same.
    let opened: Vec<u64> = std::thread::scope(|scope| {
        let opens: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| VersionedDataset::open(Path::new(&url), VersionRef::Latest).unwrap().version())
            })
            .collect();
        opens.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(opened, [13; 4]);
    let latest = VersionedDataset::open(Path::new(&url), VersionRef::Latest).unwrap();
    assert_eq!(latest.version(), 13);
    assert_eq!(labels(&latest), got[2..]);
    let tagged = VersionedDataset::open(Path::new(&url), VersionRef::Tag("clean".into())).unwrap();
    assert_eq!(labels(&tagged), vec![1, 2, 3, 4, 6, 7, 8, 9]);
    let err = VersionedDataset::open(Path::new(&url), VersionRef::Number(5)).unwrap_err().to_string();
    assert!(err.contains("has no version 5"), "{err}");

    // Data files this process writes stay in the mirror up to BETON_CACHE_SIZE, then go (they
    // are in the store): here a bound below one file's size keeps none.
    let part = tmp.path().join("big.beton");
    write(&part, 500, 300);
    let size = std::fs::metadata(&part).unwrap().len();
    std::env::set_var("BETON_CACHE_SIZE", (size - 1).to_string());
    let v14 = latest.append_file(&part, "past the bound").unwrap();
    std::env::remove_var("BETON_CACHE_SIZE");
    let written = &v14.manifest().fragments.last().unwrap().data_file;
    assert!(!v14.dir().join(written).exists(), "{written} left the mirror");
    assert!(store.join("ds").join(written).is_file());
    assert_eq!(labels(&v14)[got.len() - 2..], (500..800).collect::<Vec<i64>>()[..]);
    // Under the bound it stays.
    let v15 = v14.append_file(&part, "under the bound").unwrap();
    let kept = &v15.manifest().fragments.last().unwrap().data_file;
    assert!(v15.dir().join(kept).is_file());
}

/// An HTTP server on 127.0.0.1 answering every request with `status` and no body.
fn answering(status: &'static str) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    beton_testkit::answering(status, "")
}

#[test]
fn a_dataset_url_whose_listing_fails_says_why_instead_of_not_a_dataset() {
    // Refused: access denied naming the listing, after one request (no retries), for a folder
    // URL; for a URL that may be a file, after a HEAD that is refused too.
    let (base, count) = answering("403 Forbidden");
    for (url, requests) in [(format!("{base}/ds/"), 1), (format!("{base}/ds"), 2)] {
        let before = count.load(std::sync::atomic::Ordering::SeqCst);
        match VersionedDataset::probe(Path::new(&url)) {
            Err(beton_query::Error::Storage(beton_storage::Error::RemoteDenied { url: listing, what })) => {
                assert_eq!(listing, format!("{base}/ds/_versions/"));
                assert!(what.starts_with("listing it: "), "{what}");
            }
            other => panic!("{url}: {other:?}"),
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst) - before, requests, "{url}");
        assert!(!VersionedDataset::is_dataset_dir(Path::new(&url)));
    }
    // A server that cannot list (no WebDAV): not a dataset, so the URL may be a file.
    let (base, count) = answering("405 Method Not Allowed");
    assert!(!VersionedDataset::probe(Path::new(&format!("{base}/file"))).unwrap());
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Nothing listening: the listing's error, within the open budget (5 s by default), not the
    // minute of BETON_REMOTE_RETRY_SECONDS.
    let port = std::net::TcpListener::bind("127.0.0.2:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.2:{port}/ds/");
    let started = std::time::Instant::now();
    match VersionedDataset::probe(Path::new(&url)) {
        Err(beton_query::Error::Storage(beton_storage::Error::RemoteUnavailable { url: listing, what })) => {
            assert_eq!(listing, format!("{url}_versions/"));
            assert!(
                what.starts_with("listing it failed after ") && what.contains("never answered"),
                "{what}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
}
