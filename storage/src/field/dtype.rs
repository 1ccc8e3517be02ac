//! numpy dtypes and array shapes ([`DType`], [`ArraySpec`]) and FFCV's argument blob for them.
//!
//! FFCV stores an array field's shape and dtype in the descriptor's argument blob as
//! `NDArrayArgsType = [('shape', '<u8', 32), ('type_length', '<u8')]` followed by
//! `json.dumps(dtype.descr)` in ASCII, e.g. `[["", "<f4"]]`. Each sample's row holds a `<u8`
//! pointer to `itemsize × prod(shape)` bytes.

use crate::format::ARGS_SIZE;

/// Most dimensions an array field may have (numpy's limit, the size of FFCV's shape array).
pub const MAX_DIMS: usize = 32;
/// Offset of the dtype JSON in the argument blob: 32 shape entries + the length, 8 bytes each.
const DESCR_OFFSET: usize = (MAX_DIMS + 1) * 8;

/// A numpy scalar dtype, kept as its array-interface type string (`<f4`, `|u1`, `<i8`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DType {
    typestr: String,
    itemsize: usize,
}

impl DType {
    /// Parses a numpy type string: a byte-order character (`<`, `>`, `|`, `=`), a kind character
    /// and the item size in bytes (`U` counts characters of 4 bytes), with an optional `[unit]`
    /// for datetimes. `=` is normalised to `<` (this format is little-endian).
    ///
    /// # Errors
    /// A string that is not of that form, or an item size of 0.
    pub fn parse(typestr: &str) -> Result<DType, String> {
        let bad = || format!("'{typestr}' is not a numpy type string such as '<f4' or '|u1'");
        let mut chars = typestr.chars();
        let order = chars.next().ok_or_else(bad)?;
        let (order, rest) = match order {
            '<' | '>' | '|' => (order, &typestr[1..]),
            '=' => ('<', &typestr[1..]),
            _ => return Err(bad()),
        };
        let kind = rest.chars().next().filter(char::is_ascii_alphabetic).ok_or_else(bad)?;
        let digits_and_unit = &rest[1..];
        let digits_end = digits_and_unit.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits_and_unit.len());
        let unit = &digits_and_unit[digits_end..];
        if !(unit.is_empty() || (unit.starts_with('[') && unit.ends_with(']'))) {
            return Err(bad());
        }
        let count: usize = digits_and_unit[..digits_end].parse().map_err(|_| bad())?;
        let itemsize = if kind == 'U' { count.checked_mul(4).ok_or_else(bad)? } else { count };
        if itemsize == 0 {
            return Err(format!("'{typestr}' has an item size of 0"));
        }
        Ok(DType { typestr: format!("{order}{kind}{digits_and_unit}"), itemsize })
    }

    /// The numpy type string, e.g. `<f4`.
    pub fn typestr(&self) -> &str {
        &self.typestr
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// numpy's name for the dtype (`str(np.dtype(...))`): `float32`, `uint8`, `bool`, ...;
    /// the type string itself for kinds without a short name or big-endian types.
    pub fn name(&self) -> String {
        let kind = self.typestr.as_bytes()[1];
        let bits = self.itemsize * 8;
        if self.typestr.starts_with('>') && self.itemsize > 1 {
            return self.typestr.clone();
        }
        match kind {
            b'u' => format!("uint{bits}"),
            b'i' => format!("int{bits}"),
            b'f' => format!("float{bits}"),
            b'c' => format!("complex{bits}"),
            b'b' if self.itemsize == 1 => "bool".to_string(),
            _ => self.typestr.clone(),
        }
    }
}

