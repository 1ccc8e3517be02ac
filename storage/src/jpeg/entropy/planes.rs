//! A baseline JPEG decoded to its raw planes by beton: the entropy pass's reader producing each
//! block's coefficients, and libjpeg-turbo's own SIMD inverse DCT on them — the planes
//! `tj3DecompressToYUVPlanes8` gives, byte for byte, at less cost.
//!
//! libjpeg-turbo's Huffman decoder reads one code a lookup and, for a JPEG with restart markers
//! (what beton writes), takes its slower path for every block; it was a third of the writer's
//! time and of the loader's. Here a block's codes are read with a lookup that gives a code, its
//! coefficient's bits and the coefficient's value at once (most codes of a photo fit in
//! [`LOOKUP_BITS`]), the block is handed to `jsimd_idct_islow_avx2` (or `_sse2`: the one
//! libjpeg-turbo itself would pick on this CPU) with the component's quantisation table, and
//! the IDCT writes straight into the plane. So the pixels are libjpeg-turbo's exactly: the same
//! coefficients (libjpeg's `decode_mcu`: the DC prediction kept as an `int`, each value stored
//! as a `JCOEF`) through the same IDCT code, with libjpeg-turbo's SIMD-specific arithmetic
//! (16-bit products) included. The tests hold it byte for byte against libjpeg-turbo on photos,
//! noise, every subsampling and odd sizes, and extreme quantisation tables.
//!
//! It takes what the entropy pass takes ([`super::check_with_restarts`]: a JPEG libjpeg-turbo
//! decodes without a warning), at scale 1, uncropped, on x86-64 where libjpeg-turbo has its
//! SIMD IDCT (`jsimd_can_idct_islow`, which honours `JSIMD_FORCENONE`). Anything else is
//! `None` and the caller runs libjpeg-turbo, which gives the verdict and the message.

use std::cell::Cell;

use super::{
    be_word, dc_code, extend, spare_table, Decoder, Header, Layout, Reader, Table, Unstuffed, LOOKUP_BITS,
    NATURAL,
};

/// Decodes the baseline JPEG `data` into its planes in `buf`: plane `c` at
/// `geometry[c] = (offset, width, height)`, rows of `width` bytes, as
/// `tj3DecompressToYUVPlanes8` writes them at scale 1 (a plane's pixels beyond the image but
/// within its component's blocks included). `None`: not a JPEG this decoder takes (see the
/// [module docs](self)), a plane its component's blocks do not cover, or a buffer too small;
/// `buf` may then have been written in part.
pub fn decode_planes(data: &[u8], buf: &mut [u8], geometry: &[(usize, u32, u32)]) -> Option<()> {
    let idct = idct::select()?;
    thread_local! {
        /// The unstuffed scan, kept between JPEGs.
        static SCAN: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    }
    let header = Header::parse(data)?;
    let layout = Layout::of(&header)?;
    let scan = Unstuffed::reusing(data.get(header.data_at..)?, &layout, header.interval, SCAN.take())?;
    let out = decode(&header, &layout, &scan, buf, geometry, idct);
    if scan.bytes.capacity() <= KEPT_BYTES {
        SCAN.set(scan.bytes);
    }
    out
}

/// Most bytes of scan kept for the next JPEG.
const KEPT_BYTES: usize = 16 << 20;

/// A coefficient block as libjpeg-turbo's SIMD IDCT reads it (aligned for its loads).
#[repr(C, align(32))]
struct Block([i16; 64]);

/// A component's plane: where it is in the output, its size, its quantisation table, and how
/// many of its blocks hold image data (libjpeg decodes no others).
struct Plane {
    at: *mut u8,
    width: usize,
    height: usize,
    quant: Block,
    blocks: (u32, u32),
}

/// One block of an MCU: its component and where it lies in the component's MCU cell.
#[derive(Clone, Copy)]
struct Slot {
    comp: usize,
    dx: u32,
    dy: u32,
}

