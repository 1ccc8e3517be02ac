//! Every image path, pinned to the byte: the writer's encodings (re-encode, passthrough, restart
//! markers on and off, downscale, raw, grey, EXIF orientation) and every loader decoder and image
//! operation, over the bundled ImageFolder photos and the edge-case JPEGs, hashed and compared
//! with checksums recorded in `tests/data/image-checksums.json`.
//!
//! The recording was made before the image code was reorganised (issue 21); the test proves that
//! no move changed a stored byte or a decoded pixel. A deliberate change of output re-records with
//! `BETON_RECORD_IMAGE_CHECKSUMS=1 cargo test -p beton-loader --test image_checksums`, and says so
//! in its commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_loader::image::{
    CenterCropRGBImageDecoder, Cutout, FloatType, ImagePipeline, Interpolation, Layout, NormalizeImage,
    RandomBrightness, RandomContrast, RandomHorizontalFlip, RandomResizedCropRGBImageDecoder,
    RandomSaturation, RandomTranslate, RandomVerticalFlip, SimpleRGBImageDecoder,
};
use beton_loader::{FieldDecoder, Loader, OrderOption};
use beton_storage::image::{decode, encode_image};
use beton_storage::{
    Channels, Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, SampleValue, Value, WriteMode,
    Writer, WriterOptions,
};
use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn checksums_path() -> PathBuf {
    repo().join("tests/data/image-checksums.json")
}

