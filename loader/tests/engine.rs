//! The loader end to end: values, determinism across thread counts, held batches, resume, the
//! process cache under a bound, thread shutdown, errors.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use beton_dataset::IndexSet;
use beton_loader::{Batch, ColumnSpec, EpochStats, FieldDecoder, Loader, OrderOption, Result, SampleContext};
use beton_storage::{
    ArraySpec, DType, Dataset, FieldSpec, FieldType, SampleValue, Value, Writer, WriterOptions,
};

const N: u64 = 600;

/// Sample i: label i, score i / 4, blob of (i * 37) % 20_000 bytes of value i % 251, text
/// "sample {i}", arr [i, 2i, 3i] as i32. About 6 MB of payload: 3 pages of 2 MiB.
/// Runs one epoch of `loader`, handing `check` each sample's id and its `blob` row; returns the
/// number of samples and the epoch's stats.
fn blob_epoch(loader: &mut Loader, mut check: impl FnMut(u64, &[u8])) -> (usize, EpochStats) {
    let mut epoch = loader.next_epoch().unwrap();
    let mut seen = 0;
    for b in epoch.by_ref() {
        let b = b.unwrap();
        let col = b.column("blob").unwrap();
        let width = col.spec.shape[0];
        for (k, &i) in b.indices().iter().enumerate() {
            check(i, &col.bytes[k * width..(k + 1) * width]);
        }
        seen += b.len();
    }
    (seen, epoch.stats())
}

/// [`dataset`] in a temporary folder (dropped with it).
fn temp_dataset() -> (tempfile::TempDir, Arc<Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    (dir, ds)
}

fn dataset(dir: &Path) -> Arc<Dataset> {
    let path = dir.join("loader.beton");
    let arr = ArraySpec::new(DType::parse("<i4").unwrap(), vec![3]).unwrap();
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("score", FieldType::Float),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new("text", FieldType::Text),
        FieldSpec::new("arr", FieldType::NDArray(arr)),
    ];
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    Writer::new(&path, fields, options)
        .unwrap()
        .write_indexed(N, |i| {
            let a: Vec<u8> =
                [i as i32, 2 * i as i32, 3 * i as i32].iter().flat_map(|v| v.to_le_bytes()).collect();
            Ok(vec![
                SampleValue::Int(i as i64),
                SampleValue::Float(i as f64 / 4.0),
                SampleValue::Bytes(vec![(i % 251) as u8; ((i * 37) % 20_000) as usize]),
                SampleValue::Text(format!("sample {i}")),
                SampleValue::NDArray(a),
            ])
        })
        .unwrap();
    Arc::new(Dataset::open(&path).unwrap())
}

fn i64s(b: &Batch, name: &str) -> Vec<i64> {
    b.column(name).unwrap().bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Checks every value of `b` against the generator of [`dataset`].
fn check_batch(b: &Batch) {
    let ids = b.indices().to_vec();
    assert_eq!(i64s(b, "label"), ids.iter().map(|&i| i as i64).collect::<Vec<_>>());
    let scores: Vec<f64> = b
        .column("score")
        .unwrap()
        .bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(scores, ids.iter().map(|&i| i as f64 / 4.0).collect::<Vec<_>>());
    let blob = b.column("blob").unwrap();
    let width = blob.spec.shape[0];
    let lens = i64s(b, "blob.len");
    for (k, &i) in ids.iter().enumerate() {
        let len = ((i * 37) % 20_000) as usize;
        assert_eq!(lens[k] as usize, len);
        let row = &blob.bytes[k * width..(k + 1) * width];
        assert!(row[..len].iter().all(|&x| x == (i % 251) as u8), "blob of sample {i}");
        assert!(row[len..].iter().all(|&x| x == 0), "padding of sample {i}");
    }
    let text = b.column("text").unwrap();
    let tw = text.spec.shape[0];
    for (k, &i) in ids.iter().enumerate() {
        let want = format!("sample {i}");
        assert_eq!(&text.bytes[k * tw..k * tw + want.len()], want.as_bytes());
    }
    let arr = b.column("arr").unwrap();
    assert_eq!(arr.spec.shape, [3]);
    for (k, &i) in ids.iter().enumerate() {
        let got: Vec<i32> = arr.bytes[k * 12..(k + 1) * 12]
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [i as i32, 2 * i as i32, 3 * i as i32]);
    }
}

/// (indices, every column's bytes) of every batch of one epoch.
fn run(loader: &mut Loader) -> Vec<(Vec<u64>, Vec<Vec<u8>>)> {
    loader
        .next_epoch()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            check_batch(&b);
            let cols = (0..b.specs().len()).map(|k| b.column_at(k).bytes.to_vec()).collect();
            (b.indices().to_vec(), cols)
        })
        .collect()
}

