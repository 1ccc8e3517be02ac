//! The pages of a write: FFCV's rule placing each sample's payloads in one page ([`Packer`]),
//! the writer streaming pages to a file ([`PageWriter`]), and the page size a write without
//! one chooses from its payload ([`Pending`], [`choose`]).
//!
//! Why choose: every page is written whole (FORMAT.md §5) and the first starts on a page
//! boundary, so a file pays up to a page of zeros before its first page and after its last. At
//! FFCV's 8 MiB that made two images a 16 MiB file. A write without a page size holds its first
//! samples ([`Pending`], up to [`DECIDE_BYTES`] of payload or [`DECIDE_SAMPLES`] samples):
//!
//! - when the source ends before that (every file under 64 MiB of payload), it lays the samples
//!   out for every power of two from [`MIN_AUTO_PAGE_SIZE`] (or the largest sample) to FFCV's
//!   8 MiB, exactly as they would be written, and takes the largest page size whose file is at
//!   most 1/[`SLACK`] larger than the smallest: small files are not padded, and pages stay as
//!   large as that allows (fewer, longer reads);
//! - otherwise the file is large and takes FFCV's 8 MiB (or the power of two holding its
//!   largest sample so far), written as it streams: its padding is at most two pages, as FFCV's.
//!
//! FFCV 1.0.2 reads any power of two (its memory managers shift pointers by `log2(page_size)`;
//! only its *writer* refuses pages under 2 MiB), so an explicit page size keeps FFCV's writer
//! range and a chosen one may be smaller.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::{AllocEntry, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MIN_PAGE_SIZE};

/// Smallest page size a write chooses: a memory page (4 KiB), the unit of the OS's reads and
/// maps; smaller pages would save at most a few KiB a file.
pub const MIN_AUTO_PAGE_SIZE: u64 = 1 << 12;
/// Payload bytes a write without a page size holds before choosing: files with less are laid
/// out for their own payload; larger ones take [`DEFAULT_PAGE_SIZE`], whose padding (at most
/// 16 MiB) is then at most a quarter of the payload, and less the larger the file.
pub const DECIDE_BYTES: u64 = 64 << 20;
/// Samples a write without a page size holds before choosing (about 40 bytes each besides the
/// payload), for files of many tiny payloads.
pub const DECIDE_SAMPLES: usize = 1 << 20;
/// A chosen page size gives a file at most `1 / SLACK` larger than the smallest any candidate
/// gives (3 %): within that, the largest page wins.
pub const SLACK: u64 = 32;

/// FFCV's page rule (`ffcv/memory_allocator.py`): a sample's payloads go back to back after the
/// previous sample's in the current page when they fit in what is left, else into a new page.
#[derive(Debug, Clone, Copy)]
pub(super) struct Packer {
    page_size: u64,
    /// The open page and the bytes used in it.
    current: Option<(u64, u64)>,
}

impl Packer {
    pub(super) fn new(page_size: u64) -> Self {
        Packer { page_size, current: None }
    }

    /// Places a sample of `total` payload bytes (at most the page size): its page, its offset
    /// in the page, and the zeros that close the previous page first.
    pub(super) fn place(&mut self, total: u64) -> (u64, u64, u64) {
        let (page, used, fill) = match self.current {
            Some((page, used)) if used + total <= self.page_size => (page, used, 0),
            Some((page, used)) => (page + 1, 0, self.page_size - used),
            None => (0, 0, 0),
        };
        self.current = Some((page, used + total));
        (page, used, fill)
    }

    /// Pages started so far.
    pub(super) fn num_pages(&self) -> u64 {
        self.current.map_or(0, |(page, _)| page + 1)
    }

    /// Zeros that close the last page.
    fn tail(&self) -> u64 {
        self.current.map_or(0, |(_, used)| self.page_size - used)
    }
}

/// Lays payloads out in pages and streams the pages to a file.
pub(super) struct PageWriter {
    out: BufWriter<File>,
    path: PathBuf,
    packer: Packer,
    /// Where the next byte goes in the file, and up to where the kernel was asked to write the
    /// file back ([`PageWriter::write_back`]; `None`: never).
    at: u64,
    written_back: Option<u64>,
}

/// Bytes written between two requests to start writing the file back to disk.
const WRITE_BACK_EVERY: u64 = 8 << 20;

