//! The `beton` binary: info, verify and write-imagefolder on FFCV fixtures and small folders;
//! `show` and `explain` in `show_explain.rs`, `gallery` and `show --grid` in `gallery.rs`, progress
//! bars in `progress.rs`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod alpha;
mod gallery;
mod progress;
mod show_explain;
mod similar;

fn beton(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_beton")).args(args).output().expect("run beton")
}

/// Runs `beton args`, checks that it succeeded (naming the arguments and stderr when not) and
/// returns its stdout.
fn beton_ok(args: &[&str]) -> String {
    let o = beton(args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "beton {args:?}: {err}");
    out
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Gunzips fixture `name` from tests/data/ffcv into `dir`.
fn fixture(dir: &Path, name: &str) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/ffcv/{name}.beton.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).unwrap()).read_to_end(&mut bytes).unwrap();
    let path = dir.join(format!("{name}.beton"));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn info_prints_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "scalars");
    let out = beton_ok(&["info", f.to_str().unwrap()]);
    assert!(out.contains("1000 samples") && out.contains("IntField (1)") && out.contains("score"), "{out}");
    let o = beton(&["info", "--json", f.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["num_samples"], 1000);
    assert_eq!(json["fields"][1]["type"], "FloatField");
}

#[test]
fn custom_fields_need_and_take_a_layout() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "custom_field");
    let o = beton(&["info", f.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("'ext'") && err.contains("--custom ext=SIZE"), "{err}");
    let o = beton(&["info", "--json", "--custom", "ext=6:1", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["fields"][2]["row_offset"], 16);
    let o = beton(&["info", "--custom", "ext=six", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn verify_passes_good_files_and_names_the_first_problem() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "pages_2mib");
    let o = beton(&["verify", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(text(&o).0, "ok: 120 samples, 120 allocations checked\n");

    let crashed = fixture(dir.path(), "crashed_write");
    let o = beton(&["verify", crashed.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.starts_with(&format!("beton verify: {}: ", crashed.display())), "{err}");
    assert!(err.contains("interrupted write"), "{err}");
    assert!(o.stdout.is_empty());

    let o = beton(&["verify", dir.path().join("missing.beton").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.starts_with("beton verify: ") && err.contains("missing.beton: "), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "each cause once: {err}");

    // Point the first allocation entry past the end of the file.
    let mut bytes = std::fs::read(&f).unwrap();
    let table = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    bytes[table + 8..table + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    let bad = dir.path().join("bad.beton");
    std::fs::write(&bad, bytes).unwrap();
    let o = beton(&["verify", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.contains("allocation entry 0") && err.contains(&format!("byte {table}")), "{err}");
    assert!(err.starts_with(&format!("beton verify: {}: ", bad.display())), "{err}");
}

#[test]
fn help_and_version() {
    let o = beton(&["--help"]);
    assert!(o.status.success());
    let out = text(&o).0;
    for sub in ["info ", "verify ", "write-imagefolder "] {
        assert!(out.contains(sub), "{out}");
    }
    let o = beton(&["--version"]);
    assert_eq!(text(&o).0, format!("beton {}\n", env!("CARGO_PKG_VERSION")));
    assert_eq!(beton(&[]).status.code(), Some(2), "no subcommand is a usage error");
    assert_eq!(beton(&["info"]).status.code(), Some(2));
}

#[test]
fn a_closed_stdout_is_not_a_crash() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "ndarrays");
    let mut child = Command::new(env!("CARGO_BIN_EXE_beton"))
        .args(["info", "--json", f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // `beton info --json F | head -0`
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(o.stderr.is_empty(), "{}", text(&o).1);
}

fn write_png(path: &Path, w: u32, h: u32, shade: u8) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut enc = png::Encoder::new(file, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().unwrap();
    writer.write_image_data(&vec![shade; (w * h * 3) as usize]).unwrap();
}

/// A temporary folder holding an ImageFolder `folder` of one class, `c`, with a PNG of each
/// `(name, width, height, shade)`: the temporary folder and `folder`.
fn one_class(pngs: &[(&str, u32, u32, u8)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("folder");
    std::fs::create_dir_all(root.join("c")).unwrap();
    for &(name, w, h, shade) in pngs {
        write_png(&root.join("c").join(name), w, h, shade);
    }
    (dir, root)
}

#[test]
fn write_imagefolder_labels_by_sorted_class_and_records_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("folder");
    for (class, n) in [("zebra", 2), ("ant", 3)] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for k in 0..n {
            write_png(&root.join(class).join(format!("{k}.png")), 5 + k, 4, 40 * k as u8);
        }
    }
    let out = dir.path().join("out.beton");
    let (r, d) = (root.to_str().unwrap(), out.to_str().unwrap());
    let o = beton(&["write-imagefolder", r, d, "--mode", "raw", "--with-path", "--workers", "2"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(text(&o).0.contains("5 images in 2 classes"), "{}", text(&o).0);
    let ds = beton_storage::Dataset::open(&out).unwrap();
    assert_eq!(ds.fields().iter().map(|f| f.name()).collect::<Vec<_>>(), ["image", "label", "path"]);
    let labels: Vec<i64> = (0..5).map(|i| ds.get_by_name(i, "label").unwrap().as_int().unwrap()).collect();
    assert_eq!(labels, [0, 0, 0, 1, 1], "ant before zebra");
    assert_eq!(ds.get_by_name(3, "path").unwrap().as_str(), Some("zebra/0.png"));
    let img = ds.get_by_name(2, "image").unwrap().as_image().unwrap();
    assert_eq!((img.width, img.height, img.data[0]), (7, 4, 80));
    let o = beton(&["info", "--json", out.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((json["num_samples"].as_u64(), json["fields"][0]["raw"].as_u64()), (Some(5), Some(5)));
    // The class names are stored in the file (its split region), shown by info, not a split.
    assert_eq!(json["classes"], serde_json::json!(["ant", "zebra"]));
    assert_eq!(json["splits"], serde_json::json!([]));
    assert_eq!(ds.classes().unwrap(), Some(vec!["ant".to_string(), "zebra".to_string()]));
    let o = beton(&["split", "add", out.to_str().unwrap(), ":classes", "label = 0"]);
    assert!(!o.status.success() && text(&o).1.contains("reserved"), "{}", text(&o).1);
    let o = beton(&["info", out.to_str().unwrap()]);
    assert!(text(&o).0.contains("classes (2): ant, zebra"), "{}", text(&o).0);
}

#[test]
fn write_imagefolder_smart_mode_then_verify() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("folder");
    // Raw sizes 60, 72 and 84 bytes; a threshold of 65 keeps the first of each class raw.
    for (class, n) in [("a", 3), ("b", 2)] {
        std::fs::create_dir_all(root.join(class).join("nested")).unwrap();
        for k in 0..n {
            let sub = if k == 0 { "" } else { "nested" };
            write_png(&root.join(class).join(sub).join(format!("{k}.png")), 5 + k, 4, 100);
        }
    }
    let out = dir.path().join("smart.beton");
    let (r, o) = (root.to_str().unwrap(), out.to_str().unwrap());
    let args = ["write-imagefolder", r, o, "--mode", "smart", "--smart-threshold", "65", "--page-size"];
    let w = beton(&[&args[..], &["2097152", "--seed", "3", "--with-path"]].concat());
    assert!(w.status.success(), "{}", text(&w).1);
    let o = beton(&["info", "--json", out.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["page_size"], 2097152);
    assert_eq!((json["fields"][0]["jpg"].as_u64(), json["fields"][0]["raw"].as_u64()), (Some(3), Some(2)));
    let ds = beton_storage::Dataset::open(&out).unwrap();
    let paths: Vec<String> =
        (0..5).map(|i| ds.get_by_name(i, "path").unwrap().as_str().unwrap().to_string()).collect();
    assert_eq!(paths, ["a/0.png", "a/nested/1.png", "a/nested/2.png", "b/0.png", "b/nested/1.png"]);
    let o = beton(&["verify", "--decode-images", out.to_str().unwrap()]); // images and paths
    assert_eq!(text(&o).0, "ok: 5 samples, 10 allocations checked, 5 images decoded\n", "{}", text(&o).1);
}

#[test]
fn write_imagefolder_failures_leave_no_file() {
    let (dir, root) = one_class(&[("ok.png", 3, 3, 1)]);
    let out = dir.path().join("out.beton");
    let o =
        beton(&["write-imagefolder", dir.path().join("missing").to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.starts_with("beton write-imagefolder: "), "{}", text(&o).1);
    assert!(!out.exists());

    std::fs::write(root.join("c/broken.jpg"), b"\xFF\xD8\xFF\xE0 not really").unwrap();
    let (r, d) = (root.to_str().unwrap(), out.to_str().unwrap());
    let write = |args: &[&str]| beton(&[&["write-imagefolder", r, d], args].concat());
    let o = write(&[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("sample 0, field 'image'"), "{}", text(&o).1);
    assert!(!out.exists());
    let o = write(&["--mode", "smart"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("--smart-threshold"));
    let o = write(&["--smart-threshold", "10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("--mode smart only"));
    let o = write(&["--quality", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("quality"), "{}", text(&o).1);
    assert!(!out.exists());
    std::fs::write(root.join("c/x.bmp"), b"").unwrap();
    let o = write(&[]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.contains("x.bmp") && err.contains("beton reads JPEG and PNG"), "{err}");
    assert!(!out.exists());
    let o = write(&["--mode", "webp"]);
    assert_eq!(o.status.code(), Some(2));
    let o = beton(&["write-imagefolder", "--bogus"]);
    assert_eq!(o.status.code(), Some(2), "usage errors are clap's exit 2");
}

#[test]
fn query_prints_tables_json_and_ids() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "odd5");
    let file = f.to_str().unwrap();
    let out = beton_ok(&["query", file, "SELECT count(*) AS n, min(bb) AS lo FROM samples WHERE bb >= 0"]);
    assert!(out.lines().next().unwrap().starts_with("n") && out.contains("(1 rows)"), "{out}");

    let ids: Vec<u64> = beton_ok(&["query", file, "bb < 0 OR a > 1e300", "--ids"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let ds = beton_storage::Dataset::open(&f).unwrap();
    let want: Vec<u64> = (0..ds.num_samples())
        .filter(|&i| {
            let bb = ds.get_by_name(i, "bb").unwrap().as_int().unwrap();
            let a = ds.get_by_name(i, "a").unwrap().as_float().unwrap();
            bb < 0 || a > 1e300
        })
        .collect();
    assert_eq!(ids, want);

    let o = beton(&["query", file, "SELECT index, bb FROM samples ORDER BY index LIMIT 2", "--json"]);
    let rows: Vec<serde_json::Value> = text(&o).0.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["index"], 1);

    let o = beton(&["query", file, "SELECT nope FROM samples"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(err.contains("line 1, column 8") && err.contains("no column named 'nope'"), "{err}");

    // --param NAME=VALUE: the same rows as the values written in.
    let with =
        beton_ok(&["query", file, "bb < $lo OR a > $hi", "--ids", "--param", "lo=0", "--param", "hi=1e300"]);
    assert_eq!(with, beton_ok(&["query", file, "bb < 0 OR a > 1e300", "--ids"]));
    let o = beton(&["query", file, "bb < $lo", "--ids"]);
    assert!(text(&o).1.contains("parameter $lo has no value"), "{}", text(&o).1);
    let o = beton(&["query", file, "bb < 0", "--param", "nonsense"]);
    assert_eq!(o.status.code(), Some(2), "a malformed --param is a usage error");
}

#[test]
fn split_commands_on_ffcv_written_files() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "pages_2mib");
    let file = f.to_str().unwrap();
    let run = beton_ok;
    let out = run(&["split", "random", file, "train=0.8", "val=0.2", "--seed", "3", "--stratify", "label"]);
    assert!(out.contains("split 'train'") && out.contains("split 'val'"), "{out}");
    let out = run(&["split", "add", file, "even", "label % 2 = 0"]);
    let even: usize = out.split_whitespace().nth(2).unwrap().parse().unwrap();
    let out = run(&["split", "list", file]);
    assert!(out.contains("even") && out.contains("train") && out.contains("val"), "{out}");
    let ids = run(&["query", file, "in_split('even')", "--ids"]);
    assert_eq!(ids.lines().count(), even);
    let both = run(&["query", file, "in_split('train') AND in_split('val')", "--ids"]);
    assert_eq!(both, "", "train and val are disjoint");
    let json: serde_json::Value = serde_json::from_slice(&beton(&["info", "--json", file]).stdout).unwrap();
    let names: Vec<&str> =
        json["splits"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["even", "train", "val"]);
    run(&["verify", file]);
    run(&["split", "remove", file, "even"]);
    let o = beton(&["split", "remove", file, "even"]);
    assert!(!o.status.success() && text(&o).1.contains("no split named 'even'; the splits are: train, val"));

    // FFCV's scalar-only file has no pages, so no spare bytes: a clear error, no change.
    let f = fixture(dir.path(), "scalars");
    let before = std::fs::read(&f).unwrap();
    let o = beton(&["split", "add", f.to_str().unwrap(), "small", "label < 3"]);
    let err = text(&o).1;
    assert!(!o.status.success() && err.contains("room for 0"), "{err}");
    assert_eq!(std::fs::read(&f).unwrap(), before);
}

#[test]
fn bench_runs_epochs_and_reports_reads() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "pages_2mib");
    let out = beton_ok(&[
        "bench",
        f.to_str().unwrap(),
        "--batch-size",
        "8",
        "--epochs",
        "2",
        "--process-cache",
        "--threads",
        "2",
    ]);
    assert!(
        out.contains("120 of 120 samples, batch 8, 15 batches an epoch") && out.contains("samples/s"),
        "{out}"
    );
    let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with(['0', '1'])).collect();
    assert_eq!(rows.len(), 2, "{out}");
    // Epoch 0 of the process cache reads the 20 pages.
    assert_eq!(rows[0].split_whitespace().nth(4), Some("20"), "{out}");
    let f = fixture(dir.path(), "photos_jpg");
    beton_ok(&["bench", f.to_str().unwrap(), "--batch-size", "4", "--epochs", "1", "--images", "rrc:32"]);
    let o = beton(&["bench", f.to_str().unwrap(), "--images", "zoom:3"]);
    assert!(!o.status.success() && text(&o).1.contains("expected rrc:SIZE, center:SIZE or simple"));
}

/// Issue 18's arguments: absurd thread counts, NaN fractions and proportions, a directory given
/// as the file, a killed writer's temporary files, `--skip-bad`, `bench --custom`.
#[test]
fn bad_arguments_are_refused_with_their_names() {
    let (dir, root) = one_class(&[("a.png", 3, 3, 1), ("b.png", 4, 3, 2)]);
    std::fs::write(root.join("c/broken.jpg"), b"\xFF\xD8\xFF\xE0 not really").unwrap();
    let out = dir.path().join("out.beton");
    let (r, o) = (root.to_str().unwrap(), out.to_str().unwrap());
    let run = beton(&["write-imagefolder", r, o, "--workers", "100000"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run).1.contains("num_threads") && text(&run).1.contains("100000"), "{}", text(&run).1);
    let run = beton(&["write-imagefolder", r, o, "--mode", "proportion", "--proportion", "NaN"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run).1.contains("proportion"), "{}", text(&run).1);
    // A bad image: named by its path; --skip-bad leaves it out and lists it.
    let run = beton(&["write-imagefolder", r, o]);
    assert!(text(&run).1.contains("broken.jpg") && text(&run).1.contains("--skip-bad"), "{}", text(&run).1);
    assert!(!out.exists());
    let stdout = beton_ok(&["write-imagefolder", r, o, "--skip-bad", "--mode", "raw"]);
    assert!(
        stdout.contains("2 images") && stdout.contains("skipped 1") && stdout.contains("broken.jpg"),
        "{stdout}"
    );
    assert_eq!(beton_storage::Dataset::open(&out).unwrap().num_samples(), 2);
    for bad in [["train=2", "val=0.1"], ["train=0.5", "val=NaN"]] {
        let run = beton(&[&["split", "random", o][..], &bad[..]].concat());
        assert_eq!(run.status.code(), Some(1), "{bad:?}");
        assert!(text(&run).1.contains("not a fraction"), "{}", text(&run).1);
    }
    // A directory where a file is expected.
    let run = beton(&["info", dir.path().to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run).1.contains("directory"), "{}", text(&run).1);
    // A killed writer's temporary file: listed by info and verify, removed by the next write.
    let stale = dir.path().join(".out.beton.x1y2z3.tmp");
    let f = std::fs::File::create(&stale).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60)).unwrap();
    drop(f);
    for cmd in ["info", "verify"] {
        let run = beton(&[cmd, o]);
        assert!(text(&run).0.contains(".out.beton.x1y2z3.tmp"), "{cmd}: {}", text(&run).0);
    }
    let run = beton(&["verify", dir.path().to_str().unwrap()]);
    assert!(text(&run).1.contains("is a directory") && text(&run).1.contains("x1y2z3"), "{}", text(&run).1);
    let run = beton(&["write-imagefolder", r, o, "--skip-bad", "--mode", "raw"]);
    assert!(run.status.success());
    assert!(!stale.exists());
    beton_ok(&["bench", o, "--custom", "x=4", "--epochs", "1", "--batch-size", "1"]);
}

/// A writer killed mid-write (SIGKILL) leaves a temporary file; `info` lists it and the next
/// write to the same destination removes it. The write is held mid-way by an "image" that is a
/// named pipe nobody writes to, so the kill always lands during the write.
#[cfg(unix)]
#[test]
fn a_killed_writer_leaves_nothing_for_good() {
    let (dir, root) = one_class(&[("a.png", 30, 20, 1)]);
    let fifo = root.join("c/z.png");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    let out = dir.path().join("big.beton");
    let (r, o) = (root.to_str().unwrap(), out.to_str().unwrap());
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_beton")).args(["write-imagefolder", r, o]).spawn().unwrap();
    let temp = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".tmp"))
            .collect::<Vec<_>>()
    };
    let t0 = std::time::Instant::now();
    while temp().is_empty() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(child.try_wait().unwrap().is_none(), "the writer waits on the pipe");
    child.kill().unwrap();
    child.wait().unwrap();
    let left = temp();
    assert!(!left.is_empty(), "the killed writer's temporary file");
    assert_eq!(beton(&["info", o]).status.code(), Some(1), "no file was published");
    // Old enough to be taken for stale (a writer locks its file right after creating it).
    for p in &left {
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60)).unwrap();
    }
    std::fs::remove_file(&fifo).unwrap();
    beton_ok(&["write-imagefolder", r, o, "--mode", "raw"]);
    assert!(temp().is_empty(), "{:?}", temp());
}
