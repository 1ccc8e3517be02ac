//! Writes `.beton` files covering every FFCV field type, beton's extension fields and real
//! ImageFolder photos, each with `NAME.beton.json`: beton's own view of every value in the shape of
//! the FFCV fixtures' `expected.json`. `tests/ffcv/check-with-ffcv.sh` then loads each file with the
//! real FFCV 1.0.2 (`tests/ffcv/ffcv-load.py`) and compares what FFCV sees with what beton wrote. Every file
//! also carries named splits, which FFCV must not notice.
//!
//! Run: `cargo run --release --example ffcv_compat -- OUT_DIR`

use std::path::{Path, PathBuf};

use beton_storage::{
    ArraySpec, DType, FieldSpec, FieldType, ImageMode, ImageOptions, ImageSource, OpenOptions, Pixels,
    SampleValue, Value, WriteMode, Writer, WriterOptions,
};
use serde_json::{json, Value as Json};
use sha2::Digest;

fn sha(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// beton's view of `path` in the shape of expected.json's `samples` (and header).
fn describe(path: &Path, options: &OpenOptions) -> Json {
    let ds = options.open(path).expect("open");
    let samples: Vec<Json> = (0..ds.num_samples())
        .map(|i| {
            let mut s = serde_json::Map::new();
            for (k, f) in ds.fields().iter().enumerate() {
                let value = ds.get(i, k).expect("get");
                let v = match (f.field_type(), value) {
                    (ty, _) if !ty.is_ffcv_type() => {
                        // Extension fields: FFCV sees the row bytes through its stub.
                        let row = ds.row(i).unwrap();
                        json!({ "metadata_hex": hex::encode(&row[f.offset()..f.offset() + ty.slot().size]) })
                    }
                    (_, Value::Int(v)) => json!(v),
                    (_, Value::Float(v)) => json!({ "repr": format!("{v:?}") }),
                    (_, Value::Image(img)) => json!({
                        "mode": if img.mode == ImageMode::Jpg { 0 } else { 1 },
                        "width": img.width, "height": img.height,
                        "nbytes": img.data.len(), "payload_sha256": sha(img.data),
                    }),
                    (_, Value::Bytes(b)) => json!({ "nbytes": b.len(), "sha256": sha(b) }),
                    (_, Value::Json(t)) => {
                        json!({ "nbytes": t.len() + 1, "value": serde_json::from_str::<Json>(t).unwrap() })
                    }
                    (FieldType::NDArray(spec) | FieldType::TorchTensor(spec), Value::NDArray(b)) => json!({
                        "dtype": spec.dtype.name(), "shape": spec.shape, "nbytes": b.len(), "sha256": sha(b),
                    }),
                    (ty, v) => panic!("{ty:?}: {v:?}"),
                };
                s.insert(f.name().to_string(), v);
            }
            Json::Object(s)
        })
        .collect();
    json!({
        "header": { "num_samples": ds.num_samples(), "page_size": ds.page_size(),
                    "alloc_table_ptr": ds.header().alloc_table_ptr, "file_size": ds.file_len() },
        "metadata_row_size": ds.row_size(),
        "alloc_table_entries": ds.num_allocations(),
        "samples": samples,
    })
}

fn write(
    out: &Path,
    name: &str,
    fields: Vec<FieldSpec>,
    n: u64,
    f: impl Fn(u64) -> Vec<SampleValue> + Sync,
) -> PathBuf {
    let path = out.join(format!("{name}.beton"));
    let opts = WriterOptions { page_size: 1 << 21, seed: 7, ..WriterOptions::default() };
    Writer::new(&path, fields, opts).expect("writer").write_indexed(n, |i| Ok(f(i))).expect("write");
    // Named splits live where FFCV never looks (FORMAT.md §12): every file carries some, and
    // FFCV must still see exactly the same samples.
    if n > 0 {
        let parts = beton_query::IndexSet::all(n).split(&[0.75, 0.25], 1).expect("split");
        beton_query::splits::save(&path, None, [("train", &parts[0]), ("val", &parts[1])]).expect("splits");
    }
    path
}

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: ffcv_compat OUT_DIR"));
    std::fs::create_dir_all(&out).unwrap();
    let f4 = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
    let i16 = ArraySpec::new(DType::parse("<i2").unwrap(), vec![5]).unwrap();
    let mut written = vec![];

    // Every FFCV type, odd row layout (image first: 13-byte packed struct, then padding).
    let fields = vec![
        FieldSpec::rgb_image("image", ImageOptions::with_mode(WriteMode::Raw)),
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("score", FieldType::Float),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new("meta", FieldType::Json),
        FieldSpec::new("arr", FieldType::NDArray(f4.clone())),
        FieldSpec::new("tensor", FieldType::TorchTensor(i16.clone())),
    ];
    written.push((
        write(&out, "all_ffcv_types", fields, 40, |i| {
            let px = (0..8 * 6 * 3).map(|k| (k as u64 * 13 + i * 7) as u8).collect();
            vec![
                SampleValue::Image(ImageSource::Pixels(Pixels {
                    width: 8,
                    height: 6,
                    channels: 3,
                    data: px,
                })),
                SampleValue::Int(i as i64 * 1_000_003 - 7),
                SampleValue::Float(i as f64 / 7.0 - 2.5),
                SampleValue::Bytes((0..(i * 37 % 300 + 1)).map(|k| (k ^ i) as u8).collect()),
                SampleValue::Json(format!("{{\"i\": {i}, \"name\": \"é{i}\", \"tags\": [{i}, null]}}")),
                SampleValue::NDArray((0..24).map(|k| (k + i) as u8).collect()),
                SampleValue::NDArray((0..10).map(|k| (k * i) as u8).collect()),
            ]
        }),
        vec![],
    ));

    // Extensions beside FFCV types.
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("caption", FieldType::Text),
        FieldSpec::new("flag", FieldType::Bool),
        FieldSpec::new("boxes", FieldType::Array(DType::parse("<f4").unwrap())),
        FieldSpec::grey_image("grey", ImageOptions::with_mode(WriteMode::Jpg)),
        FieldSpec::rgb_image("image", ImageOptions::with_mode(WriteMode::Jpg)),
    ];
    written.push((
        write(&out, "extensions", fields, 30, |i| {
            let px: Vec<u8> = (0..32 * 24 * 3).map(|k| ((k / 3) as u64 % 32 * 8 + i) as u8).collect();
            vec![
                SampleValue::Int(i as i64),
                SampleValue::Text(format!("caption {i} ünïcödé")),
                SampleValue::Bool(i % 3 == 0),
                SampleValue::Array((0..(i % 5) * 4).map(|k| k as u8).collect()),
                SampleValue::Image(ImageSource::Pixels(Pixels {
                    width: 32,
                    height: 24,
                    channels: 3,
                    data: px.clone(),
                })),
                SampleValue::Image(ImageSource::Pixels(Pixels {
                    width: 32,
                    height: 24,
                    channels: 3,
                    data: px,
                })),
            ]
        }),
        vec![
            "caption=[('ptr','<u8'),('size','<u8')]".to_string(),
            "flag=<u1".to_string(),
            "boxes=[('ptr','<u8'),('len','<u8')]".to_string(),
            "grey=[('mode','<u1'),('width','<u2'),('height','<u2'),('data_ptr','<u8')]".to_string(),
        ],
    ));

    // Real photos from the bundled ImageFolder, in each write mode.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/imagefolder");
    let mut files = vec![];
    let mut classes: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    classes.sort();
    for (label, class) in classes.iter().enumerate() {
        let mut imgs: Vec<_> = std::fs::read_dir(class).unwrap().map(|e| e.unwrap().path()).collect();
        imgs.sort();
        files.extend(imgs.into_iter().map(|p| (p, label as i64)));
    }
    for (name, mode, max_res) in [
        ("imagefolder_jpg", WriteMode::Jpg, Some(256)),
        ("imagefolder_raw", WriteMode::Raw, Some(128)),
        ("imagefolder_proportion", WriteMode::Proportion { probability: 0.5 }, None),
    ] {
        let fields = vec![
            FieldSpec::rgb_image(
                "image",
                ImageOptions { write_mode: mode, max_resolution: max_res, ..ImageOptions::default() },
            ),
            FieldSpec::new("label", FieldType::Int),
        ];
        let files = &files;
        written.push((
            write(&out, name, fields, files.len() as u64, |i| {
                let (p, l) = &files[i as usize];
                vec![SampleValue::Image(ImageSource::File(p.clone())), SampleValue::Int(*l)]
            }),
            vec![],
        ));
    }

    for (path, custom) in written {
        let desc = describe(&path, &OpenOptions::new());
        std::fs::write(path.with_extension("beton.json"), serde_json::to_string_pretty(&desc).unwrap())
            .unwrap();
        std::fs::write(path.with_extension("custom"), custom.join("\n")).unwrap();
        println!("{}", path.display());
    }
}
