//! The process cache (`os_cache = false`): pages read with `pread` ahead of use into a bounded
//! pool of page buffers, following the epoch's known order.
//!
//! Before an epoch starts the loader knows every batch's samples, so it knows each page's uses
//! (the batches that read it). A prefetch thread walks the batches in order, a bounded distance
//! ahead of the consumer, and makes each batch's pages resident before workers build it. When
//! the pool is full it evicts the resident page whose next use is farthest away (Belady's rule,
//! exact here because the future is known), never one a batch in flight still needs. When no
//! page can be evicted, the page is not cached and workers read just their sample's bytes with
//! `pread` instead ("direct reads"): an order whose working set exceeds the bound (RANDOM over a
//! large file) re-reads instead of failing, and the cache never holds more than its bound.
//!
//! The data table is read through the map (it is the metadata FFCV also keeps in memory); only
//! payload pages go through this cache. Over a version of a dataset directory the cache reads
//! several data files: a page's key is its file's first key plus its page in the file, so one
//! bound and one eviction order cover them all. A page in the file counts from byte 0 (the
//! header's page included), so a file's keys span every page before its allocation table: the
//! pages of its head too, which are many with small pages or a large table.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex};

use beton_storage::Dataset;

use crate::error::{Error, Result};

/// One page's bytes.
pub(crate) type PageBuf = Arc<Vec<u8>>;

#[derive(Default)]
struct State {
    resident: HashMap<u64, PageBuf>,
    free: Vec<Vec<u8>>,
    allocated: usize,
}

/// One data file the cache reads.
struct CachedFile {
    file: File,
    path: std::path::PathBuf,
    page_size: u64,
    /// End of the data pages (the allocation table's offset).
    data_end: u64,
    /// The key of its page 0 (the page holding byte 0).
    first_key: u64,
}

/// The loader's page pool, reused across epochs.
pub(crate) struct PageCache {
    files: Vec<CachedFile>,
    capacity: usize,
    state: Mutex<State>,
}

/// Which pages each batch of an epoch reads, and when each page is used.
pub(crate) struct Schedule {
    /// Distinct pages of each batch, in order of first appearance.
    pub(crate) batch_pages: Vec<Vec<u64>>,
    /// The batches using each page, ascending.
    uses: HashMap<u64, Vec<usize>>,
}

impl Schedule {
    /// The schedule of `batches` (sample ids), `page_of` giving a sample's page key (`None`: it
    /// reads no payload).
    pub(crate) fn new<'b>(
        page_of: impl Fn(u64) -> Option<u64>,
        batches: impl Iterator<Item = &'b [u64]>,
    ) -> Schedule {
        let mut uses: HashMap<u64, Vec<usize>> = HashMap::new();
        let batch_pages = batches
            .enumerate()
            .map(|(b, ids)| {
                let mut pages = Vec::new();
                for &i in ids {
                    if let Some(p) = page_of(i) {
                        let u = uses.entry(p).or_default();
                        if u.last() != Some(&b) {
                            u.push(b);
                            pages.push(p);
                        }
                    }
                }
                pages
            })
            .collect();
        Schedule { batch_pages, uses }
    }

    /// The first batch at or after `from` that reads `page` (`usize::MAX`: none).
    fn next_use(&self, page: u64, from: usize) -> usize {
        let u = &self.uses[&page];
        u.get(u.partition_point(|&b| b < from)).copied().unwrap_or(usize::MAX)
    }
}

/// What one prefetch pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Prefetched {
    pub(crate) pages_read: u64,
    pub(crate) bytes_read: u64,
}

impl PageCache {
    /// A cache of at most `capacity` pages of the files of `datasets` (one, or a version's
    /// data files in order).
    pub(crate) fn new(datasets: &[&Dataset], capacity: usize) -> Result<PageCache> {
        let mut files = Vec::with_capacity(datasets.len());
        let mut first_key = 0u64;
        for ds in datasets {
            let path = ds.path().to_path_buf();
            let file = File::open(&path).map_err(|e| Error::Io { path: path.clone(), source: e })?;
            files.push(CachedFile {
                file,
                path,
                page_size: ds.page_size(),
                data_end: ds.header().alloc_table_ptr,
                first_key,
            });
            // Pages from byte 0 up to the allocation table: `page_of` numbers them from byte 0,
            // so counting the data pages alone would give the next file keys this one uses
            // when its head spans two pages more than the next file's.
            first_key += ds.header().alloc_table_ptr.div_ceil(ds.page_size().max(1)) + 1;
        }
        Ok(PageCache { files, capacity, state: Mutex::new(State::default()) })
    }

    /// The key of the page of file `file` holding byte `offset`, and that page's first byte.
    pub(crate) fn page_of(&self, file: usize, offset: u64) -> (u64, u64) {
        let f = &self.files[file];
        let page = offset / f.page_size;
        (f.first_key + page, page * f.page_size)
    }

