//! Transparency (PNG alpha channels, `tRNS`, RGBA pixels): dropped as FFCV does by default,
//! composited onto `alpha_background` when asked, and reported either way.

use ::png::{BitDepth, ColorType};

use super::tests::png;
use super::*;

/// The composite written down independently of the code under test: straight alpha, rounded to
/// nearest (`(a·c + (255 − a)·bg) / 255` is never exactly halfway: 255 is odd).
fn over(a: u8, c: u8, bg: u8) -> u8 {
    let (a, c, bg) = (f64::from(a), f64::from(c), f64::from(bg));
    ((a * c + (255.0 - a) * bg) / 255.0).round() as u8
}

/// Clip art: 8×6 RGBA whose transparent pixels hide colours (red under alpha 0, as many
/// editors leave them), with every kind of alpha: 0, 1, 64, 128, 254 and 255.
fn clip_art() -> Vec<u8> {
    let alphas = [0u8, 1, 64, 128, 254, 255];
    let mut data = Vec::new();
    for y in 0..6u8 {
        for x in 0..8u8 {
            let a = alphas[usize::from((x + y) % 6)];
            let rgb = if a == 0 { [255, 0, 0] } else { [x * 30, y * 40, 200] };
            data.extend_from_slice(&[rgb[0], rgb[1], rgb[2], a]);
        }
    }
    data
}

fn raw_with(background: Option<[u8; 3]>) -> ImageOptions {
    ImageOptions { alpha_background: background, ..ImageOptions::with_mode(WriteMode::Raw) }
}

fn encoded(source: ImageSource, options: &ImageOptions, channels: Channels) -> (Vec<u8>, bool) {
    let (e, flattened) = encode_image_flattened(&source, options, channels, 0.).unwrap();
    (e.data, flattened)
}

fn png_source(data: Vec<u8>) -> ImageSource {
    ImageSource::Encoded(data)
}

#[test]
fn an_rgba_png_loses_alpha_as_in_ffcv_by_default_and_is_reported() {
    let rgba = clip_art();
    let file = png((8, 6), (ColorType::Rgba, BitDepth::Eight), None, None, &rgba);
    // FFCV's writer stores what Pillow's convert("RGB") gives: the colour channels, alpha
    // ignored, so the red under the transparent pixels shows.
    let rgb: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
    let (data, flattened) = encoded(png_source(file.clone()), &raw_with(None), Channels::Rgb);
    assert_eq!(data, rgb);
    assert!(flattened);
    let (grey, flattened) = encoded(png_source(file), &raw_with(None), Channels::Grey);
    assert_eq!(grey, rgb.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect::<Vec<_>>());
    assert!(flattened);

    // Fully opaque: nothing to flatten, nothing reported, whatever the background.
    let opaque: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    let file = png((8, 6), (ColorType::Rgba, BitDepth::Eight), None, None, &opaque);
    for background in [None, Some([0, 255, 0])] {
        assert_eq!(
            encoded(png_source(file.clone()), &raw_with(background), Channels::Rgb),
            (rgb.clone(), false)
        );
    }
}