impl PageWriter {
    /// Pages of `page_size` bytes written to `file` from byte `base` (`path` names it in errors);
    /// with `write_back`, the disk writes them as they come ([`PageWriter::write_back`]).
    pub(super) fn new(
        file: File,
        base: u64,
        page_size: u64,
        path: PathBuf,
        write_back: bool,
    ) -> Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.seek(SeekFrom::Start(base)).map_err(|e| Error::io(&path, e))?;
        let written_back = write_back.then_some(base);
        Ok(PageWriter { out, path, packer: Packer::new(page_size), at: base, written_back })
    }

    pub(super) fn page_size(&self) -> u64 {
        self.packer.page_size
    }

    /// Places all payloads of sample `index` (each with the offset of its pointer in `row`) in
    /// one page, writes them, and records their pointers, relative to the first page, in `row`
    /// and in `allocs`.
    pub(super) fn place<'a>(
        &mut self,
        index: u64,
        payloads: impl Iterator<Item = (usize, &'a [u8])> + Clone,
        row: &mut [u8],
        allocs: &mut Vec<AllocEntry>,
    ) -> Result<()> {
        let mut payloads = payloads.peekable();
        if payloads.peek().is_none() {
            return Ok(());
        }
        let total: u64 = payloads.clone().map(|(_, p)| p.len() as u64).sum();
        let page_size = self.page_size();
        if total > page_size {
            let needed = total.next_power_of_two().max(MIN_PAGE_SIZE);
            return Err(Error::SampleTooLarge { index, bytes: total, page_size, needed });
        }
        let (page, used, fill) = self.packer.place(total);
        self.zero_fill(fill)?;
        let mut at = page * page_size + used;
        for (ptr_at, payload) in payloads {
            row[ptr_at..ptr_at + 8].copy_from_slice(&at.to_le_bytes());
            allocs.push(AllocEntry { sample_id: index, ptr: at, size: payload.len() as u64 });
            self.out.write_all(payload).map_err(|err| Error::io(&self.path, err))?;
            at += payload.len() as u64;
            self.at += payload.len() as u64;
        }
        self.write_back()
    }

    fn zero_fill(&mut self, n: u64) -> Result<()> {
        self.at += n;
        std::io::copy(&mut std::io::repeat(0).take(n), &mut self.out)
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Every [`WRITE_BACK_EVERY`] bytes, has the kernel start writing what was written so far
    /// back to disk (Linux's `sync_file_range` with `SYNC_FILE_RANGE_WRITE`: it starts the I/O
    /// and does not wait for it), so that the disk writes while the next samples encode and the
    /// `fsync` that commits the file finds little left to write: 0.27 s of a 1.9 s append of
    /// 420 MB was that `fsync` waiting for the disk. Durability still comes from the `fsync`
    /// alone. Elsewhere, or where the kernel refuses, nothing is done.
    fn write_back(&mut self) -> Result<()> {
        let Some(written_back) = self.written_back else { return Ok(()) };
        if self.at - written_back < WRITE_BACK_EVERY {
            return Ok(());
        }
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (offset, len) = (written_back, self.at - written_back);
            if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
                // SAFETY: the descriptor is the open file `out` owns for the whole call; the call
                // reads only its integer arguments. Its result is a hint's: an error (e.g. a file
                // system without it) changes nothing the final `fsync` does not decide.
                let _ = unsafe {
                    libc::sync_file_range(
                        self.out.get_ref().as_raw_fd(),
                        offset,
                        len,
                        libc::SYNC_FILE_RANGE_WRITE,
                    )
                };
            }
        }
        self.written_back = Some(self.at);
        Ok(())
    }

    /// Fills the last page with zeros and flushes; returns the number of pages.
    pub(super) fn finish(mut self) -> Result<u64> {
        self.zero_fill(self.packer.tail())?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.packer.num_pages())
    }
}

/// The first samples of a write without a page size, held until it is chosen: their payloads
/// as the encoders gave them (moved in, never copied: holding 64 MiB by copying into one buffer
/// touched twice that of fresh memory as it grew), each with its pointer's offset in the row.
/// Their rows are already in the writer's table (pointers still 0): sample `k` is row `k`.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// (offset of the pointer in the row, bytes) of every payload, in sample order.
    payloads: Vec<(usize, Vec<u8>)>,
    /// Payloads of each held sample.
    counts: Vec<usize>,
    /// Payload bytes held.
    held: u64,
    /// The largest sample's payload total.
    max_total: u64,
}

