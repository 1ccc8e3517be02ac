//! libjpeg-turbo's accurate integer inverse DCT for AVX2, `jsimd_idct_islow_avx2`
//! (`simd/x86_64/jidctint-avx2.asm`), instruction for instruction in Rust intrinsics, so that
//! the planes decoder inlines it into its block loop instead of calling it: no call, no array
//! of row pointers, the block zeroed for the next one while it is in registers. The same
//! arithmetic (16-bit dequantisation products, `vpmaddwd` pairs, the rounding and saturating
//! packs of each pass, and the shortcut of a block whose rows 1–7 are zero, which wraps where
//! the full pass would saturate), so the same bytes: the tests hold it against the assembly
//! on random, sparse and extreme blocks.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

const CONST_BITS: i32 = 13;
const PASS1_BITS: i32 = 2;
/// The descaling shift after the columns' pass and after the rows' pass.
const DESCALE_P1: i32 = CONST_BITS - PASS1_BITS;
const DESCALE_P2: i32 = CONST_BITS + PASS1_BITS + 3;

// FIX(x) at CONST_BITS 13, as jidctint-avx2.asm defines them.
const F_0_298: i16 = 2446;
const F_0_390: i16 = 3196;
const F_0_541: i16 = 4433;
const F_0_765: i16 = 6270;
const F_0_899: i16 = 7373;
const F_1_175: i16 = 9633;
const F_1_501: i16 = 12299;
const F_1_847: i16 = 15137;
const F_1_961: i16 = 16069;
const F_2_053: i16 = 16819;
const F_2_562: i16 = 20995;
const F_3_072: i16 = 25172;

/// The helpers below are `unsafe fn`s inlined always, not `#[target_feature]` ones (which
/// cannot be): each is safe to call where AVX2 is enabled, which is where [`idct`] is
/// inlined (the planes decoder's loops compiled for it), so that their intrinsics inline there.
///
/// A vector of the pair `(a, b)` four times in its low 128 bits and `(c, d)` four times in its
/// high 128 bits (the assembly's `PW_*` constants).
///
/// # Safety (this and every helper below)
///
/// The CPU has AVX2.
#[inline(always)]
unsafe fn pairs(a: i16, b: i16, c: i16, d: i16) -> __m256i {
    // SAFETY: AVX2 (the contract).
    unsafe { _mm256_setr_epi16(a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d) }
}

/// The two 128-bit halves of `x` swapped (`vperm2i128 x, x, x, 0x01`).
#[inline(always)]
unsafe fn swap(x: __m256i) -> __m256i {
    // SAFETY: AVX2 (the contract).
    unsafe { _mm256_permute2x128_si256::<0x01>(x, x) }
}

/// The low and high halves' 32-bit sums, each `(x + 2^(N-1)) >> N`, packed to 16 bits with
/// saturation.
#[inline(always)]
unsafe fn packed<const N: i32>(low: __m256i, high: __m256i) -> __m256i {
    // SAFETY: AVX2 (the contract).
    unsafe {
        let round = _mm256_set1_epi32(1 << (N - 1));
        _mm256_packs_epi32(
            _mm256_srai_epi32::<N>(_mm256_add_epi32(low, round)),
            _mm256_srai_epi32::<N>(_mm256_add_epi32(high, round)),
        )
    }
}

