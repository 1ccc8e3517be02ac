//! Output slots: the memory batches are built in, allocated once per loader and reused across
//! epochs, and the [`Batch`] handle that lends one to the consumer.
//!
//! A slot holds one buffer per output column, sized for a full batch, each starting on a 64-byte
//! cache line (numpy and torch can view any column in place; an image whose size is a whole
//! number of lines starts on one, so the 64-byte stores of the AVX-512 normaliser never split a
//! line). Workers take a free slot, fill it and hand it to the
//! consumer as a [`Batch`]; the slot goes back to the pool only when the last handle to that
//! batch is dropped, so **a batch the consumer holds is never overwritten** (FFCV issue #231).
//! The pool starts empty and allocates a slot only when none is free: with the consumer holding
//! one batch at a time that is `batches_ahead + 2` slots for the loader's life; a consumer that
//! keeps batches costs one more slot per batch kept, never a silent overwrite.

use std::sync::{Arc, Mutex};

use crate::decode::ColumnSpec;
use crate::error::{Error, Result};

/// Bytes a column's start is aligned to: a cache line, so that a sample of a whole number of
/// lines (an image) starts on one, and its writers' 64-byte stores do not split lines.
const ALIGN: usize = 64;

/// One column's memory: `u64` words, with the column starting at the first word on an
/// [`ALIGN`] boundary (the vector is never reallocated once shaped, so that word stays put).
#[derive(Default)]
struct Buffer {
    words: Vec<u64>,
    /// The column's first word and its length in words.
    start: usize,
    len: usize,
}

impl Buffer {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words[self.start..self.start + self.len])
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.words[self.start..self.start + self.len])
    }
}

/// Buffers of one batch: one per column, plus the sample ids.
pub(crate) struct Slot {
    buffers: Vec<Buffer>,
    pub(crate) indices: Vec<u64>,
}

impl Slot {
    /// Shapes the slot for `columns` × `batch_size` samples, reusing its memory when it fits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a column's size overflows or its memory cannot be had
    /// (a size taken from a corrupt file must end here as an error, never abort the process).
    fn shape_for(&mut self, columns: &[ColumnSpec], batch_size: usize) -> Result<()> {
        self.buffers.resize_with(columns.len(), Buffer::default);
        for (buf, col) in self.buffers.iter_mut().zip(columns) {
            let too_big =
                |why: String| Error::InvalidArgument { what: format!("batch column '{}'", col.name), why };
            let bytes = col
                .batch_bytes(batch_size)
                .ok_or_else(|| too_big(format!("{:?} × {batch_size} samples overflows", col.shape)))?;
            let words = bytes.div_ceil(8);
            if buf.len != words {
                // Zeroed once; afterwards every byte a batch exposes is written by its decoder.
                let spare = ALIGN / 8 - 1;
                let total = words + spare;
                let mut fresh = Vec::new();
                fresh.try_reserve_exact(total).map_err(|_| {
                    too_big(format!("{bytes} bytes for {batch_size} samples cannot be allocated"))
                })?;
                fresh.resize(total, 0);
                buf.words = fresh;
                let misaligned = (buf.words.as_ptr() as usize / 8) % (ALIGN / 8);
                buf.start = (ALIGN / 8 - misaligned) % (ALIGN / 8);
                buf.len = words;
            }
        }
        Ok(())
    }

    /// Every column as bytes, to split per sample.
    pub(crate) fn columns_mut(&mut self) -> Vec<&mut [u8]> {
        self.buffers.iter_mut().map(Buffer::bytes_mut).collect()
    }

    fn column(&self, k: usize) -> &[u8] {
        self.buffers[k].bytes()
    }
}

#[derive(Default)]
struct PoolState {
    free: Vec<Slot>,
    allocated: usize,
}

/// The loader's slots. Cloning shares the pool.
#[derive(Clone, Default)]
pub(crate) struct SlotPool {
    state: Arc<Mutex<PoolState>>,
}

impl SlotPool {
    /// A free slot shaped for `columns` × `batch_size` (a new one when none is free).
    ///
    /// # Errors
    /// As [`Slot::shape_for`]; the slot goes back to the pool.
    pub(crate) fn take(&self, columns: &[ColumnSpec], batch_size: usize) -> Result<Slot> {
        let mut slot = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.free.pop() {
                Some(slot) => slot,
                None => {
                    state.allocated += 1;
                    Slot { buffers: Vec::new(), indices: Vec::with_capacity(batch_size) }
                }
            }
        };
        match slot.shape_for(columns, batch_size) {
            Ok(()) => Ok(slot),
            Err(e) => {
                self.give_back(slot);
                Err(e)
            }
        }
    }

    /// Returns `slot` to the pool.
    pub(crate) fn give_back(&self, slot: Slot) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).free.push(slot);
    }

    /// Slots allocated so far.
    pub(crate) fn allocated(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).allocated
    }
}

