//! The entropy pass against libjpeg-turbo: what it takes decodes alike (strictly, pixel for pixel)
//! before and after its rewrite, with restart markers where DRI says; what libjpeg-turbo refuses
//! or warns about it never takes, over the edge-case corpus and thousands of damaged scans.

use std::path::{Path, PathBuf};

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

use super::*;
use crate::jpeg::{compress, markers, with_restarts, Decompressor, JpegColor, PixelFormat};

/// The strict whole decode the writer runs (every warning an error): RGB, or grey for a grey JPEG.
pub(super) fn decoded(data: &[u8]) -> crate::Result<Vec<u8>> {
    let mut d = Decompressor::new()?;
    let h = d.header(data)?;
    let format = match h.color {
        JpegColor::Grey => PixelFormat::Grey,
        JpegColor::Cmyk | JpegColor::Ycck => PixelFormat::Cmyk,
        _ => PixelFormat::Rgb,
    };
    let mut out = vec![0u8; h.width as usize * h.height as usize * format.size()];
    d.decompress(data, &mut out, (h.width, h.height), format)?;
    Ok(out)
}

/// A number in `range`.
pub(super) fn within(rng: &mut TestRng, range: std::ops::Range<usize>) -> usize {
    range.start + (rng.next_u64() % (range.end - range.start) as u64) as usize
}

/// A picture with flat patches (large DC steps between blocks) and noise (long AC runs), so
/// that DC categories up to 11 and every AC length occur.
pub(super) fn picture(width: u32, height: u32, channels: usize, seed: u64) -> Vec<u8> {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed.to_le_bytes().repeat(4));
    let patch: Vec<u8> = (0..64 * channels).map(|_| rng.next_u64() as u8).collect();
    let mut out = Vec::with_capacity((width * height) as usize * channels);
    for y in 0..height {
        for x in 0..width {
            let p = (((y / 16) * 8 + (x / 16)) % 64) as usize;
            for c in 0..channels {
                let noise: u8 = if (x / 32 + y / 32) % 2 == 0 { within(&mut rng, 0..48) as u8 } else { 0 };
                out.push(patch[p * channels + c].saturating_add(noise));
            }
        }
    }
    out
}

/// A JPEG as most encoders write it (standard Huffman tables, no restart markers).
pub(super) fn jpeg(width: u32, height: u32, subsamp: turbojpeg::Subsamp, quality: i32, seed: u64) -> Vec<u8> {
    let grey = subsamp == turbojpeg::Subsamp::Gray;
    let (channels, format) =
        if grey { (1, turbojpeg::PixelFormat::GRAY) } else { (3, turbojpeg::PixelFormat::RGB) };
    let pixels = picture(width, height, channels, seed);
    let image = turbojpeg::Image {
        pixels: pixels.as_slice(),
        width: width as usize,
        pitch: width as usize * channels,
        height: height as usize,
        format,
    };
    turbojpeg::compress(image, quality, subsamp).expect("compress").to_vec()
}

/// Restart markers in `data`'s scan (RST0–7 after the SOS).
fn restart_markers(data: &[u8]) -> usize {
    let at = markers::parse(data).scan.expect("a scan").data_at;
    data[at..].windows(2).filter(|w| w[0] == 0xFF && (0xD0..=0xD7).contains(&w[1])).count()
}

/// MCUs of a JPEG from its frame (as [`Layout`] counts them).
fn mcus(data: &[u8]) -> u64 {
    let h = Header::parse(data).expect("a header this pass reads");
    Layout::of(&h).expect("a layout").mcus
}

/// Checks one source at one interval: taken (or, with `may_decline`, possibly declined), and
/// what it gives decodes as the source does, with the markers where they belong.
fn check(name: &str, src: &[u8], interval: u16, may_decline: bool) -> Option<Checked> {
    let got = check_with_restarts(src, interval);
    let Some(got) = got else {
        assert!(may_decline, "{name}: interval {interval} declined");
        return None;
    };
    let source_interval = markers::parse(src).restart_interval;
    match &got {
        Checked::AsIs => assert!(interval == 0 || interval == source_interval, "{name}: {interval}"),
        Checked::Rewritten(out) => {
            assert!(interval != 0 && interval != source_interval, "{name}: rewrote for nothing");
            assert_eq!(markers::parse(out).restart_interval, interval, "{name}");
            let want = mcus(src).div_ceil(u64::from(interval)) - 1;
            assert_eq!(restart_markers(out) as u64, want, "{name}: interval {interval}");
            let pixels = decoded(out).unwrap_or_else(|e| panic!("{name}: interval {interval}: {e}"));
            assert!(
                pixels == decoded(src).expect("the source decodes"),
                "{name}: interval {interval}: pixels differ"
            );
        }
    }
    Some(got)
}

