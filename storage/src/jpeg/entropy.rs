//! One entropy-level pass over a baseline JPEG: checks every Huffman code of its scan and, when
//! asked, writes it again with a restart marker every `interval` MCUs — without an inverse DCT,
//! without colour conversion and without re-encoding pixels. The writer's JPEG passthrough
//! (appends, `from_imagefolder` with `write_mode="jpg"`) runs it instead of a whole decode plus
//! libjpeg-turbo's lossless transform, which it is several times faster than.
//!
//! # Speed
//!
//! The AC codes of a block are read a step at a time, a step being every code whose bits lie in
//! the next 12 bits (`LOOKUP_BITS`; one table lookup, one code or several short ones), two
//! steps to a refill of the bit register; the tables of a DHT are built once per thread and kept
//! for the next JPEG with the same tables (most JPEGs of a corpus share the standard ones). A
//! ~40 KB, 436×363 JPEG of the benchmark corpus: 0.16 ms checked, 0.23 ms with a restart marker
//! per MCU (0.19 and 0.27 ms while a DC difference's sign was a branch in `extend` and before the
//! BMI2 copy of [`check_with_restarts`]; one code a lookup and tables built per JPEG: 0.35 and
//! 0.45 ms; docs/PERFORMANCE.md).
//!
//! # What it takes, and what it leaves to libjpeg-turbo
//!
//! It takes a JPEG only when it can tell that libjpeg-turbo, with every warning made an error
//! (as the writer decodes), decodes it without complaint: 8-bit baseline or extended sequential
//! Huffman (SOF0/SOF1), one scan holding every component in frame order, tables all defined and
//! well formed, restart markers (if any) exactly where DRI puts them, every MCU's codes valid, no
//! coefficient past the 64th, the scan ending within its last byte and EOI right after it. For
//! anything else — progressive, arithmetic, 12-bit, several scans, a code that is not in its
//! table, data that stops early, bytes between the scan and a marker, a DC difference the table
//! cannot write after a restart — it answers `None` and the caller takes the slow path (a whole
//! strict decode, then libjpeg-turbo's transform), which gives the verdict and its message. So
//! a JPEG this pass accepts is one the whole decode accepts, and a corrupt JPEG is refused either
//! way. The header itself (markers before the scan) is read by libjpeg-turbo first (the caller's
//! [`Decompressor::header`](super::Decompressor::header)).
//!
//! # The rewrite
//!
//! A restart marker resets the DC predictions and byte-aligns the stream; nothing else in it
//! depends on where restarts are. So the rewritten scan is the original bit for bit except the
//! DC difference of each component's first block after a restart (written again from the
//! block's absolute DC value, with the same table), the one-bits that pad to the marker and the
//! markers. The AC codes of every block are copied as they are. The Huffman tables, the
//! quantisation tables and every other segment are kept; a DRI segment with the new interval
//! stands just before the SOS. The coefficients, and so the decoded pixels, are exactly the
//! original's; libjpeg-turbo's transform (which the slow path uses) also writes optimised
//! Huffman tables, so its output is a few per cent smaller than this pass's.
//!
//! This code never panics for any input: it reads with checked indexing, and an anomaly is a
//! `None`.

use super::MAX_PIXELS;
use crate::recent::{Kept, Recent};

mod encode;
mod optimize;
mod planes;
mod seek;
pub use encode::{encode_420, Template420};
pub use optimize::optimize_tables;
pub use planes::{decode_planes, decodes_at};
pub use seek::SeekIndex;

/// The natural (row-major) position of each coefficient in zigzag order, then 16 entries of 63
/// (libjpeg's `jpeg_natural_order`: a run that overshoots the block lands on its last one).
const NATURAL: [u8; 80] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7,
    14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39,
    46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
];

/// MCUs (in raster order) from one entry of a [`SeekIndex`] to the next.
const SEEK_GROUP: u64 = 4;

/// What [`decode`] notes for [`SeekIndex::build`]: where every [`SEEK_GROUP`]-th MCU begins and
/// the DC predictions there, then where the last MCU ends.
#[derive(Default)]
struct Recorder {
    starts: Vec<u32>,
    preds: Vec<i16>,
    /// A position or a prediction did not fit its type.
    overflow: bool,
}

impl Recorder {
    /// MCU `mcu` begins at bit `pos` with predictions `pred`.
    #[inline(always)]
    fn mcu(&mut self, mcu: u64, pos: usize, pred: &[i32]) {
        if mcu % SEEK_GROUP != 0 {
            return;
        }
        self.starts.push(u32::try_from(pos).unwrap_or_else(|_| {
            self.overflow = true;
            0
        }));
        for &p in pred {
            self.preds.push(i16::try_from(p).unwrap_or_else(|_| {
                self.overflow = true;
                0
            }));
        }
    }

    /// The last MCU ends before bit `pos`.
    fn end(&mut self, pos: usize) {
        self.mcu(0, pos, &[]);
    }
}

/// What [`check_with_restarts`] did with a JPEG it took.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Every code checked; the JPEG already has the interval asked for (or none was asked for):
    /// store it as it is.
    AsIs,
    /// Every code checked; the JPEG with a restart marker every `interval` MCUs.
    Rewritten(Vec<u8>),
}

/// Checks the scan of `data` at the entropy level and gives it a restart marker every `interval`
/// MCUs (`0`: checks only, whatever restart markers it has). `None`: not a JPEG this pass can
/// vouch for (see the [module docs](self)); the caller decodes it whole.
///
/// On x86-64 CPUs with BMI2 (every one since 2013's Haswell and Zen) the pass runs compiled for
/// it: its shifts by a register count are then one instruction without flags (`shlx`, `shrx`),
/// 3–5 % faster; elsewhere the same code compiled for the baseline.
pub fn check_with_restarts(data: &[u8], interval: u16) -> Option<Checked> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("bmi2") && std::is_x86_feature_detected!("lzcnt") {
        // SAFETY: the CPU has BMI1 (which BMI2 comes with), BMI2 and LZCNT, checked just above:
        // the only requirement of calling a function compiled for them.
        return unsafe { check_with_restarts_bmi2(data, interval) };
    }
    check_with_restarts_portable(data, interval)
}

/// [`check_with_restarts_portable`] compiled for BMI1, BMI2 and LZCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,lzcnt")]
fn check_with_restarts_bmi2(data: &[u8], interval: u16) -> Option<Checked> {
    check_with_restarts_portable(data, interval)
}

