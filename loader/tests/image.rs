//! The image decoders end to end: exact values on constant images, quality against a
//! full-resolution reference (PSNR, printed), determinism across thread counts, progressive
//! resizing, the pipeline's normalisation, the edge-case JPEGs and corrupt payloads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_loader::image::{
    CenterCropRGBImageDecoder, Crop, FloatType, ImagePipeline, Interpolation, Layout, NormalizeImage,
    RandomHorizontalFlip, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
};
use beton_loader::{FieldDecoder, Loader, OrderOption, SampleContext};
use beton_storage::{
    Dataset, FieldSpec, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer, WriterOptions,
};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn options(mode: WriteMode) -> ImageOptions {
    ImageOptions::with_mode(mode)
}

/// A dataset with one image field `image` (grey when `grey`) of the given sources.
fn write(path: &Path, sources: Vec<ImageSource>, mode: WriteMode, grey: bool) -> Arc<Dataset> {
    write_with(path, sources, options(mode), grey)
}

fn write_with(path: &Path, sources: Vec<ImageSource>, options: ImageOptions, grey: bool) -> Arc<Dataset> {
    let spec =
        if grey { FieldSpec::grey_image("image", options) } else { FieldSpec::rgb_image("image", options) };
    let n = sources.len() as u64;
    Writer::new(path, vec![spec], WriterOptions::default())
        .unwrap()
        .write_indexed(n, |i| Ok(vec![SampleValue::Image(sources[i as usize].clone())]))
        .unwrap();
    Arc::new(Dataset::open(path).unwrap())
}

fn constant(w: u32, h: u32, rgb: [u8; 3]) -> ImageSource {
    let data = (0..w * h).flat_map(|_| rgb).collect();
    ImageSource::Pixels(Pixels { width: w, height: h, channels: 3, data })
}

fn colour(i: u64) -> [u8; 3] {
    [(i * 37 % 256) as u8, (i * 91 % 256) as u8, (255 - i * 13 % 256) as u8]
}

/// Every image of every batch of one epoch, with its sample index.
fn epoch_images(loader: &mut Loader) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for b in loader.next_epoch().unwrap() {
        let b = b.unwrap();
        let col = b.column("image").unwrap();
        let n = col.spec.sample_bytes();
        for (k, &i) in b.indices().iter().enumerate() {
            out.push((i, col.bytes[k * n..(k + 1) * n].to_vec()));
        }
    }
    out
}

fn loader(ds: &Arc<Dataset>, dec: Arc<dyn FieldDecoder>, threads: usize) -> Loader {
    Loader::builder(Arc::clone(ds))
        .batch_size(4)
        .threads(threads)
        .seed(11)
        .order(OrderOption::Random)
        .drop_last(false)
        .decoder("image", dec)
        .build()
        .unwrap()
}

