//! A 4:2:0 JPEG encoded from its Y, Cb and Cr planes with optimal Huffman tables and restart
//! markers, byte for byte what libjpeg-turbo writes from the same planes with `optimize_coding`
//! (`tj3CompressFromYUVPlanes8` with `TJPARAM_OPTIMIZE`), in one pass over the pixels and one
//! entropy coding.
//!
//! The writer's re-encode used to run libjpeg-turbo (forward DCT, quantisation and Huffman
//! coding with the standard tables) and then [`optimize_tables`](super::optimize_tables), which
//! decodes every code of that output again to count the symbols and writes them with the
//! optimal tables. Here the blocks are transformed and quantised by libjpeg-turbo's own SIMD
//! functions (`jsimd_convsamp`, `jsimd_fdct_islow`, `jsimd_quantize`: AVX2 or SSE2, chosen as
//! its `jcdctmgr.c` chooses them), so the coefficients are libjpeg-turbo's; their symbols are
//! counted as they are made, and written once, with the tables libjpeg builds from those counts
//! ([`emit`]). What libjpeg-turbo does around the DCT is done the same way: planes padded to
//! whole blocks by repeating their last column and row (turbojpeg.c's raw-data path), and the
//! blocks of an MCU past the image's blocks ("dummy blocks": zero AC, the DC of the block before
//! them in the MCU; jccoefct.c). The segments before the scan are a libjpeg-turbo JPEG's made
//! with the same settings (a `template`, any size): its SOF gets this image's size and its DHTs
//! the new tables.
//!
//! Anything else (another sampling, no restart interval, a template it does not take, a CPU
//! without libjpeg-turbo's x86-64 SIMD) answers `None`, and the caller encodes with
//! libjpeg-turbo.

use super::optimize::{emit, Symbol};
use super::{Header, NATURAL};

/// What [`encode_420`] takes from a libjpeg-turbo JPEG of the settings it encodes with (a 4:2:0
/// JPEG with a restart interval, any size): the segments before its scan, parsed, and what
/// they make of the blocks (each component's quantisation divisors and Huffman table slots),
/// with the forward DCT of this CPU. Made once per setting.
pub struct Template420 {
    head: Vec<u8>,
    header: Header,
    divisors: [Divisors; 3],
    slots: [(u32, u32); 3],
    fdct: Fdct,
}

impl Template420 {
    /// `None` for a JPEG that is not such a template, or on a CPU without libjpeg-turbo's SIMD
    /// forward DCT (see the module docs).
    pub fn new(template: &[u8]) -> Option<Template420> {
        let fdct = fdct::select()?;
        let header = Header::parse(template)?;
        let sampling: Vec<(u32, u32)> = header.components.iter().map(|c| (c.h, c.v)).collect();
        if sampling != [(2, 2), (1, 1), (1, 1)] || header.interval == 0 {
            return None;
        }
        let mut divisors = [Divisors::ZERO; 3];
        let mut slots = [(0, 0); 3];
        for ((d, s), c) in divisors.iter_mut().zip(&mut slots).zip(&header.components) {
            *d = Divisors::of(header.quant.get(c.q)?.as_ref()?)?;
            *s = (c.dc as u32, 4 + c.ac as u32);
        }
        let head = template.get(..header.data_at)?.to_vec();
        Some(Template420 { head, header, divisors, slots, fdct })
    }
}