/// [`check_with_restarts`] for any CPU (inlined into the BMI2 copy, and compiled again there).
#[inline(always)]
fn check_with_restarts_portable(data: &[u8], interval: u16) -> Option<Checked> {
    let header = Header::parse(data)?;
    let layout = Layout::of(&header)?;
    let scan = Unstuffed::of(data.get(header.data_at..)?, &layout, header.interval)?;
    let rewrite = interval != 0 && interval != header.interval;
    if !rewrite {
        decode(&header, &layout, &scan, None, None)?;
        return Some(Checked::AsIs);
    }
    // The header up to the SOS without its DRI segments, a DRI segment of `interval`, the SOS.
    // Room for what the rewrite adds per MCU (a marker, the padding before it, and each
    // component's first DC written from its absolute value: ~4 bytes a 4:2:0 MCU on the
    // benchmark corpus), so that the output is not moved while it is written.
    let per_mcu = 3 + 2 * header.components.len();
    let mut out = Vec::with_capacity(data.len() + layout.mcus as usize * per_mcu + 64);
    header_without_dri(data, &header, &mut out)?;
    out.extend_from_slice(&[0xFF, 0xDD, 0, 4]);
    out.extend_from_slice(&interval.to_be_bytes());
    out.extend_from_slice(data.get(header.sos_at..header.data_at)?);
    let mut rewrite = Rewrite::new(&header, &scan, out)?;
    decode(&header, &layout, &scan, Some((&mut rewrite, u32::from(interval))), None)?;
    Some(Checked::Rewritten(rewrite.finish()))
}

/// A Huffman table as DHT gives it: how many codes of each length 1–16, and their symbols.
#[derive(Clone, PartialEq, Eq)]
struct Spec {
    counts: [u8; 16],
    symbols: Vec<u8>,
}

/// Bits looked up at once when decoding; longer codes take the canonical walk.
const LOOKUP_BITS: u32 = 12;

/// An AC table's steps over the next [`LOOKUP_BITS`] bits, packed in a `u32`: every run/size
/// code whose code lies wholly within those bits, one after another (its coefficient bits only
/// counted, so the last may reach past them), up to a code that ends the block. Bits 0–5: the
/// bits they take (the low six bits, as a 64-bit shift takes its count: the step is consumed
/// without a mask); 6–11: how far they move along the block; 12: the last ends the block;
/// 13–17, 18–22, 23: the same for the first code alone (a block near its end takes one code at
/// a time). 0: the first code is longer than the lookup, or there is none.
mod multi {
    pub const BITS: u32 = 0;
    pub const ADVANCE: u32 = 6;
    pub const ENDS: u32 = 1 << 12;
    pub const FIRST_BITS: u32 = 13;
    pub const FIRST_ADVANCE: u32 = 18;
    pub const FIRST_ENDS: u32 = 1 << 23;
}

/// A decoding table: `fast[next LOOKUP_BITS bits]` is `(length, symbol)` of a code of at most
/// that many bits (length 0: a longer code, or no code), and the canonical ranges per length
/// for the rest (as libjpeg's `maxcode`/`valoffset`).
struct Decoder {
    /// `None` only while the decoder is dropped (its table goes to this thread's spares).
    fast: Option<Fast>,
    /// For an AC table, the steps of the next `LOOKUP_BITS` bits (see [`multi`]), built when
    /// first asked for (the check and the rewrite read them).
    steps: std::cell::OnceCell<Table>,
    /// For an AC table, each code with its coefficient's value (see [`value`]), built when
    /// first asked for (the planes decoder reads them).
    values: std::cell::OnceCell<ValueTable>,
    dc: bool,
    /// Largest code of each length 1..=16 (index 0 unused), -1 where there is none.
    max_code: [i32; 17],
    /// Symbol index of code `c` of length `l`: `c + offset[l]`.
    offset: [i32; 17],
    symbols: Vec<u8>,
}

/// A table of one `u32` per value of the next [`LOOKUP_BITS`] bits.
type Table = Box<[u32; 1 << LOOKUP_BITS]>;

/// A one-code lookup (see [`Decoder`]).
type Fast = Box<[(u8, u8); 1 << LOOKUP_BITS]>;

/// The bits the planes decoder looks a code and its coefficient up by (see [`value`]): fewer
/// than [`LOOKUP_BITS`], so that a JPEG's two AC tables (4 KB each) stay in a 32 KB L1 cache
/// beside everything else the decoder reads; the longer codes of a photo are rare.
const VALUE_BITS: u32 = 10;

/// A table of one `u32` per value of the next [`VALUE_BITS`] bits.
type ValueTable = Box<[u32; 1 << VALUE_BITS]>;