#[test]
fn constant_images_come_out_exact_raw_and_within_2_jpeg() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [(300, 200), (64, 128), (17, 9), (640, 480), (1000, 30)];
    let sources: Vec<ImageSource> =
        (0..20).map(|i| constant(sizes[i % 5].0, sizes[i % 5].1, colour(i as u64))).collect();
    for (mode, tolerance) in [(WriteMode::Raw, 0), (WriteMode::Jpg, 2)] {
        let ds = write(&dir.path().join(format!("{mode:?}.beton")), sources.clone(), mode, false);
        let decoders: [Arc<dyn FieldDecoder>; 3] = [
            Arc::new(RandomResizedCropRGBImageDecoder::new((32, 48)).flip(0.5)),
            Arc::new(RandomResizedCropRGBImageDecoder::new((224, 224))),
            Arc::new(CenterCropRGBImageDecoder::new((40, 40))),
        ];
        for dec in decoders {
            let images = epoch_images(&mut loader(&ds, dec, 2));
            assert_eq!(images.len(), 20);
            for (i, px) in images {
                let want = colour(i);
                for p in px.chunks_exact(3) {
                    for c in 0..3 {
                        let d = (i32::from(p[c]) - i32::from(want[c])).abs();
                        assert!(d <= tolerance, "{mode:?} sample {i}: {p:?} vs {want:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn grey_fields_come_out_replicated_to_rgb() {
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<ImageSource> = (0..6u8)
        .map(|i| ImageSource::Pixels(Pixels { width: 40, height: 30, channels: 1, data: vec![i * 40; 1200] }))
        .collect();
    for mode in [WriteMode::Raw, WriteMode::Jpg] {
        let ds = write(&dir.path().join(format!("grey-{mode:?}.beton")), sources.clone(), mode, true);
        let decoders: [Arc<dyn FieldDecoder>; 3] = [
            Arc::new(SimpleRGBImageDecoder),
            Arc::new(RandomResizedCropRGBImageDecoder::new((16, 24))),
            Arc::new(CenterCropRGBImageDecoder::new((50, 50))),
        ];
        for dec in decoders {
            for (i, px) in epoch_images(&mut loader(&ds, dec, 2)) {
                let want = i as i32 * 40;
                let tolerance = if mode == WriteMode::Raw { 0 } else { 2 };
                assert!(px.iter().all(|&v| (i32::from(v) - want).abs() <= tolerance), "{mode:?} sample {i}");
            }
        }
    }
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse =
        a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum::<f64>() / a.len() as f64;
    if mse == 0.0 {
        return 99.0;
    }
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

/// The reference: the whole image decoded at full resolution, the same crop, Lanczos3.
fn reference(px: &Pixels, crop: Crop, (h, w): (usize, usize)) -> Vec<u8> {
    let src = ImageRef::new(px.width, px.height, &px.data, PixelType::U8x3).unwrap();
    let mut dst = Image::new(w as u32, h as u32, PixelType::U8x3);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3)).crop(
        f64::from(crop.x),
        f64::from(crop.y),
        f64::from(crop.width),
        f64::from(crop.height),
    );
    Resizer::new().resize(&src, &mut dst, &options).unwrap();
    dst.into_vec()
}

/// `n` JPEGs of the bundled ImageFolder (or of `$BETON_BENCH_CORPUS`, an ImageFolder of
/// larger photos, when set), spread over the classes.
fn photos(n: usize) -> Vec<PathBuf> {
    let root = std::env::var_os("BETON_BENCH_CORPUS")
        .map_or_else(|| repo().join("examples/data/imagefolder"), PathBuf::from);
    let mut all: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    all.sort();
    // Every few, so that all classes are in.
    let step = (all.len() / n).max(1);
    all.into_iter().step_by(step).take(n).collect()
}

#[test]
fn crops_match_a_full_resolution_reference_psnr() {
    let dir = tempfile::tempdir().unwrap();
    let sources = photos(20).into_iter().map(ImageSource::File).collect();
    let ds = write(&dir.path().join("photos.beton"), sources, WriteMode::Jpg, false);
    for size in [224usize, 160, 64] {
        for (name, rrc) in [("RandomResizedCrop", true), ("CenterCrop", false)] {
            let mut scores = Vec::new();
            for epoch in 0..3 {
                for i in 0..ds.num_samples() {
                    let ctx = SampleContext { index: i, seed: 4, epoch, position: 0 };
                    let value = ds.get(i, 0).unwrap();
                    let img = value.as_image().unwrap();
                    let (w, h) = (u32::from(img.width), u32::from(img.height));
                    let mut out = vec![0u8; size * size * 3];
                    let crop = if rrc {
                        let dec = RandomResizedCropRGBImageDecoder::new((size, size));
                        dec.decode(value, &ctx, &mut [&mut out]).unwrap();
                        dec.crop(w, h, &ctx)
                    } else {
                        let dec = CenterCropRGBImageDecoder::new((size, size));
                        dec.decode(value, &ctx, &mut [&mut out]).unwrap();
                        beton_loader::image::center_crop(w, h, 224.0 / 256.0)
                    };
                    let want = reference(&img.decode().unwrap(), crop, (size, size));
                    scores.push(psnr(&out, &want));
                }
            }
            let mean = scores.iter().sum::<f64>() / scores.len() as f64;
            let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
            println!("PSNR {name} {size}px vs full decode + Lanczos3: mean {mean:.2} dB, min {min:.2} dB ({} crops)", scores.len());
            assert!(min >= 30.0, "{name} {size}: min PSNR {min:.2} dB");
        }
    }
}

/// JPEGs with restart markers (beton's) take the planar path: their raw Y, Cb, Cr planes
/// resized and converted after; JPEGs without (FFCV's bytes) the packed one: libjpeg-turbo's RGB,
/// chroma upsampled by it, then resized. The same crops agree closely (they differ in how chroma
/// is interpolated), whatever the output size and filter; normalising the planes directly gives
/// exactly what normalising the planar path's RGB gives.
#[test]
fn planar_and_packed_paths_agree() {
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<ImageSource> = photos(12).into_iter().map(ImageSource::File).collect();
    let planar = write(&dir.path().join("markers.beton"), sources.clone(), WriteMode::Jpg, false);
    let no_markers = ImageOptions { jpeg_restart_interval: 0, ..options(WriteMode::Jpg) };
    let packed = write_with(&dir.path().join("plain.beton"), sources, no_markers, false);
    for (size, interpolation) in
        [(160usize, Interpolation::Bicubic), (224, Interpolation::Area), (48, Interpolation::Bilinear)]
    {
        let dec = RandomResizedCropRGBImageDecoder::new((size, size)).interpolation(interpolation).flip(0.5);
        let mut scores = Vec::new();
        for i in 0..planar.num_samples() {
            let ctx = SampleContext { index: i, seed: 3, epoch: 0, position: 0 };
            let mut a = vec![0u8; size * size * 3];
            let mut b = a.clone();
            dec.decode(planar.get(i, 0).unwrap(), &ctx, &mut [&mut a]).unwrap();
            dec.decode(packed.get(i, 0).unwrap(), &ctx, &mut [&mut b]).unwrap();
            scores.push(psnr(&a, &b));
            // The fused normalisation (planes straight to f16 CHW) equals normalising `a`.
            for layout in [Layout::Chw, Layout::Hwc] {
                let norm = NormalizeImage::imagenet().dtype(FloatType::F16).layout(layout);
                let fused =
                    ImagePipeline::new(dec.clone()).then(RandomHorizontalFlip::default()).normalize(norm);
                let apart = ImagePipeline::new(SimpleRGBImageDecoderOf(a.clone(), size))
                    .then(RandomHorizontalFlip::default())
                    .normalize(norm);
                let (x, y) = (
                    run_pipeline(&fused, &planar, i, &ctx, size),
                    run_pipeline(&apart, &planar, i, &ctx, size),
                );
                assert_eq!(x, y, "sample {i} {size}px {layout:?}");
            }
        }
        let mean = scores.iter().sum::<f64>() / scores.len() as f64;
        let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "planar vs packed path, {size}px {interpolation:?}: PSNR mean {mean:.2} dB, min {min:.2} dB"
        );
        assert!(min >= 35.0, "{size}px {interpolation:?}: min PSNR {min:.2} dB");
    }
}

/// A decoder that writes the same pixels whatever the sample (to feed a pipeline known pixels).
struct SimpleRGBImageDecoderOf(Vec<u8>, usize);

impl FieldDecoder for SimpleRGBImageDecoderOf {
    fn columns(
        &self,
        ds: &Dataset,
        field: usize,
        _: u64,
    ) -> beton_loader::Result<Vec<beton_loader::ColumnSpec>> {
        let name = ds.fields()[field].name().to_string();
        Ok(vec![beton_loader::ColumnSpec {
            name,
            elem: beton_loader::ElemType::U8,
            shape: vec![self.1, self.1, 3],
        }])
    }

    fn decode(
        &self,
        _: beton_storage::Value<'_>,
        _: &SampleContext,
        out: &mut [&mut [u8]],
    ) -> beton_loader::Result<()> {
        out[0].copy_from_slice(&self.0);
        Ok(())
    }
}

/// `pipeline`'s output bytes for sample `i` of `ds` (epoch 0's columns declared first).
fn run_pipeline(pipeline: &ImagePipeline, ds: &Dataset, i: u64, ctx: &SampleContext, size: usize) -> Vec<u8> {
    let cols = pipeline.columns(ds, 0, ctx.epoch).unwrap();
    let mut out = vec![0u8; cols[0].sample_bytes()];
    assert_eq!(out.len(), size * size * 3 * 2);
    pipeline.decode(ds.get(i, 0).unwrap(), ctx, &mut [&mut out]).unwrap();
    out
}

#[test]
fn same_seed_same_crops_and_flips_with_1_and_2_threads() {
    let dir = tempfile::tempdir().unwrap();
    let sources = photos(12).into_iter().map(ImageSource::File).collect();
    let ds = write(&dir.path().join("photos.beton"), sources, WriteMode::Jpg, false);
    let dec: Arc<dyn FieldDecoder> = Arc::new(RandomResizedCropRGBImageDecoder::new((64, 64)).flip(0.5));
    let run = |threads| {
        let mut l = loader(&ds, Arc::clone(&dec), threads);
        [epoch_images(&mut l), epoch_images(&mut l)]
    };
    let one = run(1);
    assert_eq!(one, run(2), "1 and 2 threads");
    assert_ne!(one[0], one[1], "epochs differ");
    // The same sample in the same epoch, whatever its position: compare with a direct decode.
    let (i, px) = &one[1][3];
    let mut out = vec![0u8; 64 * 64 * 3];
    let ctx = SampleContext { index: *i, seed: 11, epoch: 1, position: 0 };
    dec.decode(ds.get(*i, 0).unwrap(), &ctx, &mut [&mut out]).unwrap();
    assert_eq!(&out, px);
    // A different seed gives different crops.
    let seeded = |seed: u64| {
        Loader::builder(Arc::clone(&ds))
            .batch_size(4)
            .seed(seed)
            .order(OrderOption::Sequential)
            .decoder("image", Arc::clone(&dec))
            .build()
            .unwrap()
    };
    assert_ne!(epoch_images(&mut seeded(12)), epoch_images(&mut seeded(11)));
}

#[test]
fn flip_probability_one_mirrors_the_unflipped_output() {
    let dir = tempfile::tempdir().unwrap();
    let sources = photos(4).into_iter().map(ImageSource::File).collect();
    let ds = write(&dir.path().join("photos.beton"), sources, WriteMode::Jpg, false);
    let (plain, flipped) = (
        RandomResizedCropRGBImageDecoder::new((32, 40)),
        RandomResizedCropRGBImageDecoder::new((32, 40)).flip(1.0),
    );
    for i in 0..4 {
        let ctx = SampleContext { index: i, seed: 1, epoch: 0, position: 0 };
        let (mut a, mut b) = (vec![0u8; 32 * 40 * 3], vec![0u8; 32 * 40 * 3]);
        plain.decode(ds.get(i, 0).unwrap(), &ctx, &mut [&mut a]).unwrap();
        flipped.decode(ds.get(i, 0).unwrap(), &ctx, &mut [&mut b]).unwrap();
        for (ra, rb) in a.chunks_exact(40 * 3).zip(b.chunks_exact(40 * 3)) {
            let mirrored: Vec<u8> = ra.chunks_exact(3).rev().flatten().copied().collect();
            assert_eq!(mirrored, rb);
        }
    }
}

#[test]
fn progressive_resizing_changes_the_output_size_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let sources = (0..6).map(|i| constant(100, 80, colour(i))).collect();
    let ds = write(&dir.path().join("c.beton"), sources, WriteMode::Raw, false);
    let dec = RandomResizedCropRGBImageDecoder::new((0, 0)).size_schedule(|e| (16 + 8 * e as usize, 24));
    let mut l = loader(&ds, Arc::new(dec.clone()), 2);
    for e in 0..3 {
        let mut epoch = l.next_epoch().unwrap();
        let b = epoch.next().unwrap().unwrap();
        assert_eq!(b.column("image").unwrap().spec.shape, [16 + 8 * e, 24, 3]);
    }
    // Through a normalising pipeline too: CHW floats of each epoch's size.
    let pipe =
        ImagePipeline::new(dec).then(RandomHorizontalFlip::default()).normalize(NormalizeImage::imagenet());
    let mut l = loader(&ds, Arc::new(pipe), 2);
    for e in 0..3 {
        let images = epoch_images(&mut l);
        assert_eq!(images.len(), 6);
        assert!(images.iter().all(|(_, px)| px.len() == 3 * (16 + 8 * e) * 24 * 4));
    }
}

#[test]
fn simple_decoder_needs_one_size_and_names_the_first_other() {
    let dir = tempfile::tempdir().unwrap();
    let mut sources: Vec<ImageSource> = (0..5).map(|i| constant(20, 10, colour(i))).collect();
    let ds = write(&dir.path().join("same.beton"), sources.clone(), WriteMode::Jpg, false);
    let images = epoch_images(&mut loader(&ds, Arc::new(SimpleRGBImageDecoder), 1));
    for (i, px) in images {
        assert_eq!(px.len(), 10 * 20 * 3);
        let want = ds.get(i, 0).unwrap().as_image().unwrap().decode().unwrap();
        assert_eq!(px, want.data, "sample {i}: exactly the full decode");
    }
    sources[3] = constant(10, 20, [0, 0, 0]);
    let ds = write(&dir.path().join("differ.beton"), sources, WriteMode::Raw, false);
    let mut l = Loader::builder(ds).decoder("image", Arc::new(SimpleRGBImageDecoder)).build().unwrap();
    let err = match l.next_epoch() {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an epoch of images of two sizes started"),
    };
    assert!(err.contains("sample 3 is 20x10"), "{err}");
}

#[test]
fn pipeline_normalizes_to_f32_and_f16_in_chw_and_hwc() {
    let dir = tempfile::tempdir().unwrap();
    let sources = (0..8).map(|i| constant(50, 40, colour(i))).collect();
    let ds = write(&dir.path().join("c.beton"), sources, WriteMode::Raw, false);
    let norm = NormalizeImage::imagenet();
    for (dtype, layout) in
        [(FloatType::F32, Layout::Chw), (FloatType::F32, Layout::Hwc), (FloatType::F16, Layout::Chw)]
    {
        let pipe = ImagePipeline::new(CenterCropRGBImageDecoder::new((8, 6)))
            .then(RandomHorizontalFlip::default())
            .normalize(norm.dtype(dtype).layout(layout));
        let mut l = loader(&ds, Arc::new(pipe), 2);
        for b in l.next_epoch().unwrap() {
            let b = b.unwrap();
            let col = b.column("image").unwrap();
            let shape = if layout == Layout::Chw { vec![3, 8, 6] } else { vec![8, 6, 3] };
            assert_eq!(col.spec.shape, shape);
            let n = col.spec.sample_bytes();
            for (k, &i) in b.indices().iter().enumerate() {
                let bytes = &col.bytes[k * n..(k + 1) * n];
                let values: Vec<f32> = match dtype {
                    FloatType::F32 => {
                        bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
                    }
                    FloatType::F16 => {
                        bytes.chunks_exact(2).map(|c| f16(u16::from_le_bytes([c[0], c[1]]))).collect()
                    }
                };
                for (j, v) in values.iter().enumerate() {
                    let c = if layout == Layout::Chw { j / 48 } else { j % 3 };
                    let want = (f32::from(colour(i)[c]) - norm.mean[c]) / norm.std[c];
                    let tol = if dtype == FloatType::F16 { 2e-3 * want.abs().max(1.0) } else { 0.0 };
                    assert!((v - want).abs() <= tol, "sample {i} value {j}: {v} vs {want}");
                }
            }
        }
    }
}

/// IEEE half to f32 (normal and zero values are enough here).
fn f16(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = f32::from(h & 0x3ff);
    if exp == 0 {
        return sign * man * 2f32.powi(-24);
    }
    sign * (1.0 + man / 1024.0) * 2f32.powi(exp - 15)
}

fn edge(name: &str) -> Vec<u8> {
    std::fs::read(repo().join("tests/data/edge-jpegs").join(name)).unwrap()
}

/// The file bytes of sample `i`'s (only) payload.
fn payload_range(ds: &Dataset, i: u64) -> std::ops::Range<usize> {
    let (lo, hi) = ds.sample_span(i).unwrap();
    lo as usize..hi as usize
}

#[test]
fn edge_jpegs_decode_through_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "arithmetic.jpg",
        "baseline-411.jpg",
        "baseline-420.jpg",
        "baseline-422.jpg",
        "baseline-440.jpg",
        "baseline-444.jpg",
        "grey.jpg",
        "icc-srgb.jpg",
        "odd-17x9.jpg",
        "progressive.jpg",
        "qtables-16bit.jpg",
        "restart-3mcu.jpg",
        "rgb-no-transform.jpg",
        "tiny-1x1.jpg",
        "trailing-data-after-eoi.jpg",
        "tall-8x65500.jpg",
        "wide-65500x8.jpg",
        "cmyk-adobe.jpg",
        "ycck-adobe.jpg",
    ];
    // YCbCr ones are stored as they are (passthrough); the others are re-encoded by the writer.
    let sources = names.iter().map(|n| ImageSource::Encoded(edge(n))).collect();
    let ds = write(&dir.path().join("edge.beton"), sources, WriteMode::Jpg, false);
    for dec in [
        Arc::new(CenterCropRGBImageDecoder::new((24, 24))) as Arc<dyn FieldDecoder>,
        Arc::new(RandomResizedCropRGBImageDecoder::new((8, 8))),
    ] {
        let images = epoch_images(&mut loader(&ds, dec, 2));
        assert_eq!(images.len(), names.len());
    }
    // Compare the 96x64 ones with the reference.
    for (i, name) in names.iter().enumerate() {
        let img = ds.get(i as u64, 0).unwrap().as_image().unwrap();
        if (img.width, img.height) != (96, 64) {
            continue;
        }
        let mut out = vec![0u8; 32 * 32 * 3];
        let ctx = SampleContext { index: i as u64, seed: 0, epoch: 0, position: 0 };
        let dec = CenterCropRGBImageDecoder::new((32, 32));
        dec.decode(ds.get(i as u64, 0).unwrap(), &ctx, &mut [&mut out]).unwrap();
        let want = reference(
            &img.decode().unwrap(),
            beton_loader::image::center_crop(96, 64, 224.0 / 256.0),
            (32, 32),
        );
        let p = psnr(&out, &want);
        assert!(p >= 30.0, "{name}: PSNR {p:.1}");
    }

    // Grey, stored as a 1-component JPEG in a grey field: replicated to RGB.
    let ds = write(
        &dir.path().join("grey.beton"),
        vec![ImageSource::Encoded(edge("grey.jpg")); 3],
        WriteMode::Jpg,
        true,
    );
    let stored = ds.get(0, 0).unwrap().as_image().unwrap();
    let luma = stored.decode().unwrap();
    // Passed through (rewritten losslessly with restart markers): the same pixels.
    let original = beton_storage::ImageRef { data: &edge("grey.jpg"), ..stored }.decode().unwrap();
    assert_eq!(luma.data, original.data, "passed through");
    for (_, px) in epoch_images(&mut loader(&ds, Arc::new(SimpleRGBImageDecoder), 1)) {
        let want: Vec<u8> = luma.data.iter().flat_map(|&g| [g, g, g]).collect();
        assert_eq!(px, want);
    }
    let mut l = loader(&ds, Arc::new(RandomResizedCropRGBImageDecoder::new((16, 16))), 1);
    for (_, px) in epoch_images(&mut l) {
        assert!(px.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    }
}

/// A dataset of `n` copies of baseline-420.jpg padded with zeros after EOI (stored as is), in
/// which sample `bad`'s payload is then replaced in the file by `patch` (same length or shorter,
/// the rest left as padding).
fn patched(dir: &Path, name: &str, n: u64, bad: u64, patch: &[u8]) -> Arc<Dataset> {
    let mut jpeg = edge("baseline-420.jpg");
    jpeg.resize(jpeg.len().max(patch.len()) + 64, 0);
    let path = dir.join(name);
    // Without restart markers, so that the bytes are stored as they are.
    let as_is = ImageOptions { jpeg_restart_interval: 0, ..options(WriteMode::Jpg) };
    let ds = write_with(&path, vec![ImageSource::Encoded(jpeg.clone()); n as usize], as_is, false);
    let range = payload_range(&ds, bad);
    drop(ds);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[range.clone()], jpeg.as_slice(), "passthrough stores the bytes as they are");
    bytes[range.start..range.start + patch.len()].copy_from_slice(patch);
    std::fs::write(&path, bytes).unwrap();
    Arc::new(Dataset::open(&path).unwrap())
}

