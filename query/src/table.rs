//! The data table of a `.beton` file as Arrow columns.
//!
//! A `.beton` data table is row-major: each row packs the fields' metadata (numpy aligned-struct
//! layout, docs/FORMAT.md §4). [`Table`] exposes it as named columns and materialises a column
//! only when asked, by a columnar gather over the rows, caching the result:
//!
//! | field type | columns | Arrow type | reads payload pages? |
//! |---|---|---|---|
//! | (every file) | `index` | UInt64 | no |
//! | Int | `name` | Int64 | no |
//! | Float | `name` | Float64 | no |
//! | RGBImage / GreyImage | `name.mode` ('jpg'/'raw'), `name.width`, `name.height`, `name.nbytes` | Utf8, UInt16, UInt16, UInt64 | no (nbytes comes from the allocation table) |
//! | Bytes, JSON | `name`: payload bytes as stored (JSON counts its NUL) | UInt64 | no |
//! | NDArray, TorchTensor | `name`: payload bytes | UInt64 | no |
//! | Text | `name` | Utf8 | **yes** |
//! | Bool | `name` | Boolean | no |
//! | Array | `name`: number of elements | UInt64 | no |
//! | custom | `name`: the row slot's bytes | FixedSizeBinary | no |
//!
//! Only Text columns read heap pages, and only when they are materialised.
//!
//! A query names its columns up front ([`Table::prefetch`]): the fixed-width ones among them are
//! gathered in one pass over the rows, since a pass costs about the same for one column as for
//! several (every row's cache lines are read either way).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::builder::{FixedSizeBinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, UInt16Array, UInt64Array};
use arrow_schema::{DataType, Field as ArrowField, Schema, SchemaRef};
use beton_storage::field::ColumnSource as Source;
use beton_storage::{Dataset, ImageMode, Value};

use crate::error::{Error, Result};
use crate::index_set::IndexSet;

#[derive(Debug, Clone)]
struct Column {
    name: String,
    field: usize,
    source: Source,
    data_type: DataType,
}

/// The data table of an open dataset, as lazily materialised Arrow columns.
pub struct Table<'a> {
    ds: &'a Dataset,
    columns: Vec<Column>,
    schema: SchemaRef,
    cache: Mutex<HashMap<usize, ArrayRef>>,
    /// The file's named splits, read once per table (so one query sees one generation).
    splits: OnceLock<BTreeMap<String, Arc<IndexSet>>>,
}

impl std::fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("path", &self.ds.path()).field("columns", &self.column_names()).finish()
    }
}

impl<'a> Table<'a> {
    /// The table of `ds`: its columns are known at once, none is materialised yet.
    pub fn new(ds: &'a Dataset) -> Table<'a> {
        let mut columns = vec![Column {
            name: "index".into(),
            field: usize::MAX,
            source: Source::Index,
            data_type: DataType::UInt64,
        }];
        for (k, f) in ds.fields().iter().enumerate() {
            for def in f.field_type().kind().columns() {
                let name = match def.suffix {
                    Some(suffix) => format!("{}.{suffix}", f.name()),
                    None => f.name().to_string(),
                };
                columns.push(Column {
                    name,
                    field: k,
                    source: def.source,
                    data_type: def.source.data_type(),
                });
            }
        }
        let schema = Arc::new(Schema::new(
            columns.iter().map(|c| ArrowField::new(&c.name, c.data_type.clone(), false)).collect::<Vec<_>>(),
        ));
        Table { ds, columns, schema, cache: Mutex::new(HashMap::new()), splits: OnceLock::new() }
    }

    /// The named split `name` of the file, read with the table's first use of a split and kept
    /// for the table's life, so every query on one table sees the same splits.
    ///
    /// # Errors
    /// [`Error::NoSuchSplit`] listing the splits; storage errors reading them.
    pub fn split(&self, name: &str) -> Result<Arc<IndexSet>> {
        let splits = match self.splits.get() {
            Some(s) => s,
            None => {
                let read = crate::splits::all(self.ds)?.into_iter().map(|(n, s)| (n, Arc::new(s))).collect();
                self.splits.get_or_init(|| read)
            }
        };
        splits.get(name).cloned().ok_or_else(|| crate::splits::no_such_split(name, splits.keys()))
    }

    /// The dataset this table reads.
    pub fn dataset(&self) -> &'a Dataset {
        self.ds
    }

