//! The compact binary form of an index set (stored in `.beton` files for named splits) and its
//! fingerprint (stored in the loader's resume state).
//!
//! ```text
//! index_set := magic version count ids
//! magic     := b"BIDX"
//! version   := u8 = 1
//! count     := u64 little-endian, the number of ids
//! ids       := count × varint   (unsigned LEB128, shortest form)
//!              first: the smallest id; then each id minus the previous id minus 1
//! ```
//!
//! Ids are strictly increasing, so gaps minus one are ≥ 0 and a dense run of ids costs one byte
//! each (`IndexSet::all(n)` is `13 + n` bytes). Decoding accepts exactly the bytes encoding
//! produces: no overlong varints, no trailing bytes, so an encoding is unique per set.

use super::random::splitmix64;
use super::IndexSet;
use crate::error::{Error, Result};

/// The first four bytes of every encoded index set.
pub(super) const MAGIC: [u8; 4] = *b"BIDX";

/// The version this build writes and reads.
pub(super) const VERSION: u8 = 1;

/// Magic, version, count.
const HEADER_BYTES: usize = MAGIC.len() + 1 + 8;

/// Seed of the fingerprint: "beton-ix" as a big-endian u64, so a fingerprint is not a bare
/// SplitMix64 chain that another hash might share.
const FINGERPRINT_SEED: u64 = u64::from_be_bytes(*b"beton-ix");

fn corrupt(offset: usize, what: impl Into<String>) -> Error {
    Error::CorruptIndexSet { offset: offset as u64, what: what.into() }
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads one shortest-form LEB128 varint at `start`; returns it and the offset after it.
fn read_varint(bytes: &[u8], start: usize) -> Result<(u64, usize)> {
    let mut value = 0u64;
    // A u64 takes at most 10 groups of 7 bits; the 10th may hold only the top bit.
    for i in 0..10 {
        let at = start + i;
        let Some(&b) = bytes.get(at) else {
            return Err(corrupt(at, "truncated varint: the input ends inside it"));
        };
        if i == 9 && b > 1 {
            return Err(corrupt(at, format!("varint overflows u64 (10th byte {b:#04x})")));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(corrupt(at, "overlong varint (ends in a zero byte)"));
            }
            return Ok((value, at + 1));
        }
    }
    // Unreachable: the 10th byte is at most 1, so it ends the varint; kept as an error, not a panic.
    Err(corrupt(start, "varint longer than 10 bytes"))
}