/// The JPEG of the 4:2:0 planes `planes` (Y, Cb, Cr, packed: Y is `width` and `height` rounded
/// up to even, each chroma plane half that) of a `width × height` image, with the quantisation
/// tables, restart interval and other segments of `template` and optimal Huffman tables; `None`
/// for planes of other sizes, an empty image or one over 65,535 pixels either way.
pub fn encode_420(
    template: &Template420,
    planes: [&[u8]; 3],
    (width, height): (u32, u32),
) -> Option<Vec<u8>> {
    let Template420 { header, divisors, slots, fdct, .. } = template;
    let fdct = *fdct;
    if width == 0 || height == 0 || width > u32::from(u16::MAX) || height > u32::from(u16::MAX) {
        return None;
    }
    let (pw, ph) = (width.next_multiple_of(2) as usize, height.next_multiple_of(2) as usize);
    let chroma = (pw / 2, ph / 2);
    if planes[0].len() != pw * ph
        || planes[1].len() != chroma.0 * chroma.1
        || planes[2].len() != planes[1].len()
    {
        return None;
    }

    // The segments before the scan with this image's size in the SOF.
    let mut head = template.head.clone();
    let size_at = header.sof_size_at;
    head.get_mut(size_at..size_at + 4)?.copy_from_slice(&[
        (height >> 8) as u8,
        height as u8,
        (width >> 8) as u8,
        width as u8,
    ]);

    thread_local! {
        /// The symbols and the padded rows, kept between images.
        static SCRATCH: std::cell::Cell<(Vec<Symbol>, Vec<u8>)> =
            const { std::cell::Cell::new((Vec::new(), Vec::new())) };
    }
    let (mut symbols, mut strip) = SCRATCH.with(std::cell::Cell::take);
    symbols.clear();
    let mut counts = [0u32; 8 * 256];
    let mut interval_ends = Vec::new();
    let mut coder = Coder { symbols: &mut symbols, counts: &mut counts };

    // Blocks of each component (libjpeg's width_in_blocks, height_in_blocks) and MCUs.
    let y_blocks = (width.div_ceil(8), height.div_ceil(8));
    let (mcus_x, mcus_y) = (width.div_ceil(16), height.div_ceil(16));
    // Padded rows of one MCU row: 16 of Y, 8 of Cb, 8 of Cr, each as wide as its blocks.
    let (yw, cw) = (y_blocks.0 as usize * 8, mcus_x as usize * 8);
    strip.clear();
    strip.resize(16 * yw + 16 * cw, 0);
    let interval = u32::from(header.interval);
    let mut pred = [0i32; 3];
    let mut ws = Workspace::new();
    let mut mcu = 0u32;
    for my in 0..mcus_y {
        let (ys, cs) = strip.split_at_mut(16 * yw);
        pad_rows(planes[0], (pw, ph), my as usize * 16, ys, yw);
        let (cbs, crs) = cs.split_at_mut(8 * cw);
        pad_rows(planes[1], chroma, my as usize * 8, cbs, cw);
        pad_rows(planes[2], chroma, my as usize * 8, crs, cw);
        for mx in 0..mcus_x {
            if mcu > 0 && mcu % interval == 0 {
                interval_ends.push(coder.symbols.len());
                pred = [0; 3];
            }
            mcu += 1;
            // Y: four blocks, row by row; those past the image's blocks are dummies.
            let mut last_dc = 0i16;
            for by in 0..2 {
                for bx in 0..2 {
                    let (x, y) = (mx * 2 + bx, my * 2 + by);
                    let block = if x < y_blocks.0 && y < y_blocks.1 {
                        let rows = &ys[by as usize * 8 * yw..][..8 * yw];
                        ws.transform(fdct, rows, yw, x as usize * 8, &divisors[0])
                    } else {
                        ws.dummy(last_dc)
                    };
                    last_dc = block[0];
                    coder.block(block, &mut pred[0], slots[0]);
                }
            }
            for (c, rows) in [(1, &*cbs), (2, &*crs)] {
                let block = ws.transform(fdct, rows, cw, mx as usize * 8, &divisors[c]);
                coder.block(block, &mut pred[c], slots[c]);
            }
        }
    }
    interval_ends.push(coder.symbols.len());
    let out = emit(&head, header, slots, &counts, &symbols, &interval_ends);
    // Kept for the next image unless one huge image made them big.
    if symbols.capacity() * 4 + strip.capacity() <= KEPT_BYTES {
        SCRATCH.with(|s| s.set((symbols, strip)));
    }
    out
}

