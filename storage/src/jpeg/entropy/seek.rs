//! A seek index for a JPEG without restart markers: where its MCUs begin in the scan and the DC
//! predictions there, so that a window of MCUs can be cut out of it as a JPEG of its own.
//!
//! Without restart markers a JPEG's scan is one bit stream: to decode its last rows a decoder
//! must entropy-decode everything before them, and every DC value is a difference from the
//! previous block's. FFCV's writer (OpenCV's `imencode`) writes such JPEGs, so a crop of one
//! costs every MCU above and left of the crop's end. [`SeekIndex::build`] reads the scan once
//! (the entropy pass's check, so a JPEG it indexes is one libjpeg-turbo decodes without a
//! warning) and keeps, for every [`SEEK_GROUP`]-th MCU in raster order, the bit where it begins in
//! the unstuffed scan and the DC prediction of each component there. [`SeekIndex::window`] then
//! writes a baseline JPEG of just the MCU columns and rows asked for: the original header with
//! the window's size, and for each MCU row of the window its MCUs' bits copied as they are,
//! except the DC difference of each component's first block (written again against the
//! prediction the window's stream has there: 0 in its first row, the previous window row's last
//! value after). It has no restart markers, so libjpeg-turbo decodes it on its fast Huffman
//! path (a JPEG with a restart interval never takes it); its coefficients, and so its pixels,
//! are exactly those of the same MCUs in the original.
//!
//! An index takes 4 bytes plus 2 a component for every [`SEEK_GROUP`] MCUs (a 256×192 4:2:0 photo:
//! 192 MCUs, 480 bytes; its JPEG at quality 90 about 20 KB). Reaching an MCU between entries
//! reads up to `SEEK_GROUP - 1` MCUs from the entry before it (~0.3 µs each).

use std::ops::Range;

use super::planes::{decodes_at, with_scan, Sink};
use super::{header_without_dri, Header, Layout, Mcus, Reader, Recorder, Rewrite, Unstuffed, SEEK_GROUP};

/// Where every [`SEEK_GROUP`]-th MCU of a JPEG without restart markers begins (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekIndex {
    /// MCU width and height in pixels.
    mcu: (u32, u32),
    /// MCUs across and down.
    mcus: (u32, u32),
    /// Components of the scan.
    comps: usize,
    /// The bit (of the unstuffed scan) where MCU `SEEK_GROUP · i` begins, for every `i`; then the bit
    /// after the last MCU.
    starts: Box<[u32]>,
    /// The DC prediction of each component where each of `starts` (but the last) begins.
    preds: Box<[i16]>,
}

impl SeekIndex {
    /// Reads the scan of `data` once and indexes it; `None` when it has a restart interval
    /// (its intervals can be cut out as they are) or is a JPEG the entropy pass does not take
    /// ([`check_with_restarts`](super::check_with_restarts) would say `None`: progressive,
    /// arithmetic, damaged, ...), or a position or prediction does not fit the index.
    pub fn build(data: &[u8]) -> Option<SeekIndex> {
        let header = Header::parse(data)?;
        if header.interval != 0 || header.components.len() > 4 {
            return None;
        }
        let layout = Layout::of(&header)?;
        // (In this thread's scan buffer, as `window_planes`, not a fresh one per JPEG.)
        let record = with_scan(data, &header, &layout, |scan| {
            let mut record = Recorder::default();
            super::decode(&header, &layout, scan, None, Some(&mut record))?;
            Some(record)
        })?;
        let mcu = header.mcu_size()?;
        let mcus = (header.width.div_ceil(mcu.0), header.height.div_ceil(mcu.1));
        let comps = header.components.len();
        let groups = layout.mcus.div_ceil(SEEK_GROUP) as usize;
        if record.overflow
            || u64::from(mcus.0) * u64::from(mcus.1) != layout.mcus
            || record.starts.len() != groups + 1
            || record.preds.len() != groups * comps
        {
            return None;
        }
        Some(SeekIndex {
            mcu,
            mcus,
            comps,
            starts: record.starts.into_boxed_slice(),
            preds: record.preds.into_boxed_slice(),
        })
    }

    /// The MCU size in pixels, `(width, height)`.
    pub fn mcu_size(&self) -> (u32, u32) {
        self.mcu
    }

    /// MCUs across and down.
    pub fn mcus(&self) -> (u32, u32) {
        self.mcus
    }