fn orders() -> [OrderOption; 3] {
    [OrderOption::Sequential, OrderOption::Random, OrderOption::QuasiRandom { buffer_pages: None }]
}

#[test]
fn every_value_in_order_and_ffcv_batch_counts() {
    let (_dir, ds) = temp_dataset();
    for drop_last in [true, false] {
        let mut loader =
            Loader::builder(Arc::clone(&ds)).batch_size(7).drop_last(drop_last).threads(2).build().unwrap();
        let batches = run(&mut loader);
        assert_eq!(batches.len(), if drop_last { 85 } else { 86 });
        let ids: Vec<u64> = batches.iter().flat_map(|b| b.0.clone()).collect();
        let want = if drop_last { 595 } else { 600 };
        assert_eq!(ids, (0..want).collect::<Vec<_>>(), "SEQUENTIAL reads the rows in order");
    }
    let mut loader = Loader::builder(Arc::clone(&ds)).batch_size(60).build().unwrap();
    assert_eq!(run(&mut loader).len(), 10);
}

#[test]
fn same_batches_whatever_the_threads_and_cache() {
    let (_dir, ds) = temp_dataset();
    for order in orders() {
        let mut reference = None;
        for (threads, os_cache) in [(1, true), (2, true), (4, true), (1, false), (3, false)] {
            let mut loader = Loader::builder(Arc::clone(&ds))
                .batch_size(16)
                .order(order)
                .seed(9)
                .threads(threads)
                .os_cache(os_cache)
                .drop_last(false)
                .build()
                .unwrap();
            let epochs = [run(&mut loader), run(&mut loader)];
            if !matches!(order, OrderOption::Sequential) {
                assert_ne!(epochs[0], epochs[1], "{order:?}: epochs differ");
            }
            let ids: BTreeSet<u64> = epochs[0].iter().flat_map(|b| b.0.clone()).collect();
            assert_eq!(ids.len(), N as usize);
            match &reference {
                None => reference = Some(epochs),
                Some(r) => assert!(r == &epochs, "{order:?}: {threads} threads, os_cache {os_cache} differ"),
            }
        }
    }
}

#[test]
fn held_batches_are_never_overwritten() {
    let (_dir, ds) = temp_dataset();
    let mut loader = Loader::builder(Arc::clone(&ds))
        .batch_size(10)
        .order(OrderOption::Random)
        .batches_ahead(2)
        .threads(2)
        .build()
        .unwrap();
    // Hold every batch of the epoch, then check them all: a reused slot would show another
    // batch's samples.
    let mut epoch = loader.next_epoch().unwrap();
    let held: Vec<Batch> = epoch.by_ref().map(|b| b.unwrap()).collect();
    assert_eq!(held.len(), 60);
    held.iter().for_each(check_batch);
    assert!(epoch.stats().slots >= 60, "holding 60 batches takes 60 slots");
    drop(epoch);
    drop(held);
    // Consuming one at a time reuses the same few slots, across epochs.
    let mut loader =
        Loader::builder(Arc::clone(&ds)).batch_size(10).batches_ahead(2).threads(2).build().unwrap();
    let mut slots = Vec::new();
    for _ in 0..5 {
        let mut epoch = loader.next_epoch().unwrap();
        for b in epoch.by_ref() {
            check_batch(&b.unwrap());
        }
        slots.push(epoch.stats().slots);
    }
    assert!(slots[0] <= 2 + 2 + 1, "batches_ahead + threads + the consumer's: {slots:?}");
    assert!(slots.iter().all(|&s| s == slots[0]), "no slot allocated after the first epoch: {slots:?}");
}

