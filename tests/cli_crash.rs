//! A writer killed at every step of every kind of commit (`BETON_CRASH_AT=N` aborts the process
//! at the N-th step, as `kill -9` would) leaves a dataset directory that opens at the version
//! before the edit or the one after, whole: its rows readable, every file its manifest names
//! present, and the next edit succeeds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn beton(args: &[&str], crash_at: Option<u64>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_beton"));
    cmd.args(args);
    match crash_at {
        Some(n) => cmd.env("BETON_CRASH_AT", n.to_string()),
        None => cmd.env_remove("BETON_CRASH_AT"),
    };
    cmd.output().expect("run beton")
}

fn ok(args: &[&str]) -> String {
    let out = beton(args, None);
    assert!(out.status.success(), "beton {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The bundled photos (examples/data/imagefolder) written to `dir/a.beton`, at most
/// `max_resolution` pixels a side.
fn photos(dir: &Path, max_resolution: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/imagefolder");
    let file = dir.join("a.beton");
    ok(&[
        "write-imagefolder",
        folder.to_str().unwrap(),
        file.to_str().unwrap(),
        "--max-resolution",
        max_resolution,
    ]);
    file
}

/// The latest version's number and its rows, checked whole: the manifest's files exist and
/// every row's label reads.
fn check(dir: &Path) -> (u64, u64) {
    let d = dir.to_str().unwrap();
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", d, "--json"])).unwrap();
    let version = info["version"].as_u64().unwrap();
    for f in info["fragments"].as_array().unwrap() {
        assert!(dir.join(f["data_file"].as_str().unwrap()).is_file());
        for c in f["columns"].as_array().into_iter().flatten() {
            assert!(dir.join(c["file"].as_str().unwrap()).is_file(), "{c}");
        }
        if let Some(del) = f.get("deletions") {
            assert!(dir.join(del["file"].as_str().unwrap()).is_file());
        }
    }
    let count = ok(&["query", d, "SELECT count(*) AS n, sum(label) FROM samples", "--json"]);
    let row: serde_json::Value = serde_json::from_str(count.lines().next().unwrap()).unwrap();
    (version, row["n"].as_u64().unwrap())
}

#[test]
fn a_writer_killed_at_any_step_leaves_the_old_or_the_new_version() {
    let tmp = tempfile::tempdir().unwrap();
    let file = photos(tmp.path(), "32");
    let f = file.to_str().unwrap();
    // Each edit, run after the ones before it.
    let script: Vec<Vec<&str>> = vec![
        vec!["import", "{dir}", f],
        vec!["update", "{dir}", "--set", "label=label + 10", "--where", "label < 2"],
        vec!["delete", "{dir}", "label = 3"],
        vec!["add-column", "{dir}", "big", "label > 10"],
        vec!["append", "{dir}", f],
        // The appended rows lack `big`: NULL there, and NOT NULL is NULL, which an update refuses.
        vec!["update", "{dir}", "--set", "big=NOT big", "--where", "big IS NOT NULL"],
        vec!["tag", "{dir}", "t1"],
        vec!["restore", "{dir}", "2"],
        vec!["compact", "{dir}"],
        vec!["cleanup", "{dir}", "--grace-seconds", "0"],
    ];
    let mut crashes = 0;
    for (k, step) in script.iter().enumerate() {
        for n in 1.. {
            let dir = tmp.path().join(format!("ds-{k}-{n}"));
            let d = dir.to_str().unwrap().to_string();
            let args = |s: &Vec<&str>| {
                s.iter().map(|a| if *a == "{dir}" { d.clone() } else { a.to_string() }).collect::<Vec<_>>()
            };
            for before in &script[..k] {
                let a = args(before);
                ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
            }
            let before = if k == 0 { None } else { Some(check(&dir)) };
            let a = args(step);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let out = beton(&a, Some(n));
            if out.status.success() {
                // Past this edit's last step: it completed.
                break;
            }
            assert!(
                out.status.code().is_none(),
                "step {k} crash {n}: failed instead of aborting: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            crashes += 1;
            match before {
                // The import itself: either no dataset yet, or version 1 whole.
                None => {
                    if dir.join("_versions").is_dir()
                        && std::fs::read_dir(dir.join("_versions")).unwrap().count() > 0
                    {
                        assert_eq!(check(&dir).0, 1);
                    } else {
                        // Nothing committed: importing again works.
                        ok(&a);
                        assert_eq!(check(&dir).0, 1);
                    }
                }
                Some((version, rows)) => {
                    let (now, now_rows) = check(&dir);
                    assert!(
                        now == version || now == version + 1,
                        "step {k} crash {n}: version {now} after {version}"
                    );
                    if now == version && a[0] != "cleanup" {
                        assert_eq!(now_rows, rows, "step {k} crash {n}: the old version changed");
                    }
                    // The next edit goes through.
                    ok(&["delete", &d, "label = 4"]);
                }
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    assert!(crashes >= 50, "only {crashes} crash points were exercised");
    eprintln!("{crashes} crash points exercised");
}

#[test]
fn two_processes_editing_at_once_lose_no_update() {
    let tmp = tempfile::tempdir().unwrap();
    let file = photos(tmp.path(), "16");
    let dir = tmp.path().join("ds");
    let d = dir.to_str().unwrap();
    ok(&["import", d, file.to_str().unwrap()]);
    ok(&["add-column", d, "k", "index"]);
    // Two processes, each deleting its own rows (by the column k, stable across deletes) and
    // relabelling others, 12 commits each, racing.
    let script = |parity: u64| {
        let mut cmds = Vec::new();
        for j in 0..6 {
            let k = 2 * j + parity;
            cmds.push(format!("delete {d} \"k = {k}\""));
            cmds.push(format!("update {d} --set label=100 --where \"k = {}\"", 50 + k));
        }
        cmds
    };
    let run = |parity: u64| {
        let exe = env!("CARGO_BIN_EXE_beton");
        let body: Vec<String> = script(parity).iter().map(|c| format!("{exe} {c} >/dev/null")).collect();
        Command::new("bash").arg("-ec").arg(body.join("\n")).spawn().unwrap()
    };
    let (mut a, mut b) = (run(0), run(1));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    let (version, rows) = check(&dir);
    assert_eq!(version, 2 + 24, "every commit landed");
    assert_eq!(rows, 155 - 12);
    let gone = ok(&["query", d, "SELECT count(*) AS n FROM samples WHERE k < 12", "--json"]);
    assert!(gone.contains("\"n\":0"), "{gone}");
    let relabelled = ok(&["query", d, "SELECT count(*) AS n FROM samples WHERE label = 100", "--json"]);
    assert!(relabelled.contains("\"n\":12"), "{relabelled}");
}
