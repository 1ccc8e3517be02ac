//! The replica's block logic against an in-process source (counting, failing, slow), and whole
//! datasets read through `file://` URLs.

// `&[a..b]` here is a list of one byte range, not a vector of numbers.
#![allow(clippy::single_range_in_vec_init)]

use std::sync::atomic::AtomicUsize;

use super::options::parse_size;
use super::*;
use crate::{Dataset, FieldSpec, FieldType, OpenOptions, SampleValue, Writer, WriterOptions};

/// An object in memory that counts what is asked of it, and fails while told to.
struct Fake {
    url: String,
    data: Arc<Vec<u8>>,
    requests: Arc<AtomicUsize>,
    bytes: Arc<AtomicU64>,
    fail: Arc<std::sync::atomic::AtomicBool>,
    /// Fail every request from the request with this number on (1 = the first).
    fail_at: Arc<AtomicUsize>,
    delay: Duration,
}

impl Source for Fake {
    fn url(&self) -> &str {
        &self.url
    }
    fn fetch(
        &self,
        ranges: &[Range<u64>],
        _in_flight: usize,
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        // Last range first: arrivals come in any order.
        for (i, r) in ranges.iter().enumerate().rev() {
            std::thread::sleep(self.delay);
            if self.fail.load(Ordering::Relaxed) {
                return Err(Error::Remote { url: self.url.clone(), what: "injected failure".into() });
            }
            if self.requests.fetch_add(1, Ordering::Relaxed) + 1 == self.fail_at.load(Ordering::Relaxed) {
                self.fail.store(true, Ordering::Relaxed);
            }
            self.bytes.fetch_add(r.end - r.start, Ordering::Relaxed);
            done(i, self.data[r.start as usize..r.end as usize].to_vec())?;
        }
        Ok(())
    }
}

struct Setup {
    replica: Arc<Replica>,
    data: Arc<Vec<u8>>,
    requests: Arc<AtomicUsize>,
    bytes: Arc<AtomicU64>,
    fail: Arc<std::sync::atomic::AtomicBool>,
    fail_at: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn options(dir: &Path, cache_bytes: u64) -> RemoteOptions {
    RemoteOptions {
        cache_dir: dir.to_path_buf(),
        cache_bytes,
        in_flight: 4,
        request_bytes: 4 * BLOCK_SIZE,
        retry_for: Duration::from_secs(1),
        open_retry_for: Duration::from_secs(1),
        request_timeout: Duration::from_secs(5),
    }
}

fn setup(len: usize, cache_bytes: u64, delay: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data: Arc<Vec<u8>> = Arc::new((0..len).map(|i| (i * 7 + i / 4093) as u8).collect());
    let requests = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fail_at = Arc::new(AtomicUsize::new(usize::MAX));
    let fake = Fake {
        url: format!("mem://test/{len}-{}", dir.path().display()),
        data: Arc::clone(&data),
        requests: Arc::clone(&requests),
        bytes: Arc::clone(&bytes),
        fail: Arc::clone(&fail),
        fail_at: Arc::clone(&fail_at),
        delay,
    };
    let info = ObjectInfo { len: len as u64, version: "v1".into() };
    let replica = Replica::create(Box::new(fake), info, options(dir.path(), cache_bytes)).unwrap();
    Setup { replica, data, requests, bytes, fail, fail_at, _dir: dir }
}

fn read(replica: &Replica, range: Range<u64>) -> Vec<u8> {
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    std::os::unix::fs::FileExt::read_exact_at(&replica.file, &mut buf, range.start).unwrap();
    buf
}

#[test]
fn ranges_are_fetched_once_in_coalesced_requests() {
    let s = setup(3 * BLOCK_SIZE as usize + 1000, 1 << 30, Duration::ZERO);
    let _a = s.replica.ensure(&[10..20, BLOCK_SIZE - 1..BLOCK_SIZE + 1]).unwrap();
    // Blocks 0 and 1: one request.
    assert_eq!(s.requests.load(Ordering::Relaxed), 1);
    assert_eq!(read(&s.replica, 0..2 * BLOCK_SIZE), s.data[..2 * BLOCK_SIZE as usize]);
    // Present blocks cost nothing; the short last block is fetched to the object's end; ranges
    // past it are clipped.
    let _b = s.replica.ensure(&[5..6, 3 * BLOCK_SIZE..u64::MAX, 0..0]).unwrap();
    assert_eq!(s.requests.load(Ordering::Relaxed), 2);
    assert_eq!(read(&s.replica, 3 * BLOCK_SIZE..s.data.len() as u64), s.data[3 * BLOCK_SIZE as usize..]);
    assert_eq!(s.replica.stats().requests, 2);
    assert_eq!(s.replica.stats().bytes, s.bytes.load(Ordering::Relaxed));
    // Requests are cut at request_bytes (4 blocks): 9 blocks, 3 requests.
    let t = setup(9 * BLOCK_SIZE as usize, 1 << 30, Duration::ZERO);
    let _c = t.replica.ensure(&[0..9 * BLOCK_SIZE]).unwrap();
    assert_eq!(t.requests.load(Ordering::Relaxed), 3);
}

#[test]
fn concurrent_readers_share_one_fetch_of_each_block() {
    let s = setup(16 * BLOCK_SIZE as usize, 1 << 30, Duration::from_millis(30));
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let replica = &s.replica;
            let data = &s.data;
            scope.spawn(move || {
                let range = (t % 4) * BLOCK_SIZE..(t % 4 + 6) * BLOCK_SIZE;
                let _lease = replica.ensure(std::slice::from_ref(&range)).unwrap();
                assert_eq!(read(replica, range.clone()), data[range.start as usize..range.end as usize]);
            });
        }
    });
    // Blocks 0..9 were asked for by 8 threads: each fetched exactly once.
    assert_eq!(s.bytes.load(Ordering::Relaxed), 9 * BLOCK_SIZE);
}

