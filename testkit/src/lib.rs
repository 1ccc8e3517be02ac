//! Fixtures the workspace's tests and benches share, so that each crate's tests do not write
//! them again: schemas in one line ([`schema`]), small `.beton` files ([`write`],
//! [`write_labels`], [`write_labels_and_blobs`]), RGB pixels ([`pixels`]), temporary folders
//! ([`temp_file`]), an ImageFolder of the bundled photos ([`image_folder`]), query results as
//! text ([`text_rows`]) and buffers that end at an inaccessible page ([`Guarded`]), for SIMD
//! kernels' bounds.
//!
//! It depends on `beton-storage` alone, so that the unit tests of every crate above storage can
//! use it without a second copy of their own crate's types.

use std::path::{Path, PathBuf};

mod guarded;
pub use guarded::Guarded;

use beton_storage::{
    FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, WriteReport, Writer,
    WriterOptions,
};

/// Fields from a one-line schema: `name:type` words separated by white space, `type` a field
/// type's short name (`int`, `float`, `bool`, `text`, `bytes`, `json`, `rgb_image`,
/// `grey_image`), `raw` or `jpg` for an RGB image written raw or as JPEG, `array:<i4` for a
/// variable-length array of a dtype and `ndarray:<f4:2x3` for a fixed-shape one.
///
/// ```
/// let fields = beton_testkit::schema("label:int image:raw caption:text vec:ndarray:<f4:2");
/// assert_eq!(fields.len(), 4);
/// ```
///
/// # Panics
/// On a word that is not `name:type` or a type storage does not know.
pub fn schema(spec: &str) -> Vec<FieldSpec> {
    spec.split_whitespace()
        .map(|word| {
            let (name, ty) = word.split_once(':').unwrap_or_else(|| panic!("{word:?} is not name:type"));
            let image = |mode| FieldSpec::rgb_image(name, ImageOptions::with_mode(mode));
            match ty.split_once(':') {
                _ if ty == "raw" => image(WriteMode::Raw),
                _ if ty == "jpg" => image(WriteMode::Jpg),
                Some(("array", dtype)) => FieldSpec::new(name, short(ty, "array", Some(dtype), None)),
                Some(("ndarray", array)) => {
                    let (dtype, shape) = array.split_once(':').unwrap_or((array, ""));
                    let shape: Vec<u64> = shape.split('x').filter(|s| !s.is_empty()).map(number).collect();
                    FieldSpec::new(name, short(ty, "ndarray", Some(dtype), Some(&shape)))
                }
                _ => FieldSpec::new(name, short(ty, ty, None, None)),
            }
        })
        .collect()
}

/// The field type of short name `name` (as [`FieldType::from_short_name`] reads it).
fn short(word: &str, name: &str, dtype: Option<&str>, shape: Option<&[u64]>) -> FieldType {
    FieldType::from_short_name(name, dtype, shape).unwrap_or_else(|e| panic!("{word:?}: {e}"))
}

fn number(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("{s:?} is not a dimension"))
}

/// Writes `n` samples of `fields` to `path` with the default options, sample `i` the values
/// `sample(i)` gives, and returns the writer's report.
///
/// # Panics
/// When the write fails.
pub fn write(
    path: &Path,
    fields: Vec<FieldSpec>,
    n: u64,
    sample: impl Fn(u64) -> Vec<SampleValue> + Sync,
) -> WriteReport {
    write_with(path, fields, WriterOptions::default(), n, sample)
}

/// [`write`] with `options`.
///
/// # Panics
/// When the write fails.
pub fn write_with(
    path: &Path,
    fields: Vec<FieldSpec>,
    options: WriterOptions,
    n: u64,
    sample: impl Fn(u64) -> Vec<SampleValue> + Sync,
) -> WriteReport {
    let writer = Writer::new(path, fields, options).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    writer.write_indexed(n, |i| Ok(sample(i))).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `n` samples of one field, `label` (int): `first`, `first + 1`, ...
pub fn write_labels(path: &Path, first: i64, n: u64) {
    write(path, schema("label:int"), n, |i| vec![SampleValue::Int(first + i as i64)]);
}

/// `n` samples of `label` (int, `first + i`) and `blob` (bytes: `1 + i % 7` bytes `i`).
pub fn write_labels_and_blobs(path: &Path, first: i64, n: u64) {
    write(path, schema("label:int blob:bytes"), n, |i| {
        vec![SampleValue::Int(first + i as i64), SampleValue::Bytes(vec![i as u8; 1 + i as usize % 7])]
    });
}

/// A temporary folder and the path of `name` in it (not created).
pub fn temp_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let path = tmp.path().join(name);
    (tmp, path)
}

/// A temporary folder holding file `name`, written by `write` (given its path).
pub fn temp_file(name: &str, write: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let (tmp, file) = temp_path(name);
    write(&file);
    (tmp, file)
}

