//! beton-storage: the `.beton` file format.
//!
//! A `.beton` file is FFCV 1.0.2's format (version 2): a header, field descriptors, a fixed-width
//! per-sample data table, whole pages of payloads and an allocation table. This crate reads any
//! file FFCV writes ([`Dataset::open`]: memory-mapped, validated on open, O(1) access to any
//! sample) and writes files FFCV reads ([`Writer`]: parallel, deterministic, atomic), plus
//! beton's extension fields (text, bool, variable-length arrays, grey images) through FFCV's own
//! extension point. docs/FORMAT.md is the normative description of the bytes.
//!
//! ```no_run
//! use beton_storage::{Dataset, FieldSpec, FieldType, SampleValue, Writer, WriterOptions};
//!
//! let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("score", FieldType::Float)];
//! let writer = Writer::new("scores.beton", fields, WriterOptions::default())?;
//! writer.write_indexed(100, |i| Ok(vec![SampleValue::Int(i as i64), SampleValue::Float(0.5)]))?;
//!
//! let ds = Dataset::open("scores.beton")?;
//! let label = ds.field_index("label")?;
//! assert_eq!(ds.get(7, label)?.as_int(), Some(7));
//! # Ok::<(), beton_storage::Error>(())
//! ```

pub mod allocator;
pub mod error;
pub mod field;
pub mod format;
pub mod fuzz;
pub mod image;
pub mod imagefolder;
pub mod jpeg;
mod mmap;
pub mod reader;
mod recent;
pub mod remote;
pub mod splits;
pub mod summary;
mod temp;
pub mod value;
pub mod writer;

pub use error::{Error, Result};
pub use field::{ArraySpec, CustomField, DType, FieldKind, FieldType};
pub use format::{AllocEntry, Header, Slot};
pub use image::{Channels, EncodedImage, ImageMode, ImageOptions, ImageSource, Pixels, WriteMode};
pub use mmap::{advise_huge_pages, reserve_descriptors, MappedFile};
pub use reader::{Dataset, Field, FileId, OpenOptions, Window};
pub use remote::{Lease, RemoteOptions, RemoteStats};
pub use splits::{save_classes, update_splits, SplitMap, SplitRegion};
pub use summary::{verify, verify_with_progress, Summary};
pub use temp::{stale_temp_files, stale_temp_files_in};
pub use value::{ImageRef, SampleValue, Value, ValueKind};
pub use writer::{FieldSpec, Progress, WriteReport, Writer, WriterOptions, MAX_THREADS};