#[test]
fn rewrites_keep_every_coefficient_at_every_subsampling_size_and_interval() {
    use turbojpeg::Subsamp::*;
    let sizes = [(1, 1), (8, 8), (17, 9), (33, 47), (250, 3), (3, 250), (160, 120)];
    let mut rewritten = 0;
    for (k, &(w, h)) in sizes.iter().enumerate() {
        for subsamp in [None, Sub2x1, Sub2x2, Sub1x2, Sub4x1, Sub1x4, Gray] {
            for quality in [40, 90, 100] {
                let src = jpeg(w, h, subsamp, quality, k as u64);
                let name = format!("{w}x{h} {subsamp:?} q{quality}");
                for interval in [0, 1, 2, 5, 64, 65535] {
                    if let Some(Checked::Rewritten(out)) = check(&name, &src, interval, false) {
                        rewritten += 1;
                        // Another pass over the rewrite: taken, and back to one interval or none.
                        check(&format!("{name} rewritten at {interval}"), &out, 3, false);
                        assert_eq!(check_with_restarts(&out, interval), Some(Checked::AsIs), "{name}");
                    }
                }
            }
        }
    }
    assert!(rewritten > 500, "{rewritten}");
}

#[test]
fn jpegs_with_restart_markers_and_optimised_tables_are_taken_or_declined_never_miswritten() {
    // libjpeg-turbo's own writes with restart markers (optimised Huffman tables, where a DC
    // category the picture never needed may be missing): the pass re-cuts them or declines.
    let mut taken = 0;
    for (k, (w, h)) in [(64u32, 48u32), (17, 9), (250, 31), (1, 1)].into_iter().enumerate() {
        for grey in [false, true] {
            let channels: u8 = if grey { 1 } else { 3 };
            for every in [1u16, 2, 7] {
                let src = compress(
                    &picture(w, h, usize::from(channels), k as u64 + 7),
                    (w, h, channels),
                    90,
                    every,
                )
                .unwrap();
                assert_eq!(markers::parse(&src).restart_interval, every);
                let name = format!("{w}x{h} grey {grey} every {every}");
                assert_eq!(check(&name, &src, every, false), Some(Checked::AsIs), "{name}");
                assert_eq!(check(&name, &src, 0, false), Some(Checked::AsIs), "{name}");
                for interval in [1, 3, 1000] {
                    taken += usize::from(check(&name, &src, interval, true).is_some());
                }
                // The lossless transform's output, from a JPEG without markers.
                let plain = jpeg(w, h, turbojpeg::Subsamp::Sub2x2, 85, k as u64);
                let transformed = with_restarts(&plain, every).unwrap();
                check(&format!("{name} transformed"), &transformed, every, false);
                taken += usize::from(check(&format!("{name} transformed"), &transformed, 4, true).is_some());
            }
        }
    }
    assert!(taken > 10, "{taken}");
}

#[test]
fn a_dc_difference_the_table_cannot_write_declines_the_rewrite() {
    // Grey halves, 255 then 165: the optimised luma DC table holds the categories of the first
    // block's value (~338: 9) and of the one step (~-239: 8); after a restart every MCU writes
    // its DC whole, and the right half's (~99: 7) has no code.
    let halves: Vec<u8> = (0..64 * 64).flat_map(|i| [if i % 64 < 32 { 255 } else { 165 }; 3]).collect();
    let src = compress(&halves, (64, 64, 3), 90, 64).unwrap();
    assert_eq!(check_with_restarts(&src, 64), Some(Checked::AsIs));
    assert_eq!(check_with_restarts(&src, 1), None);
    // The slow path does it (it writes new tables).
    let slow = with_restarts(&src, 1).unwrap();
    assert_eq!(decoded(&slow).unwrap(), decoded(&src).unwrap());
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/edge-jpegs")
}