/// The inputs: every bundled ImageFolder photo (JPEG and PNG) and every edge-case JPEG, sorted
/// by path, with a short name.
fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let folder = repo().join("examples/data/imagefolder");
    for class in std::fs::read_dir(&folder).unwrap() {
        for f in std::fs::read_dir(class.unwrap().path()).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    for f in std::fs::read_dir(repo().join("tests/data/edge-jpegs")).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|e| e == "jpg") {
            files.push(p);
        }
    }
    files.sort();
    let root = repo();
    files
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn sha(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// One line per input: its hash, or `error` where the path refuses it.
type Sums = BTreeMap<String, String>;

/// The writer's configurations: (name, field spec maker).
fn writer_configs() -> Vec<(&'static str, FieldSpec)> {
    let o = |write_mode, max_resolution, passthrough, restart| ImageOptions {
        write_mode,
        max_resolution,
        jpeg_quality: 90,
        jpeg_passthrough: passthrough,
        jpeg_restart_interval: restart,
        verify: true,
        alpha_background: None,
    };
    vec![
        ("jpg-default", FieldSpec::rgb_image("image", o(WriteMode::Jpg, None, true, 1))),
        ("jpg-reencode-max200", FieldSpec::rgb_image("image", o(WriteMode::Jpg, Some(200), false, 1))),
        ("jpg-no-restart", FieldSpec::rgb_image("image", o(WriteMode::Jpg, None, true, 0))),
        (
            "jpg-restart-4-q75",
            FieldSpec::rgb_image(
                "image",
                ImageOptions { jpeg_quality: 75, ..o(WriteMode::Jpg, None, false, 4) },
            ),
        ),
        ("raw-max160", FieldSpec::rgb_image("image", o(WriteMode::Raw, Some(160), true, 1))),
        ("smart", FieldSpec::rgb_image("image", o(WriteMode::Smart { threshold: 40_000 }, None, true, 1))),
        ("grey-jpg", FieldSpec::grey_image("image", o(WriteMode::Jpg, None, true, 1))),
        ("grey-raw", FieldSpec::grey_image("image", o(WriteMode::Raw, Some(128), true, 1))),
    ]
}

/// Writes the inputs the writer accepts (one sample each, in input order) and returns the file
/// with, per sample, the input's name.
fn write(
    dir: &Path,
    name: &str,
    spec: FieldSpec,
    inputs: &[(String, Vec<u8>)],
    sums: &mut Sums,
) -> (Arc<Dataset>, Vec<String>) {
    // Which inputs this configuration stores: the ones it encodes without error.
    let channels = if !matches!(spec.ty, FieldType::GreyImage) { Channels::Rgb } else { Channels::Grey };
    let mut kept = Vec::new();
    for (input, bytes) in inputs {
        if encode_image(&ImageSource::Encoded(bytes.clone()), &spec.image, channels, 0.0).is_ok() {
            kept.push(input.clone());
        } else {
            sums.insert(format!("write/{name}/{input}"), "error".into());
        }
    }
    let by_name: BTreeMap<&String, &Vec<u8>> = inputs.iter().map(|(n, b)| (n, b)).collect();
    let path = dir.join(format!("{name}.beton"));
    Writer::new(&path, vec![spec], WriterOptions::default())
        .unwrap()
        .write_indexed(kept.len() as u64, |i| {
            Ok(vec![SampleValue::Image(ImageSource::Encoded(by_name[&kept[i as usize]].clone()))])
        })
        .unwrap();
    let ds = Arc::new(Dataset::open(&path).unwrap());
    for (i, input) in kept.iter().enumerate() {
        let Value::Image(img) = ds.get(i as u64, 0).unwrap() else { panic!("not an image") };
        sums.insert(
            format!("write/{name}/{input}"),
            format!("{:?} {}x{} {}", img.mode, img.width, img.height, sha(img.data)),
        );
        let pixels = img.decode().map(|p| sha(&p.data)).unwrap_or_else(|_| "error".into());
        sums.insert(format!("decode_stored/{name}/{input}"), pixels);
    }
    (ds, kept)
}

/// Every image of one epoch (sequential order) through `dec`, hashed per sample.
fn load(ds: &Arc<Dataset>, dec: Arc<dyn FieldDecoder>, threads: usize) -> Result<Vec<String>, String> {
    let mut loader = Loader::builder(Arc::clone(ds))
        .batch_size(3)
        .threads(threads)
        .seed(7)
        .order(OrderOption::Sequential)
        .drop_last(false)
        .decoder("image", dec)
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in loader.next_epoch().map_err(|e| e.to_string())? {
        let b = b.map_err(|e| e.to_string())?;
        let col = b.column("image").unwrap();
        let n = col.spec.sample_bytes();
        for k in 0..b.indices().len() {
            out.push(sha(&col.bytes[k * n..(k + 1) * n]));
        }
    }
    Ok(out)
}

/// [`load`] for a decoder that needs images of one size: the rows grouped by size, each group
/// copied byte for byte into a file of its own and loaded alone, the hashes put back in row order.
fn load_by_size(ds: &Arc<Dataset>, dec: Arc<dyn FieldDecoder>, dir: &Path) -> Result<Vec<String>, String> {
    let mut by_size: BTreeMap<(u16, u16), Vec<u64>> = BTreeMap::new();
    for i in 0..ds.num_samples() {
        let Value::Image(img) = ds.get(i, 0).unwrap() else { panic!("not an image") };
        by_size.entry((img.width, img.height)).or_default().push(i);
    }
    let spec = FieldSpec::new("image", ds.fields()[0].field_type().clone());
    let mut out = vec![String::new(); ds.num_samples() as usize];
    for rows in by_size.into_values() {
        let path = dir.join("one-size.beton");
        Writer::new(&path, vec![spec.clone()], WriterOptions::default())
            .unwrap()
            .write_indexed(rows.len() as u64, |k| {
                Ok(vec![ds.get(rows[k as usize], 0).unwrap().to_sample_value()])
            })
            .unwrap();
        let group = Arc::new(Dataset::open(&path).unwrap());
        for (row, s) in rows.into_iter().zip(load(&group, Arc::clone(&dec), 2)?) {
            out[row as usize] = s;
        }
    }
    Ok(out)
}

fn decoders() -> Vec<(&'static str, Arc<dyn FieldDecoder>)> {
    let norm = NormalizeImage::imagenet;
    vec![
        ("simple", Arc::new(SimpleRGBImageDecoder)),
        ("rrc-160", Arc::new(RandomResizedCropRGBImageDecoder::new((160, 160)))),
        ("rrc-32-flip", Arc::new(RandomResizedCropRGBImageDecoder::new((32, 32)).flip(0.5))),
        (
            "rrc-96x64-bilinear",
            Arc::new(RandomResizedCropRGBImageDecoder::new((96, 64)).interpolation(Interpolation::Bilinear)),
        ),
        (
            "rrc-48-area-scale",
            Arc::new(
                RandomResizedCropRGBImageDecoder::new((48, 48))
                    .interpolation(Interpolation::Area)
                    .scale((0.3, 0.9))
                    .ratio((0.5, 2.0)),
            ),
        ),
        ("center-224", Arc::new(CenterCropRGBImageDecoder::new((224, 224)))),
        ("center-40-ratio", Arc::new(CenterCropRGBImageDecoder::new((40, 40)).ratio(0.5))),
        (
            "pipe-rrc-flip-f32-chw",
            Arc::new(
                ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((64, 64)))
                    .then(RandomHorizontalFlip::default())
                    .normalize(norm().dtype(FloatType::F32).layout(Layout::Chw)),
            ),
        ),
        (
            "pipe-rrc-f16-hwc",
            Arc::new(
                ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((80, 80)))
                    .normalize(norm().dtype(FloatType::F16).layout(Layout::Hwc)),
            ),
        ),
        (
            "pipe-center-f16-chw",
            Arc::new(
                ImagePipeline::new(CenterCropRGBImageDecoder::new((56, 56)))
                    .normalize(norm().dtype(FloatType::F16).layout(Layout::Chw)),
            ),
        ),
        (
            "pipe-simple-f32-hwc",
            Arc::new(ImagePipeline::new(SimpleRGBImageDecoder).normalize(norm().layout(Layout::Hwc))),
        ),
        (
            "pipe-every-op",
            Arc::new(
                ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((40, 40)))
                    .then(RandomVerticalFlip { flip_prob: 0.5 })
                    .then(RandomTranslate { padding: 4, fill: [1, 2, 3] })
                    .then(Cutout { crop_size: 9, fill: [200, 100, 0] })
                    .then(RandomBrightness { magnitude: 0.4, p: 0.7 })
                    .then(RandomContrast { magnitude: 0.4, p: 0.7 })
                    .then(RandomSaturation { magnitude: 0.4, p: 0.7 }),
            ),
        ),
        (
            "pipe-ops-then-normalize",
            Arc::new(
                ImagePipeline::new(CenterCropRGBImageDecoder::new((32, 32)))
                    .then(RandomHorizontalFlip { flip_prob: 0.5 })
                    .then(Cutout { crop_size: 5, fill: [0, 0, 0] })
                    .normalize(
                        NormalizeImage::new([10.0, 20.0, 30.0], [2.0, 3.0, 4.0]).dtype(FloatType::F16),
                    ),
            ),
        ),
    ]
}

