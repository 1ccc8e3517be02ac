//! Seek-index windows against libjpeg-turbo's lossless crop of the same MCUs: the same pixels,
//! at every subsampling, for windows anywhere (edges, partial MCUs, one MCU, every row);
//! damaged bytes never panic.

use proptest::test_runner::{RngAlgorithm, TestRng};
use turbojpeg::Subsamp;

use super::super::tests::{damage, decoded, jpeg, within};
use super::*;
use crate::jpeg::{lossless_crop, with_restarts, Decompressor, PlaneLayout, Rect};

/// The window as libjpeg-turbo crops it losslessly (the same coefficients), decoded.
fn reference(data: &[u8], index: &SeekIndex, cols: &Range<u32>, rows: &Range<u32>) -> Vec<u8> {
    let (mw, mh) = index.mcu_size();
    let header = Header::parse(data).expect("a header");
    let region = Rect {
        x: cols.start * mw,
        y: rows.start * mh,
        width: (cols.end * mw).min(header.width) - cols.start * mw,
        height: (rows.end * mh).min(header.height) - rows.start * mh,
    };
    decoded(&lossless_crop(data, region).expect("libjpeg-turbo crops it")).expect("the crop decodes")
}

/// Checks one window: a JPEG without restart markers that decodes strictly to the reference.
fn check_window(name: &str, data: &[u8], index: &SeekIndex, cols: Range<u32>, rows: Range<u32>) {
    let mut out = Vec::new();
    let size = index.window(data, cols.clone(), rows.clone(), &mut out);
    let size = size.unwrap_or_else(|| panic!("{name}: window {cols:?} x {rows:?} not written"));
    let got = decoded(&out).unwrap_or_else(|e| panic!("{name}: window {cols:?} x {rows:?}: {e}"));
    let header = Header::parse(&out).expect("the window's header");
    assert_eq!((header.width, header.height), size, "{name}");
    assert_eq!(header.interval, 0, "{name}: no restart markers");
    assert!(got == reference(data, index, &cols, &rows), "{name}: window {cols:?} x {rows:?}: pixels differ");
    // Decoded straight from the original without writing the window: libjpeg-turbo's planes of
    // the window JPEG, byte for byte, at every scale the planes decoder takes.
    let mut d = Decompressor::new().unwrap();
    let header = d.header(&out).unwrap();
    d.set_own_planes(false);
    for denom in [1, 2, 4] {
        let scaled = (size.0.div_ceil(denom), size.1.div_ceil(denom));
        let layout = PlaneLayout::of(&header, scaled).unwrap();
        d.set_geometry(denom, crate::jpeg::Rect::default()).unwrap();
        let mut want = vec![0x5A; layout.bytes];
        d.decompress_planes(&out, &mut want, layout.geometry()).unwrap();
        // By the loops compiled for AVX2 (where the CPU has it) and by the portable ones.
        for portable in [false, true] {
            let mut planes = vec![0xA5; layout.bytes];
            super::super::planes::PORTABLE.set(portable);
            let decoded =
                index.window_planes(data, cols.clone(), rows.clone(), denom, &mut planes, layout.geometry());
            super::super::planes::PORTABLE.set(false);
            let at = format!("{name}: window {cols:?} x {rows:?} at 1/{denom}, portable {portable}");
            assert_eq!(decoded, Some(size), "{at}: not decoded to planes");
            assert!(planes == want, "{at}: planes differ");
        }
    }
}

#[test]
fn windows_decode_to_the_pixels_of_a_lossless_crop_at_every_subsampling() {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]);
    let subsamplings = [Subsamp::None, Subsamp::Sub2x1, Subsamp::Sub2x2, Subsamp::Sub1x2, Subsamp::Gray];
    for (s, subsamp) in subsamplings.into_iter().enumerate() {
        // Sizes with partial MCUs on both edges, and one of a single MCU row and column.
        for (width, height) in [(203, 157), (64, 48), (17, 9), (250, 16)] {
            let data = jpeg(width, height, subsamp, 90, s as u64);
            let index = SeekIndex::build(&data).expect("indexed");
            let (mx, my) = index.mcus();
            let name = format!("{subsamp:?} {width}x{height}");
            // The whole image, every single MCU of the first and last rows and columns, and
            // random windows.
            check_window(&name, &data, &index, 0..mx, 0..my);
            for c in 0..mx {
                check_window(&name, &data, &index, c..c + 1, my - 1..my);
            }
            for r in 0..my {
                check_window(&name, &data, &index, mx - 1..mx, r..r + 1);
                check_window(&name, &data, &index, 0..1, r..my);
            }
            for _ in 0..40 {
                let c0 = within(&mut rng, 0..mx as usize) as u32;
                let c1 = within(&mut rng, c0 as usize + 1..mx as usize + 1) as u32;
                let r0 = within(&mut rng, 0..my as usize) as u32;
                let r1 = within(&mut rng, r0 as usize + 1..my as usize + 1) as u32;
                check_window(&name, &data, &index, c0..c1, r0..r1);
            }
        }
    }
}