impl Pending {
    /// Holds the next sample's payloads (each with its pointer's offset in the row).
    pub(super) fn push(&mut self, payloads: Vec<(usize, Vec<u8>)>) {
        let total: u64 = payloads.iter().map(|(_, p)| p.len() as u64).sum();
        self.max_total = self.max_total.max(total);
        self.held += total;
        self.counts.push(payloads.len());
        self.payloads.extend(payloads);
    }

    /// Whether enough is held to stop holding: the file is large, and takes FFCV's page size.
    pub(super) fn is_full(&self) -> bool {
        self.held >= DECIDE_BYTES || self.counts.len() >= DECIDE_SAMPLES
    }

    /// The page size of a file that goes on past what is held: FFCV's, or the power of two that
    /// holds the largest sample so far when that is larger.
    pub(super) fn streaming_page_size(&self) -> u64 {
        self.max_total.next_power_of_two().clamp(DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE / 2)
    }

    /// Each held sample's payload total, `None` for a sample without payloads.
    fn totals(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        let mut at = 0;
        self.counts.iter().map(move |&n| {
            let total = self.payloads[at..at + n].iter().map(|(_, p)| p.len() as u64).sum();
            at += n;
            (n > 0).then_some(total)
        })
    }

    /// The page size of a file that holds exactly the held samples, its first page at
    /// `data_start(page_size)` (`None`: no such file); see the [module docs](self).
    pub(super) fn choose(&self, data_start: impl Fn(u64) -> Option<u64>) -> u64 {
        if self.totals().all(|t| t.is_none()) {
            // No pages: the header still names one; FFCV's, as every file without payloads had.
            return DEFAULT_PAGE_SIZE;
        }
        let smallest = self.max_total.next_power_of_two().max(MIN_AUTO_PAGE_SIZE);
        if smallest >= DEFAULT_PAGE_SIZE {
            return smallest.min(MAX_PAGE_SIZE / 2);
        }
        let sizes = std::iter::successors(Some(smallest), |&p| (p < DEFAULT_PAGE_SIZE).then_some(p * 2));
        let lens: Vec<(u64, u64)> = sizes
            .filter_map(|page_size| {
                let mut packer = Packer::new(page_size);
                for total in self.totals().flatten() {
                    packer.place(total);
                }
                let pages = packer.num_pages().checked_mul(page_size)?;
                Some((page_size, data_start(page_size)?.checked_add(pages)?))
            })
            .collect();
        let Some(best) = lens.iter().map(|&(_, len)| len).min() else { return DEFAULT_PAGE_SIZE };
        let bound = best + best / SLACK;
        lens.iter().filter(|&&(_, len)| len <= bound).map(|&(p, _)| p).max().unwrap_or(DEFAULT_PAGE_SIZE)
    }