thread_local! {
    /// The tables of decoders dropped on this thread, for the next ones to fill: a JPEG with
    /// tables of its own (beton's writer optimises them per image) needs new decoders, and
    /// fresh 8–16 KB boxes cost page faults every time.
    static SPARE: std::cell::RefCell<(Vec<Fast>, Vec<Table>, Vec<ValueTable>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// Spare tables kept per thread, of each kind.
const SPARE_TABLES: usize = 32;

/// A table from this thread's spares or new (its contents are to be overwritten, every entry).
fn spare_table() -> Table {
    SPARE.with(|s| s.borrow_mut().1.pop()).unwrap_or_else(|| Box::new([0; 1 << LOOKUP_BITS]))
}

impl Drop for Decoder {
    fn drop(&mut self) {
        let (fast, steps, values) = (self.fast.take(), self.steps.take(), self.values.take());
        // (Not at all once the thread's spares are gone, as the thread ends.)
        let _ = SPARE.try_with(|s| {
            let Ok(mut s) = s.try_borrow_mut() else { return };
            if let Some(f) = fast.filter(|_| s.0.len() < SPARE_TABLES) {
                s.0.push(f);
            }
            if let Some(t) = steps.filter(|_| s.1.len() < SPARE_TABLES) {
                s.1.push(t);
            }
            if let Some(t) = values.filter(|_| s.2.len() < SPARE_TABLES) {
                s.2.push(t);
            }
        });
    }
}

/// Decoders built on this thread, newest first: most JPEGs of a corpus share their tables (the
/// standard ones), and building an AC table's steps takes longer than checking a small JPEG.
const CACHED_DECODERS: usize = 8;

thread_local! {
    static DECODERS: Kept<(bool, Spec), Decoder> =
        const { std::cell::RefCell::new(Recent::new(CACHED_DECODERS)) };
}

impl Decoder {
    /// The decoder of `spec` (a DC table with `dc`), from this thread's cache or built;
    /// `None` as for [`Decoder::new`].
    fn cached(spec: &Spec, dc: bool) -> Option<std::rc::Rc<Decoder>> {
        DECODERS.with(|cache| {
            cache.borrow_mut().get_or_insert_with(
                |(d, s)| *d == dc && s == spec,
                || ((dc, spec.clone()), Decoder::new(spec, dc).map(std::rc::Rc::new)),
            )
        })
    }

    /// Builds a table; `None` for one libjpeg refuses (codes that overflow their length, or
    /// with `dc`, a symbol above 15) or whose symbols are too few for its counts.
    fn new(spec: &Spec, dc: bool) -> Option<Decoder> {
        let codes = canonical(spec)?;
        if dc && spec.symbols.iter().any(|&s| s > 15) {
            return None;
        }
        let mut fast =
            SPARE.with(|s| s.borrow_mut().0.pop()).unwrap_or_else(|| Box::new([(0, 0); 1 << LOOKUP_BITS]));
        fast.fill((0, 0));
        let mut max_code = [-1i32; 17];
        let mut offset = [0i32; 17];
        let mut k = 0usize;
        for len in 1..=16usize {
            let n = usize::from(spec.counts[len - 1]);
            if n == 0 {
                continue;
            }
            let first = codes.get(k)?.0;
            offset[len] = k as i32 - first as i32;
            max_code[len] = codes.get(k + n - 1)?.0 as i32;
            k += n;
        }
        for (i, &(code, len)) in codes.iter().enumerate() {
            let len = u32::from(len);
            if len <= LOOKUP_BITS {
                let shift = LOOKUP_BITS - len;
                let start = (code << shift) as usize;
                fast.get_mut(start..start + (1 << shift))?.fill((len as u8, *spec.symbols.get(i)?));
            }
        }
        Some(Decoder {
            fast: Some(fast),
            steps: std::cell::OnceCell::new(),
            values: std::cell::OnceCell::new(),
            dc,
            max_code,
            offset,
            symbols: spec.symbols.clone(),
        })
    }

    /// An AC table's steps (see [`multi`]); `None` for a DC table.
    #[inline(always)]
    fn steps(&self) -> Option<&[u32; 1 << LOOKUP_BITS]> {
        if self.dc {
            return None;
        }
        let fast = self.fast.as_deref()?;
        Some(self.steps.get_or_init(|| ac_steps(fast)))
    }

    /// An AC table's codes with their values (see [`value`]); `None` for a DC table.
    #[inline(always)]
    fn values(&self) -> Option<&[u32; 1 << VALUE_BITS]> {
        if self.dc {
            return None;
        }
        let fast = self.fast.as_deref()?;
        Some(self.values.get_or_init(|| ac_values(fast)))
    }

    /// Reads the AC codes of one block (an AC table) to its EOB or its 63rd coefficient, their
    /// coefficients' bits skipped; gives the position reached (64: all 63 read; above 64: past
    /// the block, which libjpeg takes silently and this pass declines). On a local copy of the
    /// reader, so that the loop's state stays in registers.
    #[inline(always)]
    fn skip_block(&self, r: &mut Reader<'_>) -> Option<u32> {
        let steps = self.steps()?;
        let mut local = *r;
        let mut k = 1u32;
        'block: loop {
            // One refill for two steps: a step takes at most 27 bits of the 56 or more.
            local.refill();
            for _ in 0..2 {
                let e = steps[(local.acc >> (64 - LOOKUP_BITS)) as usize & ((1 << LOOKUP_BITS) - 1)];
                let advance = (e >> multi::ADVANCE) & 63;
                if e != 0 && k + advance < 64 {
                    // Every code of the step, none reaching the block's end before the last.
                    // (A shift by `e` takes its low six bits, the step's bits.)
                    local.acc = local.acc.wrapping_shl(e);
                    local.n -= e & 63;
                    k += advance;
                    if e & multi::ENDS != 0 {
                        break 'block;
                    }
                    continue;
                }
                // One code: a long one (up to 31 bits with its coefficient's), or one near the
                // block's end; then a refill.
                local.refill();
                let (bits, advance) = match e {
                    0 => self.ac_step_long(local.acc)?,
                    _ => ((e >> multi::FIRST_BITS) & 31, (e >> multi::FIRST_ADVANCE) & 31),
                };
                local.consume(bits);
                if advance == 0 {
                    break 'block;
                }
                k += advance;
                if k >= 64 {
                    break 'block;
                }
                continue 'block;
            }
        }
        *r = local;
        Some(k)
    }

    #[cold]
    fn ac_step_long(&self, word: u64) -> Option<(u32, u32)> {
        let (len, rs) = self.decode_long(word)?;
        Some(step(len, rs))
    }

    /// The `(length, symbol)` of the code at the top of `word` (its 16 high bits are the next
    /// bits of the stream); `None` when they start no code of the table.
    #[inline(always)]
    fn decode(&self, word: u64) -> Option<(u32, u8)> {
        let (len, symbol) =
            self.fast.as_deref()?[(word >> (64 - LOOKUP_BITS)) as usize & ((1 << LOOKUP_BITS) - 1)];
        if len != 0 {
            return Some((u32::from(len), symbol));
        }
        self.decode_long(word)
    }

    #[cold]
    fn decode_long(&self, word: u64) -> Option<(u32, u8)> {
        for len in LOOKUP_BITS as usize + 1..=16 {
            let code = (word >> (64 - len)) as i32;
            if code <= self.max_code[len] {
                let at = usize::try_from(code + self.offset[len]).ok()?;
                return Some((len as u32, *self.symbols.get(at)?));
            }
        }
        None
    }
}

/// The steps of an AC table (see [`multi`]) from its one-code lookup.
fn ac_steps(fast: &[(u8, u8); 1 << LOOKUP_BITS]) -> Table {
    let mask = (1usize << LOOKUP_BITS) - 1;
    let mut steps = spare_table();
    for (i, entry) in steps.iter_mut().enumerate() {
        let (len, rs) = fast[i];
        if len == 0 {
            *entry = 0;
            continue;
        }
        let (first_bits, first_advance) = step(u32::from(len), rs);
        let (mut bits, mut advance, mut ends) = (first_bits, first_advance, first_advance == 0);
        // The codes after it whose code bits are all within the lookup.
        while !ends && bits < LOOKUP_BITS {
            let (len, rs) = fast[(i << bits) & mask];
            if len == 0 || u32::from(len) > LOOKUP_BITS - bits {
                break;
            }
            let (b, a) = step(u32::from(len), rs);
            // A step this far along is near the block's end anyway: taken one code at a time.
            if advance + a >= 64 {
                break;
            }
            (bits, advance, ends) = (bits + b, advance + a, a == 0);
        }
        *entry = bits << multi::BITS
            | advance << multi::ADVANCE
            | if ends { multi::ENDS } else { 0 }
            | first_bits << multi::FIRST_BITS
            | first_advance << multi::FIRST_ADVANCE
            | if first_advance == 0 { multi::FIRST_ENDS } else { 0 };
    }
    steps
}

/// An AC table's one-lookup decode of the next [`VALUE_BITS`] bits, packed in a `u32`: bits
/// 0–4 the bits taken (code and coefficient bits); bit 5: the code ends the block (EOB, or a
/// run/size with size 0 other than ZRL); bit 6: the code and its bits do not fit in the lookup
/// (nothing else set); 8–15: the positions moved (run + 1, or 16 for ZRL); 16–31: the
/// coefficient's value. A code that neither ends the block nor is too long has bits 5–7 clear,
/// so a shift by the whole entry (which takes its low six bits) shifts by its bits.
mod value {
    pub const BITS: u32 = 31;
    pub const END: u32 = 1 << 5;
    pub const SLOW: u32 = 1 << 6;
    pub const ADVANCE: u32 = 8;
    pub const VALUE: u32 = 16;
}

/// `NATURAL[k - 1]` at `k` (the natural position of the coefficient a code moving to position
/// `k` writes), 63 past the block, for the planes decoder's coefficient loop: indexed by `k & 127`
/// without a subtraction (`k` stays below 64 + 16 there).
const NATURAL_AT: [u8; 128] = {
    let mut at = [63u8; 128];
    let mut k = 1;
    while k <= 64 {
        at[k] = NATURAL[k - 1];
        k += 1;
    }
    at
};

/// The one-lookup values of an AC table (see [`value`]) from its one-code lookup, filled a
/// code (and a coefficient value) at a time: a JPEG with tables of its own builds them for each
/// image.
fn ac_values(fast: &[(u8, u8); 1 << LOOKUP_BITS]) -> ValueTable {
    let mut values = SPARE.with(|s| s.borrow_mut().2.pop()).unwrap_or_else(|| Box::new([0; 1 << VALUE_BITS]));
    let mut i = 0usize;
    while i < 1 << VALUE_BITS {
        // The code the next VALUE_BITS bits begin with, if it has at most that many bits.
        let (len, rs) = fast[i << (LOOKUP_BITS - VALUE_BITS)];
        let len = u32::from(len);
        if len == 0 || len > VALUE_BITS {
            values[i] = value::SLOW;
            i += 1;
            continue;
        }
        let span = 1usize << (VALUE_BITS - len);
        let (run, size) = (u32::from(rs >> 4), u32::from(rs & 15));
        let code = &mut values[i..i + span];
        match (run, size) {
            (15, 0) => code.fill(len | (16 << value::ADVANCE)),
            (_, 0) => code.fill(len | value::END),
            _ if len + size <= VALUE_BITS => {
                // Each value of the coefficient's bits over its share of the code's span.
                let each = span >> size;
                for (bits, entries) in code.chunks_exact_mut(each).enumerate() {
                    let v = extend(bits as u64, size);
                    entries.fill(
                        (len + size)
                            | ((run + 1) << value::ADVANCE)
                            | (u32::from(v as i16 as u16) << value::VALUE),
                    );
                }
            }
            _ => code.fill(value::SLOW),
        }
        i += span;
    }
    values
}

/// A run/size code of `len` bits as a step along a block: its bits with the coefficient's (the
/// low four bits of `rs` say how many) and the positions it moves (EOB: 0, ZRL: 16).
fn step(len: u32, rs: u8) -> (u32, u32) {
    let (r, s) = (u32::from(rs >> 4), u32::from(rs & 15));
    let advance = match (r, s) {
        (_, 1..) => r + 1,
        (15, 0) => 16,
        // EOB, and run/size codes with size 0 other than ZRL, which libjpeg ends a block at too.
        _ => 0,
    };
    (len + s, advance)
}

/// The canonical codes `(code, length)` of a table in symbol order (JPEG Annex C); `None` when
/// the table has fewer or more symbols than its counts say, or when, as libjpeg checks it
/// (`jpeg_make_d_derived_tbl`), the codes of a length up to the longest used fill or overflow
/// that length's code space ("Bogus Huffman table definition").
fn canonical(spec: &Spec) -> Option<Vec<(u32, u8)>> {
    let total: usize = spec.counts.iter().map(|&c| usize::from(c)).sum();
    if total > 256 || spec.symbols.len() != total {
        return None;
    }
    let longest = spec.counts.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    let mut codes = Vec::with_capacity(total);
    let mut code = 0u32;
    for len in 1..=16u8 {
        for _ in 0..spec.counts[usize::from(len) - 1] {
            codes.push((code, len));
            code += 1;
        }
        if usize::from(len) <= longest && code >= 1 << len {
            return None;
        }
        code <<= 1;
    }
    Some(codes)
}

/// An encoding table for DC categories: `(code, length)` of each category 0..=11 the table has.
fn dc_encoder(spec: &Spec) -> Option<[Option<(u32, u32)>; 12]> {
    let mut enc = [None; 12];
    for (&(code, len), &symbol) in canonical(spec)?.iter().zip(&spec.symbols) {
        if let Some(slot) = enc.get_mut(usize::from(symbol)) {
            slot.get_or_insert((code, u32::from(len)));
        }
    }
    Some(enc)
}

/// A frame component: its sampling factors and tables.
#[derive(Clone, Copy)]
struct Component {
    h: u32,
    v: u32,
    dc: usize,
    ac: usize,
    /// Its quantisation table (the one in effect at the SOS, as libjpeg latches it).
    q: usize,
}

/// A component as the frame header gives it: id, sampling factors h and v, quantisation table.
type FrameComponent = (u8, u32, u32, u8);

/// What the segments before the scan say.
struct Header {
    width: u32,
    height: u32,
    components: Vec<Component>,
    dc: [Option<Spec>; 4],
    ac: [Option<Spec>; 4],
    /// The quantisation tables in natural (row-major) order, as the last DQT before the SOS
    /// defined each.
    quant: [Option<[u16; 64]>; 4],
    /// The restart interval in effect for the scan (the last DRI), 0 for none.
    interval: u16,
    /// Byte ranges of the DRI segments (marker included), to leave out of a rewrite.
    dri_segments: Vec<std::ops::Range<usize>>,
    /// Byte ranges of the DHT segments (marker included) and where each one's tables begin, for
    /// a rewrite with other tables ([`optimize_tables`]).
    dht_segments: Vec<(std::ops::Range<usize>, usize)>,
    /// Offset of SOF's height field (its width follows), for a [`SeekIndex`] window's new size.
    sof_size_at: usize,
    /// Offset of the SOS marker, and of the first byte of entropy-coded data.
    sos_at: usize,
    data_at: usize,
}

impl Header {
    /// The MCU size in pixels of a scan of the components (a one-component scan's MCU is one
    /// block, whatever its sampling factors).
    fn mcu_size(&self) -> Option<(u32, u32)> {
        let comps = &self.components;
        if comps.len() == 1 {
            return Some((8, 8));
        }
        Some((8 * comps.iter().map(|c| c.h).max()?, 8 * comps.iter().map(|c| c.v).max()?))
    }

    fn parse(data: &[u8]) -> Option<Header> {
        if !data.starts_with(&[0xFF, 0xD8]) {
            return None;
        }
        let mut pos = 2usize;
        let mut frame: Option<(u32, u32, Vec<FrameComponent>)> = None;
        let mut quant: [Option<[u16; 64]>; 4] = [None; 4];
        let (mut dc, mut ac): ([Option<Spec>; 4], [Option<Spec>; 4]) = Default::default();
        let mut interval = 0u16;
        let mut dri_segments = Vec::new();
        let mut dht_segments = Vec::new();
        let mut sof_size_at = 0;
        loop {
            let marker_at = pos;
            if *data.get(pos)? != 0xFF {
                return None;
            }
            while data.get(pos) == Some(&0xFF) {
                pos += 1;
            }
            let marker = *data.get(pos)?;
            pos += 1;
            // Markers without a segment (RSTn, SOI, TEM, EOI) before the scan: not ours.
            if matches!(marker, 0x00 | 0x01 | 0xD0..=0xD9) {
                return None;
            }
            let len = usize::from(u16::from_be_bytes([*data.get(pos)?, *data.get(pos + 1)?]));
            let seg = data.get(pos + 2..pos.checked_add(len)?)?;
            let end = pos + len;
            match marker {
                0xC4 => {
                    dht_segments.push((marker_at..end, pos + 2));
                    let mut s = seg;
                    while let [tc_th, rest @ ..] = s {
                        let (class, id) = (tc_th >> 4, usize::from(tc_th & 15));
                        let counts: [u8; 16] = rest.get(..16)?.try_into().ok()?;
                        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
                        let symbols = rest.get(16..16 + n)?.to_vec();
                        let spec = Some(Spec { counts, symbols });
                        match class {
                            0 => *dc.get_mut(id)? = spec,
                            1 => *ac.get_mut(id)? = spec,
                            _ => return None,
                        }
                        s = rest.get(16 + n..)?;
                    }
                }
                0xDB => {
                    let mut s = seg;
                    while let [pq_tq, rest @ ..] = s {
                        let wide = match pq_tq >> 4 {
                            0 => false,
                            1 => true,
                            _ => return None,
                        };
                        let values = rest.get(..if wide { 128 } else { 64 })?;
                        let mut table = [0u16; 64];
                        for (k, &at) in NATURAL[..64].iter().enumerate() {
                            table[usize::from(at)] = if wide {
                                u16::from_be_bytes([values[2 * k], values[2 * k + 1]])
                            } else {
                                u16::from(values[k])
                            };
                        }
                        *quant.get_mut(usize::from(pq_tq & 15))? = Some(table);
                        s = rest.get(values.len()..)?;
                    }
                }
                0xC0 | 0xC1 => {
                    if frame.is_some() || *seg.first()? != 8 {
                        return None;
                    }
                    let height = u32::from(u16::from_be_bytes([*seg.get(1)?, *seg.get(2)?]));
                    let width = u32::from(u16::from_be_bytes([*seg.get(3)?, *seg.get(4)?]));
                    let n = usize::from(*seg.get(5)?);
                    if seg.len() != 6 + 3 * n {
                        return None;
                    }
                    let comps = (0..n)
                        .map(|c| {
                            let (id, hv, tq) = (seg[6 + 3 * c], seg[7 + 3 * c], seg[8 + 3 * c]);
                            (id, u32::from(hv >> 4), u32::from(hv & 15), tq)
                        })
                        .collect();
                    frame = Some((width, height, comps));
                    sof_size_at = pos + 3;
                }
                // Other frames (progressive, lossless, arithmetic, hierarchical), arithmetic
                // conditioning, DNL, DHP, EXP: not ours.
                0xC2 | 0xC3 | 0xC5..=0xCF | 0xDC | 0xDE | 0xDF => return None,
                0xDD => {
                    interval = u16::from_be_bytes([*seg.first()?, *seg.get(1)?]);
                    dri_segments.push(marker_at..end);
                }
                0xDA => {
                    let (width, height, comps) = frame?;
                    let ns = usize::from(*seg.first()?);
                    // libjpeg allows 1 to 4 components in a scan (MAX_COMPS_IN_SCAN); the
                    // decoders here keep 4 DC predictions.
                    if !(1..=4).contains(&ns) || ns != comps.len() || seg.len() != 1 + 2 * ns + 3 {
                        return None;
                    }
                    // Sequential: spectral selection 0..63, no successive approximation.
                    if seg.get(1 + 2 * ns..)? != [0, 63, 0] {
                        return None;
                    }
                    if comps.iter().enumerate().any(|(i, a)| comps[..i].iter().any(|b| b.0 == a.0)) {
                        return None;
                    }
                    let mut components = Vec::with_capacity(ns);
                    for (c, &(id, h, v, tq)) in comps.iter().enumerate() {
                        let (cs, tables) = (seg[1 + 2 * c], seg[2 + 2 * c]);
                        let (td, ta) = (usize::from(tables >> 4), usize::from(tables & 15));
                        let defined = |t: &[Option<Spec>; 4], i: usize| t.get(i).is_some_and(Option::is_some);
                        if cs != id
                            || !(1..=4).contains(&h)
                            || !(1..=4).contains(&v)
                            || quant.get(usize::from(tq))?.is_none()
                            || !defined(&dc, td)
                            || !defined(&ac, ta)
                        {
                            return None;
                        }
                        components.push(Component { h, v, dc: td, ac: ta, q: usize::from(tq) });
                    }
                    if width == 0 || height == 0 || u64::from(width) * u64::from(height) > MAX_PIXELS as u64 {
                        return None;
                    }
                    return Some(Header {
                        width,
                        height,
                        components,
                        dc,
                        ac,
                        quant,
                        interval,
                        dri_segments,
                        dht_segments,
                        sof_size_at,
                        sos_at: marker_at,
                        data_at: end,
                    });
                }
                _ => {}
            }
            pos = end;
        }
    }
}

/// How the scan's blocks are laid out: MCUs, and per MCU the component of each block.
struct Layout {
    mcus: u64,
    /// The component of each block of an MCU, in order.
    blocks: Vec<usize>,
}

impl Layout {
    fn of(header: &Header) -> Option<Layout> {
        let comps = &header.components;
        let (w, h) = (u64::from(header.width), u64::from(header.height));
        let (mw, mh) = header.mcu_size()?;
        // A one-component scan: an MCU is one block, the component's own blocks (its sampling
        // factors do not matter when it is the only one).
        let blocks: Vec<usize> = if comps.len() == 1 {
            vec![0]
        } else {
            comps.iter().enumerate().flat_map(|(i, c)| std::iter::repeat_n(i, (c.h * c.v) as usize)).collect()
        };
        // libjpeg's limit on blocks in an MCU (D_MAX_BLOCKS_IN_MCU).
        if blocks.len() > 10 {
            return None;
        }
        Some(Layout { mcus: w.div_ceil(u64::from(mw)) * h.div_ceil(u64::from(mh)), blocks })
    }
}

/// The entropy-coded data with its stuffing removed, cut at its restart markers.
struct Unstuffed {
    /// The data bytes, then 8 zero bytes (so that a word can always be read).
    bytes: Vec<u8>,
    /// End (in bytes of `bytes`) of each restart interval's data.
    ends: Vec<usize>,
}

impl Unstuffed {
    /// Reads from the first byte after the SOS to EOI; `None` for a marker other than the
    /// restart markers DRI places (in order) and EOI, fill bytes, or a wrong number of
    /// intervals.
    fn of(data: &[u8], layout: &Layout, interval: u16) -> Option<Unstuffed> {
        Unstuffed::reusing(data, layout, interval, Vec::new())
    }

    /// [`Unstuffed::of`] into `bytes` (a buffer kept between JPEGs; its contents are replaced).
    fn reusing(data: &[u8], layout: &Layout, interval: u16, mut bytes: Vec<u8>) -> Option<Unstuffed> {
        bytes.clear();
        let mut ends = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked).
            unsafe { unstuff_avx2(data, interval, &mut bytes, &mut ends) }?;
        } else {
            unstuff(data, interval, &mut bytes, &mut ends)?;
        }
        #[cfg(not(target_arch = "x86_64"))]
        unstuff(data, interval, &mut bytes, &mut ends)?;
        let intervals = if interval == 0 { 1 } else { layout.mcus.div_ceil(u64::from(interval)) };
        if ends.len() as u64 != intervals {
            return None;
        }
        bytes.extend_from_slice(&[0; 8]);
        Some(Unstuffed { bytes, ends })
    }

    /// The 64 bits from bit `pos` on (zeros past the end).
    #[inline(always)]
    fn word(&self, pos: usize) -> u64 {
        be_word(&self.bytes, pos >> 3) << (pos & 7)
    }
}

