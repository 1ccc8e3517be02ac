//! The image code's one CPU-feature dispatch point: which x86-64 extensions its kernels may use,
//! detected once per process. Every kernel choice in `crate::image` asks here (there is no other
//! `is_x86_feature_detected!` in it), so what a machine runs is decided in one place, and each
//! `unsafe` kernel call's `// SAFETY:` can name the check that guards it.

use std::sync::LazyLock;

/// The extensions the kernels use.
#[derive(Debug, Clone, Copy, Default)]
struct Features {
    avx2: bool,
    fma: bool,
    f16c: bool,
    /// AVX-512 F, BW and VBMI together (the byte-table normalisation).
    avx512_vbmi: bool,
}

static FEATURES: LazyLock<Features> = LazyLock::new(detect);

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    Features {
        avx2: is_x86_feature_detected!("avx2"),
        fma: is_x86_feature_detected!("fma"),
        f16c: is_x86_feature_detected!("f16c"),
        avx512_vbmi: is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Features {
    Features::default()
}

/// AVX2.
pub(crate) fn avx2() -> bool {
    FEATURES.avx2
}

/// FMA (fused multiply-add, 256-bit).
pub(crate) fn fma() -> bool {
    FEATURES.fma
}

/// F16C (`f32` ↔ `f16` conversion).
pub(crate) fn f16c() -> bool {
    FEATURES.f16c
}

/// AVX-512 F, BW and VBMI.
pub(crate) fn avx512_vbmi() -> bool {
    FEATURES.avx512_vbmi
}
