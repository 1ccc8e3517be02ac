//! A baseline JPEG decoded to its raw planes by beton: the entropy pass's reader producing each
//! block's coefficients, and libjpeg-turbo's own SIMD inverse DCT on them — the planes
//! `tj3DecompressToYUVPlanes8` gives, byte for byte, at less cost.
//!
//! libjpeg-turbo's Huffman decoder reads one code a lookup and, for a JPEG with restart markers
//! (what beton writes), takes its slower path for every block; it was a third of the writer's
//! time and of the loader's. Here a block's codes are read with a lookup that gives a code, its
//! coefficient's bits and the coefficient's value at once (most codes of a photo fit in
//! [`VALUE_BITS`]), and the block goes through the inverse DCT libjpeg-turbo itself would pick
//! on this CPU with the component's quantisation table, straight into the plane: at scale 1
//! `jsimd_idct_islow_avx2` ported instruction for instruction to Rust ([`islow`], inlined into
//! the block loop) or `jsimd_idct_islow_sse2` where AVX2 is missing or `JSIMD_FORCESSE2=1`;
//! `jsimd_idct_4x4_sse2` and `jsimd_idct_2x2_sse2` at 1/2 and 1/4. So the pixels are
//! libjpeg-turbo's exactly: the same coefficients (libjpeg's `decode_mcu`: the DC prediction
//! kept as an `int`, each value stored as a `JCOEF`) through the same IDCT arithmetic, with
//! libjpeg-turbo's SIMD-specific 16-bit products included. The tests hold it byte for byte
//! against libjpeg-turbo on photos, noise, every subsampling and odd sizes, and extreme
//! quantisation tables, and the port against the assembly on random blocks.
//!
//! It takes what the entropy pass takes ([`super::check_with_restarts`]: a JPEG libjpeg-turbo
//! decodes without a warning), uncropped, at scale 1, 1/2 or 1/4 (libjpeg-turbo's reduced
//! IDCTs give 4×4 and 2×2 pixels a block), on x86-64 where libjpeg-turbo has its SIMD IDCT for
//! the scale (`jsimd_can_idct_*`, which honour `JSIMD_FORCENONE`). Anything else is `None` and
//! the caller runs libjpeg-turbo, which gives the verdict and the message.
//! [`Sink`] writes the planes an MCU at a time, for a whole scan ([`decode_planes`]) or for a
//! window of a JPEG without restart markers ([`super::SeekIndex::window_planes`]).
//!
//! # Speed
//!
//! A ~500×375 4:2:0 photo: 0.45 ms against libjpeg-turbo's 0.565 ms (Huffman decoding 0.32 ms
//! against its `decode_mcu`'s ~0.41 ms; the IDCT, the same code, 0.13 ms), before the changes
//! below. On a CPU with AVX2 and BMI2 the block loops run compiled for them (shifts without
//! flags; the scale-1 IDCT inlined, without the call, the row pointers and a separate zeroing of
//! the block), a code's lookup tests one bit pair for both its rare cases (block end, code too
//! long) and no position bound (the caller declines a block run past 64 once), and the lookup
//! takes 10 bits (4 KB a table) instead of 12: a JPEG's two AC tables of 16 KB had filled a
//! 32 KB L1 cache (AMD Zen 4) beside the decoder's other data. Together 1.08–1.09× the loader's
//! images/s on the benchmark corpus (docs/PERFORMANCE.md); a DC table of values the same way
//! measured 0.98–1.01× (beton's files build their tables per image) and was left out.

use std::cell::Cell;

use super::{
    be_word, dc_difference, extend, value, Decoder, Header, Layout, Reader, Unstuffed, NATURAL_AT, VALUE_BITS,
};

/// Decodes the baseline JPEG `data` at scale 1/`denom` (1, 2 or 4) into its planes in `buf`:
/// plane `c` at `geometry[c] = (offset, width, height)`, rows of `width` bytes, as
/// `tj3DecompressToYUVPlanes8` writes them at that scale (a plane's pixels beyond the image but
/// within its component's blocks included), the same bytes. `None`: not a JPEG this decoder
/// takes (what [`check_with_restarts`](super::check_with_restarts) takes, on x86-64 where
/// libjpeg-turbo has its SIMD IDCT for the scale and `JSIMD_FORCENONE` is not set), another
/// scale, a plane its component's blocks do not cover, or a buffer too small; `buf` may then
/// have been written in part.
pub fn decode_planes(data: &[u8], denom: u32, buf: &mut [u8], geometry: &[(usize, u32, u32)]) -> Option<()> {
    // Before the header is parsed and the scan unstuffed: a scale this decoder has no IDCT for.
    if !decodes_at(denom) {
        return None;
    }
    let header = Header::parse(data)?;
    let layout = Layout::of(&header)?;
    with_scan(data, &header, &layout, |scan| decode(&header, &layout, scan, denom, buf, geometry))
}