/// What a 0xFF in a scan is.
enum Ff {
    /// A data byte, stuffed (0xFF 0x00).
    Stuffed,
    /// A restart marker (its interval's end noted).
    Restart,
    /// EOI: the scan ends (its last interval's end noted).
    End,
}

/// What the 0xFF at `ff` in a scan is, the ends of intervals noted at `len` bytes of output;
/// `None` for anything else, a restart marker out of order, or one where `interval` is 0.
#[inline(always)]
fn marker(data: &[u8], ff: usize, interval: u16, len: usize, ends: &mut Vec<usize>) -> Option<Ff> {
    match *data.get(ff + 1)? {
        0x00 => Some(Ff::Stuffed),
        m @ 0xD0..=0xD7 => {
            if interval == 0 || usize::from(m - 0xD0) != ends.len() % 8 {
                return None;
            }
            ends.push(len);
            Some(Ff::Restart)
        }
        0xD9 => {
            ends.push(len);
            Some(Ff::End)
        }
        _ => None,
    }
}

/// Appends the scan `data` to `bytes` without its stuffing and markers, noting where each
/// restart interval ends in `ends` (see [`Unstuffed::reusing`]).
fn unstuff(data: &[u8], interval: u16, bytes: &mut Vec<u8>, ends: &mut Vec<usize>) -> Option<()> {
    bytes.reserve(data.len() + 8);
    let mut pos = 0;
    loop {
        let ff = pos + memchr::memchr(0xFF, data.get(pos..)?)?;
        bytes.extend_from_slice(&data[pos..ff]);
        match marker(data, ff, interval, bytes.len(), ends)? {
            Ff::Stuffed => bytes.push(0xFF),
            Ff::Restart => {}
            Ff::End => return Some(()),
        }
        pos = ff + 2;
    }
}