#[test]
fn the_edge_corpus_gets_the_whole_decodes_verdict() {
    let mut names: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jpg"))
        .collect();
    names.sort();
    let mut taken = Vec::new();
    for name in &names {
        let src = std::fs::read(corpus_dir().join(name)).unwrap();
        let mut any = false;
        for interval in [0, 1, 3] {
            if check(name, &src, interval, true).is_some() {
                // Taken: libjpeg-turbo decodes it without a warning.
                decoded(&src).unwrap_or_else(|e| panic!("{name}: taken, but the whole decode says {e}"));
                any = true;
            }
        }
        if any {
            taken.push(name.as_str());
        }
    }
    for name in [
        "baseline-411.jpg",
        "baseline-420.jpg",
        "baseline-422.jpg",
        "baseline-440.jpg",
        "baseline-444.jpg",
        "grey.jpg",
        "odd-17x9.jpg",
        "tiny-1x1.jpg",
        "restart-3mcu.jpg",
        "qtables-16bit.jpg",
        "trailing-data-after-eoi.jpg",
        "wide-65500x8.jpg",
        "tall-8x65500.jpg",
    ] {
        assert!(taken.contains(&name), "{name} declined; taken: {taken:?}");
    }
    for name in [
        "progressive.jpg",
        "arithmetic.jpg",
        "truncated-half.jpg",
        "soi-then-garbage.jpg",
        "random-junk.jpg",
        "empty.jpg",
        "png-renamed.jpg",
    ] {
        assert!(!taken.contains(&name), "{name} taken");
    }
}

/// One random damage to `src`'s entropy-coded data (or its end).
pub(super) fn damage(rng: &mut TestRng, src: &[u8]) -> Vec<u8> {
    let data_at = markers::parse(src).scan.unwrap().data_at;
    let mut d = src.to_vec();
    let at = within(rng, data_at..d.len());
    match within(rng, 0..6) {
        0 => d[at] ^= 1 << within(rng, 0..8),
        1 => {
            for _ in 0..3 {
                let at = within(rng, data_at..d.len() - 2);
                d[at] ^= 1 << within(rng, 0..8);
            }
        }
        2 => d.truncate(at),
        3 => {
            d.remove(at);
        }
        4 => {
            let m: u8 = rng.next_u64() as u8;
            d.splice(at..at, [0xFF, m]);
        }
        _ => {
            let b: u8 = rng.next_u64() as u8;
            d.insert(at, b);
        }
    }
    d
}

#[test]
fn damaged_scans_are_declined_or_decode_exactly_as_libjpeg_decodes_them() {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let sources = [
        jpeg(64, 48, turbojpeg::Subsamp::Sub2x2, 90, 1),
        jpeg(40, 24, turbojpeg::Subsamp::Gray, 75, 2),
        compress(&picture(48, 32, 3, 3), (48, 32, 3), 90, 1).unwrap(),
        compress(&picture(48, 32, 1, 4), (48, 32, 1), 90, 2).unwrap(),
    ];
    let (mut taken, mut declined, mut truncations) = (0, 0, 0);
    for (s, src) in sources.iter().enumerate() {
        for round in 0..1500 {
            let bad = damage(&mut rng, src);
            let name = format!("source {s}, damage {round}");
            for interval in [0, 1, 3] {
                match check(&name, &bad, interval, true) {
                    Some(_) => {
                        taken += 1;
                        decoded(&bad)
                            .unwrap_or_else(|e| panic!("{name}: taken, but the whole decode says {e}"));
                    }
                    None => declined += 1,
                }
            }
            // A scan cut short is never taken.
            if bad.len() < src.len() && !bad.ends_with(&[0xFF, 0xD9]) {
                truncations += 1;
                assert_eq!(check_with_restarts(&bad, 0), None, "{name}");
            }
        }
    }
    // Some damage leaves a valid scan (a flipped bit inside a coefficient's bits), most does not.
    assert!(taken > 100 && declined > 1000 && truncations > 100, "{taken} {declined} {truncations}");
}

