//! `beton show FILE INDEX`: prints every field of one sample, one a line, and (`--out x.png`)
//! writes its image as a PNG.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use beton_storage::{Dataset, FieldType, Pixels, Value};

/// How many payload bytes `show` prints in hex.
const HEX_PREFIX: usize = 16;

/// `beton show`: the fields of each of `indices` (under a `sample N:` line when there are
/// several); `out` writes one sample's image, `grid` a contact sheet of all of theirs.
pub fn run_many(
    file: &Path,
    version: Option<&str>,
    custom: &[String],
    indices: &[u64],
    field: Option<&str>,
    out: Option<&Path>,
    grid: Option<&Path>,
) -> Result<String> {
    if out.is_some() && indices.len() > 1 {
        bail!("--out writes one sample's image; for {} samples use --grid sheet.png", indices.len());
    }
    let one = |index: u64, out: Option<&Path>| match crate::versions::is_dataset(file) {
        true => run_version(file, version, index, field, out),
        false => {
            crate::versions::file_version(file, version).and_then(|()| run(file, custom, index, field, out))
        }
    };
    let mut text = String::new();
    for &index in indices {
        let shown = one(index, out)?;
        match indices.len() {
            1 => text.push_str(&shown),
            _ => {
                writeln!(text, "sample {index}:")?;
                for line in shown.lines() {
                    writeln!(text, "  {line}")?;
                }
            }
        }
    }
    if let Some(grid) = grid {
        text.push_str(&crate::gallery::grid(file, version, custom, indices, field, grid)?);
    }
    Ok(text)
}

/// Prints sample `index` of `file`; with `out`, writes the image field `field` (default: the
/// first image field) there as a PNG. With `field` and no `out`, prints that field only.
pub fn run(
    file: &Path,
    custom: &[String],
    index: u64,
    field: Option<&str>,
    out: Option<&Path>,
) -> Result<String> {
    let ds = crate::open::open(file, custom)?;
    let n = ds.num_samples();
    if index >= n {
        bail!(
            "sample {index} is out of range: {} has {n} sample{} (indices 0..{})",
            file.display(),
            if n == 1 { "" } else { "s" },
            n.saturating_sub(1)
        );
    }
    let chosen = match field {
        Some(name) => Some(ds.field_index(name).map_err(|e| crate::open::name_file(file, e))?),
        None => None,
    };
    let mut text = String::new();
    for (k, f) in ds.fields().iter().enumerate() {
        if chosen.is_some_and(|c| c != k) {
            continue;
        }
        let value = ds.get(index, k).map_err(|e| crate::open::name_file(file, e))?;
        writeln!(text, "{}: {}", f.name(), describe(f.field_type(), &value))?;
    }
    if let Some(out) = out {
        let k = image_field(&ds, chosen)?;
        let image = ds.get(index, k).map_err(|e| crate::open::name_file(file, e))?;
        let image = image.as_image().context("not an image value")?;
        let pixels = image
            .decode()
            .map_err(|e| crate::open::name_file(file, e))
            .with_context(|| format!("decoding sample {index}, field '{}'", ds.fields()[k].name()))?;
        write_png(out, &pixels)?;
        writeln!(
            text,
            "wrote {}: {}x{} {} PNG",
            out.display(),
            pixels.width,
            pixels.height,
            if pixels.channels == 1 { "grey" } else { "RGB" }
        )?;
    }
    Ok(text)
}

/// Prints sample `index` of a version of the dataset directory `dir`, as [`run`] does for a
/// file: fields a column file holds show the values it gives.
pub fn run_version(
    dir: &Path,
    version: Option<&str>,
    index: u64,
    field: Option<&str>,
    out: Option<&Path>,
) -> Result<String> {
    let v = beton_query::versioned::VersionedDataset::open(dir, crate::versions::version_ref(version))?;
    let view = v.view()?;
    let table = view.table()?;
    let n = table.num_rows();
    if index >= n {
        bail!("sample {index} is out of range: version {} of {} has {n} samples", v.version(), dir.display());
    }
    let schema = view.schema()?;
    if let Some(name) = field {
        if !schema.iter().any(|(n, _)| n == name) {
            let names: Vec<&str> = schema.iter().map(|(n, _)| n.as_str()).collect();
            bail!("no field '{name}' in version {}; the fields are {}", v.version(), names.join(", "));
        }
    }
    let mut text = String::new();
    for (name, ty) in &schema {
        if field.is_some_and(|f| f != name) {
            continue;
        }
        // Its column file's value where one holds it (any field type), else its data file's.
        let shown = match table.value(index, name, ty)? {
            Some(value) => describe(ty, &value),
            None => "NULL".to_string(),
        };
        writeln!(text, "{name}: {shown}")?;
    }
    if let Some(out) = out {
        let name = match field {
            Some(f) => f.to_string(),
            None => match schema.iter().find(|(_, ty)| ty.is_image()) {
                Some((n, _)) => n.clone(),
                None => bail!("--out writes an image, and version {} has no image field", v.version()),
            },
        };
        let ty = schema
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .with_context(|| format!("no field '{name}'"))?;
        let image = table
            .value(index, &name, ty)?
            .with_context(|| format!("field '{name}' of sample {index} is NULL"))?;
        let image = image.as_image().with_context(|| format!("field '{name}' is not an image field"))?;
        let pixels = image.decode().with_context(|| format!("decoding sample {index}, field '{name}'"))?;
        write_png(out, &pixels)?;
        writeln!(text, "wrote {}: {}x{} PNG", out.display(), pixels.width, pixels.height)?;
    }
    Ok(text)
}