/// Most bytes of scratch kept for the next image.
const KEPT_BYTES: usize = 16 << 20;

/// Copies the rows `from..from + rows.len() / width` of `plane` (`size`, packed) into `rows`,
/// `width` bytes each, as libjpeg-turbo's raw-data path pads them: each row's last sample
/// repeated to `width`, the plane's last row repeated below it.
fn pad_rows(plane: &[u8], (pw, ph): (usize, usize), from: usize, rows: &mut [u8], width: usize) {
    for (i, row) in rows.chunks_exact_mut(width).enumerate() {
        let y = (from + i).min(ph - 1);
        let src = &plane[y * pw..][..pw];
        let n = pw.min(width);
        row[..n].copy_from_slice(&src[..n]);
        let last = src[pw - 1];
        row[n..].fill(last);
    }
}

/// Symbols of the scan as blocks are coded, with each table's counts.
struct Coder<'a> {
    symbols: &'a mut Vec<Symbol>,
    counts: &'a mut [u32; 8 * 256],
}

impl Coder<'_> {
    /// A block's symbols (libjpeg's `encode_one_block` and `encode_mcu_gather`): the DC
    /// difference from `pred` (updated), then each nonzero AC coefficient in zigzag order with
    /// the run of zeros before it (a ZRL for each 16), and EOB unless the last is nonzero.
    #[inline(always)]
    fn block(&mut self, block: &[i16; 64], pred: &mut i32, (dc_slot, ac_slot): (u32, u32)) {
        let dc = i32::from(block[0]);
        let diff = dc - *pred;
        *pred = dc;
        self.push(dc_slot, 0, diff);
        let mut zigzag = [0i16; 64];
        let mut nonzero = zigzag::order(block, &mut zigzag) & !1;
        let mut last = 0u32;
        while nonzero != 0 {
            let k = nonzero.trailing_zeros();
            nonzero &= nonzero - 1;
            let mut run = k - last - 1;
            while run > 15 {
                self.push(ac_slot, 0xF0, 0);
                run -= 16;
            }
            self.push(ac_slot, run << 4, i32::from(zigzag[k as usize]));
            last = k;
        }
        if last != 63 {
            self.push(ac_slot, 0, 0);
        }
    }

    /// One symbol: `head` (an AC symbol's run, shifted; 0 for DC) with the category of `value`,
    /// and `value`'s bits (`value - 1` for a negative one, as many as the category).
    #[inline(always)]
    fn push(&mut self, slot: u32, head: u32, value: i32) {
        let size = 32 - value.unsigned_abs().leading_zeros();
        let bits = ((value + (value >> 31)) as u32) & ((1u32 << size) - 1);
        let sym = (head | size) | slot << 8;
        self.counts[sym as usize] += 1;
        self.symbols.push(sym | bits << 16);
    }
}

/// A block's coefficients in zigzag order, and which are nonzero.
mod zigzag {
    use super::NATURAL;

