//! The JPEGs and damage the codec's, the restart slicer's and the decoders' tests share (test
//! builds only).

use crate::image::ops::Crop;

/// A smooth `w × h` test picture as a JPEG with chroma subsampling `subsamp`.
pub(crate) fn jpeg(w: usize, h: usize, subsamp: turbojpeg::Subsamp) -> Vec<u8> {
    let pixels: Vec<u8> = (0..h)
        .flat_map(|y| {
            (0..w).flat_map(move |x| [(x * 255 / w) as u8, (y * 255 / h) as u8, ((x + y) % 256) as u8])
        })
        .collect();
    let image = turbojpeg::Image {
        pixels: pixels.as_slice(),
        width: w,
        pitch: w * 3,
        height: h,
        format: turbojpeg::PixelFormat::RGB,
    };
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_quality(95).unwrap();
    c.set_subsamp(subsamp).unwrap();
    c.compress_to_vec(image).unwrap()
}

/// Damage to a JPEG: bytes overwritten (at offsets taken modulo its length) and the length
/// it is cut short at.
pub(crate) type Damage = (Vec<(usize, u8)>, usize);

/// Up to 8 bytes overwritten and a cut, offsets below `len`: what the never-panic proptests
/// of the codec, the restart slicer and the decoders do to their JPEGs.
pub(crate) fn damage(len: usize) -> impl proptest::strategy::Strategy<Value = Damage> {
    (proptest::collection::vec((0..len, proptest::prelude::any::<u8>()), 0..8), 0..len)
}

/// `data` with `damage` done to it (cut at 2 bytes at the least).
pub(crate) fn damaged(mut data: Vec<u8>, (edits, cut): &Damage) -> Vec<u8> {
    for &(at, byte) in edits {
        let n = data.len();
        data[at % n] = byte;
    }
    data.truncate((*cut).max(2));
    data
}

/// A 120×90 JPEG (restart markers or not) with `damage` done to it: the damaged inputs of the
/// codec's and the decoders' never-panic proptests.
pub(crate) fn damaged_jpeg(damage: &Damage, restarts: bool) -> Vec<u8> {
    let data = jpeg(120, 90, turbojpeg::Subsamp::Sub2x2);
    damaged(if restarts { with_restarts(&data) } else { data }, damage)
}

/// Crops inside a `w`×`h` image: any corner, up to the rest of the image across and down.
pub(crate) fn crop_in(w: u32, h: u32) -> impl proptest::strategy::Strategy<Value = Crop> {
    use proptest::strategy::Strategy;
    (0..w, 0..h, 1..w, 1..h).prop_map(move |(x, y, cw, ch)| Crop {
        x,
        y,
        width: cw.min(w - x),
        height: ch.min(h - y),
    })
}

/// `data` rewritten losslessly with a restart marker every MCU (as beton's writer stores it).
pub(crate) fn with_restarts(data: &[u8]) -> Vec<u8> {
    beton_storage::jpeg::with_restarts(data, 1).unwrap()
}