/// Whether the planes decoder decodes at scale 1/`denom` on this CPU (1, 2 and 4 where
/// libjpeg-turbo has its SIMD IDCTs for them; see the module docs): callers skip work that
/// only leads to it elsewhere.
pub fn decodes_at(denom: u32) -> bool {
    idct::select(denom).is_some()
}

/// Runs `f` on the unstuffed scan of `data` (its restart intervals as `header` says), read into
/// this thread's buffer, which is kept between JPEGs unless one huge scan made it big.
pub(super) fn with_scan<T>(
    data: &[u8],
    header: &Header,
    layout: &Layout,
    f: impl FnOnce(&Unstuffed) -> Option<T>,
) -> Option<T> {
    thread_local! {
        static SCAN: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    }
    let scan = Unstuffed::reusing(data.get(header.data_at..)?, layout, header.interval, SCAN.take())?;
    let out = f(&scan);
    if scan.bytes.capacity() <= KEPT_BYTES {
        SCAN.set(scan.bytes);
    }
    out
}

#[cfg(test)]
thread_local! {
    /// Set by tests to run the loops as on a CPU without AVX2 or BMI2 (libjpeg-turbo's IDCT
    /// called, not inlined), which every CI machine has: both paths are held to libjpeg-turbo.
    pub(super) static PORTABLE: Cell<bool> = const { Cell::new(false) };
}

/// Whether a test asked for the portable loops ([`PORTABLE`]).
#[cfg(test)]
fn forced_portable() -> bool {
    PORTABLE.get()
}

#[cfg(not(test))]
fn forced_portable() -> bool {
    false
}

/// Most bytes of scan kept for the next JPEG.
const KEPT_BYTES: usize = 16 << 20;

/// A coefficient block as libjpeg-turbo's SIMD IDCT reads it (aligned for its loads).
#[repr(C, align(32))]
struct Block([i16; 64]);

/// A component's plane: where it is in the output, its size, its quantisation table, how
/// many of its blocks hold image data (libjpeg decodes no others), and how many pixels across
/// and down a block gives at the scale decoded (8, 4 or 2).
struct Plane {
    at: *mut u8,
    width: usize,
    height: usize,
    quant: Block,
    blocks: (u32, u32),
    px: usize,
}

/// One block of an MCU: its component, the component's sampling factors, and where the block
/// lies in the component's MCU cell.
#[derive(Clone, Copy)]
struct Slot {
    comp: usize,
    h: u32,
    v: u32,
    dx: u32,
    dy: u32,
}

/// Planes written an MCU at a time: each block's coefficients read, then its inverse DCT
/// written into its component's plane, for a JPEG's scan or a window of it.
pub(super) struct Sink<'b> {
    planes: Vec<Plane>,
    slots: Vec<Slot>,
    dc: Vec<std::rc::Rc<Decoder>>,
    ac: Vec<std::rc::Rc<Decoder>>,
    idct: idct::Idct,
    /// Whether the loops run compiled for AVX2 and BMI2, with the scale-1 IDCT inlined
    /// ([`islow`]): where libjpeg-turbo's IDCT at scale 1 is its AVX2 one, which [`islow`] is.
    fast: bool,
    block: Block,
    /// The planes' pointers point into this borrow.
    _buf: std::marker::PhantomData<&'b mut [u8]>,
}