/// [`unstuff`] 32 bytes at a time: each 32 copied whole (past the next 0xFF, which later bytes
/// overwrite), the output advancing to the first 0xFF among them; a JPEG beton writes has a
/// restart marker every MCU (a few dozen bytes), where a search call per marker cost more than
/// the copy.
///
/// # Safety
///
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1")]
unsafe fn unstuff_avx2(data: &[u8], interval: u16, bytes: &mut Vec<u8>, ends: &mut Vec<usize>) -> Option<()> {
    use std::arch::x86_64::*;
    debug_assert!(bytes.is_empty());
    // Every write below lands within `len .. pos + 32` or `len .. len + 1` with `len <= pos`
    // and `pos + 32 <= data.len()` (or the tail's `pos + i <= data.len()`): inside this.
    bytes.reserve(data.len() + 8);
    let out = bytes.as_mut_ptr();
    let (mut len, mut pos) = (0usize, 0usize);
    let all_ff = _mm256_set1_epi8(-1);
    loop {
        // Copy up to the next 0xFF.
        let ff = loop {
            if pos + 32 <= data.len() {
                // SAFETY: bytes pos..pos + 32 of `data` (checked just above); 32 bytes written
                // at `len <= pos`, inside the reservation (see above).
                let mask = unsafe {
                    let v = _mm256_loadu_si256(data.as_ptr().add(pos).cast());
                    _mm256_storeu_si256(out.add(len).cast(), v);
                    _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, all_ff)) as u32
                };
                if mask == 0 {
                    pos += 32;
                    len += 32;
                    continue;
                }
                let i = mask.trailing_zeros() as usize;
                pos += i;
                len += i;
                break pos;
            }
            let i = super::markers::next_ff(data, pos)? - pos;
            // SAFETY: `i` bytes from `pos` of `data` to `len <= pos`, inside the reservation.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), out.add(len), i) };
            pos += i;
            len += i;
            break pos;
        };
        match marker(data, ff, interval, len, ends)? {
            Ff::Stuffed => {
                // SAFETY: one byte at `len <= ff`, inside the reservation.
                unsafe { out.add(len).write(0xFF) };
                len += 1;
            }
            Ff::Restart => {}
            Ff::End => break,
        }
        pos = ff + 2;
    }
    // SAFETY: bytes 0..len were written above (each advance of `len` covers bytes written),
    // within the capacity reserved.
    unsafe { bytes.set_len(len) };
    Some(())
}

