//! Gathering a data file's columns from its row-major data table (docs/FORMAT.md §4): each
//! field type lists its columns ([`FieldKind::columns`](beton_storage::FieldKind::columns)), and
//! each column's [`ColumnSource`](beton_storage::field::ColumnSource) says how to read it from a
//! row slot. [`crate::Table`] gathers through here when no columnar copy holds a column, and
//! [`crate::columnar`] makes its copies from here: neither needs the other's code.

use std::sync::Arc;

use arrow_array::builder::{FixedSizeBinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, UInt16Array, UInt64Array};
use arrow_schema::DataType;
use beton_storage::field::ColumnSource as Source;
use beton_storage::{Dataset, ImageMode, Value};

use crate::error::{Error, Result};

/// A column of a table: its name, the field it comes from and how it is read.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub(crate) name: String,
    /// The field, by name (none for `index` and `row_id`).
    pub(crate) field: Option<String>,
    /// The field's type (none for `index` and `row_id`).
    pub(crate) ty: Option<beton_storage::FieldType>,
    pub(crate) source: Source,
    pub(crate) data_type: DataType,
}

/// The columns of a schema: `(field name, field type)` in order.
pub(crate) fn columns_of<'t>(
    fields: impl Iterator<Item = (&'t str, &'t beton_storage::FieldType)>,
    row_id: bool,
) -> Vec<Column> {
    let mut columns = vec![Column {
        name: "index".into(),
        field: None,
        ty: None,
        source: Source::Index,
        data_type: DataType::UInt64,
    }];
    if row_id {
        // The stable id: `Source::Constant` marks it (no field has a constant column without one).
        columns.push(Column {
            name: "row_id".into(),
            field: None,
            ty: None,
            source: Source::Constant(0),
            data_type: DataType::UInt64,
        });
    }
    for (name, ty) in fields {
        for def in ty.kind().columns() {
            let column = match def.suffix {
                Some(suffix) => format!("{name}.{suffix}"),
                None => name.to_string(),
            };
            columns.push(Column {
                name: column,
                field: Some(name.to_string()),
                ty: Some(ty.clone()),
                source: def.source,
                data_type: def.source.data_type(),
            });
        }
    }
    columns
}

/// Whether columns of `source` are fixed-width values of row slots, which [`gather_fused`]
/// gathers several at a time in one pass over the rows.
pub(crate) fn fusable(source: Source) -> bool {
    matches!(
        source,
        Source::Int | Source::Float | Source::ImageWidth | Source::ImageHeight | Source::SizeWord
    )
}

/// True for the columns a columnar copy holds: every fixed-width one computed from row slots or
/// the allocation table.
pub(crate) fn holds(source: Source) -> bool {
    !matches!(source, Source::Index | Source::Text | Source::Constant(_))
}

/// The columns a columnar copy of `ds` holds, gathered from its rows: the fixed-width ones in
/// one pass over the data table, the others (image modes and sizes) in parallel. A column that
/// cannot be read (a corrupt image mode) is left out: the row gather reports it where a query
/// needs it.
///
/// # Errors
/// `FileChanged` from storage when the data file shrank while it was read (its rows then read
/// as zeros, which must not be taken for data).
pub(crate) fn copy_columns(ds: &Dataset) -> Result<Vec<(String, ArrayRef)>> {
    let columns: Vec<Column> = columns_of(ds.fields().iter().map(|f| (f.name(), f.field_type())), false)
        .into_iter()
        .filter(|c| c.field.is_some() && holds(c.source))
        .collect();
    let field_of = |c: &Column| ds.field_index(c.field.as_deref().unwrap_or_default());
    let mut arrays: Vec<Option<Result<ArrayRef>>> = (0..columns.len()).map(|_| None).collect();
    let fused: Vec<usize> = (0..columns.len()).filter(|&k| fusable(columns[k].source)).collect();
    if fused.len() >= 2 {
        let offsets: Result<Vec<usize>> =
            fused.iter().map(|&k| Ok(ds.fields()[field_of(&columns[k])?].offset())).collect();
        let part = GatherPart { ds, rows: None, offsets: offsets? };
        let sources: Vec<Source> = fused.iter().map(|&k| columns[k].source).collect();
        for (&k, array) in fused.iter().zip(gather_fused(&[part], &sources)) {
            arrays[k] = Some(Ok(array));
        }
    }
    let rest: Vec<(usize, Result<ArrayRef>)> = {
        use rayon::prelude::*;
        (0..columns.len())
            .into_par_iter()
            .filter(|&k| arrays[k].is_none())
            .map(|k| {
                (k, field_of(&columns[k]).map_err(Error::from).and_then(|f| gather(ds, f, columns[k].source)))
            })
            .collect()
    };
    for (k, array) in rest {
        arrays[k] = Some(array);
    }
    ds.check_intact()?;
    Ok(columns.into_iter().zip(arrays).filter_map(|(c, array)| Some((c.name, array?.ok()?))).collect())
}