impl<'b> Sink<'b> {
    /// The planes of an image of `size` pixels coded as `header` says (the JPEG's own size, or
    /// a window's of it: the blocks with image data are counted from it), decoded at scale
    /// 1/`denom`, in `buf` at `geometry`; `None` when this decoder does not decode here (see
    /// the module docs), when the geometry is not one plane per component inside `buf`, or a
    /// plane reaches past its component's blocks.
    pub(super) fn new(
        header: &Header,
        size: (u32, u32),
        denom: u32,
        buf: &'b mut [u8],
        geometry: &[(usize, u32, u32)],
    ) -> Option<Sink<'b>> {
        let idct = idct::select(denom)?;
        let px = 8 / denom as usize;
        let comps = &header.components;
        if comps.len() != geometry.len() {
            return None;
        }
        let single = comps.len() == 1;
        let hmax = comps.iter().map(|c| c.h).max()?;
        let vmax = comps.iter().map(|c| c.v).max()?;
        let (width, height) = (u64::from(size.0), u64::from(size.1));
        // Every plane's pointer from this one (a reborrow of `buf` per plane would end the last's).
        let base = buf.as_mut_ptr();
        let mut planes = Vec::with_capacity(comps.len());
        for (c, &(offset, pw, ph)) in comps.iter().zip(geometry) {
            // libjpeg's width_in_blocks / height_in_blocks.
            let across = (width * u64::from(c.h)).div_ceil(u64::from(hmax) * 8);
            let down = (height * u64::from(c.v)).div_ceil(u64::from(vmax) * 8);
            let (pw, ph) = (pw as usize, ph as usize);
            if pw == 0 || ph == 0 || pw as u64 > across * px as u64 || ph as u64 > down * px as u64 {
                return None;
            }
            if offset.checked_add(pw.checked_mul(ph)?)? > buf.len() {
                return None;
            }
            let table = header.quant[c.q].as_ref()?;
            // libjpeg-turbo's ISLOW_MULT_TYPE is a `short` with SIMD: a 16-bit value as it is cast.
            let quant = Block(std::array::from_fn(|i| table[i] as i16));
            let blocks = (u32::try_from(across).ok()?, u32::try_from(down).ok()?);
            planes.push(Plane { at: base.wrapping_add(offset), width: pw, height: ph, quant, blocks, px });
        }
        // The planes must not overlap: each is written through its own pointer.
        let mut spans: Vec<_> = geometry.iter().map(|&(o, w, h)| (o, o + w as usize * h as usize)).collect();
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            return None;
        }
        // A one-component scan's MCU is one block of it, whatever its sampling factors.
        let slots: Vec<Slot> = if single {
            vec![Slot { comp: 0, h: 1, v: 1, dx: 0, dy: 0 }]
        } else {
            comps
                .iter()
                .enumerate()
                .flat_map(|(i, c)| {
                    (0..c.v)
                        .flat_map(move |dy| (0..c.h).map(move |dx| Slot { comp: i, h: c.h, v: c.v, dx, dy }))
                })
                .collect()
        };
        let dc =
            comps.iter().map(|c| Decoder::cached(header.dc[c.dc].as_ref()?, true)).collect::<Option<_>>()?;
        let ac =
            comps.iter().map(|c| Decoder::cached(header.ac[c.ac].as_ref()?, false)).collect::<Option<_>>()?;
        let fast = idct::inlined() && !forced_portable();
        Some(Sink {
            planes,
            slots,
            dc,
            ac,
            idct,
            fast,
            block: Block([0; 64]),
            _buf: std::marker::PhantomData,
        })
    }

    /// Whether the loops run compiled for AVX2 and BMI2 with [`Sink::mcu`]'s `FAST` (see
    /// [`idct::inlined`]).
    pub(super) fn fast(&self) -> bool {
        self.fast
    }

    /// Reads the MCU at `r` (its blocks' DC differences added to `pred`) and writes its blocks
    /// as MCU `(mx, my)` of the planes.
    /// `FAST`: inlined into a loop compiled for AVX2 (where [`Sink::fast`] says so), the
    /// scale-1 IDCT with it.
    #[inline(always)]
    pub(super) fn mcu<const FAST: bool>(
        &mut self,
        r: &mut Reader<'_>,
        pred: &mut [i32],
        mx: u32,
        my: u32,
    ) -> Option<()> {
        for slot in &self.slots {
            let c = slot.comp;
            pred[c] = pred[c].wrapping_add(dc_difference(&self.dc[c], r)?);
            // libjpeg: `(*block)[0] = (JCOEF) s`.
            self.block.0[0] = pred[c] as i16;
            if self.ac[c].coefficients(r, &mut self.block.0)? > 64 {
                return None;
            }
            let plane = &self.planes[c];
            let (bx, by) = (mx * slot.h + slot.dx, my * slot.v + slot.dy);
            if bx < plane.blocks.0 && by < plane.blocks.1 {
                let (x, y) = (bx as usize * plane.px, by as usize * plane.px);
                // One copy of `put` per block size, so that its loops are unrolled at scale 1.
                match plane.px {
                    #[cfg(target_arch = "x86_64")]
                    8 if FAST => {
                        // SAFETY: `FAST` only in loops compiled for AVX2, run where `Sink::fast`
                        // (the CPU has it).
                        unsafe { put_inlined(plane, &mut self.block, x, y) };
                        continue;
                    }
                    8 => put::<8>(plane, &mut self.block, x, y, self.idct),
                    4 => put::<4>(plane, &mut self.block, x, y, self.idct),
                    _ => put::<2>(plane, &mut self.block, x, y, self.idct),
                }
            }
            self.block.0 = [0; 64];
        }
        Some(())
    }
}

