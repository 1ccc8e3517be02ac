//! What `beton info` and `beton verify` report: a dataset's shape and sizes, and a deep check of
//! every structure, row and allocation.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::image::ImageMode;
use crate::reader::Dataset;
use crate::value::Value;

/// Per-field totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FieldSummary {
    /// Field name.
    pub name: String,
    /// Type name (FFCV's class name, or beton's for extensions).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Type id in the descriptor.
    pub type_id: u8,
    /// Type arguments worth showing (dtype and shape of arrays).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// Byte offset of the field in a row.
    pub row_offset: usize,
    /// Payload bytes of this field over all samples.
    pub payload_bytes: u64,
    /// Images stored as JPEG.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jpg: Option<u64>,
    /// Images stored raw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<u64>,
}

/// A dataset's header, fields and sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// The file.
    pub path: String,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Format version.
    pub version: u16,
    /// Number of samples.
    pub num_samples: u64,
    /// Page size.
    pub page_size: u64,
    /// Number of data pages.
    pub num_pages: u64,
    /// Data-table row size.
    pub row_bytes: usize,
    /// Byte offset of the allocation table.
    pub alloc_table_ptr: u64,
    /// Allocation-table entries.
    pub num_allocations: u64,
    /// The fields.
    pub fields: Vec<FieldSummary>,
}

impl Summary {
    /// Summarises `ds`, reading every row once (payloads are not read, only sized).
    ///
    /// # Errors
    /// A row that disagrees with the allocation table ([`Error::Corrupt`]).
    pub fn of(ds: &Dataset) -> Result<Summary> {
        let summary = Summary::read(ds);
        ds.check_intact()?;
        summary
    }

    fn read(ds: &Dataset) -> Result<Summary> {
        let mut fields: Vec<FieldSummary> = ds
            .fields()
            .iter()
            .map(|f| {
                let is_image = f.field_type().is_image();
                FieldSummary {
                    name: f.name().to_string(),
                    type_name: f.field_type().name().to_string(),
                    type_id: f.type_id(),
                    arguments: f.field_type().kind().describe(),
                    row_offset: f.offset(),
                    payload_bytes: 0,
                    jpg: is_image.then_some(0),
                    raw: is_image.then_some(0),
                }
            })
            .collect();
        // Only payload fields have sizes to add up: a scalar-only file reads no row here.
        let payload_fields: Vec<usize> = (0..ds.fields().len())
            .filter(|&k| ds.fields()[k].field_type().payload_ptr_offset().is_some())
            .collect();
        for i in 0..ds.num_samples() {
            for &k in &payload_fields {
                let fs = &mut fields[k];
                match ds.get(i, k)? {
                    Value::Image(img) => {
                        fs.payload_bytes += img.data.len() as u64;
                        let counter = if img.mode == ImageMode::Jpg { &mut fs.jpg } else { &mut fs.raw };
                        *counter.get_or_insert(0) += 1;
                    }
                    Value::Bytes(b) | Value::NDArray(b) | Value::Array(b) => {
                        fs.payload_bytes += b.len() as u64
                    }
                    Value::Json(s) => fs.payload_bytes += s.len() as u64 + 1,
                    Value::Text(s) => fs.payload_bytes += s.len() as u64,
                    _ => {}
                }
            }
        }
        let h = ds.header();
        Ok(Summary {
            path: ds.path().display().to_string(),
            file_bytes: ds.file_len(),
            version: h.version,
            num_samples: h.num_samples,
            page_size: ds.page_size(),
            num_pages: ds.num_pages(),
            row_bytes: ds.row_size(),
            alloc_table_ptr: h.alloc_table_ptr,
            num_allocations: ds.num_allocations(),
            fields,
        })
    }
}

/// What [`verify`] checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Samples checked.
    pub samples: u64,
    /// Allocations checked.
    pub allocations: u64,
    /// Images decoded (when asked to decode).
    pub images_decoded: u64,
}

/// Checks everything [`Dataset::open`] does not: every field of every sample against the
/// allocation table and its type, that allocations do not overlap, that every allocation is used
/// by exactly one row, that each sample's payloads share one page, that pages are whole, and
/// (with `decode_images`) that every image decodes to its stored size.
///
/// # Errors
/// The first problem found, as [`Error::Corrupt`] naming the byte offset and sample.
pub fn verify(ds: &Dataset, decode_images: bool) -> Result<VerifyReport> {
    verify_with_progress(ds, decode_images, &|_, _| {})
}