    /// Bytes the index holds (what a cache of indexes counts).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<SeekIndex>() + self.starts.len() * 4 + self.preds.len() * 2
    }

    /// The header and layout of `data` when it is coded as this index says and `cols` × `rows`
    /// is a window of it (not empty, inside the image), with the window's size in pixels (the
    /// original's width and height where it reaches the right or bottom edge); `None` otherwise.
    fn window_header(
        &self,
        data: &[u8],
        cols: &Range<u32>,
        rows: &Range<u32>,
    ) -> Option<(Header, Layout, (u32, u32))> {
        let header = Header::parse(data)?;
        let layout = Layout::of(&header)?;
        let fits = header.interval == 0
            && header.mcu_size()? == self.mcu
            && header.components.len() == self.comps
            && !cols.is_empty()
            && !rows.is_empty()
            && cols.end <= self.mcus.0
            && rows.end <= self.mcus.1;
        if !fits {
            return None;
        }
        // (Only now: for a window inside the image each start is below its end.)
        let width = (cols.end * self.mcu.0).min(header.width) - cols.start * self.mcu.0;
        let height = (rows.end * self.mcu.1).min(header.height) - rows.start * self.mcu.1;
        Some((header, layout, (width, height)))
    }

    /// Writes into `out` a baseline JPEG of the MCU columns `cols` and rows `rows` of `data`,
    /// without restart markers, and gives its size in pixels (the original's width and height
    /// where the window reaches its right or bottom edge). Its pixel (0, 0) is the original's
    /// (`cols.start` × MCU width, `rows.start` × MCU height).
    ///
    /// `data` must be the JPEG this index was built from (the caller sees to that, e.g. by a
    /// hash): given other bytes this never panics, but gives `None` or a JPEG of garbage.
    /// `None` also for an empty window or one outside the image, and when a DC difference of a
    /// window row's first MCU has no code in its table.
    pub fn window(
        &self,
        data: &[u8],
        cols: Range<u32>,
        rows: Range<u32>,
        out: &mut Vec<u8>,
    ) -> Option<(u32, u32)> {
        let (header, layout, (width, height)) = self.window_header(data, &cols, &rows)?;
        with_scan(data, &header, &layout, |scan| {
            let mcus = Mcus::of(&header, &layout)?;

            // The header up to the SOS without its DRI segments (restart interval 0 anyway), with
            // the window's size in SOF, then the SOS.
            let mut head = std::mem::take(out);
            head.clear();
            let sof_at = header_without_dri(data, &header, &mut head)?;
            let [h1, h0] = u16::try_from(height).ok()?.to_be_bytes();
            let [w1, w0] = u16::try_from(width).ok()?.to_be_bytes();
            head.get_mut(sof_at..sof_at + 4)?.copy_from_slice(&[h1, h0, w1, w0]);
            head.extend_from_slice(data.get(header.sos_at..header.data_at)?);

            // The window's DC predictions start at 0; each row's first MCU is read through the
            // rewrite (its blocks predicted from other values than in the input), the rest of the row
            // copied as it is, after which the window predicts from the row's last blocks.
            let mut rewrite = Rewrite::new(&header, scan, head)?;
            let walk = Walk { index: self, scan, mcus: &mcus };
            let across = u64::from(self.mcus.0);
            for r in rows {
                let (from, mut pred) = walk.locate(u64::from(r) * across + u64::from(cols.start))?;
                let (to, pred_after) = walk.locate(u64::from(r) * across + u64::from(cols.end))?;
                let mut reader = Reader::at_bit(&scan.bytes, from);
                rewrite.copy_from = from;
                mcus.read(&mut reader, &mut pred, Some(&mut rewrite))?;
                if reader.pos() > to {
                    return None;
                }
                rewrite.copy_to(to);
                rewrite.pred.copy_from_slice(&pred_after[..self.comps]);
            }
            *out = rewrite.finish();
            Some((width, height))
        })
    }

    /// Decodes the MCU columns `cols` and rows `rows` of `data` at scale 1/`denom` into raw
    /// planes in `buf` at `geometry`, as [`decode_planes`](super::decode_planes) decodes the
    /// JPEG [`SeekIndex::window`] writes for them (the same pixels, byte for byte), without
    /// writing it: each window row's first MCU is found through the index, and its MCUs are decoded
    /// from the original scan with the original's DC predictions. Gives the window's size.
    ///
    /// `data` must be the JPEG this index was built from (as for [`SeekIndex::window`]).
    /// `None` as for [`SeekIndex::window`], and where the planes decoder declines (see
    /// [`decode_planes`](super::decode_planes)); `buf` may then have been written in part.
    pub fn window_planes(
        &self,
        data: &[u8],
        cols: Range<u32>,
        rows: Range<u32>,
        denom: u32,
        buf: &mut [u8],
        geometry: &[(usize, u32, u32)],
    ) -> Option<(u32, u32)> {
        if !decodes_at(denom) {
            return None;
        }
        let (header, layout, (width, height)) = self.window_header(data, &cols, &rows)?;
        with_scan(data, &header, &layout, |scan| {
            let mut sink = Sink::new(&header, (width, height), denom, buf, geometry)?;
            let mcus = Mcus::of(&header, &layout)?;
            let walk = Walk { index: self, scan, mcus: &mcus };
            #[cfg(target_arch = "x86_64")]
            if sink.fast() {
                // SAFETY: `Sink::fast` says the CPU has AVX2, BMI1, BMI2 and LZCNT.
                unsafe { window_fast(&mut sink, &walk, cols, rows) }?;
                return Some((width, height));
            }
            window_mcus::<false>(&mut sink, &walk, cols, rows)?;
            Some((width, height))
        })
    }
}

