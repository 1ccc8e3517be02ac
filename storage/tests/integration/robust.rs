//! Files that change under a reader, killed writers, handles whose file was replaced, and
//! destinations that are links or directories: errors that name the file, never a signal, a
//! stray file or a write into the wrong file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use beton_storage::{
    update_splits, verify, Dataset, Error, FieldSpec, FieldType, ImageOptions, SampleValue, Writer,
    WriterOptions,
};

/// `n` samples of an int and a 20 kB blob, in pages of 2 MiB.
fn write(path: &Path, n: u64) {
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    beton_testkit::write_with(path, beton_testkit::schema("label:int blob:bytes"), options, n, |i| {
        vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![i as u8; 20_000])]
    });
}

/// A temporary folder holding file `name`, [`write`] of `n` samples, and that file opened.
fn written(name: &str, n: u64) -> (tempfile::TempDir, PathBuf, Dataset) {
    let (dir, path) = beton_testkit::temp_file(name, |path| write(path, n));
    let ds = Dataset::open(&path).unwrap();
    (dir, path, ds)
}

/// Truncated by another program after it was opened: reads past the new end are
/// `FileChanged` naming the file (they used to kill the process with SIGBUS), from `get`,
/// `verify` and every later read of the handle.
#[test]
fn a_file_truncated_between_open_and_its_first_read_gives_errors_not_sigbus() {
    // Opened without reading its allocation table, cut before any row is read: the first read
    // faults past the new end under the guard.
    let (_dir, path, ds) = written("late.beton", 300);
    drop(ds);
    let ds = beton_storage::OpenOptions::new().defer_allocation_checks(true).open(&path).unwrap();
    File::options().write(true).open(&path).unwrap().set_len(ds.data_table_offset() + 4096).unwrap();
    let e = ds.get(299, 0).unwrap_err();
    assert!(matches!(e, Error::FileChanged { .. }), "{e}");
    assert!(e.to_string().contains("late.beton"), "{e}");
    assert!(ds.check_intact().is_err());
}

#[test]
fn a_file_truncated_after_open_gives_errors_not_sigbus() {
    let (_dir, path, ds) = written("cut.beton", 300);
    assert!(ds.get(299, 1).is_ok());
    // Keep the data table and the first half of the pages.
    let keep = ds.data_start() + (ds.header().alloc_table_ptr - ds.data_start()) / 2;
    File::options().write(true).open(&path).unwrap().set_len(keep).unwrap();
    let mut failed = 0;
    for i in 0..300 {
        if let Ok(v) = ds.get(i, 1) {
            // What a caller reads from a borrowed value is checked after reading it.
            let sum: u64 = v.as_bytes().unwrap().iter().map(|&b| b as u64).sum();
            std::hint::black_box(sum);
            if ds.check_intact().is_err() {
                failed += 1;
            }
        } else {
            failed += 1;
        }
    }
    assert!(failed > 0, "no read saw the truncation");
    let e = ds.get(0, 0).unwrap_err();
    assert!(matches!(e, Error::FileChanged { .. }), "{e}");
    assert!(e.to_string().contains("cut.beton"), "{e}");
    assert!(verify(&ds, false).is_err());
    // Truncated into the data table: the row reads themselves fault.
    let ds = {
        write(&path, 300);
        Dataset::open(&path).unwrap()
    };
    File::options().write(true).open(&path).unwrap().set_len(ds.data_table_offset() + 4096).unwrap();
    // Rows in the file's remaining OS pages still read; from the first fault on, every read of
    // the handle is the error.
    let results: Vec<bool> = (0..300).map(|i| ds.get(i, 0).is_ok()).collect();
    let first_error = results.iter().position(|ok| !ok).expect("rows past the new end fail");
    assert!(results[first_error..].iter().all(|ok| !ok), "{results:?}");
    assert!(first_error as u64 * ds.row_size() as u64 <= 2 * 4096 + 4096, "{first_error}");
    // Opening the truncated file is an ordinary Corrupt error.
    assert!(matches!(Dataset::open(&path).unwrap_err(), Error::Corrupt { .. }));
}

/// The split reserve of a file without pages is written, not a hole (a hole on a full tmpfs
/// faults when read through the map).
#[cfg(target_os = "linux")]
#[test]
fn the_split_reserve_is_allocated_not_a_hole() {
    use std::os::unix::io::AsRawFd;
    let (_dir, path) = beton_testkit::temp_path("scalars.beton");
    beton_testkit::write_labels(&path, 0, 1000);
    let file = File::open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    assert!(len > 64 * 1024, "the reserve is there: {len}");
    // SAFETY: lseek on an open descriptor; SEEK_HOLE returns the offset of the first hole (the
    // end of the file when there is none).
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    assert_eq!(hole as u64, len, "a hole at byte {hole} of {len}");
}