#[test]
fn resume_gives_exactly_the_remaining_batches() {
    let (_dir, ds) = temp_dataset();
    for order in orders() {
        let build = || {
            Loader::builder(Arc::clone(&ds))
                .batch_size(16)
                .order(order)
                .seed(3)
                .threads(2)
                .indices((0..N).filter(|i| i % 3 != 0).collect::<IndexSet>())
                .build()
                .unwrap()
        };
        let mut full = build();
        run(&mut full);
        let uninterrupted = run(&mut full); // epoch 1
        for cut in [0, 1, 7, uninterrupted.len()] {
            let mut first = build();
            run(&mut first);
            let mut epoch = first.next_epoch().unwrap();
            let head: Vec<Vec<u64>> =
                epoch.by_ref().take(cut).map(|b| b.unwrap().indices().to_vec()).collect();
            let saved = epoch.state().to_json();
            drop(epoch);
            let mut second = build();
            second.resume(&beton_loader::LoaderState::from_json(&saved).unwrap()).unwrap();
            let tail: Vec<Vec<u64>> =
                second.next_epoch().unwrap().map(|b| b.unwrap().indices().to_vec()).collect();
            let joined: Vec<Vec<u64>> = head.into_iter().chain(tail).collect();
            let want: Vec<Vec<u64>> = uninterrupted.iter().map(|b| b.0.clone()).collect();
            assert_eq!(joined, want, "{order:?}, cut at {cut}");
            assert_eq!(second.epoch(), 2, "after the resumed epoch comes epoch 2");
        }
    }
    // A state from another index set is refused, naming what differs.
    let mut other = Loader::builder(Arc::clone(&ds)).batch_size(16).build().unwrap();
    let state = Loader::builder(Arc::clone(&ds))
        .batch_size(16)
        .indices(IndexSet::all(10))
        .build()
        .unwrap()
        .next_epoch()
        .unwrap()
        .state();
    let err = other.resume(&state).unwrap_err().to_string();
    assert!(err.contains("indices_len"), "{err}");
}

fn fixture(dir: &Path, name: &str) -> Arc<Dataset> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/data/ffcv/{name}.beton.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).unwrap()).read_to_end(&mut bytes).unwrap();
    let path = dir.join(format!("{name}.beton"));
    std::fs::write(&path, bytes).unwrap();
    Arc::new(Dataset::open(&path).unwrap())
}

