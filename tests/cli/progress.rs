//! Progress bars of the long commands (`verify`, `compact`, `export`, `concat`): drawn on a
//! terminal, never into a pipe or a log.

use std::process::Command;

use super::{beton, beton_ok, fixture, text};

/// A temporary folder holding the `scalars` fixture (1000 rows) and a dataset directory of it
/// with its first row deleted: (folder, file, dataset directory).
fn dataset() -> (tempfile::TempDir, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = fixture(tmp.path(), "scalars").to_str().unwrap().to_string();
    let ds = tmp.path().join("ds").to_str().unwrap().to_string();
    beton_ok(&["import", &ds, &file]);
    beton_ok(&["delete", &ds, "index = 0"]);
    (tmp, file, ds)
}

#[test]
fn long_commands_draw_no_bar_off_a_terminal() {
    let (tmp, file, ds) = dataset();
    let (file, ds, out) = (file.as_str(), ds.as_str(), tmp.path().join("out.beton"));
    let both = tmp.path().join("both");
    let commands: [&[&str]; 4] = [
        &["verify", file],
        &["export", ds, out.to_str().unwrap()],
        &["concat", both.to_str().unwrap(), ds, file],
        &["compact", ds],
    ];
    for args in commands {
        let o = beton(args);
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "beton {args:?}: {stderr}");
        assert_eq!(stderr, "", "beton {args:?} wrote to a stderr that is not a terminal");
        assert!(!stdout.contains("/1000") && !stdout.contains('\r'), "beton {args:?}: {stdout}");
    }
}

/// `beton args` run under a pseudo-terminal (util-linux `script`, which scripts/setup.sh
/// installs): what it drew. A missing `script` fails the test: it is not a pass.
fn on_a_terminal(args: &[&str]) -> String {
    let command = std::iter::once(env!("CARGO_BIN_EXE_beton"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script").args(["-qec", &command, "/dev/null"]).output().expect(
        "util-linux `script` runs the CLI on a terminal (apt-get install bsdutils; scripts/setup.sh does)",
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "script -c {command}: {stdout}{stderr}");
    stdout
}

#[test]
fn long_commands_draw_a_bar_on_a_terminal() {
    let (tmp, file, ds) = dataset();
    let (file, ds, out) = (file.as_str(), ds.as_str(), tmp.path().join("out.beton"));
    let commands: [(&[&str], &str); 3] = [
        (&["verify", file], "/1000 samples"),
        (&["export", ds, out.to_str().unwrap()], "/999 rows"),
        (&["compact", ds], "/999 rows"),
    ];
    for (args, counter) in commands {
        let drawn = on_a_terminal(args);
        assert!(drawn.contains(counter), "beton {args:?} drew no '{counter}' bar: {drawn:?}");
    }
}
