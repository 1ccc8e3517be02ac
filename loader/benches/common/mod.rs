//! What the image benchmarks share: the source images and the `.beton` files written from them.

use std::path::{Path, PathBuf};

use beton_storage::{
    Dataset, FieldSpec, ImageOptions, ImageSource, SampleValue, WriteMode, Writer, WriterOptions,
};

/// The JPEG and PNG files of an ImageFolder, sorted.
pub fn sources() -> (String, Vec<PathBuf>) {
    let root = std::env::var_os("BETON_BENCH_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/imagefolder"),
        PathBuf::from,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg" || e == "png"))
        .collect();
    files.sort();
    (root.display().to_string(), files)
}

/// The files written at `max_res` in `write_mode`, JPEGs with a restart marker every
/// `restart_interval` MCUs (beton's default 1; 0: none, as FFCV writes).
pub fn dataset_in(files: &[PathBuf], max_res: u32, write_mode: WriteMode, restart_interval: u16) -> Dataset {
    let tag = if write_mode == WriteMode::Raw { "raw" } else { "jpg" };
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("image-bench-{tag}-{max_res}-rst{restart_interval}.beton"));
    let options = ImageOptions {
        jpeg_restart_interval: restart_interval,
        write_mode,
        max_resolution: Some(max_res),
        jpeg_quality: 90,
        jpeg_passthrough: true,
    };
    Writer::new(&path, vec![FieldSpec::rgb_image("image", options)], WriterOptions::default())
        .unwrap()
        .write_indexed(files.len() as u64, |i| {
            Ok(vec![SampleValue::Image(ImageSource::File(files[i as usize].clone()))])
        })
        .unwrap();
    Dataset::open(&path).unwrap()
}