    /// The file and page in it of key `key`.
    fn file_of(&self, key: u64) -> (&CachedFile, u64) {
        let k = self.files.partition_point(|f| f.first_key <= key).saturating_sub(1);
        let f = &self.files[k];
        (f, key - f.first_key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The resident page `page`, if any; the caller holds it (it cannot be evicted) while it
    /// keeps the handle.
    pub(crate) fn get(&self, page: u64) -> Option<PageBuf> {
        self.lock().resident.get(&page).cloned()
    }

    /// Page buffers allocated so far (the cache's peak, since buffers are never freed).
    pub(crate) fn allocated(&self) -> usize {
        self.lock().allocated
    }

    /// Reads `len` bytes at `offset` of file `file` into `buf`.
    pub(crate) fn pread(&self, file: usize, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        read_into(&self.files[file], offset, len, buf)
    }

    /// Makes the pages of batch `b` resident where the bound allows. `in_flight` is the first
    /// batch not yet handed to the consumer: pages used by batches in `in_flight..=b` are not
    /// evicted.
    pub(crate) fn prefetch(&self, schedule: &Schedule, b: usize, in_flight: usize) -> Result<Prefetched> {
        let mut done = Prefetched::default();
        for &page in &schedule.batch_pages[b] {
            let buf = {
                let mut st = self.lock();
                if st.resident.contains_key(&page) {
                    continue;
                }
                match st.free.pop() {
                    Some(buf) => buf,
                    None if st.allocated < self.capacity => {
                        st.allocated += 1;
                        Vec::with_capacity(self.file_of(page).0.page_size as usize)
                    }
                    None => {
                        // Evict the farthest next use among pages no reader holds and no batch
                        // in flight needs.
                        let victim = st
                            .resident
                            .iter()
                            .filter(|(_, buf)| Arc::strong_count(buf) == 1)
                            .map(|(&p, _)| (schedule.next_use(p, in_flight), p))
                            .filter(|&(next, _)| next > b)
                            .max();
                        let Some((_, victim)) = victim else { continue };
                        let buf = st.resident.remove(&victim).and_then(|a| Arc::try_unwrap(a).ok());
                        match buf {
                            Some(buf) => buf,
                            None => continue,
                        }
                    }
                }
            };
            let mut buf = buf;
            let (file, local) = self.file_of(page);
            let start = local * file.page_size;
            let len = file.page_size.min(file.data_end.saturating_sub(start)) as usize;
            let read = read_into(file, start, len, &mut buf);
            let mut st = self.lock();
            match read {
                Ok(()) => {
                    st.resident.insert(page, Arc::new(buf));
                    done.pages_read += 1;
                    done.bytes_read += len as u64;
                }
                Err(e) => {
                    st.free.push(buf);
                    return Err(e);
                }
            }
        }
        Ok(done)
    }
}

fn read_into(f: &CachedFile, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
    buf.resize(len, 0);
    read_exact_at(&f.file, buf, offset).map_err(|e| Error::Io { path: f.path.clone(), source: e })
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_read(file, &mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use beton_storage::{Dataset, SampleValue, WriterOptions};

    use super::PageCache;

    /// A file of `n` samples of `len(i)` bytes each, its page size chosen from its payload.
    fn write(path: &std::path::Path, n: u64, len: impl Fn(u64) -> usize + Sync) -> Dataset {
        let fields = beton_testkit::schema("label:int blob:bytes");
        beton_testkit::write_with(path, fields, WriterOptions::default(), n, |i| {
            vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![i as u8; len(i)])]
        });
        Dataset::open(path).unwrap()
    }

    /// A file whose head (table and room for splits) spans many more pages than the next
    /// file's: every payload's key still names its own file and page.
    #[test]
    fn keys_of_files_with_long_heads_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        // 20,000 rows of a few bytes: a long head in small pages; then one row of 100 KB: a
        // head of one large page.
        let big = write(&dir.path().join("big.beton"), 20_000, |i| 1 + i as usize % 7);
        let small = write(&dir.path().join("small.beton"), 1, |_| 100_000);
        let heads = [&big, &small].map(|d| (d.data_start(), d.page_size()));
        assert!(heads[0].0 / heads[0].1 > heads[1].0 / heads[1].1 + 2, "{heads:?}");
        let cache = PageCache::new(&[&big, &small], 4).unwrap();
        for (f, ds) in [&big, &small].into_iter().enumerate() {
            for k in 0..ds.num_allocations() {
                let ptr = ds.allocation(k).ptr;
                let (key, start) = cache.page_of(f, ptr);
                let (file, local) = cache.file_of(key);
                assert_eq!(file.path, ds.path(), "file {f}, allocation {k}");
                assert_eq!(local * ds.page_size(), start, "file {f}, allocation {k}");
            }
        }
    }
}