#[test]
fn headers_it_cannot_vouch_for_are_declined() {
    let src = jpeg(32, 32, turbojpeg::Subsamp::Sub2x2, 90, 5);
    assert!(check_with_restarts(&src, 1).is_some());
    let sof = markers::parse(&src).frame.unwrap().size_at - 5; // the SOF marker's 0xFF
    assert_eq!(&src[sof..sof + 2], &[0xFF, 0xC0]);
    let with = |at: usize, byte: u8| {
        let mut d = src.clone();
        d[at] = byte;
        check_with_restarts(&d, 1)
    };
    // Progressive and arithmetic frames, 12-bit samples.
    assert_eq!(with(sof + 1, 0xC2), None);
    assert_eq!(with(sof + 1, 0xC9), None);
    assert_eq!(with(sof + 4, 12), None);
    // Two components with one id.
    assert_eq!(with(sof + 13, src[sof + 10]), None);
    // Sampling factors 0 and 5.
    assert_eq!(with(sof + 11, 0x01), None);
    assert_eq!(with(sof + 11, 0x51), None);
    // The scan: a component the frame does not have there, a progressive scan's spectral
    // selection, successive approximation.
    let sos = markers::parse(&src).scan.unwrap().data_at - 14;
    assert_eq!(&src[sos..sos + 2], &[0xFF, 0xDA]);
    assert_eq!(with(sos + 9, 9), None);
    assert_eq!(with(sos + 11, 1), None);
    assert_eq!(with(sos + 13, 0x10), None);
    // Five components in the frame and the scan (8 blocks an MCU, within libjpeg's 10): libjpeg
    // allows at most 4 in a scan (MAX_COMPS_IN_SCAN); declined, not a panic, by every reader
    // of the header (the planes decoder and the seek index keep 4 DC predictions).
    let mut five = src[..sof].to_vec();
    five.extend_from_slice(&[0xFF, 0xC0, 0, 8 + 3 * 5]);
    five.extend_from_slice(&src[sof + 4..sof + 19]);
    five.extend_from_slice(&[4, 0x11, 0, 5, 0x11, 0]);
    five[sof + 9] = 5;
    five.extend_from_slice(&src[sof + 19..sos]);
    five.extend_from_slice(&[0xFF, 0xDA, 0, 6 + 2 * 5, 5]);
    five.extend_from_slice(&src[sos + 5..sos + 11]);
    five.extend_from_slice(&[4, 0x00, 5, 0x00, 0, 63, 0]);
    five.extend_from_slice(&src[sos + 14..]);
    assert_eq!(check_with_restarts(&five, 1), None);
    assert_eq!(check_with_restarts(&five, 0), None);
    assert!(SeekIndex::build(&five).is_none());
    let geometry: Vec<(usize, u32, u32)> = (0..5).map(|c| (c * 32 * 32, 16, 16)).collect();
    assert_eq!(decode_planes(&five, 1, &mut vec![0; 5 * 32 * 32], &geometry), None);
    // Every prefix of the header, and no EOI.
    for cut in 0..markers::parse(&src).scan.unwrap().data_at + 1 {
        assert_eq!(check_with_restarts(&src[..cut], 0), None, "{cut}");
    }
    assert_eq!(check_with_restarts(&src[..src.len() - 2], 0), None);
}

#[test]
fn bogus_huffman_tables_are_refused_as_libjpeg_refuses_them() {
    let spec = |counts: &[u8], n: usize| {
        let mut c = [0u8; 16];
        c[..counts.len()].copy_from_slice(counts);
        Spec { counts: c, symbols: (0..n as u8).collect() }
    };
    // Two 1-bit codes fill the code space: libjpeg refuses it ("Bogus Huffman table").
    assert!(canonical(&spec(&[2], 2)).is_none());
    assert!(canonical(&spec(&[1, 2], 3)).is_none());
    assert_eq!(canonical(&spec(&[1, 1], 2)), Some(vec![(0, 1), (2, 2)]));
    assert!(canonical(&spec(&[1, 1], 3)).is_none(), "more symbols than codes");
    // A DC table may not hold a symbol above 15.
    let mut dc = spec(&[0, 2], 2);
    dc.symbols = vec![3, 16];
    assert!(Decoder::new(&dc, true).is_none());
    assert!(Decoder::new(&dc, false).is_some());
    // Codes longer than the lookup: found by the canonical walk; a code in no table is None.
    let mut long = [0u8; 16];
    long[0] = 1;
    long[11] = 2; // 12-bit codes
    let t = Decoder::new(&Spec { counts: long, symbols: vec![5, 6, 7] }, false).unwrap();
    assert_eq!(t.decode(0), Some((1, 5)));
    assert_eq!(t.decode(0b1000_0000_0000u64 << 52), Some((12, 6)));
    assert_eq!(t.decode(0b1000_0000_0001u64 << 52), Some((12, 7)));
    assert_eq!(t.decode(0b1100_0000_0000u64 << 52), None);
}