/// The image field to write: `chosen` if it is one, else the first image field.
fn image_field(ds: &Dataset, chosen: Option<usize>) -> Result<usize> {
    let is_image = |k: usize| ds.fields()[k].field_type().is_image();
    match chosen {
        Some(k) if is_image(k) => Ok(k),
        Some(k) => {
            let f = &ds.fields()[k];
            bail!("--out: field '{}' is not an image (its type is {})", f.name(), f.field_type().name())
        }
        None => (0..ds.fields().len()).find(|&k| is_image(k)).with_context(|| {
            let names: Vec<&str> = ds.fields().iter().map(|f| f.name()).collect();
            format!("--out: the file has no image field (fields: {})", names.join(", "))
        }),
    }
}

/// One value as text on one line.
fn describe(ty: &FieldType, value: &Value) -> String {
    match *value {
        Value::Int(v) => v.to_string(),
        Value::Float(v) => format!("{v:?}"),
        Value::Bool(v) => v.to_string(),
        Value::Text(s) => serde_json::Value::String(s.to_string()).to_string(),
        Value::Json(s) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(v) => v.to_string(),
            // Not valid JSON: shown as stored, kept on one line.
            Err(_) => s.replace('\n', "\\n"),
        },
        Value::Image(img) => {
            format!("{}x{} {}, {} bytes", img.width, img.height, img.mode.name(), img.data.len())
        }
        Value::Bytes(b) => format!("{} bytes{}", b.len(), hex_prefix(b)),
        Value::NDArray(b) => {
            let kind = match ty.kind().element() {
                Some((dtype, shape)) => format!("{} {shape:?}, ", dtype.name()),
                None => String::new(),
            };
            format!("{kind}{} bytes{}", b.len(), hex_prefix(b))
        }
        Value::Array(b) => {
            let kind = match ty.kind().element() {
                Some((dtype, _)) => {
                    format!("{} [{}], ", dtype.name(), beton_storage::reader::array_len(dtype, b))
                }
                None => String::new(),
            };
            format!("{kind}{} bytes{}", b.len(), hex_prefix(b))
        }
        Value::Custom(b) => format!("custom, {} bytes{}", b.len(), hex_prefix(b)),
    }
}

/// `: 00 01 02 …` — the first bytes in hex, or nothing for no bytes.
fn hex_prefix(b: &[u8]) -> String {
    if b.is_empty() {
        return String::new();
    }
    let mut s = String::from(":");
    for byte in &b[..b.len().min(HEX_PREFIX)] {
        let _ = write!(s, " {byte:02x}");
    }
    if b.len() > HEX_PREFIX {
        s.push_str(" …");
    }
    s
}

/// Writes `pixels` as an 8-bit RGB or grey PNG: to a temporary file beside `out`, then renamed
/// over it, so `out` is never half written.
fn write_png(out: &Path, pixels: &Pixels) -> Result<()> {
    let color = match pixels.channels {
        1 => png::ColorType::Grayscale,
        3 => png::ColorType::Rgb,
        c => bail!("cannot write a {c}-channel image as PNG"),
    };
    let name = out.file_name().with_context(|| format!("--out {}: not a file name", out.display()))?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| -> Result<()> {
        let file = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = std::io::BufWriter::new(file);
        {
            let mut encoder = png::Encoder::new(&mut w, pixels.width, pixels.height);
            encoder.set_color(color);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header()?;
            writer.write_image_data(&pixels.data)?;
            writer.finish()?;
        }
        w.flush()?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, out)
            .with_context(|| format!("renaming {} to {}", tmp.display(), out.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", out.display()))
}