fn decode(
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    buf: &mut [u8],
    geometry: &[(usize, u32, u32)],
    idct: idct::Idct,
) -> Option<()> {
    let comps = &header.components;
    if comps.len() != geometry.len() {
        return None;
    }
    let single = comps.len() == 1;
    let hmax = comps.iter().map(|c| c.h).max()?;
    let vmax = comps.iter().map(|c| c.v).max()?;
    let (width, height) = (u64::from(header.width), u64::from(header.height));
    // Every plane's pointer from this one (a reborrow of `buf` per plane would end the last's).
    let base = buf.as_mut_ptr();
    let mut planes = Vec::with_capacity(comps.len());
    for (c, &(offset, pw, ph)) in comps.iter().zip(geometry) {
        // libjpeg's width_in_blocks / height_in_blocks.
        let across = (width * u64::from(c.h)).div_ceil(u64::from(hmax) * 8);
        let down = (height * u64::from(c.v)).div_ceil(u64::from(vmax) * 8);
        let (pw, ph) = (pw as usize, ph as usize);
        if pw == 0 || ph == 0 || pw as u64 > across * 8 || ph as u64 > down * 8 {
            return None;
        }
        if offset.checked_add(pw.checked_mul(ph)?)? > buf.len() {
            return None;
        }
        let table = header.quant[c.q].as_ref()?;
        // libjpeg-turbo's ISLOW_MULT_TYPE is a `short` with SIMD: a 16-bit value as it is cast.
        let quant = Block(std::array::from_fn(|i| table[i] as i16));
        let blocks = (u32::try_from(across).ok()?, u32::try_from(down).ok()?);
        planes.push(Plane { at: base.wrapping_add(offset), width: pw, height: ph, quant, blocks });
    }
    // The planes must not overlap: each is written through its own pointer.
    let mut spans: Vec<_> = geometry.iter().map(|&(o, w, h)| (o, o + w as usize * h as usize)).collect();
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    let slots: Vec<Slot> = if single {
        vec![Slot { comp: 0, dx: 0, dy: 0 }]
    } else {
        comps
            .iter()
            .enumerate()
            .flat_map(|(i, c)| (0..c.v).flat_map(move |dy| (0..c.h).map(move |dx| Slot { comp: i, dx, dy })))
            .collect()
    };
    // MCUs across: a one-component scan's MCU is one block of it.
    let mcus_across =
        if single { planes[0].blocks.0 } else { u32::try_from(width.div_ceil(u64::from(hmax) * 8)).ok()? };
    let dc: Vec<_> =
        comps.iter().map(|c| Decoder::cached(header.dc[c.dc].as_ref()?, true)).collect::<Option<_>>()?;
    let ac: Vec<_> =
        comps.iter().map(|c| Decoder::cached(header.ac[c.ac].as_ref()?, false)).collect::<Option<_>>()?;
    let per_interval = if header.interval == 0 { layout.mcus } else { u64::from(header.interval) };
    let mut pred = vec![0i32; comps.len()];
    let mut block = Block([0; 64]);
    let (mut start, mut mcu) = (0usize, 0u64);
    for &end in &scan.ends {
        let end_bits = end * 8;
        let mut r = Reader::at(&scan.bytes, start);
        pred.iter_mut().for_each(|p| *p = 0);
        let last = (mcu + per_interval).min(layout.mcus);
        while mcu < last {
            let (mx, my) = ((mcu % u64::from(mcus_across)) as u32, (mcu / u64::from(mcus_across)) as u32);
            for slot in &slots {
                let c = slot.comp;
                let (s, bits) = dc_code(&dc[c], &mut r)?;
                pred[c] = pred[c].wrapping_add(extend(bits, s));
                // libjpeg: `(*block)[0] = (JCOEF) s`.
                block.0[0] = pred[c] as i16;
                if ac[c].coefficients(&mut r, &mut block.0)? > 64 {
                    return None;
                }
                let plane = &planes[c];
                let (bx, by) = if single {
                    (mx, my)
                } else {
                    let comp = &comps[c];
                    (mx * comp.h + slot.dx, my * comp.v + slot.dy)
                };
                if bx < plane.blocks.0 && by < plane.blocks.1 {
                    put(plane, &mut block, bx as usize * 8, by as usize * 8, idct);
                }
                block.0 = [0; 64];
            }
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

/// The inverse DCT of `block` into `plane` at pixel `(x, y)` (inside the plane), through a
/// scratch block where the plane ends within it.
#[inline(always)]
fn put(plane: &Plane, block: &mut Block, x: usize, y: usize, idct: idct::Idct) {
    if x >= plane.width || y >= plane.height {
        return;
    }
    let (w, h) = ((plane.width - x).min(8), (plane.height - y).min(8));
    if w == 8 && h == 8 {
        let mut rows: [*mut u8; 8] = [std::ptr::null_mut(); 8];
        for (i, row) in rows.iter_mut().enumerate() {
            // SAFETY: rows y..y + 8 and columns x..x + 8 lie inside the plane (checked just
            // above), which lies inside the output buffer (`decode` took it from `buf`).
            *row = unsafe { plane.at.add((y + i) * plane.width + x) };
        }
        // SAFETY: the block and the table are 64 aligned `i16`s; each of the 8 rows has 8
        // writable bytes from its pointer (above), and no other reference to them is live.
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
    // SAFETY: as above, into the scratch block's 8 rows of 8 bytes.
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
    /// this decoder declines). On a local copy of the reader.
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
            // LOOKUP_BITS of the 56 or more; a longer one refills first.
            refill!();
            for _ in 0..2 {
                let e = values[(acc >> (64 - LOOKUP_BITS)) as usize];
                if e != 0 {
                    let bits = e & value::BITS;
                    acc <<= bits;
                    n -= bits;
                    if e & value::END != 0 {
                        break 'block;
                    }
                    k += (e >> value::ADVANCE) & 31;
                    if k > 64 {
                        return None;
                    }
                    // The value lands at position k - 1 (0 for a ZRL, on a coefficient still 0).
                    block[usize::from(NATURAL[(k - 1) as usize & 63])] = (e >> value::VALUE) as i16;
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
                        if k > 64 {
                            return None;
                        }
                        let bits = acc >> (64 - size);
                        acc <<= size;
                        n -= size;
                        block[usize::from(NATURAL[(k - 1) as usize & 63])] = extend(bits, size) as i16;
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

/// An AC table's one-lookup decode of the next [`LOOKUP_BITS`] bits, packed in a `u32`: bits
/// 0–4 the bits taken (code and coefficient bits); bit 5: the code ends the block (EOB, or a
/// run/size with size 0 other than ZRL); 8–12: the positions moved (run + 1, or 16 for ZRL);
/// 16–31: the coefficient's value. 0: the code and its bits do not fit in the lookup.
pub(super) mod value {
    pub const BITS: u32 = 31;
    pub const END: u32 = 1 << 5;
    pub const ADVANCE: u32 = 8;
    pub const VALUE: u32 = 16;
}

/// The one-lookup values of an AC table (see [`value`]) from its one-code lookup, filled a
/// code (and a coefficient value) at a time: a JPEG with tables of its own builds them for each
/// image.
pub(super) fn ac_values(fast: &[(u8, u8); 1 << LOOKUP_BITS]) -> Table {
    let mut values = spare_table();
    let mut i = 0usize;
    while i < 1 << LOOKUP_BITS {
        let (len, rs) = fast[i];
        let len = u32::from(len);
        if len == 0 {
            // Not a code of at most LOOKUP_BITS bits.
            values[i] = 0;
            i += 1;
            continue;
        }
        let span = 1usize << (LOOKUP_BITS - len);
        let (run, size) = (u32::from(rs >> 4), u32::from(rs & 15));
        let code = &mut values[i..i + span];
        match (run, size) {
            (15, 0) => code.fill(len | (16 << value::ADVANCE)),
            (_, 0) => code.fill(len | value::END),
            _ if len + size <= LOOKUP_BITS => {
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
            _ => code.fill(0),
        }
        i += span;
    }
    values
}

/// libjpeg-turbo's SIMD inverse DCT, called as its `jsimd_idct_islow` calls it.
#[cfg(target_arch = "x86_64")]
mod idct {
    use std::ffi::{c_int, c_void};
    use std::sync::OnceLock;

    /// `jsimd_idct_islow_avx2` / `_sse2`: `(dct_table, coef_block, output_buf, output_col)`.
    pub type Idct = unsafe extern "C" fn(*mut c_void, *mut i16, *mut *mut u8, u32);

    extern "C" {
        // In the libjpeg-turbo that turbojpeg-sys builds and links statically (with SIMD,
        // the `require-simd` feature).
        fn jsimd_can_idct_islow() -> c_int;
        fn jsimd_idct_islow_avx2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
        fn jsimd_idct_islow_sse2(dct_table: *mut c_void, coef: *mut i16, rows: *mut *mut u8, col: u32);
    }

    /// The IDCT libjpeg-turbo uses on this CPU, or `None` where it would use its C one.
    pub fn select() -> Option<Idct> {
        static CHOSEN: OnceLock<Option<Idct>> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            // SAFETY: a query without arguments; it reads the CPU's features and libjpeg-turbo's
            // JSIMD_* environment variables once.
            if unsafe { jsimd_can_idct_islow() } == 0 {
                return None;
            }
            // As libjpeg-turbo's `init_simd`: AVX2 where the CPU (and OS) have it, unless
            // JSIMD_FORCESSE2=1 takes it away.
            let forced_sse2 = std::env::var("JSIMD_FORCESSE2").is_ok_and(|v| v == "1");
            if std::is_x86_feature_detected!("avx2") && !forced_sse2 {
                Some(jsimd_idct_islow_avx2 as Idct)
            } else {
                Some(jsimd_idct_islow_sse2 as Idct)
            }
        })
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod idct {
    pub type Idct = unsafe extern "C" fn(*mut std::ffi::c_void, *mut i16, *mut *mut u8, u32);

    /// Elsewhere libjpeg-turbo decodes (its SIMD IDCT for this architecture is not wired here).
    pub fn select() -> Option<Idct> {
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::test_runner::{RngAlgorithm, TestRng};

    use super::super::tests::{damage, jpeg, picture};
    use super::*;
    use crate::jpeg::{compress, plane_size, with_restarts, Decompressor, JpegColor};

    /// The planes of `data` by beton's decoder (`None`: declined) and by libjpeg-turbo.
    fn both(data: &[u8]) -> (Option<Vec<u8>>, crate::Result<Vec<u8>>) {
        let mut d = Decompressor::new().unwrap();
        let h = match d.header(data) {
            Ok(h) => h,
            Err(e) => return (None, Err(e)),
        };
        let count = if h.color == JpegColor::Grey { 1 } else { 3 };
        let mut geometry = Vec::new();
        let mut total = 0;
        for c in 0..count {
            let (pw, ph) = plane_size(c, (h.width, h.height), h.subsampling);
            geometry.push((total, pw, ph));
            total += (pw * ph) as usize;
        }
        // Filled with a value, so that a pixel the decoder left unwritten shows.
        let mut ours = vec![0xA5; total];
        let ours = decode_planes(data, &mut ours, &geometry).map(|()| ours);
        d.set_own_planes(false);
        let mut theirs = vec![0x5A; total];
        let theirs = d.decompress_planes(data, &mut theirs, &geometry).map(|()| theirs);
        (ours, theirs)
    }

    /// Taken, and libjpeg-turbo's planes byte for byte.
    fn same(name: &str, data: &[u8]) {
        let (ours, theirs) = both(data);
        let theirs = theirs.unwrap_or_else(|e| panic!("{name}: libjpeg-turbo says {e}"));
        let ours = ours.unwrap_or_else(|| panic!("{name}: declined"));
        if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
            panic!("{name}: byte {at} of {}: {} vs libjpeg-turbo's {}", ours.len(), ours[at], theirs[at]);
        }
    }

    #[test]
    fn every_subsampling_size_quality_and_interval_decodes_as_libjpeg_turbo_decodes() {
        use turbojpeg::Subsamp::*;
        let sizes = [(1, 1), (8, 8), (17, 9), (33, 47), (250, 3), (3, 250), (160, 120), (301, 77)];
        let mut compared = 0;
        for (k, &(w, h)) in sizes.iter().enumerate() {
            for subsamp in [None, Sub2x1, Sub2x2, Sub1x2, Sub4x1, Sub1x4, Gray] {
                for quality in [1, 40, 90, 100] {
                    let src = jpeg(w, h, subsamp, quality, k as u64);
                    let name = format!("{w}x{h} {subsamp:?} q{quality}");
                    same(&name, &src);
                    // With restart markers (libjpeg-turbo's own slow Huffman path).
                    for interval in [1, 3] {
                        let Some(super::super::Checked::Rewritten(rst)) =
                            super::super::check_with_restarts(&src, interval)
                        else {
                            panic!("{name}: not rewritten at {interval}");
                        };
                        same(&format!("{name}, a restart every {interval}"), &rst);
                    }
                    compared += 3;
                }
            }
        }
        assert!(compared > 600, "{compared}");
        // The writer's own JPEGs: optimised tables, a restart marker per MCU.
        for (w, h) in [(64, 48), (17, 9), (1, 1)] {
            same("writer, colour", &compress(&picture(w, h, 3, 9), (w, h, 3), 90, 1).unwrap());
            same("writer, grey", &compress(&picture(w, h, 1, 9), (w, h, 1), 75, 1).unwrap());
        }
    }

    /// `data` with every quantisation table written again at 16-bit precision, each value
    /// multiplied by `factor` (at most 65535): dequantised coefficients far past 16 bits, where
    /// libjpeg-turbo's SIMD IDCT (16-bit products) and its C one part ways.
    fn wide_tables(data: &[u8], factor: u32) -> Vec<u8> {
        let mut out = data[..2].to_vec();
        let mut pos = 2;
        loop {
            let (marker, len) =
                (data[pos + 1], usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]])));
            let seg = &data[pos + 4..pos + 2 + len];
            if marker == 0xDB {
                let mut body = Vec::new();
                for table in seg.chunks_exact(65) {
                    body.push(0x10 | table[0] & 15);
                    for &v in &table[1..] {
                        body.extend_from_slice(&((u32::from(v) * factor).min(65535) as u16).to_be_bytes());
                    }
                }
                out.extend_from_slice(&[0xFF, 0xDB]);
                out.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
                out.extend_from_slice(&body);
            } else {
                out.extend_from_slice(&data[pos..pos + 2 + len]);
            }
            pos += 2 + len;
            if marker == 0xDA {
                out.extend_from_slice(&data[pos..]);
                return out;
            }
        }
    }

    #[test]
    fn extreme_quantisation_tables_give_libjpeg_turbos_simd_pixels() {
        use turbojpeg::Subsamp::*;
        let mut changed = 0;
        for (k, subsamp) in [Sub2x2, None, Gray].into_iter().enumerate() {
            for quality in [1, 50, 100] {
                let src = jpeg(48, 40, subsamp, quality, 20 + k as u64);
                for factor in [2, 37, 255, 4000] {
                    let wide = wide_tables(&src, factor);
                    assert!(wide.len() > src.len());
                    same(&format!("{subsamp:?} q{quality} ×{factor}"), &wide);
                    changed += usize::from(both(&wide).1.unwrap() != both(&src).1.unwrap());
                }
            }
        }
        assert!(changed > 30, "{changed}");
    }

    #[test]
    fn the_bundled_photos_and_the_edge_corpus_decode_as_libjpeg_turbo_decodes_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/imagefolder");
        let mut photos = 0;
        for class in std::fs::read_dir(root).unwrap() {
            for f in std::fs::read_dir(class.unwrap().path()).unwrap() {
                let path = f.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let name = path.display().to_string();
                // Some are progressive: declined; every baseline one decodes alike.
                match both(&data) {
                    (Some(ours), Ok(theirs)) => {
                        assert!(ours == theirs, "{name}");
                        photos += 1;
                    }
                    (Some(_), Err(e)) => panic!("{name}: taken, but libjpeg-turbo says {e}"),
                    (None, _) => {}
                }
                // The writer's passthrough rewrite of it (a restart marker per MCU).
                if let Some(super::super::Checked::Rewritten(rst)) =
                    super::super::check_with_restarts(&data, 1)
                {
                    same(&format!("{name} with restarts"), &rst);
                }
            }
        }
        assert!(photos > 100, "{photos}");
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/edge-jpegs");
        let mut taken = Vec::new();
        for f in std::fs::read_dir(corpus).unwrap() {
            let path = f.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let data = std::fs::read(&path).unwrap();
            match both(&data) {
                (Some(ours), Ok(theirs)) => {
                    assert!(ours == theirs, "{name}");
                    taken.push(name);
                }
                (Some(_), Err(e)) => panic!("{name}: taken, but libjpeg-turbo says {e}"),
                (None, _) => {}
            }
        }
        for name in [
            "baseline-420.jpg",
            "baseline-411.jpg",
            "grey.jpg",
            "odd-17x9.jpg",
            "qtables-16bit.jpg",
            "restart-3mcu.jpg",
        ] {
            assert!(taken.iter().any(|t| t == name), "{name} declined; taken: {taken:?}");
        }
    }

    #[test]
    fn damaged_scans_are_declined_or_decode_as_libjpeg_turbo_decodes_them() {
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]);
        let sources = [
            jpeg(64, 48, turbojpeg::Subsamp::Sub2x2, 90, 1),
            jpeg(40, 24, turbojpeg::Subsamp::Gray, 75, 2),
            compress(&picture(48, 32, 3, 3), (48, 32, 3), 90, 1).unwrap(),
            with_restarts(&jpeg(48, 32, turbojpeg::Subsamp::None, 60, 4), 2).unwrap(),
        ];
        let (mut taken, mut declined) = (0, 0);
        for (s, src) in sources.iter().enumerate() {
            for round in 0..1500 {
                let bad = damage(&mut rng, src);
                match both(&bad) {
                    (Some(ours), Ok(theirs)) => {
                        assert!(ours == theirs, "source {s}, damage {round}");
                        taken += 1;
                    }
                    (Some(_), Err(e)) => {
                        panic!("source {s}, damage {round}: taken, but libjpeg-turbo says {e}")
                    }
                    (None, _) => declined += 1,
                }
            }
        }
        assert!(taken > 100 && declined > 1000, "{taken} {declined}");
    }

    #[test]
    fn the_decompressor_decodes_planes_with_it() {
        // `Decompressor::decompress_planes` takes this decoder's planes (test: a plane buffer
        // too small for libjpeg-turbo's checks is not the point; the same bytes either way).
        let src = jpeg(64, 48, turbojpeg::Subsamp::Sub2x2, 90, 3);
        let (ours, theirs) = both(&src);
        assert_eq!(ours.unwrap(), theirs.unwrap());
        assert!(idct::select().is_some(), "no SIMD IDCT on this x86-64 CPU");
    }
}
