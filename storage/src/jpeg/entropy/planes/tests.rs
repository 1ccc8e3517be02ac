//! The planes decoder against libjpeg-turbo's `tj3DecompressToYUVPlanes8`: byte for byte, or declined.

use proptest::test_runner::{RngAlgorithm, TestRng};

use super::super::tests::{damage, jpeg, picture};
use super::*;
use crate::jpeg::{compress, with_restarts, Decompressor, PlaneLayout};

/// The DCT scales beton's decoder takes (1/`denom`).
const SCALES: [u32; 3] = [1, 2, 4];

/// The planes of `data` by beton's decoder (`None`: declined) and by libjpeg-turbo.
fn both(data: &[u8]) -> (Option<Vec<u8>>, crate::Result<Vec<u8>>) {
    both_at(data, 1)
}

/// [`both`] at scale 1/`denom`.
fn both_at(data: &[u8], denom: u32) -> (Option<Vec<u8>>, crate::Result<Vec<u8>>) {
    let mut d = Decompressor::new().unwrap();
    let h = match d.header(data) {
        Ok(h) => h,
        Err(e) => return (None, Err(e)),
    };
    let Some(layout) = PlaneLayout::of(&h, (h.width.div_ceil(denom), h.height.div_ceil(denom))) else {
        return (None, Err(crate::Error::Image("no planes".into())));
    };
    // Filled with a value, so that a pixel the decoder left unwritten shows.
    let mut ours = vec![0xA5; layout.bytes];
    let ours = decode_planes(data, denom, &mut ours, layout.geometry()).map(|()| ours);
    d.set_own_planes(false);
    d.set_geometry(denom, crate::jpeg::Rect::default()).unwrap();
    let mut theirs = vec![0x5A; layout.bytes];
    let theirs = d.decompress_planes(data, &mut theirs, layout.geometry()).map(|()| theirs);
    (ours, theirs)
}

/// Whether each plane of `data` at 1/`denom` lies within its component's blocks (libjpeg
/// decodes no others: beyond them, a plane of a tiny image padded to its MCU holds what
/// libjpeg-turbo's buffer held, which the planes decoder declines to guess).
fn covered(data: &[u8], denom: u32) -> bool {
    let header = Header::parse(data).unwrap();
    let hd = Decompressor::new().unwrap().header(data).unwrap();
    let layout = PlaneLayout::of(&hd, (hd.width.div_ceil(denom), hd.height.div_ceil(denom))).unwrap();
    let (hmax, vmax) = (
        header.components.iter().map(|c| c.h).max().unwrap(),
        header.components.iter().map(|c| c.v).max().unwrap(),
    );
    header.components.iter().zip(layout.geometry()).all(|(c, &(_, pw, ph))| {
        let across = (header.width * c.h).div_ceil(hmax * 8);
        let down = (header.height * c.v).div_ceil(vmax * 8);
        pw <= across * 8 / denom && ph <= down * 8 / denom
    })
}

