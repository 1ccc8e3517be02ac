//! The CLI on a dataset directory: edits, log, diff, info, query, show and explain by version.

use std::path::PathBuf;
use std::process::Command;

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

/// The bundled ImageFolder (`examples/data/imagefolder`, 155 photos).
fn bundled() -> PathBuf {
    beton_testkit::example_data().join("imagefolder")
}

/// A temporary folder holding `a.beton`, [`bundled`] at most 32 pixels a side, and the path of
/// dataset directory `ds` beside it (not made).
fn bundled_file() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    ok(&["write-imagefolder", bundled().to_str().unwrap(), file.to_str().unwrap(), "--max-resolution", "32"]);
    let dir = tmp.path().join("ds");
    (tmp, file, dir)
}

#[test]
fn every_read_command_takes_a_version() {
    let (tmp, file, dir) = bundled_file();
    let (f, d) = (file.to_str().unwrap(), dir.to_str().unwrap());
    assert!(ok(&["import", d, f]).contains("version 1 imported"));
    assert!(ok(&["update", d, "--set", "label=9", "--where", "index < 3", "-m", "fix"])
        .contains("3 rows updated"));
    assert!(ok(&["delete", d, "index = 10"]).contains("1 rows deleted, 154 left"));
    ok(&["add-column", d, "wide", "image.width > image.height"]);
    ok(&["tag", d, "edited"]);
    let log = ok(&["log", d]);
    assert!(log.contains("add_column") && log.contains("[edited]") && log.contains("\"fix\""), "{log}");
    let diff = ok(&["diff", d, "1", "edited"]);
    assert!(
        diff.contains("deleted: 1")
            && diff.contains("column added: wide")
            && diff.contains("label: 3 rows changed"),
        "{diff}"
    );
    let info = ok(&["info", d]);
    assert!(info.contains("version 4 of 4") && info.contains("1 deleted pending compaction"), "{info}");
    assert_eq!(
        ok(&["query", d, "SELECT count(*) FROM samples WHERE label = 9", "--json"]).trim(),
        "{\"count(*)\":3}"
    );
    assert_eq!(
        ok(&["query", d, "--version", "1", "SELECT count(*) FROM samples", "--json"]).trim(),
        "{\"count(*)\":155}"
    );
    assert!(ok(&["show", d, "0"]).contains("label: 9"));
    assert!(!ok(&["show", d, "0", "--version", "1"]).contains("label: 9"));
    let png = tmp.path().join("x.png");
    assert!(ok(&["show", d, "0", "--out", png.to_str().unwrap()]).contains("PNG") && png.is_file());
    // concat: the edited dataset (its latest version exported) then a .beton file (hard-linked;
    // its rows are NULL in the dataset's `wide`, which they lack).
    let both = tmp.path().join("both");
    let b = both.to_str().unwrap();
    assert!(ok(&["concat", b, d, f, "-m", "joined"]).contains("version 1, 309 rows from 2 sources"));
    assert_eq!(
        ok(&["query", b, "SELECT count(*) FROM samples WHERE label = 9 AND wide", "--json"]).trim(),
        ok(&["query", d, "SELECT count(*) FROM samples WHERE label = 9 AND wide", "--json"]).trim(),
    );
    let (success, _, err) = beton(&["concat", b, f]);
    assert!(!success && err.contains("already"), "{err}");
    let explain = ok(&["explain", d, "label = 9"]);
    let explain = explain.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(explain.contains("rows matched: 3 of 154") && explain.contains("data file 0"), "{explain}");
    ok(&["compact", d]);
    let out = tmp.path().join("export.beton");
    assert!(ok(&["export", d, out.to_str().unwrap(), "--where", "wide", "--version", "edited"])
        .contains("rows of version 4"));
    ok(&["verify", out.to_str().unwrap()]);
    assert!(ok(&["cleanup", d, "--grace-seconds", "0"]).contains("removed"));
    // Errors name what is wrong.
    let (success, _, err) = beton(&["query", f, "--version", "2", "label = 1"]);
    assert!(!success && err.contains("version 1 only"), "{err}");
    let (success, _, err) = beton(&["update", d, "--set", "nolabel"]);
    assert!(!success && err.contains("FIELD=EXPR"), "{err}");
    let (success, _, err) = beton(&["show", d, "9999"]);
    assert!(!success && err.contains("out of range"), "{err}");
}