/// Every step of an AC table's lookup is the codes read one at a time (each through the
/// canonical decode): its first code's bits and move, and the codes after it while their code
/// bits lie within the lookup, up to one that ends the block or a move of 64.
#[test]
fn each_lookup_step_is_its_codes_read_one_at_a_time() {
    let mut tables = Vec::new();
    for (subsamp, quality) in [(turbojpeg::Subsamp::Sub2x2, 90), (turbojpeg::Subsamp::None, 100)] {
        let header = Header::parse(&jpeg(64, 64, subsamp, quality, 1)).expect("a header");
        tables.extend(header.ac.iter().flatten().cloned());
    }
    // A table of one-bit-short codes (lengths 2..=16: every lookup also meets codes past it).
    tables.push(Spec {
        counts: [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2],
        symbols: vec![
            0x01, 0x00, 0xF0, 0x11, 0x23, 0x05, 0x31, 0x4A, 0x61, 0x7F, 0x12, 0x21, 0x33, 0xA1, 0xE2, 0x02,
        ],
    });
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    for spec in &tables {
        let decoder = Decoder::new(spec, false).expect("a table libjpeg takes");
        let steps = decoder.steps().expect("an AC table's steps");
        for (i, &e) in steps.iter().enumerate() {
            // The lookup's bits, then any bits.
            let word = ((i as u64) << (64 - LOOKUP_BITS)) | (rng.next_u64() >> LOOKUP_BITS);
            let Some((len, rs)) = decoder.decode(word) else {
                assert_eq!(e, 0, "{i:#x}: no code, a step");
                continue;
            };
            if len > LOOKUP_BITS {
                assert_eq!(e, 0, "{i:#x}: a long code takes the canonical walk");
                continue;
            }
            let first = step(len, rs);
            assert_eq!(((e >> multi::FIRST_BITS) & 31, (e >> multi::FIRST_ADVANCE) & 31), first, "{i:#x}");
            assert_eq!(e & multi::FIRST_ENDS != 0, first.1 == 0, "{i:#x}");
            let (mut bits, mut advance, mut ends) = (first.0, first.1, first.1 == 0);
            while !ends && bits < LOOKUP_BITS {
                match decoder.decode(word << bits) {
                    Some((len, rs)) if len <= LOOKUP_BITS - bits && advance + step(len, rs).1 < 64 => {
                        let (b, a) = step(len, rs);
                        (bits, advance, ends) = (bits + b, advance + a, a == 0);
                    }
                    _ => break,
                }
            }
            assert_eq!(
                (e & 63, (e >> multi::ADVANCE) & 63, e & multi::ENDS != 0),
                (bits, advance, ends),
                "{i:#x}"
            );
        }
    }
}

