//! `beton show` and `beton explain` on a dataset written here and on an FFCV fixture.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use beton_storage::{
    Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer,
    WriterOptions,
};

use super::{beton, fixture};

const N: u64 = 8;

fn ok(args: &[&str]) -> String {
    let o = beton(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "beton {args:?} failed: {err}");
    String::from_utf8(o.stdout).unwrap()
}

/// Runs `args`, expects exit 1, returns stderr.
fn fails(args: &[&str]) -> String {
    let o = beton(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "beton {args:?}: expected exit 1; stderr: {err}");
    assert!(o.stdout.is_empty(), "beton {args:?} printed on failure");
    err
}

/// Sample i's RGB image: (200 + 20 i) x 500, about 300–400 KB raw, so the file spans 2 pages.
fn rgb(i: u64) -> Pixels {
    let (w, h) = (200 + 20 * i as u32, 500);
    let data = (0..w * h * 3).map(|j| (j.wrapping_mul(7) as u64 + i * 31) as u8).collect();
    Pixels { width: w, height: h, channels: 3, data }
}

/// Sample i's grey mask: (3 + i) x 2.
fn grey(i: u64) -> Pixels {
    let (w, h) = (3 + i as u32, 2);
    Pixels { width: w, height: h, channels: 1, data: (0..w * h).map(|j| (j * 40 + i as u32) as u8).collect() }
}

fn caption(i: u64) -> String {
    if i % 3 == 0 {
        format!("a cat, number {i}")
    } else {
        format!("a dog \"{i}\"")
    }
}

fn meta(i: u64) -> String {
    format!("{{\"i\": {i}, \"tags\": [\"x\", {}]}}", i * 2)
}

/// image (raw RGB), label, caption (text), meta (JSON), mask (raw grey).
fn write_dataset(dir: &Path) -> PathBuf {
    let path = dir.join("t.beton");
    let raw = ImageOptions::with_mode(WriteMode::Raw);
    let fields = vec![
        FieldSpec::rgb_image("image", raw.clone()),
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("caption", FieldType::Text),
        FieldSpec::new("meta", FieldType::Json),
        FieldSpec::grey_image("mask", raw),
    ];
    Writer::new(&path, fields, WriterOptions { page_size: 1 << 21, ..WriterOptions::default() })
        .unwrap()
        .write_indexed(N, |i| {
            Ok(vec![
                SampleValue::Image(ImageSource::Pixels(rgb(i))),
                SampleValue::Int(i as i64 * 10 - 5),
                SampleValue::Text(caption(i)),
                SampleValue::Json(meta(i)),
                SampleValue::Image(ImageSource::Pixels(grey(i))),
            ])
        })
        .unwrap();
    path
}

/// Decodes a PNG file: (width, height, channels, pixels).
fn read_png(path: &Path) -> (u32, u32, usize, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = png::Decoder::new(Cursor::new(bytes)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    (info.width, info.height, info.color_type.samples(), buf)
}

/// The `key: value` lines of `explain`, keyed.
fn explain(file: &Path, sql: &str) -> std::collections::HashMap<String, String> {
    let out = ok(&["explain", file.to_str().unwrap(), sql]);
    out.lines()
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("not key: value: {l:?} in\n{out}"));
            (k.to_string(), v.trim().to_string())
        })
        .collect()
}

#[test]
fn show_prints_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_dataset(dir.path());
    for i in [0, 4, N - 1] {
        let out = ok(&["show", f.to_str().unwrap(), &i.to_string()]);
        let img = rgb(i);
        let m = grey(i);
        let expected = format!(
            "image: {}x{} raw, {} bytes\nlabel: {}\ncaption: {}\nmeta: {}\nmask: {}x{} raw, {} bytes\n",
            img.width,
            img.height,
            img.data.len(),
            i as i64 * 10 - 5,
            serde_json::Value::String(caption(i)),
            serde_json::from_str::<serde_json::Value>(&meta(i)).unwrap(),
            m.width,
            m.height,
            m.data.len()
        );
        assert_eq!(out, expected);
    }
    let out = ok(&["show", f.to_str().unwrap(), "3", "--field", "caption"]);
    assert_eq!(out, "caption: \"a cat, number 3\"\n");
    let out = ok(&["show", f.to_str().unwrap(), "2", "--field", "meta"]);
    assert_eq!(out, "meta: {\"i\":2,\"tags\":[\"x\",4]}\n");
}