#[test]
fn cmyk_payloads_take_the_full_decoder() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["cmyk-adobe.jpg", "ycck-adobe.jpg"] {
        let ds = patched(dir.path(), name, 4, 2, &edge(name));
        let img = ds.get(2, 0).unwrap().as_image().unwrap();
        let want = reference(&img.decode().unwrap(), Crop::full(96, 64), (64, 96));
        let mut out = vec![0u8; 64 * 96 * 3];
        let ctx = SampleContext { index: 2, seed: 0, epoch: 0, position: 0 };
        SimpleRGBImageDecoder.decode(ds.get(2, 0).unwrap(), &ctx, &mut [&mut out]).unwrap();
        assert_eq!(out, want, "{name}");
        let images =
            epoch_images(&mut loader(&ds, Arc::new(RandomResizedCropRGBImageDecoder::new((16, 16))), 2));
        assert_eq!(images.len(), 4);
    }
}

#[test]
fn corrupt_jpeg_payloads_are_errors_naming_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let jpeg = edge("baseline-420.jpg");
    let half = jpeg.len() / 2;
    let truncated: Vec<u8> = jpeg[..half].iter().copied().chain([0xFF, 0xD9]).chain(vec![0; half]).collect();
    let junk = edge("random-junk.jpg");
    let garbage = edge("soi-then-garbage.jpg");
    let cases: [(&str, &[u8], bool); 3] =
        [("truncated", &truncated, false), ("junk", &junk, true), ("soi-then-garbage", &garbage, true)];
    for (name, patch, any_decoder) in cases {
        let ds = patched(dir.path(), &format!("{name}.beton"), 12, 9, patch);
        let mut decoders: Vec<Arc<dyn FieldDecoder>> = vec![
            Arc::new(SimpleRGBImageDecoder),
            Arc::new(CenterCropRGBImageDecoder::new((16, 16)).ratio(1.0)),
        ];
        if any_decoder {
            decoders.push(Arc::new(RandomResizedCropRGBImageDecoder::new((16, 16))));
        }
        for dec in decoders {
            let mut l = Loader::builder(Arc::clone(&ds))
                .batch_size(4)
                .threads(2)
                .decoder("image", dec)
                .build()
                .unwrap();
            let results: Vec<_> = l.next_epoch().unwrap().collect();
            assert_eq!(results.len(), 3, "{name}: batches 0, 1, then the error");
            let err = results[2].as_ref().unwrap_err().to_string();
            assert!(err.starts_with("sample 9, field 'image': corrupt JPEG"), "{name}: {err}");
        }
    }
}

