//! A group copy of **one** record batch (docs/FORMAT.md §14): the columns of every data file
//! a commit added, one after the other, each member a run of the batch's rows. Each buffer of
//! the batch (a column's values, a vector column's elements, a text column's offsets) is one
//! range of the file, so a new process's first query of 2,000 data files decodes a column
//! once and maps its pages with one read-ahead over one range, on every core, instead of
//! 2,000 decodes and 2,000 small read-aheads.
//!
//! Arrow's writer writes a batch it holds whole; a group's columns are as large as the
//! dataset's table (1.6 GB for 100 M rows of an int and a float). So the batch is written as
//! its members are gathered, a few at a time: the ranges are sized from the members' row
//! counts before anything is gathered (every type a copy holds has a fixed width per row, but
//! image modes, which are `jpg` or `raw`: three bytes, checked), and each member's values are
//! appended to each range through a staging buffer written in whole 2 MiB pieces at 2 MiB
//! offsets (the page cache then holds the copy in huge folios: see [`super::ChunkedWriter`]).
//! Ranges of 2 MiB or more start at a 2 MiB offset of the file for the same reason.
//!
//! The file is an ordinary Arrow IPC file (any Arrow reader reads it; the tests read it with
//! arrow-rs's own `FileReader`): magic, schema message, the batch's message (its field nodes
//! and buffer offsets), the body, end-of-stream marker, footer.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use arrow_array::ArrayRef;
use arrow_data::ArrayData;
use arrow_schema::{DataType, Schema};

use crate::error::Result;

/// Bytes staged per range before they are written: whole huge pages.
const STAGE: usize = 2 << 20;
/// Bytes of an image mode's text (`jpg`, `raw`): the one text column copies hold.
const MODE_BYTES: u64 = 3;
/// Arrow IPC's alignment of buffers and messages.
const ALIGN: u64 = 64;

/// What one range of the batch's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A validity bitmap: none (copies hold no NULLs), zero bytes.
    Validity,
    /// Fixed-width values, appended as they are.
    Bytes,
    /// Packed booleans, appended bit by bit after the previous member's.
    Bits,
    /// A text column's 32-bit offsets, each member's moved past the previous members' text.
    Offsets,
}

/// One range of the body being written.
struct Range {
    kind: Kind,
    /// Where it starts in the file.
    at: u64,
    /// Its length in bytes, fixed before anything is written.
    len: u64,
    /// Bytes written to the file so far.
    written: u64,
    /// Bytes (or, for [`Kind::Bits`], `bits` bits) not written yet.
    stage: Vec<u8>,
    bits: u64,
    /// [`Kind::Offsets`]: where the next member's text starts.
    base: i64,
}

impl Range {
    /// Bytes appended so far (written or staged).
    fn appended(&self) -> u64 {
        self.written + self.stage.len() as u64
    }

    /// Appends `bytes`; false when they run past the range.
    fn append(&mut self, file: &std::fs::File, bytes: &[u8]) -> std::io::Result<bool> {
        if self.appended() + bytes.len() as u64 > self.len {
            return Ok(false);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let take = rest.len().min(STAGE - self.stage.len());
            self.stage.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            self.flush_whole(file)?;
        }
        Ok(true)
    }

    /// Appends `len` bits of `data` from bit `offset`; false when they run past the range.
    fn append_bits(
        &mut self,
        file: &std::fs::File,
        data: &[u8],
        offset: usize,
        len: usize,
    ) -> std::io::Result<bool> {
        if (self.written * 8 + self.bits + len as u64).div_ceil(8) > self.len {
            return Ok(false);
        }
        let mut done = 0;
        while done < len {
            // The staged bytes: `bits` bits, the last byte maybe partly filled.
            let room = STAGE * 8 - self.bits as usize;
            let take = (len - done).min(room);
            let end = (self.bits as usize + take).div_ceil(8);
            self.stage.resize(end, 0);
            arrow_buffer::bit_mask::set_bits(&mut self.stage, data, self.bits as usize, offset + done, take);
            self.bits += take as u64;
            done += take;
            if self.bits as usize == STAGE * 8 {
                self.flush_whole(file)?;
                self.bits = 0;
            }
        }
        Ok(true)
    }