/// The same commands on a dataset directory behind a URL (`file://`: object_store's local store,
/// with the conditional puts S3 has), and on a `.beton` file behind one.
#[test]
fn dataset_directories_and_files_at_urls() {
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    let folder = bundled();
    let f = file.to_str().unwrap();
    let at = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_beton"))
            .args(args)
            .env("BETON_CACHE_DIR", tmp.path().join("cache"))
            .output()
            .expect("run beton");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "beton {args:?}: {err}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    at(&["write-imagefolder", folder.to_str().unwrap(), f, "--max-resolution", "32"]);
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let url = format!("file://{}/ds", store.display());
    assert!(at(&["import", &url, f]).contains("version 1 imported"));
    assert!(at(&["delete", &url, "index = 10"]).contains("1 rows deleted, 154 left"));
    at(&["tag", &url, "edited"]);
    assert!(store.join("ds/_versions/00000000000000000002.json").is_file());
    assert!(store.join("ds/_tags/edited.json").is_file());
    let log = at(&["log", &url]);
    assert!(log.contains("delete") && log.contains("[edited]"), "{log}");
    assert!(at(&["info", &url]).contains("version 2 of 2"));
    assert_eq!(at(&["query", &url, "SELECT count(*) FROM samples", "--json"]).trim(), "{\"count(*)\":154}");
    // Cleanup there: a second deletion, then only the tagged and the newest version are kept.
    at(&["delete", &url, "index = 0"]);
    let cleaned = at(&["cleanup", &url, "--grace-seconds", "0"]);
    assert!(cleaned.contains("removed 1 version"), "{cleaned}");
    assert!(!store.join("ds/_versions/00000000000000000001.json").exists());
    assert!(at(&["info", &url]).contains("version 3 of 3"));
    // An ImageFolder appended there: its data file is uploaded before the commit.
    let out = at(&["append", &url, folder.to_str().unwrap(), "--max-resolution", "16"]);
    assert!(out.contains("version 4, 308 rows (155 images"), "{out}");
    assert_eq!(std::fs::read_dir(store.join("ds/data")).unwrap().count(), 2);
    assert_eq!(
        at(&["query", &url, "SELECT count(*) FROM samples WHERE index >= 153 AND label = 0", "--json"])
            .trim(),
        at(&["query", f, "SELECT count(*) FROM samples WHERE label = 0", "--json"]).trim()
    );
    // A .beton file at a URL.
    let file_url = format!("file://{f}");
    assert_eq!(
        at(&["query", &file_url, "SELECT count(*) FROM samples", "--json"]).trim(),
        "{\"count(*)\":155}"
    );
}