#[test]
fn process_cache_stays_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    // FFCV's file: 120 samples of 300 kB, 6 a page, 20 pages of 2 MiB.
    let ds = fixture(dir.path(), "pages_2mib");
    let blob = ds.field_index("blob").unwrap();
    let truth: Vec<Vec<u8>> =
        (0..120).map(|i| ds.get(i, blob).unwrap().as_bytes().unwrap().to_vec()).collect();
    // Bounds below the file's 20 pages; 1 is below what even one batch needs (8 samples span
    // 2 pages), which degrades to reading single samples.
    for (order, bound) in [
        (OrderOption::QuasiRandom { buffer_pages: Some(2) }, 4),
        (OrderOption::Random, 2),
        (OrderOption::Sequential, 8),
        (OrderOption::Sequential, 1),
    ] {
        let mut loader = Loader::builder(Arc::clone(&ds))
            .batch_size(8)
            .order(order)
            .os_cache(false)
            .cache_pages(bound)
            .threads(2)
            .drop_last(false)
            .build()
            .unwrap();
        for e in 0..2 {
            let (seen, s) = blob_epoch(&mut loader, |i, row| assert_eq!(row, truth[i as usize].as_slice()));
            assert_eq!(seen, 120);
            assert!(s.cache_pages <= bound as u64, "{order:?}: {s:?}");
            assert_eq!(s.cache_hits + s.direct_reads, 120, "{s:?}");
            assert_eq!(s.page_bytes_read, s.pages_read * (2 << 20), "whole pages");
            if matches!(order, OrderOption::Sequential) && bound == 8 {
                // batches_ahead 3 + the one being consumed: 32 samples, 7 pages at most. The
                // second epoch starts with the pages the first left in the cache.
                assert_eq!(s.direct_reads, 0, "{s:?}");
                assert!(
                    if e == 0 { s.pages_read == 20 } else { s.pages_read < 20 },
                    "each page read once: {s:?}"
                );
            }
            if bound == 1 {
                assert!(s.direct_reads > 0, "{s:?}");
            }
            if matches!(order, OrderOption::QuasiRandom { .. }) {
                assert!(s.pages_read <= 24, "QUASI_RANDOM reads pages about once: {s:?}");
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[cfg(target_os = "linux")]
#[test]
fn dropping_epochs_mid_way_joins_their_threads() {
    let (_dir, ds) = temp_dataset();
    let mut loader = Loader::builder(Arc::clone(&ds))
        .batch_size(4)
        .threads(3)
        .os_cache(false)
        .order(OrderOption::Random)
        .build()
        .unwrap();
    let baseline = threads_now();
    for k in 0..100 {
        let mut epoch = loader.next_epoch().unwrap();
        for _ in 0..(k % 5) {
            epoch.next().unwrap().unwrap();
        }
        drop(epoch);
    }
    // Other tests of this binary run in parallel, so compare with some slack for their threads,
    // but 100 leaked epochs would leave 400 threads.
    assert!(threads_now() <= baseline + 16, "{} threads after, {baseline} before", threads_now());
}

struct FailsAt(u64, bool);

impl FieldDecoder for FailsAt {
    fn columns(&self, ds: &Dataset, field: usize, _epoch: u64) -> Result<Vec<ColumnSpec>> {
        Ok(vec![ColumnSpec {
            name: ds.fields()[field].name().into(),
            elem: beton_loader::ElemType::I64,
            shape: vec![],
        }])
    }

    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        if ctx.index == self.0 {
            if self.1 {
                panic!("decoder bug at {}", ctx.index);
            }
            return Err(beton_loader::Error::Decode("bad value".into()));
        }
        out[0].copy_from_slice(&value.as_int().unwrap().to_le_bytes());
        Ok(())
    }
}

#[test]
fn a_failing_or_panicking_decoder_names_the_sample_and_ends_the_epoch() {
    let (_dir, ds) = temp_dataset();
    for panics in [false, true] {
        let mut loader = Loader::builder(Arc::clone(&ds))
            .batch_size(10)
            .threads(2)
            .fields(&["label"])
            .decoder("label", Arc::new(FailsAt(57, panics)))
            .build()
            .unwrap();
        let results: Vec<_> = loader.next_epoch().unwrap().collect();
        assert_eq!(results.len(), 6, "batches 0-4, then the error, then nothing");
        assert!(results[..5].iter().all(|r| r.is_ok()));
        let err = results[5].as_ref().unwrap_err().to_string();
        if panics {
            assert!(err.contains("panic") && err.contains("decoder bug at 57"), "{err}");
            assert!(err.contains("batch 5, sample 57, field 'label'"), "{err}");
        } else {
            assert_eq!(err, "sample 57, field 'label': bad value");
        }
    }
    let err = Loader::builder(Arc::clone(&ds)).fields(&["nope"]).build().err().unwrap().to_string();
    assert!(err.contains("nope"), "{err}");
    let err = Loader::builder(Arc::clone(&ds)).indices(IndexSet::all(601)).build().err().unwrap().to_string();
    assert!(err.contains("row 600 is past the last row"), "{err}");
}

#[test]
fn distributed_ranks_split_the_epoch() {
    let (_dir, ds) = temp_dataset();
    for order in orders() {
        let mut all: Vec<Vec<u64>> = Vec::new();
        for rank in 0..3 {
            let mut loader = Loader::builder(Arc::clone(&ds))
                .batch_size(10)
                .order(order)
                .distributed(rank, 3)
                .drop_last(false)
                .build()
                .unwrap();
            let ids: Vec<u64> = run(&mut loader).into_iter().flat_map(|b| b.0).collect();
            all.push(ids);
        }
        assert!(all.iter().all(|ids| ids.len() == all[0].len()), "{order:?}: ranks read as many samples");
        let mut union: Vec<u64> = all.concat();
        if matches!(order, OrderOption::QuasiRandom { .. }) {
            // Whole pages per rank (about 200 samples a page here), padded to the longest rank.
            union.sort_unstable();
            union.dedup();
        } else {
            assert_eq!(all[0].len(), 200);
            union.sort_unstable();
        }
        assert_eq!(union, (0..N).collect::<Vec<_>>(), "{order:?}: each sample once across ranks");
    }
}

#[cfg(target_os = "linux")]
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A 2 GiB file (2,048 payloads of 1 MiB, 256 pages of 8 MiB) read with the process cache
/// bounded to 12 pages (96 MiB): QUASI_RANDOM finishes, never holds more than the bound, and
/// reads each page about once; 25 epochs (50 GiB read) leave the memory where it was.
#[cfg(target_os = "linux")]
#[test]
fn multi_gib_file_under_a_small_cache_bound_with_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.beton");
    let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("blob", FieldType::Bytes)];
    let options = WriterOptions { page_size: 8 << 20, ..WriterOptions::default() };
    const MIB: usize = 1 << 20;
    Writer::new(&path, fields, options)
        .unwrap()
        .write_indexed(2048, |i| {
            Ok(vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![(i % 256) as u8; MIB])])
        })
        .unwrap();
    let ds = Arc::new(Dataset::open(&path).unwrap());
    assert!(ds.file_len() > 2 << 30);
    let mut loader = Loader::builder(Arc::clone(&ds))
        .batch_size(4)
        .order(OrderOption::QuasiRandom { buffer_pages: Some(4) })
        .os_cache(false)
        .cache_pages(12)
        .batches_ahead(2)
        .threads(2)
        .build()
        .unwrap();
    let mut rss = Vec::new();
    for e in 0..25 {
        let (samples, s) = blob_epoch(&mut loader, |i, row| {
            assert!(row.len() == MIB && row[0] == (i % 256) as u8 && row[MIB - 1] == (i % 256) as u8);
        });
        assert_eq!(samples, 2048);
        assert!(s.cache_pages <= 12, "{s:?}");
        if e == 0 {
            assert!(s.pages_read <= 256 + 12, "QUASI_RANDOM reads each page about once: {s:?}");
            assert_eq!(s.direct_reads, 0, "{s:?}");
        }
        rss.push(rss_kib());
    }
    let (settled, last) = (rss[4], rss[rss.len() - 1]);
    assert!(last <= settled + 16 * 1024, "RSS grew from {settled} KiB to {last} KiB: {rss:?}");
}

