//! What the image benchmarks share: the source images, the `.beton` files written from them,
//! and a whole-JPEG decoder for the baselines.

use std::ffi::c_int;
use std::path::{Path, PathBuf};

use beton_storage::{
    Dataset, FieldSpec, ImageOptions, ImageSource, SampleValue, WriteMode, Writer, WriterOptions,
};

/// The median of `v` (the mean of the middle two for an even count).
#[allow(dead_code)] // (image.rs reports criterion's statistics instead)
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

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
    dataset_paged(files, max_res, write_mode, restart_interval, 0)
}

/// [`dataset_in`] in pages of `page_size` bytes (0: the writer's choice).
pub fn dataset_paged(
    files: &[PathBuf],
    max_res: u32,
    write_mode: WriteMode,
    restart_interval: u16,
    page_size: u64,
) -> Dataset {
    let tag = if write_mode == WriteMode::Raw { "raw" } else { "jpg" };
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("image-bench-{tag}-{max_res}-rst{restart_interval}-page{page_size}.beton"));
    let options = ImageOptions {
        jpeg_restart_interval: restart_interval,
        write_mode,
        max_resolution: Some(max_res),
        jpeg_quality: 90,
        jpeg_passthrough: true,
        verify: true,
        alpha_background: None,
    };
    let writer = WriterOptions { page_size, ..WriterOptions::default() };
    Writer::new(&path, vec![FieldSpec::rgb_image("image", options)], writer)
        .unwrap()
        .write_indexed(files.len() as u64, |i| {
            Ok(vec![SampleValue::Image(ImageSource::File(files[i as usize].clone()))])
        })
        .unwrap();
    Dataset::open(&path).unwrap()
}

/// A libjpeg-turbo decompressor (raw C API, to set `TJPARAM_FASTDCT` as FFCV's `imdecode`).
pub struct Tj(turbojpeg::raw::tjhandle);

impl Tj {
    pub fn new(fast_dct: bool) -> Tj {
        use turbojpeg::raw;
        // SAFETY: tj3Init has no preconditions; the handle is checked and owned by Tj.
        let h = unsafe { raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as c_int) };
        assert!(!h.is_null());
        // SAFETY: a live handle; tj3Set reads two integers.
        let rc = unsafe { raw::tj3Set(h, raw::TJPARAM_TJPARAM_FASTDCT as c_int, c_int::from(fast_dct)) };
        assert_eq!(rc, 0);
        Tj(h)
    }

    /// Decodes the whole JPEG to packed RGB in `buf`: (width, height).
    pub fn decode(&self, data: &[u8], buf: &mut Vec<u8>) -> (u32, u32) {
        use turbojpeg::raw;
        let len = data.len() as raw::size_t;
        // SAFETY: a live handle; `data` is valid for len bytes and only read.
        assert_eq!(unsafe { raw::tj3DecompressHeader(self.0, data.as_ptr(), len) }, 0);
        // SAFETY: a live handle that has read a header.
        let get = |p: raw::TJPARAM| unsafe { raw::tj3Get(self.0, p as c_int) };
        let (w, h) = (get(raw::TJPARAM_TJPARAM_JPEGWIDTH), get(raw::TJPARAM_TJPARAM_JPEGHEIGHT));
        buf.resize(w as usize * h as usize * 3, 0);
        // SAFETY: `buf` holds h rows of w × 3 bytes, the size of the unscaled, uncropped RGB
        // output of this header; `data` is valid for len bytes.
        let rc = unsafe {
            raw::tj3Decompress8(
                self.0,
                data.as_ptr(),
                len,
                buf.as_mut_ptr(),
                w * 3,
                raw::TJPF_TJPF_RGB as c_int,
            )
        };
        assert_eq!(rc, 0);
        (w as u32, h as u32)
    }
}

impl Drop for Tj {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { turbojpeg::raw::tj3Destroy(self.0) }
    }
}