/// A bit reader over one restart interval of [`Unstuffed`] data: the next bits in a register,
/// refilled a word at a time (zeros past the end of the data).
#[derive(Clone, Copy)]
struct Reader<'a> {
    bytes: &'a [u8],
    /// The next byte to load.
    next: usize,
    /// The next `n` bits of the stream, highest first.
    acc: u64,
    n: u32,
}

impl<'a> Reader<'a> {
    fn at(bytes: &'a [u8], start: usize) -> Reader<'a> {
        let mut r = Reader { bytes, next: start, acc: 0, n: 0 };
        r.refill();
        r
    }

    /// A reader at bit `bit` of `bytes`.
    fn at_bit(bytes: &'a [u8], bit: usize) -> Reader<'a> {
        let mut r = Reader::at(bytes, bit / 8);
        r.consume((bit % 8) as u32);
        r
    }

    /// At least 56 bits in the register.
    #[inline(always)]
    fn refill(&mut self) {
        self.acc |= be_word(self.bytes, self.next) >> self.n;
        self.next += ((63 - self.n) >> 3) as usize;
        self.n |= 56;
    }

    #[inline(always)]
    fn consume(&mut self, bits: u32) {
        self.acc <<= bits;
        self.n -= bits;
    }

    /// The bit position of the next bit, in bits of the data.
    #[inline(always)]
    fn pos(&self) -> usize {
        self.next * 8 - self.n as usize
    }
}

/// The 8 bytes of `bytes` from `at` as a big-endian word; 0 past the end.
#[inline(always)]
fn be_word(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(b) => u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => 0,
    }
}

/// Output bits, stuffed as they are written.
struct BitWriter {
    out: Vec<u8>,
    /// Pending bits, the oldest highest, `bits` of them.
    acc: u64,
    bits: u32,
}

impl BitWriter {
    /// Appends the low `n` bits of `value` (n ≤ 32).
    #[inline(always)]
    fn put(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 32);
        self.acc = (self.acc << n) | (value & ((1u64 << n) - 1));
        self.bits += n;
        if self.bits >= 32 {
            self.bits -= 32;
            self.emit((self.acc >> self.bits) as u32);
        }
    }