/// The element type of a vector column: the numeric little-endian dtypes, as Arrow has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Element {
    /// `int8`.
    I8,
    /// `uint8`.
    U8,
    /// `int16`.
    I16,
    /// `uint16`.
    U16,
    /// `int32`.
    I32,
    /// `uint32`.
    U32,
    /// `int64`.
    I64,
    /// `uint64`.
    U64,
    /// `float16`.
    F16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl Element {
    /// The element type of `dtype`: an integer or float dtype stored little-endian (`<`, or `|`
    /// for one byte); `None` for anything else (bool, complex, big-endian, strings, datetimes).
    pub fn of(dtype: &DType) -> Option<Element> {
        let t = dtype.typestr().as_bytes();
        if !(t[0] == b'<' || (t[0] == b'|' && dtype.itemsize() == 1)) || t.len() > 3 {
            return None;
        }
        Some(match (t[1], dtype.itemsize()) {
            (b'i', 1) => Element::I8,
            (b'u', 1) => Element::U8,
            (b'i', 2) => Element::I16,
            (b'u', 2) => Element::U16,
            (b'i', 4) => Element::I32,
            (b'u', 4) => Element::U32,
            (b'i', 8) => Element::I64,
            (b'u', 8) => Element::U64,
            (b'f', 2) => Element::F16,
            (b'f', 4) => Element::F32,
            (b'f', 8) => Element::F64,
            _ => return None,
        })
    }

    /// Its Arrow type.
    pub fn data_type(self) -> arrow_schema::DataType {
        use arrow_schema::DataType::*;
        match self {
            Element::I8 => Int8,
            Element::U8 => UInt8,
            Element::I16 => Int16,
            Element::U16 => UInt16,
            Element::I32 => Int32,
            Element::U32 => UInt32,
            Element::I64 => Int64,
            Element::U64 => UInt64,
            Element::F16 => Float16,
            Element::F32 => Float32,
            Element::F64 => Float64,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Element::I8 | Element::U8 => 1,
            Element::I16 | Element::U16 | Element::F16 => 2,
            Element::I32 | Element::U32 | Element::F32 => 4,
            Element::I64 | Element::U64 | Element::F64 => 8,
        }
    }
}

/// Shape and dtype of an NDArray or TorchTensor field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArraySpec {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, at most [`MAX_DIMS`], none of them 0 (FFCV's blob ends the shape at the first
    /// trailing 0).
    pub shape: Vec<u64>,
}

impl ArraySpec {
    /// Builds a spec, checking the shape.
    ///
    /// # Errors
    /// More than [`MAX_DIMS`] dimensions, a dimension of 0, or a byte size overflowing `u64`.
    pub fn new(dtype: DType, shape: Vec<u64>) -> Result<ArraySpec, String> {
        if shape.len() > MAX_DIMS {
            return Err(format!("{} dimensions, at most {MAX_DIMS} allowed", shape.len()));
        }
        if shape.contains(&0) {
            return Err(format!("shape {shape:?} has a dimension of 0, which FFCV's format cannot store"));
        }
        let spec = ArraySpec { dtype, shape };
        spec.checked_nbytes().ok_or_else(|| format!("shape {:?} is too large", spec.shape))?;
        Ok(spec)
    }

    /// The vector column an array of this spec is read as (docs/SQL.md, "Vectors"): one
    /// dimension of a numeric little-endian dtype, its element type and length. `None` for
    /// other arrays, whose column is their byte size.
    pub fn vector(&self) -> Option<(Element, u32)> {
        match self.shape[..] {
            [d] => {
                Some((Element::of(&self.dtype)?, u32::try_from(d).ok().filter(|&d| d <= i32::MAX as u32)?))
            }
            _ => None,
        }
    }

    fn checked_nbytes(&self) -> Option<u64> {
        self.shape.iter().try_fold(self.dtype.itemsize as u64, |acc, &d| acc.checked_mul(d))
    }

    /// Bytes of one sample's array: itemsize × product of the shape.
    pub fn nbytes(&self) -> u64 {
        self.checked_nbytes().unwrap_or(u64::MAX)
    }

    /// `json.dumps(dtype.descr)` as numpy and Python write it, e.g. `[["", "<f4"]]`.
    pub fn descr_json(&self) -> String {
        format!("[[\"\", \"{}\"]]", self.dtype.typestr)
    }

