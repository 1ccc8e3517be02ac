//! A commit finds the latest version without listing the versions when its base's next version
//! does not exist, and never mistakes a version a cleanup removed for one never published.

use std::time::Duration;

use arrow_array::{Array, Int64Array};
use beton_dataset::versioned::{VersionRef, VersionedDataset};
use beton_dataset::IndexSet;
use beton_storage::SampleValue;
use std::sync::Arc;

fn dataset(dir: &std::path::Path) -> VersionedDataset {
    let file = dir.join("a.beton");
    beton_testkit::write(&file, beton_testkit::schema("label:int"), 10, |i| vec![SampleValue::Int(i as i64)]);
    VersionedDataset::import(&dir.join("ds"), &file).unwrap()
}

fn relabel(v: &VersionedDataset, row: u64, label: i64) -> VersionedDataset {
    let values: Arc<dyn Array> = Arc::new(Int64Array::from(vec![label]));
    v.update_rows(&IndexSet::from_sorted(vec![row]).unwrap(), vec![("label".into(), values)], "").unwrap()
}

#[test]
fn a_handle_on_an_old_version_commits_after_the_latest_though_cleanup_removed_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = dataset(tmp.path());
    // A handle on version 1, kept by a tag, while another writer makes versions 2 to 5.
    v1.tag("start").unwrap();
    let mut other = VersionedDataset::open(&tmp.path().join("ds"), VersionRef::Latest).unwrap();
    for k in 0..4 {
        other = relabel(&other, k, 100 + k as i64);
    }
    assert_eq!(other.version(), 5);
    // Versions 2 to 4 go; 1 stays (tagged): version 2's manifest is missing, as if never made.
    let report = other.cleanup(1, Duration::ZERO).unwrap();
    assert_eq!(report.versions, vec![2, 3, 4]);
    assert!(!tmp.path().join("ds/_versions/00000000000000000002.json").exists());
    // The stale handle's commit (an append: rebased on what the others did) goes after version
    // 5, never in version 2's place, where it would not be the latest.
    let more = tmp.path().join("more.beton");
    beton_testkit::write(&more, beton_testkit::schema("label:int"), 5, |i| {
        vec![SampleValue::Int(-(i as i64))]
    });
    let next = v1.append_file(&more, "").unwrap();
    assert_eq!(next.version(), 6);
    let latest = VersionedDataset::open(&tmp.path().join("ds"), VersionRef::Latest).unwrap();
    assert_eq!(latest.version(), 6);
    let labels = latest.view().unwrap().table().unwrap().column("label").unwrap();
    let labels = labels.as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(labels.len(), 15);
    assert_eq!((labels.value(0), labels.value(3), labels.value(11)), (100, 103, -1), "both writers' edits");
}

#[test]
fn a_handle_on_the_latest_version_commits_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let mut v = dataset(tmp.path());
    for k in 0..3 {
        v = relabel(&v, k, k as i64);
        assert_eq!(v.version(), k + 2);
    }
    // A cleanup record that is not JSON names itself.
    std::fs::write(tmp.path().join("ds/_cleanup.json"), "nonsense").unwrap();
    let err = v.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap_err().to_string();
    assert!(err.contains("_cleanup.json"), "{err}");
}