/// One column of a batch: `len` samples of `spec.shape`, little-endian `spec.elem` values.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    /// What the column holds per sample.
    pub spec: &'a ColumnSpec,
    /// The bytes of the batch's samples (`len × spec.sample_bytes()`), 64-byte aligned.
    pub bytes: &'a [u8],
}

/// A batch: a view of its slot, which is not reused while this (or a clone) is alive.
pub struct Batch {
    inner: Arc<BatchInner>,
}

struct BatchInner {
    slot: Option<Slot>,
    pool: SlotPool,
    columns: Arc<Vec<ColumnSpec>>,
    len: usize,
    epoch: u64,
    number: usize,
}

impl Drop for BatchInner {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.give_back(slot);
        }
    }
}

impl Clone for Batch {
    fn clone(&self) -> Self {
        Batch { inner: Arc::clone(&self.inner) }
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("epoch", &self.inner.epoch)
            .field("number", &self.inner.number)
            .field("len", &self.inner.len)
            .field("columns", &self.inner.columns.iter().map(|c| &c.name).collect::<Vec<_>>())
            .finish()
    }
}

impl Batch {
    pub(crate) fn new(
        slot: Slot,
        pool: SlotPool,
        columns: Arc<Vec<ColumnSpec>>,
        len: usize,
        epoch: u64,
        number: usize,
    ) -> Batch {
        Batch { inner: Arc::new(BatchInner { slot: Some(slot), pool, columns, len, epoch, number }) }
    }

    fn slot(&self) -> &Slot {
        // Only `Drop` takes the slot out.
        self.inner.slot.as_ref().unwrap_or_else(|| unreachable!("a live batch has its slot"))
    }

    /// Samples in the batch (the last batch of an epoch may be short).
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the batch has no samples (never, for batches a loader yields).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The epoch it belongs to.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    /// Its position in the epoch (0, 1, ...).
    pub fn number(&self) -> usize {
        self.inner.number
    }

    /// The dataset row ids of its samples, in batch order.
    pub fn indices(&self) -> &[u64] {
        &self.slot().indices
    }

    /// The columns' specs.
    pub fn specs(&self) -> &[ColumnSpec] {
        &self.inner.columns
    }

    /// Column `name`.
    pub fn column(&self, name: &str) -> Option<Column<'_>> {
        let k = self.inner.columns.iter().position(|c| c.name == name)?;
        Some(self.column_at(k))
    }

    /// Column `k` in [`specs`](Self::specs) order.
    pub fn column_at(&self, k: usize) -> Column<'_> {
        let spec = &self.inner.columns[k];
        let bytes = &self.slot().column(k)[..spec.sample_bytes() * self.inner.len];
        Column { spec, bytes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::ElemType;

    /// Every column starts on a cache line and is exactly as long as the batch needs, whatever
    /// the sizes, and a slot reshaped to the same sizes keeps its memory.
    #[test]
    fn columns_start_on_cache_lines() {
        let pool = SlotPool::default();
        for batch in [1usize, 3, 256] {
            let columns: Vec<ColumnSpec> =
                [(ElemType::U8, vec![3usize]), (ElemType::F16, vec![3, 5, 7]), (ElemType::U8, vec![1])]
                    .into_iter()
                    .enumerate()
                    .map(|(i, (elem, shape))| ColumnSpec { name: format!("c{i}"), elem, shape })
                    .collect();
            let mut slot = pool.take(&columns, batch).unwrap();
            let before: Vec<usize> = slot.columns_mut().iter().map(|c| c.as_ptr() as usize).collect();
            for (c, spec) in slot.columns_mut().iter().zip(&columns) {
                assert_eq!(c.as_ptr() as usize % ALIGN, 0);
                assert_eq!(c.len(), (spec.sample_bytes() * batch).div_ceil(8) * 8);
            }
            pool.give_back(slot);
            let mut again = pool.take(&columns, batch).unwrap();
            let after: Vec<usize> = again.columns_mut().iter().map(|c| c.as_ptr() as usize).collect();
            assert_eq!(before, after);
            pool.give_back(again);
        }
    }

    /// A column whose size overflows, or whose memory the system cannot give, is an error, not
    /// an abort (a size read from a corrupt file ends here).
    #[test]
    fn impossible_sizes_are_errors() {
        let pool = SlotPool::default();
        let huge = |shape: Vec<usize>| vec![ColumnSpec { name: "x".into(), elem: ElemType::U8, shape }];
        let err = pool.take(&huge(vec![usize::MAX / 2, 3]), 1).err().expect("overflow");
        assert!(err.to_string().contains("overflows"), "{err}");
        let err = pool.take(&huge(vec![1 << 42]), 1 << 10).err().expect("4 PiB");
        assert!(err.to_string().contains("cannot be allocated"), "{err}");
        // The pool still works afterwards.
        assert!(pool.take(&huge(vec![16]), 4).is_ok());
    }
}
