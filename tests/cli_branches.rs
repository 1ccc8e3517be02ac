//! The CLI on branches: `beton branch`, `branches`, `merge` (conflicts listed, exit 1; settled by
//! a strategy), `log --graph`, `diff` and `gallery --diff` by branch name, `branch -d`.

use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use beton_query::versioned::{VersionRef, VersionedDataset};
use beton_query::IndexSet;

fn beton(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_beton")).args(args).output().expect("run beton");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) -> String {
    let (success, out, err) = beton(args);
    assert!(success, "beton {args:?}: {err}");
    out
}

fn set_label(v: &VersionedDataset, row: u64, value: i64) -> VersionedDataset {
    let values: ArrayRef = Arc::new(Int64Array::from(vec![value]));
    v.update_rows(&IndexSet::from_sorted(vec![row]).unwrap(), vec![("label".into(), values)], "").unwrap()
}

#[test]
fn branch_merge_log_graph_and_delete() {
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    beton_testkit::write_labels(&file, 0, 20);
    let dir = tmp.path().join("ds");
    let d = dir.to_str().unwrap();
    ok(&["import", d, file.to_str().unwrap()]);
    assert!(ok(&["branch", d, "fix"]).contains("branch 'fix' starts at version 1 of main"));
    let fix = VersionedDataset::open_branch(&dir, "fix", VersionRef::Latest).unwrap();
    set_label(&fix, 0, 5);
    let main = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    set_label(&main, 0, 6);
    let listed = ok(&["branches", d]);
    assert!(listed.contains("main") && listed.contains("fix") && listed.contains("from main at version 1"));
    assert!(ok(&["diff", d, "main", "fix"]).contains("label: 1 rows changed (row ids 0)"));
    // The merge preview as a page: row 0 on main beside row 0 on fix, the label highlighted.
    let page = tmp.path().join("review.html");
    let wrote = ok(&["gallery", d, "--diff", "main", "fix", "--out", page.to_str().unwrap()]);
    assert!(wrote.contains("1 thumbnails of 1 rows"), "{wrote}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("main → fix: 1 rows changed, 0 added, 0 deleted (columns label)"), "{html}");
    assert!(
        html.contains("<tr class=\"changed\" data-column=\"label\"><td>label</td><td>6</td><td>5</td></tr>")
    );
    let (success, _, err) = beton(&["gallery", d, "--diff", "main", "nope", "--out", page.to_str().unwrap()]);
    assert!(!success && err.contains("neither a version, a tag nor a branch"), "{err}");
    // Edits from the CLI on a branch stay on it.
    let updated = ok(&["update", d, "--branch", "fix", "--set", "label=9", "--where", "row_id = 1"]);
    assert!(updated.contains("(branch fix): version 3, 1 rows updated"), "{updated}");
    assert!(ok(&["delete", d, "row_id = 2", "--branch", "fix"])
        .contains("(branch fix): version 4, 1 rows deleted"));
    assert!(
        ok(&["add-column", d, "twice", "label * 2", "--branch", "fix"]).contains("(branch fix): version 5")
    );
    assert!(ok(&["tag", d, "reviewed", "--branch", "fix"]).contains("names version 5"));
    let fix = VersionedDataset::open_branch(&dir, "fix", VersionRef::Latest).unwrap();
    assert_eq!((fix.version(), fix.num_rows()), (5, 19));
    let main = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    assert_eq!((main.version(), main.num_rows()), (2, 20), "main is untouched");
    let (success, _, err) = beton(&["update", d, "--branch", "nope", "--set", "label=1"]);
    assert!(!success && err.contains("nope"), "{err}");
    let (success, _, err) = beton(&["merge", d, "fix"]);
    assert!(!success && err.contains("1 conflicts") && err.contains("row 0, column 'label' (cell)"), "{err}");
    let merged = ok(&["merge", d, "fix", "--strategy", "theirs", "-m", "take fix"]);
    assert!(merged.contains("version 3 of main merges version 5 of fix"), "{merged}");
    let graph = ok(&["log", d, "--graph"]);
    assert!(
        graph.contains("<- fix version 5") && graph.contains("fix started from main at version 1"),
        "{graph}"
    );
    let again = ok(&["merge", d, "fix", "--json"]);
    assert!(again.contains("\"committed\": false"), "{again}");
    assert!(ok(&["log", d, "--branch", "fix"]).contains("version 5"));
    assert!(ok(&["branch", "-d", d, "fix"]).contains("deleted"));
    let (success, _, err) = beton(&["merge", d, "fix"]);
    assert!(!success && err.contains("no such branch"), "{err}");
}