    /// Writes `block` (natural order) into `zigzag` in zigzag order; bit k of the result: whether
    /// `zigzag[k]` is nonzero.
    #[inline(always)]
    pub fn order(block: &[i16; 64], zigzag: &mut [i16; 64]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (checked).
            return unsafe { avx512(block, zigzag) };
        }
        portable(block, zigzag)
    }

    pub fn portable(block: &[i16; 64], zigzag: &mut [i16; 64]) -> u64 {
        for (z, &at) in zigzag.iter_mut().zip(&NATURAL[..64]) {
            *z = block[usize::from(at)];
        }
        let mut nonzero = 0u64;
        for (k, &z) in zigzag.iter().enumerate() {
            nonzero |= u64::from(z != 0) << k;
        }
        nonzero
    }

    /// [`portable`] in two two-source permutes of 32 coefficients (the zigzag positions are
    /// the permutes' indexes: bit 5 picks the block's second half) and two tests.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512bw")]
    pub fn avx512(block: &[i16; 64], zigzag: &mut [i16; 64]) -> u64 {
        use std::arch::x86_64::*;
        const fn indexes(from: usize) -> [i16; 32] {
            let mut out = [0i16; 32];
            let mut k = 0;
            while k < 32 {
                out[k] = NATURAL[from + k] as i16;
                k += 1;
            }
            out
        }
        static LOW: [i16; 32] = indexes(0);
        static HIGH: [i16; 32] = indexes(32);
        // SAFETY: unaligned loads of 64 bytes from `block` (128 bytes), the index arrays (64
        // bytes each), and stores of 64 bytes into each half of `zigzag` (128 bytes).
        unsafe {
            let a = _mm512_loadu_si512(block.as_ptr().cast());
            let b = _mm512_loadu_si512(block.as_ptr().add(32).cast());
            let lo = _mm512_permutex2var_epi16(a, _mm512_loadu_si512(LOW.as_ptr().cast()), b);
            let hi = _mm512_permutex2var_epi16(a, _mm512_loadu_si512(HIGH.as_ptr().cast()), b);
            _mm512_storeu_si512(zigzag.as_mut_ptr().cast(), lo);
            _mm512_storeu_si512(zigzag.as_mut_ptr().add(32).cast(), hi);
            u64::from(_mm512_test_epi16_mask(lo, lo)) | u64::from(_mm512_test_epi16_mask(hi, hi)) << 32
        }
    }
}

/// libjpeg-turbo's divisors for one quantisation table as `jsimd_quantize` reads them
/// (`jcdctmgr.c`'s `compute_reciprocal` of each value times 8, the islow DCT's scale): 64
/// reciprocals, 64 corrections, 64 scales, 64 shifts.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Divisors([i16; 256]);

impl Divisors {
    const ZERO: Divisors = Divisors([0; 256]);

    /// `None` for a table with a value of 0 (libjpeg refuses one).
    fn of(table: &[u16; 64]) -> Option<Divisors> {
        let mut d = Divisors::ZERO;
        for (i, &q) in table.iter().enumerate() {
            let divisor = u32::from(q) << 3;
            if divisor == 0 || divisor > u32::from(u16::MAX) {
                return None;
            }
            // compute_reciprocal, with DCTELEM = i16 (UDCTELEM2 = u32) and SIMD's scale.
            let b = 31 - divisor.leading_zeros();
            let mut r = 16 + b;
            let mut fq = (1u32 << r) / divisor;
            let fr = (1u32 << r) % divisor;
            let mut c = divisor / 2;
            if fr == 0 {
                fq >>= 1;
                r -= 1;
            } else if fr <= divisor / 2 {
                c += 1;
            } else {
                fq += 1;
            }
            // libjpeg-turbo quantises in C where a shift would be 16 or less (a divisor of 1 or
            // 2); the values here are at least 8.
            if r <= 16 {
                return None;
            }
            d.0[i] = fq as u16 as i16;
            d.0[64 + i] = c as u16 as i16;
            d.0[128 + i] = (1u32 << (32 - r)) as u16 as i16;
            d.0[192 + i] = (r - 16) as i16;
        }
        Some(d)
    }
}

/// The DCT's workspace and one block of coefficients, aligned as libjpeg-turbo aligns them.
#[repr(C, align(32))]
struct Workspace {
    dct: [i16; 64],
    block: [i16; 64],
}

impl Workspace {
    fn new() -> Workspace {
        Workspace { dct: [0; 64], block: [0; 64] }
    }

