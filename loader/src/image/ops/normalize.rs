//! FFCV's `NormalizeImage(mean, std, type)`: what it computes, as a lookup table per channel
//! and pixel value (the kernels that write it are in `crate::image::normalize`).

use crate::decode::ElemType;

/// Float type of [`NormalizeImage`]'s output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatType {
    /// `f32`.
    F32,
    /// IEEE half (`f16`), rounded to nearest even.
    F16,
}

/// Memory layout of [`NormalizeImage`]'s output, per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[3, h, w]` (PyTorch's default).
    Chw,
    /// `[h, w, 3]` (channels last, what FFCV's `ToTorchImage(channels_last=True)` hands out).
    Hwc,
}

/// FFCV's `NormalizeImage(mean, std, type)`: `(x − mean) / std` per channel, with `mean` and
/// `std` in pixel units (0–255, e.g. ImageNet's `[0.485, 0.456, 0.406] · 255`).
#[derive(Debug, Clone, Copy)]
pub struct NormalizeImage {
    /// Per-channel mean, pixel units.
    pub mean: [f32; 3],
    /// Per-channel standard deviation, pixel units.
    pub std: [f32; 3],
    /// Output float type.
    pub dtype: FloatType,
    /// Output layout.
    pub layout: Layout,
}

impl NormalizeImage {
    /// `(x − mean) / std` to `f32`, CHW.
    pub fn new(mean: [f32; 3], std: [f32; 3]) -> Self {
        NormalizeImage { mean, std, dtype: FloatType::F32, layout: Layout::Chw }
    }

    /// ImageNet's mean and std (FFCV's examples' `IMAGENET_MEAN`, `IMAGENET_STD` × 255).
    pub fn imagenet() -> Self {
        Self::new(
            [0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
            [0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
        )
    }

    /// Sets the output float type.
    pub fn dtype(mut self, dtype: FloatType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Sets the output layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    pub(crate) fn elem(&self) -> ElemType {
        match self.dtype {
            FloatType::F32 => ElemType::F32,
            FloatType::F16 => ElemType::F16,
        }
    }

    /// `1 / std` per channel when `(v − mean) · (1 / std)` gives exactly the output value of
    /// `(v − mean) / std` for every pixel value `v` and channel (bit for bit in `f32`; after
    /// rounding for `f16`, where a last-bit difference in `f32` rarely survives): a multiply then
    /// replaces the division, which costs about ten times as much. `None` otherwise.
    pub(crate) fn reciprocals(&self) -> Option<[f32; 3]> {
        let inv = self.std.map(|s| 1.0 / s);
        let exact = (0..3).all(|c| {
            (0..256).all(|v| {
                let x = v as f32 - self.mean[c];
                let (div, mul) = (x / self.std[c], x * inv[c]);
                match self.dtype {
                    FloatType::F32 => div.to_bits() == mul.to_bits(),
                    FloatType::F16 => f32_to_f16(div) == f32_to_f16(mul),
                }
            })
        });
        exact.then_some(inv)
    }

    /// The little-endian bytes of the output value for each channel and pixel value.
    pub(crate) fn table(&self) -> Table {
        let mut t = [[[0u8; 4]; 256]; 3];
        for (c, row) in t.iter_mut().enumerate() {
            for (v, cell) in row.iter_mut().enumerate() {
                let x = (v as f32 - self.mean[c]) / self.std[c];
                *cell = match self.dtype {
                    FloatType::F32 => x.to_le_bytes(),
                    FloatType::F16 => {
                        let [a, b] = f32_to_f16(x).to_le_bytes();
                        [a, b, 0, 0]
                    }
                };
            }
        }
        t
    }
}

/// Output bytes (little-endian, `f16` in the first two) per channel and pixel value.
pub(crate) type Table = [[[u8; 4]; 256]; 3];

/// `f32` to IEEE half, round to nearest even; overflow to infinity, NaN stays NaN.
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let round = |v: u32, shift: u32| {
        let (q, rem, half) = (v >> shift, v & ((1 << shift) - 1), 1 << (shift - 1));
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: units of 2^-24.
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    // A mantissa carry rounds up into the exponent (and to infinity past 65504), as it should.
    sign | round(((e as u32) << 23) | man, 13) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounds_to_nearest_even() {
        let cases: [(f32, u16); 12] = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (1e9, 0x7c00),
            (0.1, 0x2e66),
            (6.103_515_6e-5, 0x0400),
            (5.960_464_5e-8, 0x0001),
            (2.0e-8, 0x0000),
            (1.0 + 1.0 / 2048.0, 0x3c00), // halfway: to even
        ];
        for (x, want) in cases {
            assert_eq!(f32_to_f16(x), want, "{x}");
        }
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(f32_to_f16(f32::NAN) & 0x7e00, 0x7e00);
    }
}