    /// The 1024-byte argument blob FFCV's `NDArrayField.to_binary` writes.
    pub fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        let mut args = Box::new([0u8; ARGS_SIZE]);
        for (k, d) in self.shape.iter().enumerate() {
            args[k * 8..k * 8 + 8].copy_from_slice(&d.to_le_bytes());
        }
        let descr = self.descr_json();
        args[MAX_DIMS * 8..DESCR_OFFSET].copy_from_slice(&(descr.len() as u64).to_le_bytes());
        args[DESCR_OFFSET..DESCR_OFFSET + descr.len()].copy_from_slice(descr.as_bytes());
        args
    }

    /// Parses FFCV's argument blob (`NDArrayField.from_binary`).
    ///
    /// # Errors
    /// A dtype JSON that is too long, not UTF-8, not `[[name, typestr]]` with one entry, or a shape
    /// that [`ArraySpec::new`] rejects. Never panics.
    pub fn from_arguments(args: &[u8; ARGS_SIZE]) -> Result<ArraySpec, String> {
        let word = |k: usize| u64::from_le_bytes(args[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
        let mut shape: Vec<u64> = (0..MAX_DIMS).map(word).collect();
        while shape.last() == Some(&0) {
            shape.pop();
        }
        let len = word(MAX_DIMS);
        let end = (DESCR_OFFSET as u64).saturating_add(len);
        if end > ARGS_SIZE as u64 {
            return Err(format!("dtype description length {len} runs past the 1024-byte argument blob"));
        }
        let text = std::str::from_utf8(&args[DESCR_OFFSET..end as usize])
            .map_err(|_| "dtype description is not ASCII".to_string())?;
        let descr: Vec<Vec<serde_json::Value>> =
            serde_json::from_str(text).map_err(|e| format!("dtype description {text:?} is not JSON: {e}"))?;
        let typestr = match descr.as_slice() {
            [entry] if entry.len() == 2 => entry[1].as_str(),
            _ => None,
        }
        .ok_or_else(|| format!("dtype description {text:?} is not a single scalar [[name, typestr]]"))?;
        ArraySpec::new(DType::parse(typestr)?, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_dtypes() {
        for (s, name, size) in [
            ("|u1", "uint8", 1),
            ("<i2", "int16", 2),
            ("<f4", "float32", 4),
            ("<f8", "float64", 8),
            ("|b1", "bool", 1),
            ("<c16", "complex128", 16),
            ("=f2", "float16", 2),
            ("<M8[ns]", "<M8[ns]", 8),
            ("<U3", "<U3", 12),
        ] {
            let d = DType::parse(s).unwrap();
            assert_eq!((d.name().as_str(), d.itemsize()), (name, size), "{s}");
        }
        for bad in ["", "f4", "<", "<4", "<f", "<f0", "<f4x", "<f4[ns"] {
            assert!(DType::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn argument_blob_matches_ffcv() {
        // First bytes of the `u8` field of the ndarrays fixture: shape (4, 4), `[["", "|u1"]]`.
        let spec = ArraySpec::new(DType::parse("|u1").unwrap(), vec![4, 4]).unwrap();
        let args = spec.to_arguments();
        assert_eq!(&args[0..16], &[4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&args[256..264], &[13, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&args[264..277], b"[[\"\", \"|u1\"]]");
        assert_eq!(ArraySpec::from_arguments(&args).unwrap(), spec);
    }

    #[test]
    fn rejects_bad_blobs_without_panicking() {
        let mut args = Box::new([0u8; ARGS_SIZE]);
        args[256..264].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(ArraySpec::from_arguments(&args).is_err());
        args[256..264].copy_from_slice(&3u64.to_le_bytes());
        args[264..267].copy_from_slice(b"[1]");
        assert!(ArraySpec::from_arguments(&args).is_err());
    }
}