#[test]
fn a_failed_fetch_is_an_error_naming_the_url_and_can_be_retried() {
    let s = setup(4 * BLOCK_SIZE as usize, 1 << 30, Duration::ZERO);
    s.fail.store(true, Ordering::Relaxed);
    let e = s.replica.ensure(&[0..100]).unwrap_err().to_string();
    assert!(e.starts_with("mem://test/") && e.contains("injected failure"), "{e}");
    s.fail.store(false, Ordering::Relaxed);
    let _lease = s.replica.ensure(&[0..100]).unwrap();
    assert_eq!(read(&s.replica, 0..100), s.data[..100]);

    // A call of 3 requests (4 + 4 + 1 blocks, the last arriving first) whose third fails: the
    // blocks of the two that arrived stay, the other 4 are fetched by the next call.
    let t = setup(9 * BLOCK_SIZE as usize, 1 << 30, Duration::ZERO);
    t.fail_at.store(2, Ordering::Relaxed);
    assert!(t.replica.ensure(&[0..9 * BLOCK_SIZE]).is_err());
    assert_eq!(t.requests.load(Ordering::Relaxed), 2);
    t.fail.store(false, Ordering::Relaxed);
    t.fail_at.store(usize::MAX, Ordering::Relaxed);
    let _all = t.replica.ensure(&[0..9 * BLOCK_SIZE]).unwrap();
    assert_eq!(t.bytes.load(Ordering::Relaxed), 9 * BLOCK_SIZE, "blocks that arrived were fetched again");
    assert_eq!(read(&t.replica, 0..9 * BLOCK_SIZE), t.data[..]);
}

#[test]
fn evicted_blocks_are_fetched_again_and_pinned_blocks_are_kept() {
    // A bound of 3 blocks over an object of 12.
    let s = setup(12 * BLOCK_SIZE as usize, 3 * BLOCK_SIZE, Duration::ZERO);
    let pinned = s.replica.ensure(&[0..1]).unwrap();
    for round in 0..2 {
        for k in 1..12u64 {
            let range = k * BLOCK_SIZE + 5..k * BLOCK_SIZE + 900;
            let lease = s.replica.ensure(std::slice::from_ref(&range)).unwrap();
            assert_eq!(
                read(&s.replica, range.clone()),
                s.data[range.start as usize..range.end as usize],
                "{round} {k}"
            );
            drop(lease);
        }
    }
    // The pinned block was never evicted (it is still present: no new request), the others were,
    // and holes read as zeros where they were punched.
    let before = s.requests.load(Ordering::Relaxed);
    let _again = s.replica.ensure(&[0..1]).unwrap();
    assert_eq!(s.requests.load(Ordering::Relaxed), before);
    assert!(s.replica.stats().evicted_blocks >= 10, "{:?}", s.replica.stats());
    assert!(s.bytes.load(Ordering::Relaxed) >= 21 * BLOCK_SIZE);
    let b = s.replica.lock();
    let present = b.status.iter().filter(|x| **x == Status::Present).count();
    assert!(present <= 4, "{present} blocks present with a bound of 3 and one pinned");
    drop(b);
    drop(pinned);
}