/// [`put`] at scale 1 through [`islow::idct`] (the block left zero), inlined into the loops
/// compiled for AVX2.
///
/// # Safety
///
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn put_inlined(plane: &Plane, block: &mut Block, x: usize, y: usize) {
    if x >= plane.width || y >= plane.height {
        block.0 = [0; 64];
        return;
    }
    let (w, h) = ((plane.width - x).min(8), (plane.height - y).min(8));
    if w == 8 && h == 8 {
        // SAFETY: AVX2 (this function's contract); rows y..y + 8 and columns x..x + 8 lie inside
        // the plane (checked just above), which lies inside the output buffer (`Sink::new`
        // checked it against `buf`), apart from the block and the table.
        unsafe { islow::idct(&plane.quant.0, &mut block.0, plane.at.add(y * plane.width + x), plane.width) };
        return;
    }
    let mut scratch = [0u8; 64];
    // SAFETY: AVX2; the scratch block's 8 rows of 8 bytes.
    unsafe { islow::idct(&plane.quant.0, &mut block.0, scratch.as_mut_ptr(), 8) };
    for (i, row) in scratch.chunks_exact(8).enumerate().take(h) {
        // SAFETY: row y + i, columns x..x + w, lie inside the plane (w and h clipped to it).
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), plane.at.add((y + i) * plane.width + x), w) };
    }
}

fn decode(
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    denom: u32,
    buf: &mut [u8],
    geometry: &[(usize, u32, u32)],
) -> Option<()> {
    let mut sink = Sink::new(header, (header.width, header.height), denom, buf, geometry)?;
    let mcus_across = u64::from(header.width.div_ceil(header.mcu_size()?.0));
    #[cfg(target_arch = "x86_64")]
    if sink.fast() {
        // SAFETY: `Sink::fast` says the CPU has AVX2, BMI1, BMI2 and LZCNT.
        return unsafe { scan_fast(&mut sink, header, layout, scan, mcus_across) };
    }
    scan_mcus::<false>(&mut sink, header, layout, scan, mcus_across)
}

/// [`scan_mcus`] compiled for AVX2, BMI1, BMI2 and LZCNT: the Huffman decoder's shifts without
/// flags (`shlx`, `shrx`) and the scale-1 IDCT inlined ([`islow`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
fn scan_fast(
    sink: &mut Sink<'_>,
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    mcus_across: u64,
) -> Option<()> {
    scan_mcus::<true>(sink, header, layout, scan, mcus_across)
}

/// Every MCU of `scan` into `sink`, an interval at a time.
#[inline(always)]
fn scan_mcus<const FAST: bool>(
    sink: &mut Sink<'_>,
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    mcus_across: u64,
) -> Option<()> {
    let per_interval = if header.interval == 0 { layout.mcus } else { u64::from(header.interval) };
    let (mut start, mut mcu) = (0usize, 0u64);
    for &end in &scan.ends {
        let end_bits = end * 8;
        let mut r = Reader::at(&scan.bytes, start);
        let mut pred = [0i32; 4];
        let last = (mcu + per_interval).min(layout.mcus);
        while mcu < last {
            sink.mcu::<FAST>(&mut r, &mut pred, (mcu % mcus_across) as u32, (mcu / mcus_across) as u32)?;
            if r.pos() > end_bits {
                return None;
            }
            mcu += 1;
        }
        // As the entropy pass: the interval's data ends within its last byte.
        if end_bits - r.pos() >= 8 {
            return None;
        }
        start = end;
    }
    (mcu == layout.mcus).then_some(())
}