/// `beton append DIR FOLDER` labels by class name (a new class added at the end, in the same
/// version), keeps paths, and `beton classes` lists and edits the names by version.
#[test]
fn append_an_imagefolder_by_class_name_and_edit_classes() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, more) = (tmp.path().join("base"), tmp.path().join("more"));
    beton_testkit::image_folder(&base, &["bird", "cat", "cow"], 2);
    beton_testkit::image_folder(&more, &["cow", "dog"], 2);
    let file = tmp.path().join("a.beton");
    let f = file.to_str().unwrap();
    ok(&["write-imagefolder", base.to_str().unwrap(), f, "--max-resolution", "16", "--with-path"]);
    let dir = tmp.path().join("ds");
    let d = dir.to_str().unwrap();
    ok(&["import", d, f]);
    let out =
        ok(&["append", d, more.to_str().unwrap(), "--max-resolution", "16", "--mode", "raw", "-m", "more"]);
    assert!(out.contains("version 2, 10 rows (4 images from") && out.contains("new classes: dog"), "{out}");
    let rows = ok(&["query", d, "SELECT label, path, image.mode FROM samples WHERE index >= 6", "--json"]);
    let rows: Vec<serde_json::Value> = rows.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let got: Vec<(i64, &str)> =
        rows.iter().map(|r| (r["label"].as_i64().unwrap(), r["path"].as_str().unwrap())).collect();
    assert_eq!(got, [(2, "cow/cow-0.jpg"), (2, "cow/cow-1.jpg"), (3, "dog/dog-0.jpg"), (3, "dog/dog-1.jpg")]);
    assert!(rows.iter().all(|r| r["image.mode"] == "raw"), "{rows:?}");
    let listed = ok(&["classes", d]);
    assert!(listed.contains("version 2, 4 classes") && listed.contains("     3  dog"), "{listed}");
    assert!(ok(&["classes", d, "--version", "1"]).contains("version 1, 3 classes"));
    assert!(ok(&["classes", d, "--rename", "cow=cattle", "-m", "rename"]).contains("     2  cattle"));
    assert!(ok(&["classes", d, "--add", "eel"]).contains("version 4, 5 classes"));
    let (success, _, err) = beton(&["classes", d, "--rename", "cow=x"]);
    assert!(!success && err.contains("no such class"), "{err}");
    let (success, _, err) = beton(&["append", d, base.join("bird").to_str().unwrap()]);
    assert!(!success && err.contains("no class folders"), "{err}");
    assert!(ok(&["log", d]).contains("classes"));
}

/// `beton verify DIR` checks every version of a dataset directory and lists what is wrong;
/// `beton info DIR` refuses a version whose data file is missing.
#[test]
fn verify_and_info_on_a_dataset_directory_with_a_missing_data_file() {
    let (_tmp, file, dir) = bundled_file();
    let (f, d) = (file.to_str().unwrap(), dir.to_str().unwrap());
    ok(&["import", d, f]);
    ok(&["update", d, "--set", "label=9", "--where", "index < 3"]);
    ok(&["append", d, f]);
    ok(&["tag", d, "both"]);
    let verified = ok(&["verify", d]);
    assert!(verified.starts_with("ok: ") && verified.contains("3 versions, 2 data files"), "{verified}");
    assert!(ok(&["info", d]).contains("version 3 of 3"));

    // The appended data file goes: versions 3 cannot be read, 1 and 2 can.
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", d, "--json"])).unwrap();
    let appended = info["fragments"][1]["data_file"].as_str().unwrap().to_string();
    std::fs::remove_file(dir.join(&appended)).unwrap();
    let (success, out, err) = beton(&["info", d]);
    assert!(!success && out.is_empty(), "{out}");
    assert!(
        err.contains("version 3 cannot be read") && err.contains(&appended) && err.contains("missing"),
        "{err}"
    );
    assert!(ok(&["info", d, "--version", "2"]).contains("version 2 of 3"));
    let (success, _, err) = beton(&["verify", d]);
    assert!(!success, "verify passed a dataset missing a data file");
    assert!(
        err.contains("1 problem in 3 versions")
            && err.contains(&format!("version 3: data file {appended} is missing")),
        "{err}"
    );

    // A damaged manifest is listed too, naming its version.
    let manifest = dir.join("_versions/00000000000000000001.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen("\"label\"", "\"lbel\"", 1)).unwrap();
    let (success, _, err) = beton(&["verify", d]);
    assert!(
        !success && err.contains("2 problems") && err.contains("version 1:") && err.contains("checksum"),
        "{err}"
    );
    let (success, _, err) = beton(&["query", d, "--version", "1", "SELECT count(*) FROM samples"]);
    assert!(!success && err.contains("damaged dataset file") && err.contains("checksum"), "{err}");
}