/// A column being gathered.
enum Gather {
    I64(Vec<i64>),
    F64(Vec<f64>),
    U16(Vec<u16>),
    U64(Vec<u64>),
}

/// Appends each column's value from every row of `rows` (a column at row offset `at`).
fn fill<'r>(gathers: &mut [Gather], at: &[usize], rows: impl Iterator<Item = &'r [u8]> + Clone) {
    let word = |row: &[u8], at: usize| {
        row.get(at..at + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let half = |row: &[u8], at: usize| row.get(at..at + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    for (g, &at) in gathers.iter_mut().zip(at) {
        match g {
            Gather::I64(v) => v.extend(rows.clone().map(|row| word(row, at) as i64)),
            Gather::F64(v) => v.extend(rows.clone().map(|row| f64::from_bits(word(row, at)))),
            Gather::U16(v) => v.extend(rows.clone().map(|row| half(row, at))),
            Gather::U64(v) => v.extend(rows.clone().map(|row| word(row, at))),
        }
    }
}

/// One data file's share of a fused gather: its kept rows (`None`: all) and, for each column, the
/// offset of the field's slot in its rows.
pub(crate) struct GatherPart<'d> {
    pub(crate) ds: &'d Dataset,
    pub(crate) rows: Option<&'d [u64]>,
    pub(crate) offsets: Vec<usize>,
}

/// The columns of `sources` (fixed-width ones) over the kept rows of every part, in order,
/// gathered in one pass over each data table straight into one array per column (no per-part
/// arrays to concatenate).
pub(crate) fn gather_fused(parts: &[GatherPart<'_>], sources: &[Source]) -> Vec<ArrayRef> {
    let n: usize = parts.iter().map(|p| p.rows.map_or(p.ds.num_samples() as usize, <[u64]>::len)).sum();
    // Where each column's value sits past the field's slot offset.
    let delta = |source: &Source| match source {
        Source::Int | Source::Float => 0,
        Source::ImageWidth => 1,
        Source::ImageHeight => 3,
        _ => 8,
    };
    let mut gathers: Vec<Gather> = sources
        .iter()
        .map(|source| match source {
            Source::Int => Gather::I64(Vec::with_capacity(n)),
            Source::Float => Gather::F64(Vec::with_capacity(n)),
            Source::ImageWidth | Source::ImageHeight => Gather::U16(Vec::with_capacity(n)),
            _ => Gather::U64(Vec::with_capacity(n)),
        })
        .collect();
    for part in parts {
        let row_size = part.ds.row_size().max(1);
        let table = part.ds.data_table();
        let at: Vec<usize> = part.offsets.iter().zip(sources).map(|(o, s)| o + delta(s)).collect();
        // Blocks of rows small enough to stay in the L2 cache while every column takes its
        // values from them with its own tight loop.
        match part.rows {
            None => {
                for block in table.chunks(row_size * 2048) {
                    fill(&mut gathers, &at, block.chunks_exact(row_size));
                }
            }
            Some(rows) => {
                for block in rows.chunks(2048) {
                    let kept = block.iter().map(|&r| {
                        let start = r as usize * row_size;
                        table.get(start..start + row_size).unwrap_or(&[0u8; 0])
                    });
                    fill(&mut gathers, &at, kept);
                }
            }
        }
    }
    gathers
        .into_iter()
        .map(|g| -> ArrayRef {
            match g {
                Gather::I64(v) => Arc::new(Int64Array::from(v)),
                Gather::F64(v) => Arc::new(Float64Array::from(v)),
                Gather::U16(v) => Arc::new(UInt16Array::from(v)),
                Gather::U64(v) => Arc::new(UInt64Array::from(v)),
            }
        })
        .collect()
}

/// One column (`source` of field `field`) over every row of `ds`.
pub(crate) fn gather(ds: &Dataset, field: usize, source: Source) -> Result<ArrayRef> {
    let n = ds.num_samples();
    let offset = ds.fields()[field].offset();
    // Each row's slot of this field: a strided view of the row-major table.
    let slots = || ds.data_table().chunks_exact(ds.row_size().max(1)).map(move |row| &row[offset..]);
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    let half = |s: &[u8], at: usize| u16::from_le_bytes([s[at], s[at + 1]]);
    Ok(match source {
        Source::Index => Arc::new(UInt64Array::from_iter_values(0..n)),
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
                        return Err(ds.get(i as u64, field).err().map_or_else(
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
                .map(|i| Ok(ds.get(i, field)?.as_image().map_or(0, |img| img.data.len() as u64)))
                .collect::<Result<Vec<u64>>>()?;
            Arc::new(UInt64Array::from(values))
        }
        Source::Text => {
            let mut b = StringBuilder::with_capacity(n as usize, 16 * n as usize);
            for i in 0..n {
                match ds.get(i, field)? {
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
        Source::Vector(element, dim) => {
            let width = element.size() * dim as usize;
            let mut bytes = arrow_buffer::MutableBuffer::with_capacity(width * n as usize);
            for i in 0..n {
                match ds.get(i, field)? {
                    Value::NDArray(b) if b.len() == width => bytes.extend_from_slice(b),
                    other => {
                        return Err(Error::InvalidArgument {
                            what: format!("sample {i}, field '{}'", ds.fields()[field].name()),
                            why: format!(
                                "a vector of {dim} {element:?} has {width} bytes, not {:?}",
                                other.kind()
                            ),
                        })
                    }
                }
            }
            vectors(bytes.into(), element, dim)?
        }
    })
}

/// A `FixedSizeList` of `dim` elements of `element` over `bytes` (little-endian values, one
/// vector after the other, aligned for the element type), without copying them.
///
/// # Errors
/// [`Error::InvalidArgument`] when `bytes` is not a whole number of vectors or not aligned.
pub(crate) fn vectors(
    bytes: arrow_buffer::Buffer,
    element: beton_storage::field::Element,
    dim: u32,
) -> Result<ArrayRef> {
    use arrow_array::types::*;
    use arrow_array::PrimitiveArray;
    use beton_storage::field::Element as E;
    let width = element.size() * dim as usize;
    if width == 0 || bytes.len() % width != 0 || (bytes.as_ptr() as usize) % element.size() != 0 {
        return Err(Error::InvalidArgument {
            what: "vector column".into(),
            why: format!("{} bytes are not whole, aligned vectors of {dim} {element:?}", bytes.len()),
        });
    }
    let len = bytes.len() / element.size();
    macro_rules! values {
        ($t:ty) => {
            Arc::new(PrimitiveArray::<$t>::new(arrow_buffer::ScalarBuffer::new(bytes, 0, len), None))
                as ArrayRef
        };
    }
    let values = match element {
        E::I8 => values!(Int8Type),
        E::U8 => values!(UInt8Type),
        E::I16 => values!(Int16Type),
        E::U16 => values!(UInt16Type),
        E::I32 => values!(Int32Type),
        E::U32 => values!(UInt32Type),
        E::I64 => values!(Int64Type),
        E::U64 => values!(UInt64Type),
        E::F16 => values!(Float16Type),
        E::F32 => values!(Float32Type),
        E::F64 => values!(Float64Type),
    };
    let item = Arc::new(arrow_schema::Field::new("item", element.data_type(), false));
    Ok(Arc::new(arrow_array::FixedSizeListArray::try_new(item, dim as i32, values, None)?))
}