#[test]
fn adopted_files_and_replica_blocks_share_one_bound() {
    // One bound of 4 blocks over a replica's blocks and a mirror's whole files.
    let bound = 4 * BLOCK_SIZE;
    let s = setup(8 * BLOCK_SIZE as usize, bound, Duration::ZERO);
    drop(s.replica.ensure(&[0..3 * BLOCK_SIZE]).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, blocks: u64| {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![1u8; (blocks * BLOCK_SIZE) as usize]).unwrap();
        path
    };
    // A file of 2 blocks: room is made by evicting the replica's least recently used blocks.
    // (Other tests' replicas share the process's budget: what they hold decides how much of
    // this one goes here; the next adoption needs more room than anything but all of it.)
    let (first, derived) = (file("first", 2), file("first.cols", 0));
    super::budget::adopt(vec![first.clone(), derived.clone()], 2 * BLOCK_SIZE, bound);
    // A file of 3 blocks: every older thing goes, blocks and the older file, with what was
    // derived from it.
    let second = file("second", 3);
    super::budget::adopt(vec![second.clone()], 3 * BLOCK_SIZE, bound);
    assert!(!first.exists() && !derived.exists(), "the older file and its derived file were evicted");
    let b = s.replica.lock();
    assert_eq!(
        b.status.iter().filter(|x| **x == Status::Present).count(),
        0,
        "every unpinned block went first"
    );
    drop(b);
    // (`second` itself may have gone too: other tests' pinned blocks count under the bound.)
    // A file its owner removed is forgotten: no eviction counts or removes it again.
    let third = file("third", 1);
    super::budget::adopt(vec![third.clone()], BLOCK_SIZE, u64::MAX);
    assert!(super::budget::holds(&third));
    std::fs::remove_file(&third).unwrap();
    super::budget::forget(&third);
    assert!(!super::budget::holds(&third));
}

#[test]
fn a_closed_replica_is_reused_and_a_locked_one_is_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let data: Arc<Vec<u8>> = Arc::new((0..5 * BLOCK_SIZE as usize).map(|i| i as u8).collect());
    let counter = Arc::new(AtomicUsize::new(0));
    let make = |version: &str| {
        let fake = Fake {
            url: "mem://reuse/x.beton".into(),
            data: Arc::clone(&data),
            requests: Arc::clone(&counter),
            bytes: Arc::new(AtomicU64::new(0)),
            fail: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            fail_at: Arc::new(AtomicUsize::new(usize::MAX)),
            delay: Duration::ZERO,
        };
        let info = ObjectInfo { len: data.len() as u64, version: version.into() };
        Replica::create(Box::new(fake), info, options(dir.path(), 1 << 30)).unwrap()
    };
    let first = make("v1");
    drop(first.ensure(&[0..3 * BLOCK_SIZE]).unwrap());
    let shared_path = first.path.clone();
    // A second handle in this process while the first is open: the same replica.
    let second = make("v1");
    assert!(Arc::ptr_eq(&first, &second));
    drop(second);
    drop(first);
    // Another process holding it (here: its lock taken through another open file): a private
    // replica, removed when dropped.
    let other_process = std::fs::File::open(&shared_path).unwrap();
    other_process.try_lock().unwrap();
    let private = make("v1");
    assert!(private.private && private.path != shared_path);
    let private_path = private.path.clone();
    drop(private);
    assert!(!private_path.exists());
    drop(other_process);
    let n = counter.load(Ordering::Relaxed);
    let again = make("v1");
    drop(again.ensure(&[0..3 * BLOCK_SIZE]).unwrap());
    assert_eq!(counter.load(Ordering::Relaxed), n, "present blocks were fetched again");
    assert_eq!(read(&again, 0..3 * BLOCK_SIZE), data[..3 * BLOCK_SIZE as usize]);
    drop(again);
    // Another version of the object: another replica, fetched anew.
    let other = make("v2");
    drop(other.ensure(&[0..10]).unwrap());
    assert_eq!(counter.load(Ordering::Relaxed), n + 1);
}