impl IndexSet {
    /// The compact binary form, about one byte per id for dense sets and at most ten:
    ///
    /// ```text
    /// index_set := magic version count ids
    /// magic     := b"BIDX"
    /// version   := u8 = 1
    /// count     := u64 little-endian, the number of ids
    /// ids       := count × varint   (unsigned LEB128, shortest form)
    ///              first: the smallest id; then each id minus the previous id minus 1
    /// ```
    ///
    /// [`from_bytes`](Self::from_bytes) accepts exactly what this writes, so the encoding of a
    /// set is unique.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.len() + 8);
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        let mut prev: Option<u64> = None;
        for &id in &self.ids {
            // Strictly increasing, so `id - p - 1` cannot underflow.
            write_varint(&mut out, prev.map_or(id, |p| id - p - 1));
            prev = Some(id);
        }
        out
    }

    /// Reads the binary form of [`to_bytes`](Self::to_bytes).
    ///
    /// This routine never panics, for any input: every length, count and sum is checked, and
    /// memory is reserved only for as many ids as there are bytes left.
    ///
    /// # Errors
    ///
    /// [`Error::CorruptIndexSet`] with the byte offset of the first problem: wrong magic or
    /// version, a count larger than the bytes can hold, a truncated, overlong or overflowing
    /// varint, an id past `u64::MAX`, or bytes left over after the last id.
    pub fn from_bytes(bytes: &[u8]) -> Result<IndexSet> {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            let head = &bytes[..bytes.len().min(MAGIC.len())];
            return Err(corrupt(0, format!("bad magic {head:02x?}, expected b\"BIDX\"")));
        }
        let Some(&version) = bytes.get(4) else {
            return Err(corrupt(4, "truncated before the version byte"));
        };
        if version != VERSION {
            return Err(corrupt(4, format!("unsupported version {version} (this build reads {VERSION})")));
        }
        let Some(count) = bytes.get(5..HEADER_BYTES) else {
            return Err(corrupt(5, format!("truncated count: {} of 8 bytes", bytes.len() - 5)));
        };
        let mut le = [0u8; 8];
        le.copy_from_slice(count);
        let count = u64::from_le_bytes(le);
        let remaining = bytes.len() - HEADER_BYTES;
        // Each id takes at least one byte, which also bounds the allocation below.
        if count > remaining as u64 {
            return Err(corrupt(
                5,
                format!("count {count} needs at least {count} bytes of ids, but {remaining} remain"),
            ));
        }
        let mut ids = Vec::with_capacity(count as usize);
        let mut at = HEADER_BYTES;
        let mut prev: Option<u64> = None;
        for k in 0..count {
            let (v, next) = read_varint(bytes, at)?;
            let id = match prev {
                None => v,
                Some(p) => p.checked_add(v).and_then(|x| x.checked_add(1)).ok_or_else(|| {
                    corrupt(at, format!("id {k} overflows u64 (previous id {p}, gap {v} + 1)"))
                })?,
            };
            ids.push(id);
            prev = Some(id);
            at = next;
        }
        if at != bytes.len() {
            return Err(corrupt(at, format!("{} trailing bytes after {count} ids", bytes.len() - at)));
        }
        Ok(IndexSet { ids })
    }

    /// A stable 64-bit hash of the ids, for the loader's resume state to notice that the index
    /// set changed. It is the same in every release and on every platform (it is written out
    /// here, unlike `std::hash`): a SplitMix64 chain, `h ← mix(h ⊕ id)`, over the ids from a seed
    /// mixed with the count. Not cryptographic.
    pub fn fingerprint(&self) -> u64 {
        let mut h = splitmix64(FINGERPRINT_SEED ^ self.len() as u64);
        for &id in &self.ids {
            h = splitmix64(h ^ id);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn corrupt_at(r: Result<IndexSet>) -> (u64, String) {
        match r {
            Err(Error::CorruptIndexSet { offset, what }) => (offset, what),
            other => panic!("expected CorruptIndexSet, got {other:?}"),
        }
    }

    #[test]
    fn golden_encodings() {
        assert_eq!(IndexSet::empty().to_bytes(), b"BIDX\x01\0\0\0\0\0\0\0\0");
        let set = IndexSet::from_sorted(vec![5, 6, 8, 200, 1 << 40]).unwrap();
        let mut want = b"BIDX\x01\x05\0\0\0\0\0\0\0".to_vec();
        // 5; gap 0; gap 1; gap 191 = 0xbf 0x01; gap 2^40 - 201.
        want.extend_from_slice(&[0x05, 0x00, 0x01, 0xbf, 0x01]);
        write_varint(&mut want, (1 << 40) - 201);
        assert_eq!(set.to_bytes(), want);
        assert_eq!(IndexSet::all(300).to_bytes().len(), 13 + 300);
        let max = IndexSet::from_sorted(vec![u64::MAX]).unwrap().to_bytes();
        assert_eq!(&max[13..], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(IndexSet::from_bytes(&max).unwrap().as_slice(), [u64::MAX]);
        let ends = IndexSet::from_sorted(vec![0, u64::MAX]).unwrap();
        assert_eq!(IndexSet::from_bytes(&ends.to_bytes()).unwrap(), ends);
    }

    #[test]
    fn golden_fingerprints() {
        let got = [
            IndexSet::empty().fingerprint(),
            IndexSet::all(1).fingerprint(),
            IndexSet::all(1000).fingerprint(),
            IndexSet::from_sorted(vec![3, 1 << 40, u64::MAX]).unwrap().fingerprint(),
        ];
        assert_eq!(got, GOLDEN_FINGERPRINTS);
    }

    // From an independent Python model of the chain; they agree with this code.
    const GOLDEN_FINGERPRINTS: [u64; 4] =
        [16742926321914079743, 13864921675319211268, 14001531408249439676, 5526563358594830733];

    #[test]
    fn fingerprint_tells_sets_apart() {
        let a = IndexSet::all(1000);
        let b: IndexSet = (1..1001).collect();
        let c: IndexSet = (0..1000).filter(|&x| x != 500).collect();
        let fps = [IndexSet::empty(), IndexSet::all(1), a, b, c].map(|s| s.fingerprint());
        for i in 0..fps.len() {
            for j in 0..i {
                assert_ne!(fps[i], fps[j], "{i} vs {j}");
            }
        }
        // The count is mixed in: [0] and [] differ even though 0 is the xor identity.
        assert_ne!(IndexSet::from_sorted(vec![0]).unwrap().fingerprint(), IndexSet::empty().fingerprint());
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(corrupt_at(IndexSet::from_bytes(b"")).0, 0);
        assert_eq!(corrupt_at(IndexSet::from_bytes(b"BID")).0, 0);
        assert_eq!(corrupt_at(IndexSet::from_bytes(b"BIDY\x01\0\0\0\0\0\0\0\0")).0, 0);
        assert_eq!(corrupt_at(IndexSet::from_bytes(b"BIDX")).0, 4);
        let (at, what) = corrupt_at(IndexSet::from_bytes(b"BIDX\x02\0\0\0\0\0\0\0\0"));
        assert!(at == 4 && what.contains("version 2"), "{what}");
        assert_eq!(corrupt_at(IndexSet::from_bytes(b"BIDX\x01\0\0\0")).0, 5);
    }

    #[test]
    fn rejects_huge_counts_without_allocating() {
        for count in [1u64, 2, 1 << 32, 1 << 61, u64::MAX] {
            let mut b = b"BIDX\x01".to_vec();
            b.extend_from_slice(&count.to_le_bytes());
            let (at, what) = corrupt_at(IndexSet::from_bytes(&b));
            assert!(at == 5 && what.contains(&format!("count {count}")), "{what}");
        }
    }

    #[test]
    fn rejects_bad_varints_and_ids() {
        let with_ids = |count: u64, ids: &[u8]| {
            let mut b = b"BIDX\x01".to_vec();
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(ids);
            IndexSet::from_bytes(&b)
        };
        // Truncated inside a varint: the count allows it, the bytes end.
        let (at, what) = corrupt_at(with_ids(1, &[0x80]));
        assert!(at == 14 && what.contains("truncated"), "{what}");
        // Overlong: 0x80 0x00 is zero in two bytes.
        let (at, what) = corrupt_at(with_ids(1, &[0x80, 0x00]));
        assert!(at == 14 && what.contains("overlong"), "{what}");
        // 10th byte above 1.
        let (at, what) =
            corrupt_at(with_ids(1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]));
        assert!(at == 22 && what.contains("overflows"), "{what}");
        // u64::MAX followed by any id.
        let mut max = vec![0xff; 9];
        max.extend_from_slice(&[0x01, 0x00]);
        let (at, what) = corrupt_at(with_ids(2, &max));
        assert!(at == 23 && what.contains("id 1 overflows"), "{what}");
        // Trailing bytes.
        let (at, what) = corrupt_at(with_ids(1, &[0x05, 0x00]));
        assert!(at == 14 && what.contains("1 trailing"), "{what}");
        assert_eq!(with_ids(2, &[0x05, 0x00]).unwrap().as_slice(), [5, 6]);
    }

    #[test]
    fn from_bytes_never_panics_on_truncations() {
        let set = IndexSet::from_sorted(vec![0, 1, 127, 128, 300, 1 << 35, 1 << 50, u64::MAX - 1]).unwrap();
        let bytes = set.to_bytes();
        for len in 0..bytes.len() {
            assert!(IndexSet::from_bytes(&bytes[..len]).is_err(), "prefix of {len} bytes decoded");
        }
        assert_eq!(IndexSet::from_bytes(&bytes).unwrap(), set);
    }

    #[test]
    fn from_bytes_never_panics_on_random_bytes() {
        // xorshift64 (Marsaglia 2003): a fixed, dependency-free byte source.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let valid = IndexSet::from_sorted(vec![1, 2, 3, 1000, 1 << 20]).unwrap().to_bytes();
        for round in 0..20_000 {
            let len = (next() % 40) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 0 {
                // Keep a valid header half the time so the varint decoder is reached.
                let mut h = valid.clone();
                h.truncate(13);
                h[5..13].copy_from_slice(&(next() % 48).to_le_bytes());
                h.extend_from_slice(&b);
                b = h;
            }
            if round % 5 == 0 {
                // Or flip one byte of a valid encoding.
                b = valid.clone();
                let i = (next() as usize) % b.len();
                b[i] ^= (next() as u8) | 1;
            }
            if let Ok(set) = IndexSet::from_bytes(&b) {
                // Whatever decodes is a valid set and re-encodes to the same bytes.
                assert!(IndexSet::from_sorted(set.as_slice().to_vec()).is_ok());
                assert_eq!(set.to_bytes(), b);
            }
        }
    }

    proptest! {
        #[test]
        fn bytes_round_trip(ids in proptest::collection::btree_set(any::<u64>(), 0..200),
                            dense in proptest::collection::btree_set(0u64..500, 0..200)) {
            for set in [ids.into_iter().collect::<IndexSet>(), dense.into_iter().collect()] {
                let bytes = set.to_bytes();
                prop_assert_eq!(IndexSet::from_bytes(&bytes).unwrap(), set.clone());
                prop_assert!(bytes.len() <= 13 + 10 * set.len());
            }
        }

        #[test]
        fn from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = IndexSet::from_bytes(&bytes);
            let mut framed = b"BIDX\x01".to_vec();
            framed.extend_from_slice(&bytes);
            if let Ok(set) = IndexSet::from_bytes(&framed) {
                prop_assert_eq!(set.to_bytes(), framed);
            }
        }
    }
}