/// The assembly's `DODCT` on rows (or columns) `in0_4`, `in3_1`, `in2_6`, `in7_5` (two of 8
/// 16-bit values each: the first named in the low half): `[data0_1, data3_2, data4_5,
/// data7_6]`, descaled by `N`.
#[inline(always)]
unsafe fn dodct<const N: i32>(
    in0_4: __m256i,
    in3_1: __m256i,
    in2_6: __m256i,
    in7_5: __m256i,
) -> [__m256i; 4] {
    // SAFETY: AVX2 (the contract).
    unsafe {
        // Even part.
        let in6_2 = swap(in2_6);
        let even = pairs(F_0_541 + F_0_765, F_0_541, F_0_541 - F_1_847, F_0_541);
        let tmp3_2l = _mm256_madd_epi16(_mm256_unpacklo_epi16(in2_6, in6_2), even);
        let tmp3_2h = _mm256_madd_epi16(_mm256_unpackhi_epi16(in2_6, in6_2), even);
        let in4_0 = swap(in0_4);
        let signs = _mm256_setr_epi16(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
        let sum_diff = _mm256_add_epi16(in4_0, _mm256_sign_epi16(in0_4, signs));
        let zero = _mm256_setzero_si256();
        let tmp0_1l = _mm256_srai_epi32::<{ 16 - CONST_BITS }>(_mm256_unpacklo_epi16(zero, sum_diff));
        let tmp0_1h = _mm256_srai_epi32::<{ 16 - CONST_BITS }>(_mm256_unpackhi_epi16(zero, sum_diff));
        let tmp13_12l = _mm256_sub_epi32(tmp0_1l, tmp3_2l);
        let tmp10_11l = _mm256_add_epi32(tmp0_1l, tmp3_2l);
        let tmp13_12h = _mm256_sub_epi32(tmp0_1h, tmp3_2h);
        let tmp10_11h = _mm256_add_epi32(tmp0_1h, tmp3_2h);

        // Odd part.
        let z3_4 = _mm256_add_epi16(in7_5, in3_1);
        let z4_3 = swap(z3_4);
        let z = pairs(F_1_175 - F_1_961, F_1_175, F_1_175 - F_0_390, F_1_175);
        let z3_4l = _mm256_madd_epi16(_mm256_unpacklo_epi16(z3_4, z4_3), z);
        let z3_4h = _mm256_madd_epi16(_mm256_unpackhi_epi16(z3_4, z4_3), z);
        let in1_3 = swap(in3_1);
        let in71_53l = _mm256_unpacklo_epi16(in7_5, in1_3);
        let in71_53h = _mm256_unpackhi_epi16(in7_5, in1_3);
        let odd0 = pairs(F_0_298 - F_0_899, -F_0_899, F_2_053 - F_2_562, -F_2_562);
        let odd1 = pairs(-F_0_899, F_1_501 - F_0_899, -F_2_562, F_3_072 - F_2_562);
        let otmp0_1l = _mm256_add_epi32(_mm256_madd_epi16(in71_53l, odd0), z3_4l);
        let otmp0_1h = _mm256_add_epi32(_mm256_madd_epi16(in71_53h, odd0), z3_4h);
        let otmp3_2l = _mm256_add_epi32(_mm256_madd_epi16(in71_53l, odd1), swap(z3_4l));
        let otmp3_2h = _mm256_add_epi32(_mm256_madd_epi16(in71_53h, odd1), swap(z3_4h));

        // Final output stage.
        [
            packed::<N>(_mm256_add_epi32(tmp10_11l, otmp3_2l), _mm256_add_epi32(tmp10_11h, otmp3_2h)),
            packed::<N>(_mm256_add_epi32(tmp13_12l, otmp0_1l), _mm256_add_epi32(tmp13_12h, otmp0_1h)),
            packed::<N>(_mm256_sub_epi32(tmp13_12l, otmp0_1l), _mm256_sub_epi32(tmp13_12h, otmp0_1h)),
            packed::<N>(_mm256_sub_epi32(tmp10_11l, otmp3_2l), _mm256_sub_epi32(tmp10_11h, otmp3_2h)),
        ]
    }
}

/// The assembly's `DOTRANSPOSE`: `[data0_1, data3_2, data4_5, data7_6]` (as [`dodct`] gives
/// them) to `[data0_4, data1_5, data2_6, data3_7]` of the transposed block.
#[inline(always)]
unsafe fn transpose([a, b, c, d]: [__m256i; 4]) -> [__m256i; 4] {
    // SAFETY: AVX2 (the contract).
    unsafe {
        let t5 = _mm256_permute4x64_epi64::<0xD8>(a);
        let t6 = _mm256_permute4x64_epi64::<0x72>(b);
        let t7 = _mm256_permute4x64_epi64::<0xD8>(c);
        let t8 = _mm256_permute4x64_epi64::<0x72>(d);
        let a = _mm256_unpacklo_epi16(t5, t6);
        let b = _mm256_unpackhi_epi16(t5, t6);
        let c = _mm256_unpacklo_epi16(t7, t8);
        let d = _mm256_unpackhi_epi16(t7, t8);
        let t5 = _mm256_unpacklo_epi16(a, b);
        let t6 = _mm256_unpacklo_epi16(c, d);
        let t7 = _mm256_unpackhi_epi16(a, b);
        let t8 = _mm256_unpackhi_epi16(c, d);
        [
            _mm256_unpacklo_epi64(t5, t6),
            _mm256_unpackhi_epi64(t5, t6),
            _mm256_unpacklo_epi64(t7, t8),
            _mm256_unpackhi_epi64(t7, t8),
        ]
    }
}

/// The inverse DCT of `block` dequantised by `quant` (both in natural order) into 8 rows of 8
/// bytes from `out`, `stride` bytes apart, as `jsimd_idct_islow_avx2` writes them; `block` is
/// left zero.
///
/// # Safety
///
/// The CPU has AVX2 (and the caller is compiled for it, or the intrinsics are calls), and
/// `out + r * stride .. out + r * stride + 8` is valid for writes for each row `r` in `0..8`,
/// and overlaps neither `block` nor `quant`.
#[inline(always)]
pub unsafe fn idct(quant: &[i16; 64], block: &mut [i16; 64], out: *mut u8, stride: usize) {
    let c = block.as_mut_ptr().cast::<__m256i>();
    let q = quant.as_ptr().cast::<__m256i>();
    // SAFETY: AVX2 (the contract); `block` and `quant` are 128 bytes each: four 32-byte loads
    // (unaligned) of each, and four stores of zeros into `block`; the output rows as the
    // contract says, 8 bytes each.
    unsafe {
        let (rows01, rows23, rows45, rows67) = (
            _mm256_loadu_si256(c),
            _mm256_loadu_si256(c.add(1)),
            _mm256_loadu_si256(c.add(2)),
            _mm256_loadu_si256(c.add(3)),
        );
        let zero = _mm256_setzero_si256();
        for i in 0..4 {
            _mm256_storeu_si256(c.add(i), zero);
        }
        // Rows 1-7 all zero: every column's outputs of the first pass are its dequantised DC
        // shifted left by PASS1_BITS, in 16 bits (wrapping, as the assembly's `vpsllw`).
        let rest = _mm256_or_si256(_mm256_or_si256(rows23, rows45), rows67);
        let ac = _mm_or_si128(
            _mm_or_si128(_mm256_castsi256_si128(rest), _mm256_extracti128_si256::<1>(rest)),
            _mm256_extracti128_si256::<1>(rows01),
        );
        let [c0_4, c1_5, c2_6, c3_7] = if _mm_testz_si128(ac, ac) != 0 {
            let q0 = _mm_loadu_si128(q.cast::<__m128i>());
            let dc = _mm_slli_epi16::<PASS1_BITS>(_mm_mullo_epi16(_mm256_castsi256_si128(rows01), q0));
            let lo = _mm_unpacklo_epi16(dc, dc);
            let hi = _mm_unpackhi_epi16(dc, dc);
            let both = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi);
            [
                _mm256_shuffle_epi32::<0x00>(both),
                _mm256_shuffle_epi32::<0x55>(both),
                _mm256_shuffle_epi32::<0xAA>(both),
                _mm256_shuffle_epi32::<0xFF>(both),
            ]
        } else {
            let y4 = _mm256_mullo_epi16(rows01, _mm256_loadu_si256(q));
            let y5 = _mm256_mullo_epi16(rows23, _mm256_loadu_si256(q.add(1)));
            let y6 = _mm256_mullo_epi16(rows45, _mm256_loadu_si256(q.add(2)));
            let y7 = _mm256_mullo_epi16(rows67, _mm256_loadu_si256(q.add(3)));
            let in0_4 = _mm256_permute2x128_si256::<0x20>(y4, y6);
            let in3_1 = _mm256_permute2x128_si256::<0x31>(y5, y4);
            let in2_6 = _mm256_permute2x128_si256::<0x20>(y5, y7);
            let in7_5 = _mm256_permute2x128_si256::<0x31>(y7, y6);
            transpose(dodct::<DESCALE_P1>(in0_4, in3_1, in2_6, in7_5))
        };

        // Pass 2: rows.
        let in7_5 = _mm256_permute2x128_si256::<0x31>(c3_7, c1_5);
        let in3_1 = _mm256_permute2x128_si256::<0x20>(c3_7, c1_5);
        let [r0_4, r1_5, r2_6, r3_7] = transpose(dodct::<DESCALE_P2>(c0_4, in3_1, c2_6, in7_5));
        let center = _mm256_set1_epi8(-128);
        let rows01_45 = _mm256_add_epi8(_mm256_packs_epi16(r0_4, r1_5), center);
        let rows23_67 = _mm256_add_epi8(_mm256_packs_epi16(r2_6, r3_7), center);
        let halves = [
            _mm256_castsi256_si128(rows01_45),
            _mm256_castsi256_si128(rows23_67),
            _mm256_extracti128_si256::<1>(rows01_45),
            _mm256_extracti128_si256::<1>(rows23_67),
        ];
        for (i, half) in halves.into_iter().enumerate() {
            _mm_storel_epi64(out.add(2 * i * stride).cast::<__m128i>(), half);
            _mm_storeh_pd(out.add((2 * i + 1) * stride).cast::<f64>(), _mm_castsi128_pd(half));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn jsimd_idct_islow_avx2(
            dct_table: *mut std::ffi::c_void,
            coef: *mut i16,
            rows: *mut *mut u8,
            col: u32,
        );
    }

    /// The assembly's output for `block` and `quant`.
    fn reference(quant: &[i16; 64], block: &[i16; 64]) -> [[u8; 8]; 8] {
        #[repr(C, align(32))]
        struct Aligned([i16; 64]);
        let (q, mut b) = (Aligned(*quant), Aligned(*block));
        let mut out = [[0u8; 8]; 8];
        let mut rows: [*mut u8; 8] = std::array::from_fn(|i| out[i].as_mut_ptr());
        // SAFETY: 64 aligned values each; 8 rows of 8 bytes; checked for AVX2 by the caller.
        unsafe { jsimd_idct_islow_avx2(q.0.as_ptr() as *mut _, b.0.as_mut_ptr(), rows.as_mut_ptr(), 0) };
        out
    }

    /// [`idct`] compiled for AVX2, as the planes decoder's loops inline it.
    #[target_feature(enable = "avx2")]
    unsafe fn idct_avx2(quant: &[i16; 64], block: &mut [i16; 64], out: *mut u8, stride: usize) {
        // SAFETY: AVX2 (this function's own), the rows as the caller says.
        unsafe { idct(quant, block, out, stride) }
    }

    fn ours(quant: &[i16; 64], block: &[i16; 64]) -> [[u8; 8]; 8] {
        // The output rows apart, with guard bytes between them that must stay as they are.
        let mut out = [0xA5u8; 8 * 13];
        let mut b = *block;
        // SAFETY: AVX2 checked by the caller; 8 rows of 8 bytes, 13 apart, inside `out`.
        unsafe { idct_avx2(quant, &mut b, out.as_mut_ptr(), 13) };
        assert_eq!(b, [0; 64], "the block is left zero");
        for row in out.chunks_exact(13) {
            assert!(row[8..].iter().all(|&g| g == 0xA5), "a write between rows");
        }
        std::array::from_fn(|r| out[r * 13..r * 13 + 8].try_into().unwrap())
    }

    #[test]
    fn the_port_is_libjpeg_turbos_avx2_idct() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut next = beton_testkit::xorshift(0x5eed_1dc7_0000_0001);
        let mut dc_only = 0;
        for round in 0..200_000u32 {
            let shape = round % 8;
            let quant: [i16; 64] = std::array::from_fn(|_| match shape {
                // Extreme tables: up to 32767 and negative values as a `short` holds them.
                7 => next() as i16,
                6 => (1 + next() % 255) as i16,
                _ => (1 + next() % 64) as i16,
            });
            let block: [i16; 64] = std::array::from_fn(|i| {
                let r = next();
                match shape {
                    // Rows 1-7 zero (the shortcut), with DCs whose products wrap.
                    0 | 1 if i >= 8 => 0,
                    0 => (r % 4096) as i16 - 2048,
                    1 => r as i16,
                    // Sparse, as quantised photo blocks are.
                    2 | 3 if r % 5 != 0 => 0,
                    2 | 3 => (r >> 8) as i16 % 64,
                    // Any value at all.
                    4 | 7 => r as i16,
                    _ => ((r >> 8) % 512) as i16 - 256,
                }
            });
            if block[8..].iter().all(|&v| v == 0) {
                dc_only += 1;
            }
            assert_eq!(ours(&quant, &block), reference(&quant, &block), "round {round}: {quant:?} {block:?}");
        }
        assert!(dc_only > 40_000, "the shortcut was taken {dc_only} times");
    }
}