/// [`window_mcus`] compiled for AVX2, BMI1, BMI2 and LZCNT: the Huffman decoder's shifts
/// without flags (`shlx`, `shrx`) and the scale-1 IDCT inlined.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
fn window_fast(sink: &mut Sink<'_>, walk: &Walk<'_>, cols: Range<u32>, rows: Range<u32>) -> Option<()> {
    window_mcus::<true>(sink, walk, cols, rows)
}

/// The MCUs of columns `cols` and rows `rows` of the indexed scan into `sink` (see
/// [`SeekIndex::window_planes`]), a row at a time from its first MCU found through the index.
#[inline(always)]
fn window_mcus<const FAST: bool>(
    sink: &mut Sink<'_>,
    walk: &Walk<'_>,
    cols: Range<u32>,
    rows: Range<u32>,
) -> Option<()> {
    let across = u64::from(walk.index.mcus.0);
    let scan_bits = (walk.scan.bytes.len() - 8) * 8;
    for r in rows.clone() {
        let (from, mut pred) = walk.locate(u64::from(r) * across + u64::from(cols.start))?;
        let mut reader = Reader::at_bit(&walk.scan.bytes, from);
        for c in cols.clone() {
            sink.mcu::<FAST>(&mut reader, &mut pred, c - cols.start, r - rows.start)?;
        }
        if reader.pos() > scan_bits {
            return None;
        }
    }
    Some(())
}

/// Finding MCUs of an indexed scan.
struct Walk<'a> {
    index: &'a SeekIndex,
    scan: &'a Unstuffed,
    mcus: &'a Mcus<'a>,
}

impl Walk<'_> {
    /// The bit where MCU `mcu` begins and the DC predictions there (the end of the scan, with
    /// predictions 0, for the MCU after the last): from the entry before it, reading the MCUs
    /// in between.
    fn locate(&self, mcu: u64) -> Option<(usize, [i32; 4])> {
        let entry = usize::try_from(mcu / SEEK_GROUP).ok()?;
        let mut pos = *self.index.starts.get(entry)? as usize;
        let mut pred = [0i32; 4];
        let scan_bits = (self.scan.bytes.len() - 8) * 8;
        let total = u64::from(self.index.mcus.0) * u64::from(self.index.mcus.1);
        if mcu == total {
            let end = *self.index.starts.last()? as usize;
            return (end <= scan_bits).then_some((end, pred));
        }
        let comps = self.index.comps;
        for (p, &stored) in pred.iter_mut().zip(self.index.preds.get(entry * comps..(entry + 1) * comps)?) {
            *p = i32::from(stored);
        }
        if mcu % SEEK_GROUP != 0 {
            let mut reader = Reader::at_bit(&self.scan.bytes, pos);
            for _ in 0..mcu % SEEK_GROUP {
                self.mcus.read(&mut reader, &mut pred, None)?;
            }
            pos = reader.pos();
        }
        (pos <= scan_bits).then_some((pos, pred))
    }
}

#[cfg(test)]
mod tests;