fn compute() -> Sums {
    let inputs = inputs();
    let mut sums = Sums::new();
    // The source decoders: strict (EXIF orientation applied), RGB and grey.
    for (name, bytes) in &inputs {
        for (ch, c) in [("rgb", Channels::Rgb), ("grey", Channels::Grey)] {
            let v = decode(bytes, c).map(|p| format!("{}x{} {}", p.width, p.height, sha(&p.data)));
            sums.insert(format!("decode/{ch}/{name}"), v.unwrap_or_else(|_| "error".into()));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for (config, spec) in writer_configs() {
        let (ds, kept) = write(dir.path(), config, spec, &inputs, &mut sums);
        // FFCV's fast-IDCT decode of every stored image.
        for (i, input) in kept.iter().enumerate() {
            let Value::Image(img) = ds.get(i as u64, 0).unwrap() else { panic!("not an image") };
            let v = img.decode_like_ffcv().map(|p| sha(&p.data)).unwrap_or_else(|_| "error".into());
            sums.insert(format!("decode_stored_like_ffcv/{config}/{input}"), v);
        }
        if config == "smart" {
            continue; // the same loader paths as jpg-default and raw
        }
        for (dec_name, dec) in decoders() {
            // Every decoder on the main encodings; the others through the distinct paths only.
            let few = match config {
                "jpg-default" | "jpg-no-restart" | "raw-max160" => false,
                c if c.starts_with("grey") => !matches!(dec_name, "simple" | "rrc-32-flip" | "pipe-every-op"),
                _ => !matches!(dec_name, "simple" | "rrc-160" | "center-224" | "pipe-rrc-flip-f32-chw"),
            };
            if few {
                continue;
            }
            let loaded = if dec_name.contains("simple") {
                // The simple decoder outputs whole images: one loader per image size.
                load_by_size(&ds, dec, dir.path())
            } else {
                load(&ds, dec, 2)
            };
            match loaded {
                Ok(per_sample) => {
                    for (input, s) in kept.iter().zip(per_sample) {
                        sums.insert(format!("load/{config}/{dec_name}/{input}"), s);
                    }
                }
                Err(_) => {
                    sums.insert(format!("load/{config}/{dec_name}"), "error".into());
                }
            }
        }
    }
    sums
}

/// The per-input hashes folded into one line per path and configuration (the recording stays
/// small): the number of inputs, a hash over all their lines, and the first 4 hex digits of each
/// input's hash, in input order (which input changed, when one does).
fn grouped(sums: &Sums) -> Sums {
    let mut groups: BTreeMap<String, Vec<(&String, &String)>> = BTreeMap::new();
    for (k, v) in sums {
        let group = match k.find("examples/").or_else(|| k.find("tests/data/")) {
            Some(at) => k[..at - 1].to_string(),
            None => k.clone(),
        };
        groups.entry(group).or_default().push((k, v));
    }
    groups
        .into_iter()
        .map(|(g, lines)| {
            let mut all = Sha256::new();
            let mut short = String::new();
            for (k, v) in &lines {
                all.update(k.as_bytes());
                all.update(v.as_bytes());
                short.push_str(if *v == "error" { "err!" } else { &v[v.len() - 4..] });
            }
            let all: String = all.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
            (g, format!("{} {all} {short}", lines.len()))
        })
        .collect()
}

#[test]
fn every_image_path_gives_the_recorded_bytes() {
    let all = compute();
    // Not mostly errors: the inputs a path refuses are the few the edge-case manifest says.
    let errors = all.values().filter(|v| *v == "error").count();
    assert!(all.len() > 10_000 && errors * 50 < all.len(), "{errors} errors in {}", all.len());
    let sums = grouped(&all);
    let path = checksums_path();
    if std::env::var_os("BETON_RECORD_IMAGE_CHECKSUMS").is_some() {
        let text = serde_json::to_string_pretty(&sums).unwrap();
        std::fs::write(&path, text + "\n").unwrap();
        eprintln!("recorded {} checksums into {}", sums.len(), path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let recorded: Sums = serde_json::from_str(&text).unwrap();
    let mut wrong = Vec::new();
    for (k, v) in &recorded {
        match sums.get(k) {
            Some(got) if got == v => {}
            Some(got) => wrong.push(format!("{k}: recorded {v}, now {got}")),
            None => wrong.push(format!("{k}: recorded {v}, now missing")),
        }
    }
    for k in sums.keys().filter(|k| !recorded.contains_key(*k)) {
        wrong.push(format!("{k}: not recorded"));
    }
    assert!(
        wrong.is_empty(),
        "{} of {} image checksums differ:\n{}",
        wrong.len(),
        recorded.len(),
        wrong.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The loader's output does not depend on its thread count (one decoder, each write mode).
#[test]
fn checksums_do_not_depend_on_threads() {
    let inputs: Vec<_> = inputs().into_iter().step_by(9).collect();
    let dir = tempfile::tempdir().unwrap();
    for (config, spec) in writer_configs().into_iter().take(3) {
        let (ds, _) = write(dir.path(), config, spec, &inputs, &mut Sums::new());
        for (_, dec) in decoders().into_iter().skip(7).take(3) {
            assert_eq!(load(&ds, Arc::clone(&dec), 1).unwrap(), load(&ds, dec, 2).unwrap(), "{config}");
        }
    }
}

/// A JPEG without restart markers (what FFCV's writer stores) loads exactly as the same JPEG with
/// a restart marker per MCU (what beton's writer stores): its crops are cut out through a seek
/// index, the same MCUs as the restart slices, so every crop decoder gives the same bytes on
/// both files. Only JPEGs the index declines (arithmetic coding, progressive, ... stored as
/// they are) take the packed-RGB path and may differ.
#[test]
fn jpegs_without_restart_markers_load_as_with_them() {
    let inputs = inputs();
    let dir = tempfile::tempdir().unwrap();
    let configs = writer_configs();
    let spec = |name: &str| configs.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    let (marked, kept) = write(dir.path(), "marked", spec("jpg-default"), &inputs, &mut Sums::new());
    let (plain, kept_plain) = write(dir.path(), "plain", spec("jpg-no-restart"), &inputs, &mut Sums::new());
    assert_eq!(kept, kept_plain);
    // The stored JPEGs without restart markers that have no seek index.
    let unindexed: Vec<usize> = (0..kept.len())
        .filter(|&i| {
            let Value::Image(img) = plain.get(i as u64, 0).unwrap() else { panic!("not an image") };
            beton_storage::jpeg::entropy::SeekIndex::build(img.data).is_none()
        })
        .collect();
    assert!(unindexed.len() <= 4, "{} of {} not indexed", unindexed.len(), kept.len());
    for (name, dec) in decoders().into_iter().filter(|(n, _)| !n.contains("simple")) {
        let (a, b) = (load(&marked, Arc::clone(&dec), 2).unwrap(), load(&plain, dec, 2).unwrap());
        for (i, input) in kept.iter().enumerate().filter(|(i, _)| !unindexed.contains(i)) {
            assert_eq!(a[i], b[i], "{name}: {input}");
        }
    }
}