#[test]
fn alpha_background_composites_every_pixel_with_straight_alpha() {
    let rgba = clip_art();
    let file = png((8, 6), (ColorType::Rgba, BitDepth::Eight), None, None, &rgba);
    for bg in [[255, 255, 255], [10, 200, 30], [0, 0, 0]] {
        let want: Vec<u8> = rgba
            .chunks_exact(4)
            .flat_map(|p| [over(p[3], p[0], bg[0]), over(p[3], p[1], bg[1]), over(p[3], p[2], bg[2])])
            .collect();
        let (data, flattened) = encoded(png_source(file.clone()), &raw_with(Some(bg)), Channels::Rgb);
        assert_eq!(data, want, "background {bg:?}");
        assert!(flattened);
        // Fully transparent pixels are the background, opaque ones keep their colour.
        for (p, q) in rgba.chunks_exact(4).zip(data.chunks_exact(3)) {
            match p[3] {
                0 => assert_eq!(q, bg),
                255 => assert_eq!(q, &p[..3]),
                _ => {}
            }
        }
        let (grey, _) = encoded(png_source(file.clone()), &raw_with(Some(bg)), Channels::Grey);
        assert_eq!(grey, want.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect::<Vec<_>>());
    }

    // Every (alpha, colour) pair against a few backgrounds: the integer arithmetic is the
    // rounded formula everywhere.
    let all: Vec<u8> =
        (0..=255u8).flat_map(|a| (0..=255u8).flat_map(move |c| [c, 255 - c, c / 2, a])).collect();
    let pixels = Pixels { width: 256, height: 256, channels: 4, data: all.clone() };
    for bg in [[0, 0, 0], [255, 255, 255], [1, 128, 254]] {
        let (flat, transparent) = flatten_alpha(&pixels, Some(bg));
        assert!(transparent);
        assert_eq!(flat.channels, 3);
        for (p, q) in all.chunks_exact(4).zip(flat.data.chunks_exact(3)) {
            assert_eq!(
                q,
                [over(p[3], p[0], bg[0]), over(p[3], p[1], bg[1]), over(p[3], p[2], bg[2])],
                "{p:?}"
            );
        }
    }
}

#[test]
fn grey_alpha_palette_trns_and_colour_key_pngs_are_flattened_too() {
    let bg = [200, 100, 50];
    let opts = raw_with(Some(bg));
    let dropped = raw_with(None);

    // Grey+alpha (8- and 16-bit): the grey replicated; composited per channel.
    let ga = [10u8, 0, 90, 128, 250, 255];
    let file = png((3, 1), (ColorType::GrayscaleAlpha, BitDepth::Eight), None, None, &ga);
    assert_eq!(
        encoded(png_source(file.clone()), &dropped, Channels::Rgb),
        (vec![10, 10, 10, 90, 90, 90, 250, 250, 250], true)
    );
    assert_eq!(encoded(png_source(file.clone()), &dropped, Channels::Grey), (vec![10, 90, 250], true));
    let want: Vec<u8> = ga
        .chunks_exact(2)
        .flat_map(|p| [over(p[1], p[0], bg[0]), over(p[1], p[0], bg[1]), over(p[1], p[0], bg[2])])
        .collect();
    assert_eq!(encoded(png_source(file.clone()), &opts, Channels::Rgb), (want.clone(), true));
    let grey: Vec<u8> = want.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect();
    assert_eq!(encoded(png_source(file), &opts, Channels::Grey), (grey, true));
    let ga16 = [10u8, 0x55, 0, 0xFF, 250, 1, 255, 0];
    let file = png((2, 1), (ColorType::GrayscaleAlpha, BitDepth::Sixteen), None, None, &ga16);
    assert_eq!(encoded(png_source(file.clone()), &dropped, Channels::Grey), (vec![10, 250], true));
    let want16 = vec![bg[0], bg[1], bg[2], 250, 250, 250];
    assert_eq!(encoded(png_source(file), &opts, Channels::Rgb), (want16, true));

    // A palette with tRNS: entry 0 fully transparent, 1 half, 2 opaque (no entry: opaque).
    let palette = [255, 0, 0, 0, 255, 0, 0, 0, 255];
    let file =
        png((3, 1), (ColorType::Indexed, BitDepth::Eight), Some(&palette), Some(&[0, 128]), &[0, 1, 2]);
    // FFCV (Pillow's convert("RGB") of a "P" image): the palette colours.
    assert_eq!(encoded(png_source(file.clone()), &dropped, Channels::Rgb), (palette.to_vec(), true));
    let want =
        vec![bg[0], bg[1], bg[2], over(128, 0, bg[0]), over(128, 255, bg[1]), over(128, 0, bg[2]), 0, 0, 255];
    assert_eq!(encoded(png_source(file), &opts, Channels::Rgb), (want, true));
    // tRNS saying every entry is opaque: nothing to report.
    let file = png(
        (3, 1),
        (ColorType::Indexed, BitDepth::Eight),
        Some(&palette),
        Some(&[255, 255, 255]),
        &[0, 1, 2],
    );
    assert_eq!(encoded(png_source(file), &opts, Channels::Rgb), (palette.to_vec(), false));

    // RGB with a tRNS colour key (16-bit samples, the key 1,2,3): that colour is transparent.
    let file =
        png((2, 1), (ColorType::Rgb, BitDepth::Eight), None, Some(&[0, 1, 0, 2, 0, 3]), &[1, 2, 3, 4, 5, 6]);
    assert_eq!(encoded(png_source(file.clone()), &dropped, Channels::Rgb), (vec![1, 2, 3, 4, 5, 6], true));
    assert_eq!(encoded(png_source(file), &opts, Channels::Rgb), (vec![bg[0], bg[1], bg[2], 4, 5, 6], true));
}