    /// The quantised coefficients of the 8×8 block at column `col` of `rows` (8 rows of `width`
    /// bytes; `col + 8 <= width`), by libjpeg-turbo's `forward_DCT`.
    #[inline(always)]
    fn transform(
        &mut self,
        fdct: Fdct,
        rows: &[u8],
        width: usize,
        col: usize,
        divisors: &Divisors,
    ) -> &[i16; 64] {
        assert!(rows.len() >= 8 * width && col + 8 <= width);
        let mut ptrs = [std::ptr::null::<u8>(); 8];
        for (p, row) in ptrs.iter_mut().zip(rows.chunks_exact(width)) {
            *p = row.as_ptr();
        }
        // SAFETY: `ptrs` holds 8 row pointers, each to `width` readable bytes (asserted above),
        // of which convsamp reads 8 from `col` (`col + 8 <= width`); the workspace and block
        // are 64 i16 each, 32-byte aligned (`repr(align(32))`), and the divisors 256 i16,
        // likewise aligned: what libjpeg-turbo's forward_DCT hands these functions.
        unsafe {
            (fdct.convsamp)(ptrs.as_ptr(), col as u32, self.dct.as_mut_ptr());
            (fdct.fdct)(self.dct.as_mut_ptr());
            (fdct.quantize)(self.block.as_mut_ptr(), divisors.0.as_ptr(), self.dct.as_ptr());
        }
        &self.block
    }

    /// A dummy block: zero AC, DC `dc`.
    fn dummy(&mut self, dc: i16) -> &[i16; 64] {
        self.block = [0; 64];
        self.block[0] = dc;
        &self.block
    }
}

/// `jsimd_convsamp_*`, `jsimd_fdct_islow_*` and `jsimd_quantize_*` of one instruction set.
#[derive(Clone, Copy)]
struct Fdct {
    convsamp: unsafe extern "C" fn(*const *const u8, u32, *mut i16),
    fdct: unsafe extern "C" fn(*mut i16),
    quantize: unsafe extern "C" fn(*mut i16, *const i16, *const i16),
}

/// libjpeg-turbo's SIMD forward DCT, as its `jcdctmgr.c` uses it.
#[cfg(target_arch = "x86_64")]
mod fdct {
    use std::ffi::c_int;
    use std::sync::OnceLock;

    use super::Fdct;

    extern "C" {
        // In the libjpeg-turbo that turbojpeg-sys builds and links statically (with SIMD,
        // the `require-simd` feature).
        fn jsimd_can_convsamp() -> c_int;
        fn jsimd_can_fdct_islow() -> c_int;
        fn jsimd_can_quantize() -> c_int;
        fn jsimd_convsamp_avx2(sample_data: *const *const u8, start_col: u32, workspace: *mut i16);
        fn jsimd_convsamp_sse2(sample_data: *const *const u8, start_col: u32, workspace: *mut i16);
        fn jsimd_fdct_islow_avx2(data: *mut i16);
        fn jsimd_fdct_islow_sse2(data: *mut i16);
        fn jsimd_quantize_avx2(coef_block: *mut i16, divisors: *const i16, workspace: *const i16);
        fn jsimd_quantize_sse2(coef_block: *mut i16, divisors: *const i16, workspace: *const i16);
    }

    /// The AVX2 functions (to be called only where the CPU has AVX2).
    pub fn avx2() -> Fdct {
        Fdct { convsamp: jsimd_convsamp_avx2, fdct: jsimd_fdct_islow_avx2, quantize: jsimd_quantize_avx2 }
    }

    /// The SSE2 functions (every x86-64 has SSE2).
    pub fn sse2() -> Fdct {
        Fdct { convsamp: jsimd_convsamp_sse2, fdct: jsimd_fdct_islow_sse2, quantize: jsimd_quantize_sse2 }
    }