    /// Writes the staged bytes when they fill a whole stage.
    fn flush_whole(&mut self, file: &std::fs::File) -> std::io::Result<()> {
        if self.stage.len() >= STAGE {
            self.write_out(file)?;
        }
        Ok(())
    }

    /// Writes every staged byte at its place.
    fn write_out(&mut self, file: &std::fs::File) -> std::io::Result<()> {
        let mut f = file;
        f.seek(SeekFrom::Start(self.at + self.written))?;
        f.write_all(&self.stage)?;
        self.written += self.stage.len() as u64;
        self.stage.clear();
        Ok(())
    }

    /// Writes what is staged (for bits, whole bytes: the last one maybe partly filled); the
    /// bytes appended in all.
    fn finish(&mut self, file: &std::fs::File) -> std::io::Result<u64> {
        self.write_out(file)?;
        Ok(self.written)
    }
}

/// The ranges (kind and length) and field nodes (lengths) of a column of type `ty` and `rows`
/// rows, in Arrow IPC's order; `None` for a type a sliced copy does not hold.
fn plan(ty: &DataType, rows: u64, ranges: &mut Vec<(Kind, u64)>, nodes: &mut Vec<u64>) -> Option<()> {
    nodes.push(rows);
    ranges.push((Kind::Validity, 0));
    match ty {
        DataType::Boolean => ranges.push((Kind::Bits, rows.div_ceil(8))),
        DataType::Utf8 => {
            // 32-bit offsets: the text of every member must stay under 2 GiB.
            (rows * MODE_BYTES <= i32::MAX as u64).then_some(())?;
            ranges.push((Kind::Offsets, (rows + 1) * 4));
            ranges.push((Kind::Bytes, rows * MODE_BYTES));
        }
        DataType::FixedSizeBinary(w) => ranges.push((Kind::Bytes, rows * u64::try_from(*w).ok()?)),
        DataType::FixedSizeList(item, dim) => {
            plan(item.data_type(), rows.checked_mul(u64::try_from(*dim).ok()?)?, ranges, nodes)?
        }
        t if t.is_primitive() => ranges.push((Kind::Bytes, rows * t.primitive_width()? as u64)),
        _ => return None,
    }
    Some(())
}