/// Taken, and libjpeg-turbo's planes byte for byte, at every scale (declined only where a plane
/// reaches past its component's blocks), by the loops compiled for AVX2 (where the CPU has it)
/// and by the portable ones.
fn same(name: &str, data: &[u8]) {
    for (denom, portable) in SCALES.into_iter().flat_map(|d| [(d, false), (d, true)]) {
        PORTABLE.set(portable);
        let (ours, theirs) = both_at(data, denom);
        PORTABLE.set(false);
        let name = &format!("{name}{}", if portable { " (portable loop)" } else { "" });
        let theirs = theirs.unwrap_or_else(|e| panic!("{name} at 1/{denom}: libjpeg-turbo says {e}"));
        let Some(ours) = ours else {
            assert!(!covered(data, denom), "{name} at 1/{denom}: declined");
            continue;
        };
        if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
            panic!(
                "{name} at 1/{denom}: byte {at} of {}: {} vs libjpeg-turbo's {}",
                ours.len(),
                ours[at],
                theirs[at]
            );
        }
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
        let (marker, len) = (data[pos + 1], usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]])));
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
    let mut photos = 0;
    for path in beton_testkit::bundled_photos() {
        let data = std::fs::read(&path).unwrap();
        let name = path.display().to_string();
        // Some are progressive: declined; every baseline one decodes alike, at every scale.
        for denom in SCALES {
            match both_at(&data, denom) {
                (Some(ours), Ok(theirs)) => {
                    assert!(ours == theirs, "{name} at 1/{denom}");
                    photos += usize::from(denom == 1);
                }
                (Some(_), Err(e)) => panic!("{name} at 1/{denom}: taken, but libjpeg-turbo says {e}"),
                (None, _) => {}
            }
        }
        // The writer's passthrough rewrite of it (a restart marker per MCU).
        if let Some(super::super::Checked::Rewritten(rst)) = super::super::check_with_restarts(&data, 1) {
            same(&format!("{name} with restarts"), &rst);
        }
    }
    assert!(photos > 100, "{photos}");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/edge-jpegs");
    let mut taken = Vec::new();
    for f in std::fs::read_dir(corpus).unwrap() {
        let path = f.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        for denom in SCALES {
            match both_at(&data, denom) {
                (Some(ours), Ok(theirs)) => {
                    assert!(ours == theirs, "{name} at 1/{denom}");
                    if denom == 1 {
                        taken.push(name.clone());
                    }
                }
                (Some(_), Err(e)) => panic!("{name} at 1/{denom}: taken, but libjpeg-turbo says {e}"),
                (None, _) => {}
            }
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
            let denom = SCALES[round % SCALES.len()];
            match both_at(&bad, denom) {
                (Some(ours), Ok(theirs)) => {
                    assert!(ours == theirs, "source {s}, damage {round} at 1/{denom}");
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
fn the_decompressor_decodes_planes_with_it_where_it_may() {
    let src = jpeg(64, 48, turbojpeg::Subsamp::Sub2x2, 90, 3);
    let decoded = || crate::jpeg::turbo::OWN_PLANES_DECODED.with(std::cell::Cell::get);
    // Decodes at 1/`denom` with `d`: the planes, and whether beton's decoder made them.
    let run = |d: &mut Decompressor, denom: u32| {
        let h = d.header(&src).unwrap();
        d.set_geometry(denom, crate::jpeg::Rect::default()).unwrap();
        let layout = PlaneLayout::of(&h, (h.width.div_ceil(denom), h.height.div_ceil(denom))).unwrap();
        let mut buf = vec![0u8; layout.bytes];
        let before = decoded();
        d.decompress_planes(&src, &mut buf, layout.geometry()).unwrap();
        (buf, decoded() > before)
    };
    assert!(SCALES.iter().all(|&d| idct::select(d).is_some()), "no SIMD IDCT on this x86-64 CPU");
    let mut d = Decompressor::new().unwrap();
    let (ours, taken) = run(&mut d, 1);
    assert!(taken, "the default decodes with beton's decoder");
    d.set_own_planes(false);
    let (theirs, taken) = run(&mut d, 1);
    assert!(!taken, "switched off");
    assert_eq!(ours, theirs);
    d.set_own_planes(true);
    for denom in [2, 4] {
        let (ours, taken) = run(&mut d, denom);
        assert!(taken, "at 1/{denom} too");
        d.set_own_planes(false);
        assert_eq!(ours, run(&mut d, denom).0, "at 1/{denom}");
        d.set_own_planes(true);
    }
    assert!(!run(&mut d, 8).1, "1/8 is libjpeg-turbo's");
    assert!(SCALES.iter().all(|&d| decodes_at(d)) && !decodes_at(8) && !decodes_at(3));
    d.set_fast_dct(true).unwrap();
    assert!(!run(&mut d, 1).1, "the fast IDCT is libjpeg-turbo's");
    assert!(!d.own_planes());
}