#[test]
fn a_loader_built_for_n_epochs_runs_n() {
    let (_dir, ds) = temp_dataset();
    let mut loader = Loader::builder(Arc::clone(&ds)).batch_size(100).epochs(2).build().unwrap();
    assert_eq!(loader.remaining_epochs(), Some(2));
    for _ in 0..2 {
        assert_eq!(loader.next_epoch().unwrap().count(), 6);
    }
    assert_eq!(loader.remaining_epochs(), Some(0));
    let err = loader.next_epoch().err().unwrap().to_string();
    assert!(err.contains("built for 2 epochs (0 to 1); epoch 2 is past them"), "{err}");
    assert_eq!(Loader::builder(ds).build().unwrap().remaining_epochs(), None);
}

#[cfg(target_os = "linux")]
#[test]
fn fifty_epochs_keep_memory_flat() {
    // RSS is the whole process's: measure in a child running only this test, so that other
    // tests' maps and buffers do not count.
    if std::env::var_os("BETON_RSS_CHILD").is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "fifty_epochs_keep_memory_flat", "--test-threads=1"])
            .env("BETON_RSS_CHILD", "1")
            .status()
            .unwrap();
        assert!(status.success(), "the child measuring RSS failed (its output is above)");
        return;
    }
    let (_dir, ds) = temp_dataset();
    for os_cache in [true, false] {
        let mut loader = Loader::builder(Arc::clone(&ds))
            .batch_size(32)
            .threads(2)
            .order(OrderOption::Random)
            .os_cache(os_cache)
            .build()
            .unwrap();
        let mut rss = Vec::new();
        for _ in 0..50 {
            for b in loader.next_epoch().unwrap() {
                b.unwrap();
            }
            rss.push(rss_kib());
        }
        // A slot (a batch of 32 × ~20 kB) or page buffer (2 MiB) leaked per epoch would add
        // megabytes over 45 epochs.
        assert!(rss[49] <= rss[4] + 4 * 1024, "os_cache {os_cache}: RSS {} -> {} KiB", rss[4], rss[49]);
    }
}

/// The file read through a `file://` URL (a replica in a small cache, so that an epoch evicts
/// and re-fetches): every order gives the batches of the local file, values checked, and a
/// dataset on remote storage is read-only.
#[test]
fn remote_files_give_the_local_batches_under_a_small_cache() {
    let (dir, ds) = temp_dataset();
    let url = format!("file://{}", ds.path().display());
    let options = beton_storage::RemoteOptions {
        cache_dir: dir.path().join("cache"),
        // 2 MiB for 6 MB of payloads: RANDOM evicts and fetches again.
        cache_bytes: 2 << 20,
        ..beton_storage::RemoteOptions::from_env().unwrap()
    };
    let remote = Arc::new(beton_storage::OpenOptions::new().remote_options(options).open(&url).unwrap());
    assert!(remote.is_remote());
    for order in orders() {
        for os_cache in [true, false] {
            let build = |ds: &Arc<Dataset>| {
                Loader::builder(Arc::clone(ds))
                    .batch_size(16)
                    .order(order)
                    .seed(4)
                    .threads(2)
                    .os_cache(os_cache)
                    .drop_last(false)
                    .build()
                    .unwrap()
            };
            let (mut local, mut far) = (build(&ds), build(&remote));
            assert!(run(&mut far) == run(&mut local), "{order:?}, os_cache {os_cache}");
        }
    }
    let stats = remote.remote_stats().unwrap();
    assert!(stats.evicted_blocks > 0, "{stats:?}");
    let e = beton_storage::save_classes(&url, None, Some(&["a".to_string()])).unwrap_err().to_string();
    assert!(e.starts_with(&url) && e.contains("reads only"), "{e}");
}