/// Samples checked between two calls of [`verify_with_progress`]'s callback: often enough for a
/// bar to move smoothly, rarely enough to cost nothing next to the checks (a few microseconds a
/// sample without decoding).
const VERIFY_PROGRESS_EVERY: u64 = 256;

/// [`verify`], calling `progress(done, total)` as the per-sample checks go: samples checked so
/// far and the number of samples, first `(0, total)`, then every few hundred samples, last
/// `(total, total)` once every sample passed (`done` never goes down).
///
/// # Errors
/// As [`verify`].
pub fn verify_with_progress(
    ds: &Dataset,
    decode_images: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<VerifyReport> {
    let report = verify_bytes(ds, decode_images, progress);
    // A read that faulted (the file shrank meanwhile) got zeros: whatever they showed is moot.
    ds.check_intact()?;
    report
}

fn verify_bytes(ds: &Dataset, decode_images: bool, progress: &dyn Fn(u64, u64)) -> Result<VerifyReport> {
    let corrupt = |offset: u64, what: String| Error::Corrupt { path: ds.path().to_path_buf(), offset, what };
    // Opened with deferred allocation checks: this is where they run.
    ds.alloc_meta()?;
    let page = ds.page_size();
    let n = ds.num_allocations();
    if n > 0 && (ds.header().alloc_table_ptr - ds.data_start()) % page != 0 {
        return Err(corrupt(
            16,
            format!(
                "data region from byte {} to the allocation table at {} is not a whole number of {page}-byte pages",
                ds.data_start(),
                ds.header().alloc_table_ptr
            ),
        ));
    }
    let mut by_ptr: Vec<(u64, u64, u64, u64)> = (0..n)
        .map(|k| {
            let e = ds.allocation(k);
            (e.ptr, e.size, e.sample_id, k)
        })
        .collect();
    by_ptr.sort_unstable();
    for w in by_ptr.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.0 + a.1 > b.0 {
            return Err(corrupt(
                ds.header().alloc_table_ptr + b.3 * 24,
                format!(
                    "allocation entry {} (sample {}, ptr {}, size {}) overlaps entry {} (sample {}, ptr {}, size {})",
                    b.3, b.2, b.0, b.1, a.3, a.2, a.0, a.1
                ),
            ));
        }
    }
    let mut images_decoded = 0u64;
    let num_samples = ds.num_samples();
    progress(0, num_samples);
    for i in 0..num_samples {
        if i > 0 && i % VERIFY_PROGRESS_EVERY == 0 {
            progress(i, num_samples);
        }
        let allocs = ds.sample_allocations(i);
        if let (Some(first), Some(last)) = (allocs.first(), allocs.last()) {
            if first.ptr / page != (last.ptr + last.size.max(1) - 1) / page {
                return Err(corrupt(
                    ds.data_table_offset() + i * ds.row_size() as u64,
                    format!("sample {i}: its allocations span more than one page"),
                ));
            }
        }
        // The (ptr, size) of every payload the row points to must be exactly the sample's
        // allocations: none missing, none shared by two fields, none left over.
        let base = ds.file_bytes().as_ptr() as u64;
        let mut referenced = Vec::with_capacity(allocs.len());
        for k in 0..ds.fields().len() {
            let v = ds.get(i, k)?;
            if ds.fields()[k].field_type().payload_ptr_offset().is_some() {
                if let Some(payload) = v.as_bytes() {
                    let len = payload.len() as u64 + u64::from(matches!(v, Value::Json(_)));
                    referenced.push((payload.as_ptr() as u64 - base, len));
                }
            }
            if let (true, Value::Image(img)) = (decode_images, v) {
                img.decode().map_err(|e| {
                    corrupt(
                        img.data.as_ptr() as u64 - base,
                        format!("sample {i}, field '{}': image does not decode: {e}", ds.fields()[k].name()),
                    )
                })?;
                images_decoded += 1;
            }
        }
        referenced.sort_unstable();
        let mut table: Vec<(u64, u64)> = allocs.iter().map(|a| (a.ptr, a.size)).collect();
        table.sort_unstable();
        if referenced != table {
            return Err(corrupt(
                ds.data_table_offset() + i * ds.row_size() as u64,
                format!(
                    "sample {i}: its row points to {} payloads {:?}, the allocation table lists {} {:?} \
                     (ptr, size)",
                    referenced.len(),
                    referenced,
                    table.len(),
                    table
                ),
            ));
        }
    }
    if num_samples > 0 {
        progress(num_samples, num_samples);
    }
    Ok(VerifyReport { samples: num_samples, allocations: n, images_decoded })
}