/// One member's bytes for each range, in the order of [`plan`]; `None` for anything the plan
/// does not hold (NULLs, another type).
enum Piece<'a> {
    Empty,
    Bytes(&'a [u8]),
    Bits(&'a [u8], usize, usize),
    Offsets(&'a [i32]),
}

fn pieces<'a>(d: &'a ArrayData, out: &mut Vec<Piece<'a>>) -> Option<()> {
    if d.null_count() > 0 {
        return None;
    }
    out.push(Piece::Empty);
    let (at, len) = (d.offset(), d.len());
    match d.data_type() {
        DataType::Boolean => out.push(Piece::Bits(d.buffers().first()?.as_slice(), at, len)),
        DataType::Utf8 => {
            let offsets: &[i32] = d.buffers().first()?.typed_data::<i32>().get(at..=at + len)?;
            let (first, last) = (usize::try_from(offsets[0]).ok()?, usize::try_from(offsets[len]).ok()?);
            out.push(Piece::Offsets(offsets));
            out.push(Piece::Bytes(d.buffers().get(1)?.as_slice().get(first..last)?));
        }
        DataType::FixedSizeBinary(w) => {
            let w = usize::try_from(*w).ok()?;
            out.push(Piece::Bytes(d.buffers().first()?.as_slice().get(at * w..(at + len) * w)?));
        }
        DataType::FixedSizeList(_, dim) => {
            let dim = usize::try_from(*dim).ok()?;
            let child = d.child_data().first()?;
            // (A fresh array's offset is 0; its child is its rows' elements.)
            if at != 0 || child.len() != len * dim {
                return None;
            }
            return pieces(child, out);
        }
        t if t.is_primitive() => {
            let w = t.primitive_width()?;
            out.push(Piece::Bytes(d.buffers().first()?.as_slice().get(at * w..(at + len) * w)?));
        }
        _ => return None,
    }
    Some(())
}

/// Writes the group copy of `rows` members (row counts, in order) to `file`, whose members'
/// columns `next` gives in order (`Ok(None)` when a member's copy cannot be made: nothing
/// usable is written then). `Ok(false)` when the members' columns differ from the first's, or
/// hold what the layout does not (the caller then makes a copy per data file).
pub(super) fn write(
    path: &Path,
    file: &std::fs::File,
    schema: &Schema,
    rows: &[u64],
    mut next: impl FnMut() -> Result<Option<Vec<ArrayRef>>>,
) -> Result<bool> {
    let total: u64 = rows.iter().sum();
    let mut kinds = Vec::new();
    let mut nodes = Vec::new();
    for f in schema.fields() {
        if plan(f.data_type(), total, &mut kinds, &mut nodes).is_none() {
            return Ok(false);
        }
    }
    let options = arrow_ipc::writer::IpcWriteOptions::default();
    // Magic, then the schema message.
    let mut head = b"ARROW1\0\0".to_vec();
    let mut tracker = arrow_ipc::writer::DictionaryTracker::new(false);
    let encoded = arrow_ipc::writer::IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
        schema,
        &mut tracker,
        &options,
    );
    arrow_ipc::writer::write_message(&mut head, encoded, &options)?;
    let block_at = head.len() as u64;
    // The batch's message, whose length does not depend on the offsets in it (every number
    // written, defaults included): built once to learn where the body starts, then for real.
    let place = |body: u64| {
        let mut at = body;
        kinds
            .iter()
            .map(|&(kind, len)| {
                let align = if len >= STAGE as u64 { STAGE as u64 } else { ALIGN };
                at = at.next_multiple_of(align);
                let r = (kind, at, len);
                at += len;
                r
            })
            .collect::<Vec<_>>()
    };
    // Where the body ends (padded), its ranges placed from `body`.
    let end_of = |placed: &[(Kind, u64, u64)], body: u64| {
        placed.last().map_or(body, |&(_, at, len)| at + len).next_multiple_of(ALIGN)
    };
    let message = |body: u64| -> std::result::Result<Vec<u8>, arrow_schema::ArrowError> {
        let placed = place(body);
        let end = end_of(&placed, body);
        let mut fbb = flatbuffers::FlatBufferBuilder::new();
        fbb.force_defaults(true);
        let fb_nodes: Vec<arrow_ipc::FieldNode> =
            nodes.iter().map(|&n| arrow_ipc::FieldNode::new(n as i64, 0)).collect();
        let fb_buffers: Vec<arrow_ipc::Buffer> = placed
            .iter()
            .map(|&(_, at, len)| arrow_ipc::Buffer::new((at - body) as i64, len as i64))
            .collect();
        let fb_nodes = fbb.create_vector(&fb_nodes);
        let fb_buffers = fbb.create_vector(&fb_buffers);
        let mut batch = arrow_ipc::RecordBatchBuilder::new(&mut fbb);
        batch.add_length(total as i64);
        batch.add_nodes(fb_nodes);
        batch.add_buffers(fb_buffers);
        let batch = batch.finish();
        let mut m = arrow_ipc::MessageBuilder::new(&mut fbb);
        m.add_version(arrow_ipc::MetadataVersion::V5);
        m.add_header_type(arrow_ipc::MessageHeader::RecordBatch);
        m.add_bodyLength((end - body) as i64);
        m.add_header(batch.as_union_value());
        let root = m.finish();
        fbb.finish(root, None);
        let encoded =
            arrow_ipc::writer::EncodedData { ipc_message: fbb.finished_data().to_vec(), arrow_data: vec![] };
        let mut out = Vec::new();
        arrow_ipc::writer::write_message(&mut out, encoded, &options)?;
        Ok(out)
    };
    let meta_len = message(0)?.len() as u64;
    let body = block_at + meta_len;
    let meta = message(body)?;
    if meta.len() as u64 != meta_len {
        return Ok(false); // (cannot happen: every number is written)
    }
    head.extend_from_slice(&meta);
    let placed = place(body);
    let body_end = end_of(&placed, body);
    let mut ranges: Vec<Range> = placed
        .iter()
        .map(|&(kind, at, len)| Range { kind, at, len, written: 0, stage: Vec::new(), bits: 0, base: 0 })
        .collect();
    for r in ranges.iter_mut().filter(|r| r.kind == Kind::Offsets) {
        r.stage.extend_from_slice(&0i32.to_le_bytes());
    }
    let io = |e: std::io::Error| crate::error::io(path, e);
    let mut f = file;
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    f.write_all(&head).map_err(io)?;

    for &n in rows {
        let Some(columns) = next()? else { return Ok(false) };
        if columns.len() != schema.fields().len() {
            return Ok(false);
        }
        let data: Vec<ArrayData> = columns.iter().map(|a| a.to_data()).collect();
        let mut list = Vec::with_capacity(ranges.len());
        for (d, field) in data.iter().zip(schema.fields()) {
            if d.data_type() != field.data_type() || d.len() as u64 != n || pieces(d, &mut list).is_none() {
                return Ok(false);
            }
        }
        if list.len() != ranges.len() {
            return Ok(false);
        }
        for (piece, r) in list.iter().zip(ranges.iter_mut()) {
            let fits = match (piece, r.kind) {
                (Piece::Empty, Kind::Validity) => true,
                (Piece::Bytes(b), Kind::Bytes) => r.append(file, b).map_err(io)?,
                (Piece::Bits(b, at, len), Kind::Bits) => r.append_bits(file, b, *at, *len).map_err(io)?,
                (Piece::Offsets(o), Kind::Offsets) => {
                    let start = i64::from(o[0]);
                    let moved: Vec<u8> = o[1..]
                        .iter()
                        .flat_map(|&x| ((i64::from(x) - start + r.base) as i32).to_le_bytes())
                        .collect();
                    r.base += i64::from(o[o.len() - 1]) - start;
                    r.base <= i64::from(i32::MAX) && r.append(file, &moved).map_err(io)?
                }
                _ => false,
            };
            if !fits {
                return Ok(false);
            }
        }
    }
    for r in &mut ranges {
        if r.finish(file).map_err(io)? != r.len {
            return Ok(false); // the text was not three bytes a row
        }
    }
    // End-of-stream marker, then the footer naming the schema and the batch.
    let mut tail = Vec::new();
    tail.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
    tail.extend_from_slice(&0u32.to_le_bytes());
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let blocks = fbb.create_vector(&[arrow_ipc::Block::new(
        block_at as i64,
        meta_len as i32,
        (body_end - body) as i64,
    )]);
    let dictionaries = fbb.create_vector::<arrow_ipc::Block>(&[]);
    let fb_schema = arrow_ipc::convert::schema_to_fb_offset(&mut fbb, schema);
    let mut footer = arrow_ipc::FooterBuilder::new(&mut fbb);
    footer.add_version(arrow_ipc::MetadataVersion::V5);
    footer.add_schema(fb_schema);
    footer.add_dictionaries(dictionaries);
    footer.add_recordBatches(blocks);
    let root = footer.finish();
    fbb.finish(root, None);
    tail.extend_from_slice(fbb.finished_data());
    tail.extend_from_slice(&(fbb.finished_data().len() as i32).to_le_bytes());
    tail.extend_from_slice(b"ARROW1");
    f.seek(SeekFrom::Start(body_end)).map_err(io)?;
    f.write_all(&tail).map_err(io)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn bits_run_on_across_members_and_whole_stages() {
        // Pieces at odd bit offsets, together past one stage of bits (16,777,216): the range
        // holds them one after the other, as a reference builder packs them.
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("b"))
            .unwrap();
        let source: Vec<u8> =
            (0..(3 << 20)).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let pieces = [(3usize, 13usize), (0, STAGE * 8 - 5), (7, 1), (1, 1_000_003), (5, 0), (2, 9)];
        let total: usize = pieces.iter().map(|p| p.1).sum();
        let mut reference = arrow_buffer::BooleanBufferBuilder::new(total);
        let at = 4096;
        let mut range = Range {
            kind: Kind::Bits,
            at,
            len: total.div_ceil(8) as u64,
            written: 0,
            stage: Vec::new(),
            bits: 0,
            base: 0,
        };
        for &(offset, len) in &pieces {
            assert!(range.append_bits(&file, &source, offset, len).unwrap());
            reference.append_packed_range(offset..offset + len, &source);
        }
        assert!(!range.append_bits(&file, &source, 0, 8).unwrap(), "past the range's length");
        assert_eq!(range.finish(&file).unwrap(), range.len);
        let mut written = vec![0u8; range.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut written, at).unwrap();
        assert_eq!(written, reference.finish().values());
    }
}