    /// Writes the held samples through `pages`, setting their pointers in `rows` (rows of
    /// `row_size` bytes, held sample `k` at row `k`).
    pub(super) fn write(
        self,
        pages: &mut PageWriter,
        rows: &mut [u8],
        row_size: usize,
        allocs: &mut Vec<AllocEntry>,
    ) -> Result<()> {
        let mut at = 0;
        for (k, &n) in self.counts.iter().enumerate() {
            let payloads = &self.payloads[at..at + n];
            at += n;
            let slices = payloads.iter().map(|(ptr_at, p)| (*ptr_at, p.as_slice()));
            let row = &mut rows[k * row_size..(k + 1) * row_size];
            pages.place(k as u64, slices, row, allocs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pending set of samples with one payload of each size.
    fn pending(sizes: &[usize]) -> Pending {
        let mut p = Pending::default();
        for &s in sizes {
            p.push(vec![(0, vec![1u8; s])]);
        }
        p
    }

    /// The head of a small file: 64 KiB of split room after a short table, page-aligned.
    fn head(page_size: u64) -> Option<u64> {
        Some((1100u64 + (64 << 10)).next_multiple_of(page_size))
    }

    /// Pages written past several write-back requests (and from a base that is not 0) hold
    /// exactly the payloads, the zeros between pages and the tail; each request covers what was
    /// written since the last. A writer without write-back (a scratch file) makes none and
    /// writes the same bytes.
    #[test]
    fn pages_written_back_early_are_the_pages_written() {
        let page_size = 4 << 20;
        let base = 12_345;
        let dir = tempfile::tempdir().expect("a temporary directory");
        for write_back in [true, false] {
            let path = dir.path().join(format!("pages-{write_back}"));
            let file =
                File::options().create(true).truncate(true).read(true).write(true).open(&path).expect("file");
            let mut pages =
                PageWriter::new(file, base, page_size, path.clone(), write_back).expect("a page writer");
            let mut want = vec![0u8; base as usize];
            let (mut row, mut allocs, mut requests) = (vec![0u8; 8], Vec::new(), 0);
            for i in 0..40u64 {
                // 1–3 MiB payloads of varying bytes: pages close early and are zero-filled.
                let payload: Vec<u8> = (0..(1 << 20) + (i as usize * 51_111) % (2 << 20))
                    .map(|k| (k as u64 * 7 + i) as u8)
                    .collect();
                let written_back = pages.written_back;
                pages
                    .place(i, std::iter::once((0, payload.as_slice())), &mut row, &mut allocs)
                    .expect("placed");
                let at = u64::from_le_bytes(row[..8].try_into().expect("8 bytes"));
                want.resize((base + at) as usize, 0);
                want.extend_from_slice(&payload);
                assert_eq!(pages.at, base + at + payload.len() as u64, "sample {i}");
                if pages.written_back != written_back {
                    assert_eq!(pages.written_back, Some(pages.at), "a request covers everything written");
                    requests += 1;
                }
            }
            match write_back {
                true => assert!(requests >= 5, "{requests} write-back requests for ~100 MiB"),
                false => assert_eq!((requests, pages.written_back), (0, None)),
            }
            let num_pages = pages.finish().expect("finished");
            want.resize((base + num_pages * page_size) as usize, 0);
            assert!(std::fs::read(&path).expect("read back") == want, "the file holds the pages written");
        }
    }

    #[test]
    fn packer_follows_ffcvs_rule() {
        let mut p = Packer::new(100);
        assert_eq!(p.place(60), (0, 0, 0));
        assert_eq!(p.place(40), (0, 60, 0));
        assert_eq!(p.place(1), (1, 0, 0));
        assert_eq!(p.place(100), (2, 0, 99));
        assert_eq!((p.num_pages(), p.tail()), (3, 0));
        assert_eq!((Packer::new(8).num_pages(), Packer::new(8).tail()), (0, 0));
    }

    #[test]
    fn two_images_take_pages_of_their_size() {
        // Two 100 KB JPEGs: one 128 KiB page each (384 KiB with the head), not two 8 MiB pages.
        let p = pending(&[100_000, 100_000]);
        assert_eq!(p.choose(head), 128 << 10);
    }

    #[test]
    fn fifty_small_images_are_not_padded() {
        let p = pending(&[5_000; 50]);
        let page_size = p.choose(head);
        let mut packer = Packer::new(page_size);
        for _ in 0..50 {
            packer.place(5_000);
        }
        let len = head(page_size).unwrap() + packer.num_pages() * page_size;
        assert!(page_size < 1 << 20, "{page_size}");
        // 250 KB of payload and 65 KiB of head: within 110 KiB of padding.
        assert!(len <= 250_000 + (65 << 10) + (110 << 10), "{len} bytes with {page_size}-byte pages");
    }

    #[test]
    fn larger_files_get_larger_pages() {
        // 60 MB of 100 KB images: a few MiB pages (the largest within 1/32 of the smallest file).
        let p = pending(&[100_000; 600]);
        assert_eq!(p.choose(head), 2 << 20);
        // Samples of 5 MB: 8 MiB pages (one sample a page would waste more with smaller pages).
        assert_eq!(pending(&[5_000_000; 3]).choose(head), 8 << 20);
    }

    #[test]
    fn a_sample_larger_than_ffcvs_page_chooses_its_power_of_two() {
        assert_eq!(pending(&[9 << 20]).choose(head), 16 << 20);
        assert_eq!(pending(&[1]).streaming_page_size(), DEFAULT_PAGE_SIZE);
        assert_eq!(pending(&[9 << 20]).streaming_page_size(), 16 << 20);
    }

    #[test]
    fn no_payloads_keep_ffcvs_page_size() {
        let mut p = Pending::default();
        p.push(Vec::new());
        assert_eq!(p.choose(head), DEFAULT_PAGE_SIZE);
        assert_eq!(Pending::default().choose(head), DEFAULT_PAGE_SIZE);
        // Empty payloads still take a page.
        assert_eq!(pending(&[0, 0]).choose(head), MIN_AUTO_PAGE_SIZE);
    }
}