#[test]
fn rgba_pixels_are_flattened_as_pngs_are() {
    let rgba = clip_art();
    let pixels = ImageSource::Pixels(Pixels { width: 8, height: 6, channels: 4, data: rgba.clone() });
    let file = png_source(png((8, 6), (ColorType::Rgba, BitDepth::Eight), None, None, &rgba));
    for background in [None, Some([255, 255, 255])] {
        for channels in [Channels::Rgb, Channels::Grey] {
            let opts = raw_with(background);
            assert_eq!(encoded(pixels.clone(), &opts, channels), encoded(file.clone(), &opts, channels));
        }
    }
    // RGB and grey pixels have nothing to flatten.
    let rgb = ImageSource::Pixels(Pixels { width: 1, height: 1, channels: 3, data: vec![1, 2, 3] });
    assert_eq!(encoded(rgb, &raw_with(Some([9, 9, 9])), Channels::Rgb), (vec![1, 2, 3], false));
}

#[test]
fn jpeg_mode_flattens_before_encoding() {
    // 32×32: the left half opaque blue, the right half fully transparent over hidden red.
    let mut rgba = Vec::new();
    for _y in 0..32 {
        for x in 0..32 {
            rgba.extend_from_slice(&if x < 16 { [0, 0, 255, 255] } else { [255, 0, 0, 0] });
        }
    }
    let file = png((32, 32), (ColorType::Rgba, BitDepth::Eight), None, None, &rgba);
    let right_half = |data: &[u8]| -> Vec<u8> {
        data.chunks_exact(32 * 3).flat_map(|row| row[16 * 3..].to_vec()).collect()
    };
    let mean_diff = |a: &[u8], colour: [u8; 3]| -> f64 {
        a.chunks_exact(3).flat_map(|p| (0..3).map(move |k| f64::from(p[k].abs_diff(colour[k])))).sum::<f64>()
            / a.len() as f64
    };
    for (background, shown) in [(None, [255, 0, 0]), (Some([255, 255, 255]), [255, 255, 255])] {
        let opts = ImageOptions { alpha_background: background, ..ImageOptions::with_mode(WriteMode::Jpg) };
        let (e, flattened) =
            encode_image_flattened(&png_source(file.clone()), &opts, Channels::Rgb, 0.).unwrap();
        assert_eq!(e.mode, ImageMode::Jpg);
        assert!(flattened);
        let back = decode_stored(e.mode, e.width, e.height, &e.data, Channels::Rgb).unwrap();
        let right = right_half(&back.data);
        assert!(mean_diff(&right, shown) < 8.0, "{background:?}: {}", mean_diff(&right, shown));
        let other = if shown == [255, 0, 0] { [255, 255, 255] } else { [255, 0, 0] };
        assert!(mean_diff(&right, other) > 60.0, "{background:?}");
    }
}