/// A deterministic stream of pseudo-random values (xorshift64 from `seed`, not 0): noise for
/// tests.
pub fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// `w` x `h` RGB pixels, byte `k` `k * seed` (wrapping).
pub fn pixels(w: u32, h: u32, seed: u8) -> Pixels {
    let data = (0..w * h * 3).map(|k| (k as u8).wrapping_mul(seed)).collect();
    Pixels { width: w, height: h, channels: 3, data }
}

/// An image value of `w` x `h` RGB pixels `data` (row by row, R, G and B).
pub fn rgb(w: u32, h: u32, data: Vec<u8>) -> SampleValue {
    SampleValue::Image(ImageSource::Pixels(Pixels { width: w, height: h, channels: 3, data }))
}

/// [`pixels`] as an image value.
pub fn image(w: u32, h: u32, seed: u8) -> SampleValue {
    SampleValue::Image(ImageSource::Pixels(pixels(w, h, seed)))
}

/// The repository's `examples/data` folder (bundled photos and datasets).
pub fn example_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data")
}

/// The bundled ImageFolder's photos (`examples/data/imagefolder/CLASS/*.jpg`), sorted by path.
pub fn bundled_photos() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for class in std::fs::read_dir(example_data().join("imagefolder")).unwrap() {
        for f in std::fs::read_dir(class.unwrap().path()).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_some_and(|e| e == "jpg") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
}

/// An ImageFolder at `root`: a folder per class of `classes`, each with `count` JPEGs named
/// `{class}-{k}.jpg`, copies of the bundled photos of `fish` (in name order, taken in turn).
pub fn image_folder(root: &Path, classes: &[&str], count: usize) {
    let photos = example_data().join("imagefolder/fish");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&photos).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for (c, class) in classes.iter().enumerate() {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for k in 0..count {
            let src = &files[(c * count + k) % files.len()];
            std::fs::copy(src, root.join(class).join(format!("{class}-{k}.jpg"))).unwrap();
        }
    }
}

/// A temporary folder holding `a.beton` and `b.beton`: `write(path, first, n)` writes `a` rows
/// from 0 to the first and `b` rows from 100 to the second, as a dataset and the rows appended
/// to it.
pub fn two_files(write: impl Fn(&Path, i64, u64), a: u64, b: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (tmp, first) = temp_path("a.beton");
    let second = tmp.path().join("b.beton");
    write(&first, 0, a);
    write(&second, 100, b);
    (tmp, first, second)
}

/// The rows of `batch` as text: each row's values as arrow displays them, joined by commas.
///
/// # Panics
/// On a value arrow cannot display.
pub fn text_rows(batch: &arrow_array::RecordBatch) -> Vec<String> {
    (0..batch.num_rows())
        .map(|r| {
            let values = batch.columns().iter().map(|c| arrow_cast::display::array_value_to_string(c, r));
            values.collect::<Result<Vec<_>, _>>().unwrap().join(",")
        })
        .collect()
}

/// An HTTP server on 127.0.0.1 answering every request with `status` and `body` (a store that
/// refuses, fails or cannot list): its URL and how many requests it answered so far.
pub fn answering(
    status: &'static str,
    body: &'static str,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0u64;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let _ = reader.take(length).read_to_end(&mut Vec::new());
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, count)
}

#[cfg(test)]
mod tests {
    use beton_storage::{ArraySpec, DType, FieldType, WriteMode};

    #[test]
    fn schemas_name_every_field_type_and_image_mode() {
        let fields =
            super::schema("a:int b:raw c:jpg d:rgb_image e:array:<i2 f:ndarray:<f4:2x3 g:grey_image");
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e", "f", "g"]);
        assert_eq!(fields[0].ty, FieldType::Int);
        assert_eq!((fields[1].ty.clone(), fields[1].image.write_mode), (FieldType::RgbImage, WriteMode::Raw));
        assert_eq!(fields[2].image.write_mode, WriteMode::Jpg);
        assert_eq!(fields[3].image, beton_storage::ImageOptions::default());
        assert_eq!(fields[4].ty, FieldType::Array(DType::parse("<i2").unwrap()));
        let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
        assert_eq!(fields[5].ty, FieldType::NDArray(spec));
        assert_eq!(fields[6].ty, FieldType::GreyImage);
    }

    #[test]
    #[should_panic(expected = "is not name:type")]
    fn a_word_without_a_type_is_refused() {
        super::schema("label");
    }

    #[test]
    fn written_files_read_back() {
        let (_dir, path) = super::temp_file("t.beton", |p| super::write_labels_and_blobs(p, 5, 9));
        let ds = beton_storage::Dataset::open(&path).unwrap();
        assert_eq!(ds.num_samples(), 9);
        assert_eq!(ds.get(8, 0).unwrap().as_int(), Some(13));
        assert_eq!(ds.get(8, 1).unwrap().as_bytes().unwrap(), [8u8; 2]);
    }
}