/// The inverse DCT of `block` into `plane` at pixel `(x, y)` (inside the plane): a block of
/// `PX` pixels square (`plane.px`), through a scratch block where the plane ends within it.
#[inline(always)]
fn put<const PX: usize>(plane: &Plane, block: &mut Block, x: usize, y: usize, idct: idct::Idct) {
    if x >= plane.width || y >= plane.height {
        return;
    }
    let px = PX;
    let (w, h) = ((plane.width - x).min(px), (plane.height - y).min(px));
    if w == px && h == px {
        let mut rows: [*mut u8; 8] = [std::ptr::null_mut(); 8];
        for (i, row) in rows.iter_mut().enumerate().take(px) {
            // SAFETY: rows y..y + px and columns x..x + px lie inside the plane (checked just
            // above), which lies inside the output buffer (`Sink::new` checked it against `buf`).
            *row = unsafe { plane.at.add((y + i) * plane.width + x) };
        }
        // SAFETY: the block and the table are 64 aligned `i16`s; the IDCT for this scale
        // writes px rows of px bytes, each from its pointer (above, px of the 8), and no other
        // reference to them is live.
        unsafe {
            idct(
                &plane.quant.0 as *const i16 as *mut std::ffi::c_void,
                block.0.as_mut_ptr(),
                rows.as_mut_ptr(),
                0,
            )
        };
        return;
    }
    let mut scratch = [[0u8; 8]; 8];
    let mut rows: [*mut u8; 8] = std::array::from_fn(|i| scratch[i].as_mut_ptr());
    // SAFETY: as above, into the scratch block's 8 rows of 8 bytes (px of each written).
    unsafe {
        idct(
            &plane.quant.0 as *const i16 as *mut std::ffi::c_void,
            block.0.as_mut_ptr(),
            rows.as_mut_ptr(),
            0,
        )
    };
    for (i, row) in scratch.iter().enumerate().take(h) {
        // SAFETY: row y + i, columns x..x + w, lie inside the plane (w and h clipped to it).
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), plane.at.add((y + i) * plane.width + x), w) };
    }
}

impl Decoder {
    /// Reads the AC codes of one block into `block` (natural order; the block zero but for its
    /// DC) to its EOB or its 63rd coefficient, as libjpeg's `decode_mcu` stores them; gives the
    /// position reached as [`Decoder::skip_block`] does (above 64: a run past the block, which
    /// the caller declines; `block` may then hold values at other positions). On a local copy
    /// of the reader.
    #[inline(always)]
    fn coefficients(&self, r: &mut Reader<'_>, block: &mut [i16; 64]) -> Option<u32> {
        let values = self.values()?;
        // The reader's state in locals, so that it stays in registers.
        let bytes = r.bytes;
        let (mut acc, mut n, mut next) = (r.acc, r.n, r.next);
        macro_rules! refill {
            () => {
                acc |= be_word(bytes, next) >> n;
                next += ((63 - n) >> 3) as usize;
                n |= 56;
            };
        }
        let mut k = 1u32;
        'block: loop {
            // One refill for two codes: a code and its bits within the lookup take at most
            // VALUE_BITS of the 56 or more; a longer one refills first.
            refill!();
            for _ in 0..2 {
                let e = values[(acc >> (64 - VALUE_BITS)) as usize];
                if e & (value::END | value::SLOW) == 0 {
                    // A run/size code and its coefficient's bits (a shift by `e` takes its low
                    // six bits: the bits, bit 5 clear). The value lands at position k - 1 (0 for
                    // a ZRL, on a coefficient still 0); a run past the block is the caller's to
                    // decline (k above 64), the position written then being any.
                    acc = acc.wrapping_shl(e);
                    n -= e & value::BITS;
                    k += (e >> value::ADVANCE) & 0xFF;
                    block[usize::from(NATURAL_AT[k as usize & 127])] = (e >> value::VALUE) as i16;
                } else if e & value::SLOW == 0 {
                    // The end of the block.
                    acc <<= e & value::BITS;
                    n -= e & value::BITS;
                    break 'block;
                } else {
                    // A code longer than the lookup, or whose bits reach past it: up to 31 bits.
                    refill!();
                    let (len, rs) = self.decode(acc)?;
                    acc <<= len;
                    n -= len;
                    let (run, size) = (u32::from(rs >> 4), u32::from(rs & 15));
                    if size == 0 {
                        if run != 15 {
                            break 'block;
                        }
                        k += 16;
                    } else {
                        k += run + 1;
                        let bits = acc >> (64 - size);
                        acc <<= size;
                        n -= size;
                        block[usize::from(NATURAL_AT[k as usize & 127])] = extend(bits, size) as i16;
                    }
                }
                if k >= 64 {
                    break 'block;
                }
            }
        }
        (r.acc, r.n, r.next) = (acc, n, next);
        Some(k)
    }
}