#[test]
fn sizes_and_urls_parse() {
    assert_eq!(parse_size("123"), Some(123));
    assert_eq!(parse_size("500K"), Some(500 << 10));
    assert_eq!(parse_size("1.5G"), Some(3 << 29));
    assert_eq!(parse_size("20GiB"), Some(20 << 30));
    assert_eq!(parse_size("x"), None);
    assert_eq!(parse_size("-1"), None);
    for url in ["s3://b/k.beton", "gs://b/k", "file:///tmp/x", "https://h/x", "az://c/x"] {
        assert!(is_url(Path::new(url)), "{url}");
    }
    for path in ["/tmp/x.beton", "x.beton", "C://x", "weird:/x", "://x"] {
        assert!(!is_url(Path::new(path)), "{path}");
    }
}

/// A dataset with images and bytes on several pages, written locally.
fn write_dataset(path: &Path, n: u64) {
    let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("blob", FieldType::Bytes)];
    let options = WriterOptions { page_size: 2 << 20, ..WriterOptions::default() };
    let writer = Writer::new(path, fields, options).unwrap();
    writer
        .write_indexed(n, |i| {
            let blob: Vec<u8> = (0..(20_000 + i * 997) % 90_000).map(|j| (j * 31 + i) as u8).collect();
            Ok(vec![SampleValue::Int(i as i64), SampleValue::Bytes(blob)])
        })
        .unwrap();
}

#[cfg(feature = "remote")]
#[test]
fn a_file_url_reads_as_the_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.beton");
    write_dataset(&path, 300);
    let local = Dataset::open(&path).unwrap();
    let url = format!("file://{}", path.display());
    let cache = dir.path().join("cache");
    let remote = OpenOptions::new().remote_options(options(&cache, 1 << 30)).open(&url).unwrap();
    assert!(remote.is_remote() && !local.is_remote());
    assert_eq!(remote.path(), Path::new(&url));
    assert_eq!(remote.data_table(), local.data_table());
    let opened = remote.remote_stats().unwrap();
    // Opening fetched the metadata only, not the ~16 MB of payloads.
    assert!(opened.bytes < 2 << 20, "{opened:?}");
    for i in (0..300).rev().step_by(7) {
        assert_eq!(remote.get(i, 1).unwrap(), local.get(i, 1).unwrap(), "sample {i}");
    }
    let after = remote.remote_stats().unwrap();
    assert!(after.requests > opened.requests);
    // A batch's payloads in one call; then they read from the map.
    let lease = remote.fetch_samples([3, 4, 5, 250]).unwrap().unwrap();
    let (lo, hi) = remote.sample_span(250).unwrap();
    assert_eq!(remote.file_bytes()[lo as usize..hi as usize], local.file_bytes()[lo as usize..hi as usize]);
    drop(lease);
    assert!(local.fetch_samples([1]).unwrap().is_none());
    // Errors name the URL.
    let missing = format!("file://{}/absent.beton", dir.path().display());
    let e = OpenOptions::new().remote_options(options(&cache, 1 << 30)).open(&missing).unwrap_err();
    assert!(matches!(&e, Error::RemoteNotFound { url } if *url == missing), "{e}");
    std::fs::write(dir.path().join("junk.beton"), b"not a beton file at all, but long enough....").unwrap();
    let junk = format!("file://{}/junk.beton", dir.path().display());
    let e = OpenOptions::new().remote_options(options(&cache, 1 << 30)).open(&junk).unwrap_err().to_string();
    assert!(e.starts_with(&junk), "{e}");
}

#[cfg(feature = "remote")]
#[test]
fn a_replaced_object_is_an_error_not_a_mix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.beton");
    write_dataset(&path, 200);
    let url = format!("file://{}", path.display());
    let remote =
        OpenOptions::new().remote_options(options(&dir.path().join("cache"), 1 << 30)).open(&url).unwrap();
    // Replaced (another write renamed over it): the next fetch refuses.
    std::thread::sleep(Duration::from_millis(20));
    write_dataset(&dir.path().join("new.beton"), 201);
    std::fs::rename(dir.path().join("new.beton"), &path).unwrap();
    let e = remote.get(150, 1).unwrap_err().to_string();
    assert!(e.starts_with(&url) && e.contains("changed since it was opened"), "{e}");
}