    /// The functions libjpeg-turbo's forward DCT uses on this CPU (AVX2 where the CPU has it,
    /// unless JSIMD_FORCESSE2=1, as its `init_simd`), or `None` where it would use C ones.
    pub fn select() -> Option<Fdct> {
        static CHOSEN: OnceLock<Option<Fdct>> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            // SAFETY: queries without arguments; they read the CPU's features and libjpeg-turbo's
            // JSIMD_* environment variables.
            let can = unsafe {
                jsimd_can_convsamp() != 0 && jsimd_can_fdct_islow() != 0 && jsimd_can_quantize() != 0
            };
            if !can {
                return None;
            }
            let forced_sse2 = std::env::var("JSIMD_FORCESSE2").is_ok_and(|v| v == "1");
            Some(if std::is_x86_feature_detected!("avx2") && !forced_sse2 { avx2() } else { sse2() })
        })
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod fdct {
    use super::Fdct;

    /// Elsewhere libjpeg-turbo encodes (its SIMD DCT for this architecture is not wired here).
    pub fn select() -> Option<Fdct> {
        None
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// libjpeg-turbo's AVX2 and SSE2 forward DCTs give the same coefficients (so the bytes do not
    /// depend on which this CPU takes), through the signatures declared here: random blocks,
    /// flat ones and extremes, every quality's divisors; and a coefficient is what the divisor
    /// makes of the DCT (the DC of a flat block of value v is (v - 128) * 8 / (8 * q), rounded).
    #[test]
    fn the_simd_forward_dcts_agree() {
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: the_simd_forward_dcts_agree: no AVX2");
            return;
        }
        let (avx2, sse2) = (fdct::avx2(), fdct::sse2());
        let mut next = beton_testkit::xorshift(0x853c_49e6_748f_ea9b);
        let (mut a, mut b) = (Workspace::new(), Workspace::new());
        for round in 0..400u32 {
            let q = 1 + (next() % 255) as u16;
            let table: [u16; 64] = std::array::from_fn(|i| {
                if round % 2 == 0 {
                    q
                } else {
                    1 + ((u32::from(q) + i as u32 * 7) % 255) as u16
                }
            });
            let divisors = Divisors::of(&table).unwrap();
            // 8 rows of 24 bytes; the block at column 8.
            let rows: Vec<u8> = match round % 4 {
                0 => (0..192).map(|_| next() as u8).collect(),
                1 => vec![(next() % 256) as u8; 192],
                2 => (0..192).map(|i| if (i / 24 + i % 24) % 2 == 0 { 255 } else { 0 }).collect(),
                _ => (0..192).map(|i| (i % 24 * 10) as u8).collect(),
            };
            let x = *a.transform(avx2, &rows, 24, 8, &divisors);
            let y = *b.transform(sse2, &rows, 24, 8, &divisors);
            assert_eq!(x, y, "round {round}");
            if round % 4 == 1 {
                let v = i32::from(rows[0]) - 128;
                let dc = f64::from(v * 8) / f64::from(table[0]);
                assert!((f64::from(x[0]) - dc).abs() <= 0.5 + 1e-9, "flat {v}: DC {} for {dc}", x[0]);
                assert!(x[1..].iter().all(|&c| c == 0));
            }
        }
    }

    #[test]
    fn zigzag_orders_agree() {
        let mut next = beton_testkit::xorshift(0x1234_5678_9abc_def1);
        for round in 0..2000 {
            let block: [i16; 64] = std::array::from_fn(|_| {
                let seed = next();
                // Mostly zeros, as quantised blocks are.
                if seed % (1 + round % 9) == 0 {
                    (seed >> 20) as i16
                } else {
                    0
                }
            });
            let (mut x, mut y) = ([0i16; 64], [0i16; 64]);
            let m = zigzag::portable(&block, &mut x);
            for (k, &at) in NATURAL[..64].iter().enumerate() {
                assert_eq!(x[k], block[usize::from(at)]);
                assert_eq!(m >> k & 1 == 1, x[k] != 0);
            }
            if std::is_x86_feature_detected!("avx512bw") {
                // SAFETY: the CPU has AVX-512BW (checked).
                let n = unsafe { zigzag::avx512(&block, &mut y) };
                assert_eq!((m, x), (n, y), "round {round}");
            } else if round == 0 {
                eprintln!("SKIPPED: zigzag_orders_agree: no AVX-512BW");
            }
        }
    }

    #[test]
    fn it_declines_what_it_does_not_encode() {
        assert!(Template420::new(b"not a JPEG").is_none());
        assert!(Divisors::of(&[0; 64]).is_none());
    }
}