    /// Writes four bytes of output, a 0 after each 0xFF.
    #[inline(always)]
    fn emit(&mut self, word: u32) {
        // Whether a byte is 0xFF: whether a byte of `!word` is zero (the classic SWAR test,
        // exact for "any").
        let inverse = !word;
        if inverse.wrapping_sub(0x0101_0101) & !inverse & 0x8080_8080 == 0 {
            self.out.extend_from_slice(&word.to_be_bytes());
            return;
        }
        for b in word.to_be_bytes() {
            self.out.push(b);
            if b == 0xFF {
                self.out.push(0);
            }
        }
    }

    /// Copies bits `from..to` of `scan`: whole words of 32 bits (with fewer than 32 bits
    /// pending, each makes exactly one word of output), then the rest.
    #[inline(always)]
    fn copy(&mut self, scan: &Unstuffed, mut from: usize, to: usize) {
        while to - from >= 32 {
            self.acc = (self.acc << 32) | (scan.word(from) >> 32);
            self.emit((self.acc >> self.bits) as u32);
            from += 32;
        }
        if from < to {
            let n = (to - from) as u32;
            self.put(scan.word(from) >> (64 - n), n);
        }
    }

    /// Pads to a byte boundary with one-bits (as encoders do before a marker).
    fn align(&mut self) {
        let pad = (8 - self.bits % 8) % 8;
        self.put((1 << pad) - 1, pad);
        while self.bits >= 8 {
            self.bits -= 8;
            let b = (self.acc >> self.bits) as u8;
            self.out.push(b);
            if b == 0xFF {
                self.out.push(0);
            }
        }
    }

    fn marker(&mut self, m: u8) {
        self.align();
        self.out.extend_from_slice(&[0xFF, m]);
    }

    fn finish(mut self) -> Vec<u8> {
        self.align();
        self.out
    }
}

/// The DC difference of `s` bits `bits` (JPEG's EXTEND), without a branch: a DC difference's
/// sign is as good as random, so a branch on it was mispredicted about every other block (10 %
/// of the pass). `bits` is 0 when `s` is 0.
#[inline(always)]
fn extend(bits: u64, s: u32) -> i32 {
    let v = bits as i32;
    let negative = -i32::from(v < (1 << s) >> 1);
    v + (negative & (1 - (1 << s)))
}

/// Reads a DC difference (a category, then that many bits: at most 16 + 11 bits) at the reader.
#[inline(always)]
fn dc_difference(table: &Decoder, r: &mut Reader<'_>) -> Option<i32> {
    let (s, bits) = dc_code(table, r)?;
    Some(extend(bits, s))
}

/// Reads a DC code at the reader (after a refill): its category `s` (at most 11) and the `s`
/// bits that follow it, as coded.
#[inline(always)]
fn dc_code(table: &Decoder, r: &mut Reader<'_>) -> Option<(u32, u64)> {
    r.refill();
    let (len, s) = table.decode(r.acc)?;
    let s = u32::from(s);
    if s > 11 {
        return None;
    }
    let bits = if s == 0 { 0 } else { (r.acc << len) >> (64 - s) };
    r.consume(len + s);
    Some((s, bits))
}

impl BitWriter {
    /// Writes the DC difference `d` with the table's codes (`None`: the table has no code for
    /// its category).
    #[inline(always)]
    fn dc(&mut self, encoder: &[Option<(u32, u32)>; 12], d: i32) -> Option<()> {
        let cat = 32 - d.unsigned_abs().leading_zeros();
        let (code, code_len) = (*encoder.get(cat as usize)?)?;
        // The code, then `cat` bits: `d`, or `d - 1` when negative; one write of at most 16 + 11
        // bits, without a branch.
        let bits = u64::from((d + (d >> 31)) as u32) & ((1 << cat) - 1);
        self.put(u64::from(code) << cat | bits, code_len + cat);
        Some(())
    }
}

/// What reading a scan's MCUs takes: the component of each block of an MCU and each
/// component's DC and AC decoders (components share them; most JPEGs of a corpus share them
/// too, [`Decoder::cached`]).
struct Mcus<'l> {
    blocks: &'l [usize],
    dc: Vec<std::rc::Rc<Decoder>>,
    ac: Vec<std::rc::Rc<Decoder>>,
}