#[test]
fn a_window_of_everything_is_the_original() {
    let data = jpeg(203, 157, Subsamp::Sub2x2, 75, 3);
    let index = SeekIndex::build(&data).unwrap();
    let mut out = Vec::new();
    let (mx, my) = index.mcus();
    assert_eq!(index.window(&data, 0..mx, 0..my, &mut out), Some((203, 157)));
    assert!(decoded(&out).unwrap() == decoded(&data).unwrap());
}

#[test]
fn what_the_entropy_pass_declines_or_has_restart_markers_is_not_indexed() {
    let data = jpeg(64, 48, Subsamp::Sub2x2, 90, 4);
    assert!(SeekIndex::build(&data).is_some());
    // Restart markers: their intervals are cut as they are.
    assert_eq!(SeekIndex::build(&with_restarts(&data, 1).unwrap()), None);
    // Cut short, or not a JPEG.
    assert_eq!(SeekIndex::build(&data[..data.len() - 40]), None);
    assert_eq!(SeekIndex::build(b"not a jpeg"), None);
}

#[test]
fn windows_outside_the_image_or_empty_are_refused() {
    let data = jpeg(64, 48, Subsamp::Sub2x2, 90, 5);
    let index = SeekIndex::build(&data).unwrap();
    assert_eq!(index.mcus(), (4, 3));
    let mut out = Vec::new();
    for (cols, rows) in [(0..5, 0..3), (0..4, 0..4), (2..2, 0..3), (0..4, 1..1)] {
        assert_eq!(index.window(&data, cols.clone(), rows.clone(), &mut out), None, "{cols:?} {rows:?}");
    }
    // Another JPEG's bytes with this index: a different MCU size, or nothing sensible; no panic.
    let grey = jpeg(64, 48, Subsamp::Gray, 90, 6);
    assert_eq!(index.window(&grey, 0..4, 0..3, &mut out), None);
}

#[test]
fn an_index_is_small_beside_its_jpeg() {
    let data = jpeg(256, 192, Subsamp::Sub2x2, 90, 7);
    let index = SeekIndex::build(&data).unwrap();
    // 192 MCUs: 48 entries of 4 + 3 × 2 bytes, and the end.
    assert_eq!(index.heap_bytes(), std::mem::size_of::<SeekIndex>() + 49 * 4 + 48 * 6);
    assert!(index.heap_bytes() * 20 < data.len(), "{} vs {}", index.heap_bytes(), data.len());
}

#[test]
fn damaged_bytes_are_not_indexed_or_window_exactly_and_never_panic() {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[13; 32]);
    let sources = [jpeg(64, 48, Subsamp::Sub2x2, 90, 8), jpeg(40, 24, Subsamp::Gray, 75, 9)];
    let (mut indexed, mut declined) = (0, 0);
    for (s, src) in sources.iter().enumerate() {
        let good = SeekIndex::build(src).unwrap();
        let (mx, my) = good.mcus();
        for round in 0..600 {
            let bad = damage(&mut rng, src);
            let name = format!("source {s}, damage {round}");
            let c0 = within(&mut rng, 0..mx as usize) as u32;
            let r0 = within(&mut rng, 0..my as usize) as u32;
            // The good index over damaged bytes (a caller that did not check its hash): any
            // answer but a panic.
            let _ = good.window(&bad, c0..mx, r0..my, &mut Vec::new());
            match SeekIndex::build(&bad) {
                // What is indexed decodes, and its windows are the lossless crop's.
                Some(index) => {
                    indexed += 1;
                    decoded(&bad)
                        .unwrap_or_else(|e| panic!("{name}: indexed, but the whole decode says {e}"));
                    check_window(&name, &bad, &index, c0..mx, r0..my);
                }
                None => declined += 1,
            }
        }
    }
    assert!(indexed > 20 && declined > 500, "{indexed} {declined}");
}