/// A killed writer's temporary file (unlocked, not brand new) is removed by the next write to
/// the same destination and listed by `stale_temp_files` until then; a live writer's
/// (locked) one is left alone.
#[test]
fn the_next_write_removes_temp_files_of_killed_writers() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("d.beton");
    let old = |name: &str| {
        let p = dir.path().join(name);
        let f = File::create(&p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(3600)).unwrap();
        (p, f)
    };
    let (dead, f) = old(".d.beton.Ab12Cd.tmp");
    drop(f);
    let (live, live_file) = old(".d.beton.Ef34Gh.tmp");
    live_file.lock().unwrap();
    let (other, _g) = old(".e.beton.Ab12Cd.tmp");
    assert_eq!(beton_storage::stale_temp_files(&dest), vec![dead.clone()]);
    write(&dest, 3);
    assert!(!dead.exists(), "the dead writer's file is gone");
    assert!(live.exists() && other.exists());
    assert!(beton_storage::stale_temp_files(&dest).is_empty());
    // Nothing of this write is left behind either.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

/// A handle whose path now holds another file (written over by another write) refuses to
/// write its splits there: they would tag the wrong samples.
#[test]
fn a_handle_never_writes_into_a_file_it_did_not_open() {
    let (_dir, path, ds) = written("d.beton", 10);
    let opened = ds.file_id();
    assert!(opened.is_some());
    // Same path, same handle: fine.
    update_splits(&path, opened, |s| {
        s.insert("a".into(), vec![1]);
        Ok(())
    })
    .unwrap();
    // Replaced by another write: refused, and the new file is left as it is.
    write(&path, 12);
    let e = update_splits(&path, opened, |s| {
        s.insert("b".into(), vec![1]);
        Ok(())
    })
    .unwrap_err();
    assert!(matches!(e, Error::FileReplaced { .. }), "{e}");
    assert!(e.to_string().contains("d.beton"), "{e}");
    assert!(Dataset::open(&path).unwrap().splits().unwrap().is_empty());
    // A handle on the new file may write.
    let again = Dataset::open(&path).unwrap();
    update_splits(&path, again.file_id(), |_| Ok(())).unwrap();
}

/// Writing to a symbolic link writes the file it points to (the link stays a link); a
/// directory is an error saying so.
#[cfg(unix)]
#[test]
fn writes_go_through_links_and_refuse_directories() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.beton");
    let link = dir.path().join("link.beton");
    std::os::unix::fs::symlink("real.beton", &link).unwrap();
    write(&link, 4);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(Dataset::open(&target).unwrap().num_samples(), 4);
    let e = Writer::new(dir.path(), vec![FieldSpec::new("x", FieldType::Int)], WriterOptions::default())
        .expect_err("a directory");
    assert!(e.to_string().contains("is a directory"), "{e}");
    let e = Dataset::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}

/// Option errors name the option, not something else.
#[test]
fn bad_options_name_themselves() {
    let image = |q: u8| {
        let opts = ImageOptions { jpeg_quality: q, ..ImageOptions::default() };
        Writer::new("x.beton", vec![FieldSpec::rgb_image("image", opts)], WriterOptions::default())
            .expect_err("refused")
            .to_string()
    };
    let e = image(0);
    assert!(e.contains("jpeg_quality") && !e.contains("field name"), "{e}");
    let options = WriterOptions { num_threads: 100_000, ..WriterOptions::default() };
    let e = Writer::new("x.beton", vec![FieldSpec::new("x", FieldType::Int)], options).expect_err("refused");
    assert!(e.to_string().contains("num_threads"), "{e}");
}

/// The SIGBUS guard answers faults in beton's own maps only: a fault in any other map of the
/// process still ends it with SIGBUS (the handler chains to the one before it), so it never
/// hides another program's bug behind zeros. Runs itself in a child process.
#[cfg(target_os = "linux")]
#[test]
fn a_fault_outside_betons_maps_still_kills_the_process() {
    use std::os::unix::process::ExitStatusExt;
    const NAME: &str = "robust::a_fault_outside_betons_maps_still_kills_the_process";
    if std::env::var_os("BETON_TEST_FOREIGN_SIGBUS").is_some() {
        let (dir, _, _ds) = written("d.beton", 3); // opened: installs the guard
        let other = dir.path().join("other.bin");
        std::fs::write(&other, vec![1u8; 3 * 4096]).unwrap();
        let file = File::open(&other).unwrap();
        // SAFETY: this map is truncated under itself on purpose; the read below must fault and
        // end this child process, which is what the parent checks.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        File::options().write(true).open(&other).unwrap().set_len(0).unwrap();
        println!("read {}: the fault was swallowed", std::hint::black_box(map[2 * 4096]));
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env("BETON_TEST_FOREIGN_SIGBUS", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGBUS),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
}