/// Two random crops of one image (as SSL methods train on): each view has its own columns and
/// its own randomness, and both are the same whatever the thread count.
#[test]
fn two_views_of_one_field_crop_independently() {
    let dir = tempfile::tempdir().unwrap();
    let sources = photos(8).into_iter().map(ImageSource::File).collect();
    let ds = write(&dir.path().join("views.beton"), sources, WriteMode::Jpg, false);
    let rrc = || -> Arc<dyn FieldDecoder> { Arc::new(RandomResizedCropRGBImageDecoder::new((48, 48))) };
    let run = |threads| {
        let mut l = Loader::builder(Arc::clone(&ds))
            .batch_size(8)
            .threads(threads)
            .seed(5)
            .decoder("image", rrc())
            .view("view2", "image", rrc())
            .build()
            .unwrap();
        let b = l.next_epoch().unwrap().next().unwrap().unwrap();
        let names: Vec<String> = b.specs().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, ["image", "view2"]);
        (b.column("image").unwrap().bytes.to_vec(), b.column("view2").unwrap().bytes.to_vec())
    };
    let (a, b) = run(1);
    assert_eq!((a.clone(), b.clone()), run(2), "views do not depend on threads");
    let per = 48 * 48 * 3;
    let differ = (0..8).filter(|k| a[k * per..(k + 1) * per] != b[k * per..(k + 1) * per]).count();
    assert!(differ >= 7, "the two views crop differently ({differ} of 8 differ)");
    let dup = Loader::builder(Arc::clone(&ds)).view("image", "image", rrc()).build();
    assert!(dup.err().unwrap().to_string().contains("already the name"));
}