#[test]
fn show_out_writes_exact_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_dataset(dir.path());
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let png_path = out_dir.join("img.png");
    for i in [1, 6] {
        let text = ok(&["show", f.to_str().unwrap(), &i.to_string(), "--out", png_path.to_str().unwrap()]);
        let img = rgb(i);
        assert!(text.contains(&format!(
            "wrote {}: {}x{} RGB PNG",
            png_path.display(),
            img.width,
            img.height
        )));
        assert_eq!(read_png(&png_path), (img.width, img.height, 3, img.data));
    }
    let mask_path = out_dir.join("mask.png");
    let text =
        ok(&["show", f.to_str().unwrap(), "5", "--field", "mask", "--out", mask_path.to_str().unwrap()]);
    assert!(text.starts_with("mask: 8x2 raw, 16 bytes\n"), "{text}");
    let m = grey(5);
    assert_eq!(read_png(&mask_path), (m.width, m.height, 1, m.data));
    // Only the PNGs: no temporary file left beside them.
    let mut names: Vec<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["img.png", "mask.png"]);
}

#[test]
fn show_errors_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_dataset(dir.path());
    let file = f.to_str().unwrap();
    let png_path = dir.path().join("x.png");
    let png_str = png_path.to_str().unwrap();
    let err = fails(&["show", file, "8"]);
    assert!(err.contains("sample 8 is out of range") && err.contains("has 8 samples"), "{err}");
    let err = fails(&["show", file, "1", "--field", "label", "--out", png_str]);
    assert!(err.contains("field 'label' is not an image"), "{err}");
    let err = fails(&["show", file, "1", "--field", "nope"]);
    assert!(err.contains("nope"), "{err}");
    assert!(!png_path.exists());

    // A file without images.
    let plain = dir.path().join("plain.beton");
    Writer::new(&plain, vec![FieldSpec::new("label", FieldType::Int)], WriterOptions::default())
        .unwrap()
        .write_indexed(2, |i| Ok(vec![SampleValue::Int(i as i64)]))
        .unwrap();
    assert_eq!(ok(&["show", plain.to_str().unwrap(), "1"]), "label: 1\n");
    let err = fails(&["show", plain.to_str().unwrap(), "1", "--out", png_str]);
    assert!(err.contains("no image field"), "{err}");
    assert!(!png_path.exists());
}