/// Decoders are kept per thread by their table: the same table gives the same decoder, another
/// table its own, and one pushed out by [`CACHED_DECODERS`] others is built again.
#[test]
fn decoders_are_kept_by_their_table() {
    let spec = |last: u8| Spec {
        counts: [0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        symbols: vec![0x01, 0x00, last],
    };
    let a = Decoder::cached(&spec(0x11), false).unwrap();
    assert!(std::rc::Rc::ptr_eq(&a, &Decoder::cached(&spec(0x11), false).unwrap()));
    let b = Decoder::cached(&spec(0x12), false).unwrap();
    assert!(!std::rc::Rc::ptr_eq(&a, &b));
    assert_eq!(b.decode(0b100 << 61), Some((3, 0x12)));
    assert_eq!(a.decode(0b100 << 61), Some((3, 0x11)));
    assert_eq!(a.decode(0b110 << 61), None);
    // The same counts and symbols as a DC table and as an AC table: a decoder each.
    assert!(Decoder::cached(&spec(0x05), true).unwrap().steps().is_none());
    assert!(Decoder::cached(&spec(0x05), false).unwrap().steps().is_some());
    for k in 0..CACHED_DECODERS as u8 {
        Decoder::cached(&spec(0x20 + k), false).unwrap();
    }
    assert!(!std::rc::Rc::ptr_eq(&a, &Decoder::cached(&spec(0x11), false).unwrap()));
}

/// The branch-free EXTEND is JPEG's (F.2.2.1, as libjpeg writes it) for every category and
/// value a DC difference can have.
#[test]
fn extend_is_jpegs_extend() {
    for s in 0..=11u32 {
        for v in 0..1u64 << s {
            let want = match s {
                0 => 0,
                _ if v < 1 << (s - 1) => v as i32 - (1 << s) + 1,
                _ => v as i32,
            };
            assert_eq!(extend(v, s), want, "s {s}, bits {v:#b}");
        }
    }
}

/// The pass compiled for BMI2 (which [`check_with_restarts`] runs where the CPU has it) and the
/// portable one give the same verdicts and the same bytes, on JPEGs of every subsampling, sizes
/// that end MCUs early, intervals, and damaged copies (declined or not).
#[test]
fn the_bmi2_pass_is_the_portable_pass() {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]);
    let mut checked = 0;
    for (i, subsamp) in [
        turbojpeg::Subsamp::Sub2x2,
        turbojpeg::Subsamp::Sub2x1,
        turbojpeg::Subsamp::None,
        turbojpeg::Subsamp::Gray,
    ]
    .into_iter()
    .enumerate()
    {
        for (w, h) in [(1, 1), (37, 23), (130, 67)] {
            let src = jpeg(w, h, subsamp, 90, i as u64 * 7 + u64::from(w));
            for data in [src.clone(), damage(&mut rng, &src), damage(&mut rng, &src)] {
                for interval in [0, 1, 3] {
                    assert_eq!(
                        check_with_restarts(&data, interval),
                        check_with_restarts_portable(&data, interval),
                        "{subsamp:?} {w}x{h}, interval {interval}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 108);
}

#[test]
fn the_avx2_unstuffing_is_the_portable_one() {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        let mut next = beton_testkit::xorshift(0x0ff0_5eed_0000_0042);
        let mut refused = 0;
        for round in 0..20_000u32 {
            // Scans of 0-300 bytes: data bytes, stuffed 0xFFs, restart markers (in order, or
            // now and then out of it), other markers, and EOI at the end (or not).
            let mut data = Vec::new();
            let mut rst = 0u8;
            let len = (next() % 300) as usize;
            while data.len() < len {
                match next() % 40 {
                    0 | 1 => data.extend_from_slice(&[0xFF, 0x00]),
                    2 => {
                        let m = if next() % 50 == 0 { 0xD0 + (next() % 8) as u8 } else { 0xD0 + rst % 8 };
                        data.extend_from_slice(&[0xFF, m]);
                        rst += 1;
                    }
                    3 if next() % 20 == 0 => data.extend_from_slice(&[0xFF, (next() % 256) as u8]),
                    _ => data.push((next() % 255) as u8),
                }
            }
            match next() % 10 {
                0 => {}
                1 => data.push(0xFF),
                _ => data.extend_from_slice(&[0xFF, 0xD9]),
            }
            let interval = if round % 3 == 0 { 0 } else { 1 };
            let (mut a, mut a_ends) = (Vec::new(), Vec::new());
            let (mut b, mut b_ends) = (Vec::new(), Vec::new());
            let ra = unstuff(&data, interval, &mut a, &mut a_ends);
            // SAFETY: the CPU has AVX2 (checked).
            let rb = unsafe { unstuff_avx2(&data, interval, &mut b, &mut b_ends) };
            assert_eq!(ra, rb, "round {round}: {data:02x?}");
            if ra.is_some() {
                assert_eq!((&a, &a_ends), (&b, &b_ends), "round {round}: {data:02x?}");
            } else {
                refused += 1;
            }
        }
        assert!(refused > 1000 && refused < 19_000, "{refused} refused");
    }
}