    /// Number of rows.
    pub fn num_rows(&self) -> u64 {
        self.ds.num_samples()
    }

    /// The Arrow schema of every column (materialised or not).
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Column names, in schema order.
    pub fn column_names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// True when the column's values live in payload pages (reading it reads the heap).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`].
    pub fn reads_payloads(&self, name: &str) -> Result<bool> {
        Ok(self.columns[self.position(name)?].source.reads_payloads())
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.columns.iter().position(|c| c.name == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.to_string(),
            available: self.column_names().join(", "),
        })
    }

    /// Column `name`, materialised on first use and cached.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] listing the columns; storage errors for rows that disagree with
    /// the allocation table (image sizes) or text that is not UTF-8.
    pub fn column(&self, name: &str) -> Result<ArrayRef> {
        let pos = self.position(name)?;
        let cached = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&pos).cloned();
        let array = match cached {
            Some(a) => a,
            None => self.materialise(&self.columns[pos])?,
        };
        // Rows read through the map of a file that shrank meanwhile are zeros, not data
        // (beton_storage's SIGBUS guard): no column made of them is used or kept.
        self.ds.check_intact()?;
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).entry(pos).or_insert_with(|| array.clone());
        Ok(array)
    }

    /// Materialises the named columns that are not cached yet, the fixed-width ones computed from
    /// row slots (Int, Float, image width and height, Bytes / JSON / Array sizes) together in one
    /// pass over the data table: each row is read once instead of once per column. Names that are
    /// not columns, and columns of other kinds, are left to [`Table::column`]. Never fails: these
    /// columns are plain copies of row bytes.
    pub fn prefetch(&self, names: &[&str]) {
        let mut fused: Vec<usize> = Vec::new();
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for name in names {
                let Ok(pos) = self.position(name) else { continue };
                if cache.contains_key(&pos) || fused.contains(&pos) {
                    continue;
                }
                let fusable = matches!(
                    self.columns[pos].source,
                    Source::Int | Source::Float | Source::ImageWidth | Source::ImageHeight | Source::SizeWord
                );
                if fusable {
                    fused.push(pos);
                }
            }
        }
        if fused.len() < 2 {
            return;
        }
        let ds = self.ds;
        let n = ds.num_samples() as usize;
        /// A column being gathered: where its value sits in the row, and the values so far.
        enum Gather {
            I64(usize, Vec<i64>),
            F64(usize, Vec<f64>),
            U16(usize, Vec<u16>),
            U64(usize, Vec<u64>),
        }
        let mut gathers: Vec<Gather> = fused
            .iter()
            .map(|&pos| {
                let c = &self.columns[pos];
                let at = ds.fields()[c.field].offset();
                match c.source {
                    Source::Int => Gather::I64(at, Vec::with_capacity(n)),
                    Source::Float => Gather::F64(at, Vec::with_capacity(n)),
                    Source::ImageWidth => Gather::U16(at + 1, Vec::with_capacity(n)),
                    Source::ImageHeight => Gather::U16(at + 3, Vec::with_capacity(n)),
                    _ => Gather::U64(at + 8, Vec::with_capacity(n)),
                }
            })
            .collect();
        let word = |row: &[u8], at: usize| u64::from_le_bytes(row[at..at + 8].try_into().unwrap_or([0; 8]));
        // Blocks of rows small enough to stay in the L2 cache while every column takes its values
        // from them with its own tight loop.
        let row_size = ds.row_size().max(1);
        for block in ds.data_table().chunks(row_size * 2048) {
            let rows = || block.chunks_exact(row_size);
            for g in &mut gathers {
                match g {
                    Gather::I64(at, v) => v.extend(rows().map(|row| word(row, *at) as i64)),
                    Gather::F64(at, v) => v.extend(rows().map(|row| f64::from_bits(word(row, *at)))),
                    Gather::U16(at, v) => {
                        v.extend(rows().map(|row| u16::from_le_bytes([row[*at], row[*at + 1]])))
                    }
                    Gather::U64(at, v) => v.extend(rows().map(|row| word(row, *at))),
                }
            }
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (pos, g) in fused.into_iter().zip(gathers) {
            let array: ArrayRef = match g {
                Gather::I64(_, v) => Arc::new(Int64Array::from(v)),
                Gather::F64(_, v) => Arc::new(Float64Array::from(v)),
                Gather::U16(_, v) => Arc::new(UInt16Array::from(v)),
                Gather::U64(_, v) => Arc::new(UInt64Array::from(v)),
            };
            cache.entry(pos).or_insert(array);
        }
    }

    /// A record batch of the named columns, in the order given.
    ///
    /// # Errors
    /// As [`Table::column`].
    pub fn record_batch(&self, names: &[&str]) -> Result<RecordBatch> {
        let arrays = names.iter().map(|n| self.column(n)).collect::<Result<Vec<_>>>()?;
        let fields: Vec<ArrowField> =
            names.iter().map(|n| self.schema.field(self.position(n).unwrap_or(0)).clone()).collect();
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
    }

    fn materialise(&self, c: &Column) -> Result<ArrayRef> {
        let ds = self.ds;
        let n = ds.num_samples();
        if c.source == Source::Index {
            return Ok(Arc::new(UInt64Array::from_iter_values(0..n)));
        }
        let offset = ds.fields()[c.field].offset();
        // Each row's slot of this field: a strided view of the row-major table.
        let slots = || ds.data_table().chunks_exact(ds.row_size().max(1)).map(move |row| &row[offset..]);
        let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
        let half = |s: &[u8], at: usize| u16::from_le_bytes([s[at], s[at + 1]]);
        Ok(match c.source {
            Source::Index => unreachable!("handled above"),
            Source::Int => Arc::new(Int64Array::from_iter_values(slots().map(|s| word(s, 0) as i64))),
            Source::Float => {
                Arc::new(Float64Array::from_iter_values(slots().map(|s| f64::from_bits(word(s, 0)))))
            }
            Source::Bool => Arc::new(BooleanArray::from_iter(slots().map(|s| Some(s[0] != 0)))),
            Source::ImageWidth => Arc::new(UInt16Array::from_iter_values(slots().map(|s| half(s, 1)))),
            Source::ImageHeight => Arc::new(UInt16Array::from_iter_values(slots().map(|s| half(s, 3)))),
            Source::SizeWord => Arc::new(UInt64Array::from_iter_values(slots().map(|s| word(s, 8)))),
            Source::Constant(nbytes) => Arc::new(UInt64Array::from_iter_values((0..n).map(|_| nbytes))),
            Source::ImageMode => {
                let mut b = StringBuilder::with_capacity(n as usize, 3 * n as usize);
                for (i, s) in slots().enumerate() {
                    match ImageMode::from_byte(s[0]) {
                        Some(mode) => b.append_value(mode.name()),
                        // Not 0 or 1: the reader's error names the sample and byte offset.
                        None => {
                            return Err(ds.get(i as u64, c.field).err().map_or_else(
                                || Error::InvalidArgument {
                                    what: "image mode".into(),
                                    why: format!("byte {}", s[0]),
                                },
                                Error::from,
                            ))
                        }
                    }
                }
                Arc::new(b.finish())
            }
            Source::ImageNbytes => {
                let values = (0..n)
                    .map(|i| Ok(ds.get(i, c.field)?.as_image().map_or(0, |img| img.data.len() as u64)))
                    .collect::<Result<Vec<u64>>>()?;
                Arc::new(UInt64Array::from(values))
            }
            Source::Text => {
                let mut b = StringBuilder::with_capacity(n as usize, 16 * n as usize);
                for i in 0..n {
                    match ds.get(i, c.field)? {
                        Value::Text(t) => b.append_value(t),
                        other => unreachable!("text field gave {other:?}"),
                    }
                }
                Arc::new(b.finish())
            }
            Source::Raw(size) => {
                let mut b = FixedSizeBinaryBuilder::with_capacity(n as usize, size as i32);
                for s in slots() {
                    b.append_value(&s[..size])?;
                }
                Arc::new(b.finish())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, StringArray};
    use beton_storage::{
        ArraySpec, DType, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode,
        Writer, WriterOptions,
    };

    fn dataset(dir: &std::path::Path) -> Dataset {
        let path = dir.join("t.beton");
        let raw = ImageOptions { write_mode: WriteMode::Raw, ..ImageOptions::default() };
        let fields = vec![
            FieldSpec::rgb_image("image", raw),
            FieldSpec::new("label", FieldType::Int),
            FieldSpec::new("score", FieldType::Float),
            FieldSpec::new("blob", FieldType::Bytes),
            FieldSpec::new("meta", FieldType::Json),
            FieldSpec::new(
                "arr",
                FieldType::NDArray(ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap()),
            ),
            FieldSpec::new("caption", FieldType::Text),
            FieldSpec::new("flag", FieldType::Bool),
            FieldSpec::new("boxes", FieldType::Array(DType::parse("<i2").unwrap())),
        ];
        Writer::new(&path, fields, WriterOptions { page_size: 1 << 21, ..WriterOptions::default() })
            .unwrap()
            .write_indexed(5, |i| {
                let w = 1 + i as u32;
                Ok(vec![
                    SampleValue::Image(ImageSource::Pixels(Pixels {
                        width: w,
                        height: 2,
                        channels: 3,
                        data: vec![7; (w * 6) as usize],
                    })),
                    SampleValue::Int(i as i64 - 2),
                    SampleValue::Float(i as f64 / 2.0),
                    SampleValue::Bytes(vec![0; i as usize]),
                    SampleValue::Json(format!("{{\"i\": {i}}}")),
                    SampleValue::NDArray(vec![0; 24]),
                    SampleValue::Text(format!("c{i}")),
                    SampleValue::Bool(i % 2 == 0),
                    SampleValue::Array(vec![0; 2 * i as usize]),
                ])
            })
            .unwrap();
        Dataset::open(&path).unwrap()
    }

    #[test]
    fn every_field_type_maps_to_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let t = Table::new(&ds);
        assert_eq!(
            t.column_names(),
            [
                "index",
                "image.mode",
                "image.width",
                "image.height",
                "image.nbytes",
                "label",
                "score",
                "blob",
                "meta",
                "arr",
                "caption",
                "flag",
                "boxes"
            ]
        );
        let get_u64 =
            |n: &str| t.column(n).unwrap().as_any().downcast_ref::<UInt64Array>().unwrap().values().to_vec();
        assert_eq!(get_u64("index"), [0, 1, 2, 3, 4]);
        assert_eq!(get_u64("image.nbytes"), [6, 12, 18, 24, 30]);
        assert_eq!(get_u64("blob"), [0, 1, 2, 3, 4]);
        assert_eq!(get_u64("meta"), [9, 9, 9, 9, 9], "JSON size counts its NUL");
        assert_eq!(get_u64("arr"), [24; 5]);
        assert_eq!(get_u64("boxes"), [0, 1, 2, 3, 4], "array length in elements");
        let w = t.column("image.width").unwrap();
        assert_eq!(w.as_any().downcast_ref::<UInt16Array>().unwrap().values().to_vec(), [1, 2, 3, 4, 5]);
        let labels = t.column("label").unwrap();
        assert_eq!(
            labels.as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec(),
            [-2, -1, 0, 1, 2]
        );
        let mode = t.column("image.mode").unwrap();
        assert_eq!(mode.as_any().downcast_ref::<StringArray>().unwrap().value(3), "raw");
        let caption = t.column("caption").unwrap();
        assert_eq!(caption.as_any().downcast_ref::<StringArray>().unwrap().value(4), "c4");
        let flag = t.column("flag").unwrap();
        assert!(flag.as_any().downcast_ref::<BooleanArray>().unwrap().value(2));
        assert!(t.reads_payloads("caption").unwrap() && !t.reads_payloads("image.nbytes").unwrap());
        let batch = t.record_batch(&["label", "score"]).unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (5, 2));
        assert_eq!(batch.column(1).len(), 5);
    }

    #[test]
    fn prefetch_gives_the_columns_one_by_one_materialisation_gives() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let names =
            ["label", "score", "image.width", "image.height", "blob", "meta", "boxes", "caption", "nope"];
        let fused = Table::new(&ds);
        fused.prefetch(&names);
        let cached = fused.cache.lock().unwrap().len();
        assert_eq!(cached, 7, "the seven fixed-width slot columns, not caption or an unknown name");
        let single = Table::new(&ds);
        for name in &names[..8] {
            assert_eq!(fused.column(name).unwrap().as_ref(), single.column(name).unwrap().as_ref(), "{name}");
        }
        // One column alone is left to `column`.
        let one = Table::new(&ds);
        one.prefetch(&["label"]);
        assert!(one.cache.lock().unwrap().is_empty());
    }

    #[test]
    fn unknown_column_lists_the_columns() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let err = Table::new(&ds).column("lable").unwrap_err().to_string();
        assert!(err.contains("no column named 'lable'") && err.contains("label, score"), "{err}");
    }
}