/// libjpeg-turbo's SIMD inverse DCTs, called as its `jsimd_idct_islow` (scale 1),
/// `jsimd_idct_4x4` (1/2) and `jsimd_idct_2x2` (1/4) call them.
#[cfg(target_arch = "x86_64")]
mod idct {
    use std::ffi::{c_int, c_void};
    use std::sync::OnceLock;

    /// `jsimd_idct_islow_avx2` / `_sse2`, `jsimd_idct_4x4_sse2`, `jsimd_idct_2x2_sse2`:
    /// `(dct_table, coef_block, output_buf, output_col)`; they write 8, 4 or 2 rows of as many
    /// bytes.
    pub type Idct = unsafe extern "C" fn(*mut c_void, *mut i16, *mut *mut u8, u32);

    extern "C" {
        // In the libjpeg-turbo that turbojpeg-sys builds and links statically (with SIMD,
        // the `require-simd` feature).
        fn jsimd_can_idct_islow() -> c_int;
        fn jsimd_can_idct_4x4() -> c_int;
        fn jsimd_can_idct_2x2() -> c_int;
        fn jsimd_idct_islow_avx2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
        fn jsimd_idct_islow_sse2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
        fn jsimd_idct_4x4_sse2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
        fn jsimd_idct_2x2_sse2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
    }

    /// What libjpeg-turbo uses on this CPU: its IDCT at each scale, and whether the one at
    /// scale 1 is `jsimd_idct_islow_avx2` on a CPU that also has BMI1, BMI2 and LZCNT.
    struct Chosen {
        by_scale: [Option<Idct>; 3],
        inlined: bool,
    }

    fn chosen() -> &'static Chosen {
        static CHOSEN: OnceLock<Chosen> = OnceLock::new();
        CHOSEN.get_or_init(|| {
            // SAFETY: queries without arguments; they read the CPU's features and libjpeg-turbo's
            // JSIMD_* environment variables once.
            let can = unsafe { [jsimd_can_idct_islow(), jsimd_can_idct_4x4(), jsimd_can_idct_2x2()] };
            // As libjpeg-turbo's `init_simd`: AVX2 where the CPU (and OS) have it, unless
            // JSIMD_FORCESSE2=1 takes it away.
            let forced_sse2 = std::env::var("JSIMD_FORCESSE2").is_ok_and(|v| v == "1");
            let avx2 = std::is_x86_feature_detected!("avx2") && !forced_sse2;
            let islow = if avx2 { jsimd_idct_islow_avx2 as Idct } else { jsimd_idct_islow_sse2 as Idct };
            let by_scale = [islow, jsimd_idct_4x4_sse2 as Idct, jsimd_idct_2x2_sse2 as Idct];
            let bmi = std::is_x86_feature_detected!("bmi1")
                && std::is_x86_feature_detected!("bmi2")
                && std::is_x86_feature_detected!("lzcnt");
            Chosen {
                by_scale: std::array::from_fn(|i| (can[i] != 0).then_some(by_scale[i])),
                inlined: avx2 && can[0] != 0 && bmi,
            }
        })
    }

    /// Whether the planes decoder runs compiled for AVX2 and BMI2, with the scale-1 IDCT
    /// inlined ([`super::islow`], libjpeg-turbo's AVX2 one ported): where libjpeg-turbo's IDCT
    /// at scale 1 is `jsimd_idct_islow_avx2` (so the port gives its bytes) and the CPU has BMI1,
    /// BMI2 and LZCNT too.
    pub fn inlined() -> bool {
        chosen().inlined
    }

    /// The IDCT libjpeg-turbo uses on this CPU at scale 1/`denom` (its `jddctmgr.c`: the SIMD
    /// one where `jsimd_can_idct_*` says so), or `None` where it would use a C one, or at
    /// another scale.
    pub fn select(denom: u32) -> Option<Idct> {
        let chosen = &chosen().by_scale;
        match denom {
            1 => chosen[0],
            2 => chosen[1],
            4 => chosen[2],
            _ => None,
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod idct {
    pub type Idct = unsafe extern "C" fn(*mut std::ffi::c_void, *mut i16, *mut *mut u8, u32);

    /// Elsewhere libjpeg-turbo decodes (its SIMD IDCT for this architecture is not wired here).
    pub fn select(_denom: u32) -> Option<Idct> {
        None
    }

    pub fn inlined() -> bool {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod islow;
#[cfg(test)]
mod tests;