impl<'l> Mcus<'l> {
    fn of(header: &Header, layout: &'l Layout) -> Option<Mcus<'l>> {
        let decoders = |dc: bool| -> Option<Vec<std::rc::Rc<Decoder>>> {
            let tables = if dc { &header.dc } else { &header.ac };
            let id = |c: &Component| if dc { c.dc } else { c.ac };
            header.components.iter().map(|c| Decoder::cached(tables[id(c)].as_ref()?, dc)).collect()
        };
        Some(Mcus { blocks: &layout.blocks, dc: decoders(true)?, ac: decoders(false)? })
    }

    /// Reads the MCU at `r`: each block's DC difference added to `pred` (its component's), its
    /// AC codes to EOB or the 63rd coefficient skipped (a code with its bits is at most 31
    /// bits). With `rewrite`, a block whose DC is predicted from another value in the output
    /// than in the input gets its difference written again ([`Rewrite`]).
    #[inline(always)]
    fn read(
        &self,
        r: &mut Reader<'_>,
        pred: &mut [i32],
        mut rewrite: Option<&mut Rewrite<'_>>,
    ) -> Option<()> {
        for &c in self.blocks {
            let dc_from = r.pos();
            let before = pred[c];
            pred[c] = before.wrapping_add(dc_difference(&self.dc[c], r)?);
            if let Some(rw) = rewrite.as_mut() {
                if rw.pred[c] != before {
                    rw.copy_to(dc_from);
                    rw.w.dc(&rw.enc[c], pred[c].wrapping_sub(rw.pred[c]))?;
                    rw.copy_from = r.pos();
                }
                rw.pred[c] = pred[c];
            }
            if self.ac[c].skip_block(r)? > 64 {
                return None;
            }
        }
        Some(())
    }
}

/// A scan being written again: the input's bits copied in runs, from `copy_from` up to where a
/// block's DC difference must be written again (its prediction in the output, `pred`, differs
/// from the input's: after a restart of one that the other does not have, or at a window's
/// row), a marker, or the end.
struct Rewrite<'s> {
    scan: &'s Unstuffed,
    w: BitWriter,
    /// Each component's DC encoding table.
    enc: Vec<[Option<(u32, u32)>; 12]>,
    /// The output's DC prediction of each component.
    pred: Vec<i32>,
    /// The next bit of the input not yet copied.
    copy_from: usize,
}

impl<'s> Rewrite<'s> {
    /// A rewrite of `scan` appending to `out` (what comes before the scan, written already).
    fn new(header: &Header, scan: &'s Unstuffed, out: Vec<u8>) -> Option<Rewrite<'s>> {
        let enc =
            header.components.iter().map(|c| dc_encoder(header.dc[c.dc].as_ref()?)).collect::<Option<_>>()?;
        let pred = vec![0; header.components.len()];
        Some(Rewrite { scan, w: BitWriter { out, acc: 0, bits: 0 }, enc, pred, copy_from: 0 })
    }

    /// Copies the input's bits from `copy_from` up to bit `to`.
    #[inline(always)]
    fn copy_to(&mut self, to: usize) {
        self.w.copy(self.scan, self.copy_from, to);
        self.copy_from = to;
    }

    /// The output: the scan padded to a byte, then EOI.
    fn finish(self) -> Vec<u8> {
        let mut out = self.w.finish();
        out.extend_from_slice(&[0xFF, 0xD9]);
        out
    }
}

/// Appends to `out` the segments of `data` before its scan, without the DRI segments (an
/// output's own DRI, if any, goes after them), and gives where SOF's height field is in `out`.
fn header_without_dri(data: &[u8], header: &Header, out: &mut Vec<u8>) -> Option<usize> {
    let (mut at, mut sof_at) = (0, out.len() + header.sof_size_at);
    for dri in &header.dri_segments {
        out.extend_from_slice(data.get(at..dri.start)?);
        if dri.end <= header.sof_size_at {
            sof_at -= dri.len();
        }
        at = dri.end;
    }
    out.extend_from_slice(data.get(at..header.sos_at)?);
    Some(sof_at)
}

/// Decodes every block of the scan (and with `out`, writes it with a restart marker every
/// `interval` MCUs; with `record`, notes where MCUs begin); `None` at the first anomaly.
/// (Inlined: into the BMI2 copy of [`check_with_restarts`] among others.)
#[inline(always)]
fn decode(
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    mut out: Option<(&mut Rewrite<'_>, u32)>,
    mut record: Option<&mut Recorder>,
) -> Option<()> {
    let mcus = Mcus::of(header, layout)?;
    let per_interval = if header.interval == 0 { layout.mcus } else { u64::from(header.interval) };
    let mut pred = vec![0i32; header.components.len()];
    let mut start = 0usize;
    let mut mcu = 0u64;
    // The rewrite's MCUs since its last restart marker (the first MCU has none before it), and
    // the number of its next marker.
    let (mut since_marker, mut next_marker) = (0u32, 0u8);
    for &end in &scan.ends {
        let end_bits = end * 8;
        let mut r = Reader::at(&scan.bytes, start);
        if let Some((rw, _)) = out.as_mut() {
            rw.copy_from = start * 8;
        }
        pred.iter_mut().for_each(|p| *p = 0);
        let last = (mcu + per_interval).min(layout.mcus);
        while mcu < last {
            if let Some((rw, interval)) = out.as_mut() {
                // (Counted, not divided per MCU.)
                if since_marker == *interval {
                    rw.copy_to(r.pos());
                    rw.w.marker(0xD0 + next_marker);
                    next_marker = (next_marker + 1) % 8;
                    since_marker = 0;
                    rw.pred.iter_mut().for_each(|p| *p = 0);
                }
                since_marker += 1;
            }
            if let Some(rec) = record.as_mut() {
                rec.mcu(mcu, r.pos(), &pred);
            }
            mcus.read(&mut r, &mut pred, out.as_mut().map(|(rw, _)| &mut **rw))?;
            if r.pos() > end_bits {
                return None;
            }
            mcu += 1;
        }
        // The interval's data ends within its last byte: a whole byte left over is data
        // libjpeg would warn about.
        if end_bits - r.pos() >= 8 {
            return None;
        }
        if let Some((rw, _)) = out.as_mut() {
            rw.copy_to(r.pos());
        }
        if let Some(rec) = record.as_mut() {
            rec.end(r.pos());
        }
        start = end;
    }
    (mcu == layout.mcus).then_some(())
}

#[cfg(test)]
mod tests;