#[test]
fn interpolation_options_area_averages_and_all_keep_constant_colours() {
    let dir = tempfile::tempdir().unwrap();
    // An 8x8 raw image whose 2x2 blocks have known means: Area halving gives those means.
    let data: Vec<u8> = (0..64u32)
        .flat_map(|p| {
            let (x, y) = (p % 8, p / 8);
            let v = (x * 20 + y * 9) as u8;
            [v, 255 - v, v / 2]
        })
        .collect();
    let src = ImageSource::Pixels(Pixels { width: 8, height: 8, channels: 3, data: data.clone() });
    let ds = write(&dir.path().join("area.beton"), vec![src], WriteMode::Raw, false);
    let dec = CenterCropRGBImageDecoder::new((4, 4)).ratio(1.0).interpolation(Interpolation::Area);
    let (_, px) = epoch_images(&mut loader(&ds, Arc::new(dec), 1)).remove(0);
    for (k, out) in px.iter().enumerate() {
        let (c, p) = (k % 3, k / 3);
        let (bx, by) = ((p % 4 * 2) as u32, (p / 4 * 2) as u32);
        let at = |x: u32, y: u32| u32::from(data[((y * 8 + x) * 3) as usize + c]);
        let mean = (at(bx, by) + at(bx + 1, by) + at(bx, by + 1) + at(bx + 1, by + 1)) as f64 / 4.0;
        assert!((f64::from(*out) - mean).abs() <= 0.5 + 1e-9, "value {k}: {out} vs block mean {mean}");
    }
    // Constant colours stay exact through every filter, shrinking and enlarging.
    for interpolation in [Interpolation::Bicubic, Interpolation::Bilinear, Interpolation::Area] {
        let ds = write(
            &dir.path().join(format!("c-{interpolation:?}.beton")),
            vec![constant(300, 200, [12, 200, 99]), constant(40, 30, [250, 3, 77])],
            WriteMode::Raw,
            false,
        );
        for out in [(64, 64), (96, 128)] {
            let dec = RandomResizedCropRGBImageDecoder::new(out).interpolation(interpolation);
            for (i, px) in epoch_images(&mut loader(&ds, Arc::new(dec), 2)) {
                let want = if i == 0 { [12, 200, 99] } else { [250, 3, 77] };
                assert!(px.chunks_exact(3).all(|p| p == want), "{interpolation:?} {out:?} sample {i}");
            }
        }
    }
    assert_eq!(Interpolation::parse("area").unwrap(), Interpolation::Area);
    let err = Interpolation::parse("lanczos").unwrap_err().to_string();
    assert!(err.contains("'lanczos'") && err.contains("bicubic"), "{err}");
}