#[test]
fn show_ffcv_jpeg_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "photos_jpg");
    // From photos_jpg.expected.json: sample 3 is a 33x22 JPEG of 1084 bytes, label 3.
    assert_eq!(ok(&["show", f.to_str().unwrap(), "3"]), "image: 33x22 jpg, 1084 bytes\nlabel: 3\n");
    let png_path = dir.path().join("p3.png");
    ok(&["show", f.to_str().unwrap(), "3", "--out", png_path.to_str().unwrap()]);
    let decoded = Dataset::open(&f).unwrap().get(3, 0).unwrap().as_image().unwrap().decode().unwrap();
    assert_eq!(read_png(&png_path), (33, 22, 3, decoded.data));
    let err = fails(&["show", f.to_str().unwrap(), "12"]);
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn explain_ffcv_fixture_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), "photos_jpg");
    // Labels 0, 1, 2 are samples 0, 1, 2: JPEGs of 5485 + 2524 + 1657 bytes (expected.json);
    // all 12 images (27331 bytes) lie in the file's one 8 MiB page.
    let e = explain(&f, "label < 3");
    assert_eq!(e["columns"], "label");
    assert_eq!(e["heap columns"], "none");
    assert_eq!(e["rows matched"], "3 of 12 (25.0%)");
    assert_eq!(e["allocations"], "3 of 12 (25.0%)");
    assert!(e["pages"].starts_with("1 of 1 (100.0%)"), "{:?}", e["pages"]);
    assert!(e["payload bytes"].starts_with("9666 of 27331 "), "{:?}", e["payload bytes"]);

    let e = explain(&f, "SELECT label FROM samples WHERE image.width = 33 AND image.height = 22");
    assert_eq!(e["columns"], "image.width, image.height, label");
    // Samples 3 and 11: 1084 + 956 bytes.
    assert!(e["rows matched"].starts_with("2 of 12"), "{:?}", e["rows matched"]);
    assert!(e["payload bytes"].starts_with("2040 of 27331 "), "{:?}", e["payload bytes"]);

    let e = explain(&f, "label > 100");
    assert!(e["rows matched"].starts_with("0 of 12"));
    assert!(e["pages"].starts_with("0 of 1"));
    assert!(e["payload bytes"].starts_with("0 of 27331"));

    let err = fails(&["explain", f.to_str().unwrap(), "nosuch > 1"]);
    assert!(err.contains("nosuch"), "{err}");
}

#[test]
fn explain_written_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_dataset(dir.path());
    let ds = Dataset::open(&f).unwrap();
    // Every sample owns 4 payloads: image, caption, meta (with its NUL), mask.
    let bytes =
        |i: u64| (rgb(i).data.len() + caption(i).len() + meta(i).len() + 1 + grey(i).data.len()) as u64;
    let total: u64 = (0..N).map(bytes).sum();
    // The payloads (~3 MB) fill two 2 MiB pages.
    assert_eq!(ds.num_pages(), 2);

    // Captions containing "cat": samples 0, 3, 6.
    let e = explain(&f, "caption LIKE '%cat%'");
    assert_eq!(e["columns"], "caption");
    assert_eq!(e["heap columns"], "caption");
    assert_eq!(e["rows matched"], "3 of 8 (37.5%)");
    assert_eq!(e["allocations"], "12 of 32 (37.5%)");
    let matched = bytes(0) + bytes(3) + bytes(6);
    assert!(e["payload bytes"].starts_with(&format!("{matched} of {total} ")), "{:?}", e["payload bytes"]);
    // The pages, counted independently from the allocation pointers.
    let page_of = |p: u64| (p - ds.data_start()) / ds.page_size();
    let mut pages: Vec<u64> = [0, 3, 6]
        .iter()
        .flat_map(|&i| ds.sample_allocations(i))
        .flat_map(|a| page_of(a.ptr)..=page_of(a.ptr + a.size - 1))
        .collect();
    pages.sort();
    pages.dedup();
    assert!(e["pages"].starts_with(&format!("{} of 2 ", pages.len())), "{:?}", e["pages"]);

    // Sample 0 alone: in the first page.
    let e = explain(&f, "SELECT * FROM samples WHERE \"index\" = 0");
    assert_eq!(e["columns"], "index");
    assert_eq!(e["rows matched"], "1 of 8 (12.5%)");
    assert!(e["pages"].starts_with("1 of 2 "), "{:?}", e["pages"]);
    assert!(e["payload bytes"].starts_with(&format!("{} of {total} ", bytes(0))));

    // Everything.
    let e = explain(&f, "label >= -5 AND image.width > 0");
    assert_eq!(e["columns"], "image.width, label");
    assert_eq!(e["rows matched"], "8 of 8 (100.0%)");
    assert!(e["pages"].starts_with("2 of 2 (100.0%)"));
    assert!(e["payload bytes"].starts_with(&format!("{total} of {total} (100.0%)")));
}
