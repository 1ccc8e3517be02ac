//! Optimal Huffman tables for a baseline JPEG, by an entropy-level pass: every code of the scan
//! is decoded once into a list of symbols (with their coefficient bits) while each table's
//! symbols are counted, each table the scan uses is rebuilt from its counts by libjpeg's
//! `jpeg_gen_optimal_table` (JPEG Annex K.2, with its tie-breaking and its limit of 16 bits),
//! and the symbols are written again with the new codes, the restart markers where they were.
//!
//! The result is the JPEG libjpeg-turbo writes with `optimize_coding` (`TJPARAM_OPTIMIZE`) from
//! the same pixels, byte for byte: the same coefficients give the same symbols, and the same
//! counts the same tables. Where the writer encodes with libjpeg-turbo (grey and RGB images,
//! subsamplings other than 4:2:0; its 4:2:0 re-encode is [`encode_420`](super::encode_420)'s,
//! which shares [`emit`]), it encodes with the standard tables (libjpeg-turbo's SIMD Huffman
//! encoder, one pass, no whole-image coefficient buffer) and then runs this pass, which costs a
//! fraction of libjpeg-turbo's own statistics pass (`encode_mcu_gather`, plain C, a second
//! entropy coding of every block): 19 % of the writer's time before.

use super::{canonical, dc_code, BitWriter, Header, Layout, Mcus, Reader, Spec, Unstuffed};

/// A decoded symbol: bits 0–7 the symbol, 8–10 its table (0–3: DC tables 0–3, 4–7: AC tables
/// 0–3), 16–31 its coefficient bits (at most 11; how many the symbol says).
pub(super) type Symbol = u32;

/// Rewrites the baseline JPEG `data` with optimal Huffman tables for its scan (see the module
/// docs); `None` for a JPEG the entropy pass does not take (the caller then encodes with
/// libjpeg-turbo's optimisation) or a code that does not decode.
pub fn optimize_tables(data: &[u8]) -> Option<Vec<u8>> {
    thread_local! {
        /// The unstuffed scan and the symbols, kept between JPEGs (fresh buffers of their size
        /// cost more in page faults than the pass itself).
        static SCRATCH: std::cell::Cell<(Vec<u8>, Vec<Symbol>)> =
            const { std::cell::Cell::new((Vec::new(), Vec::new())) };
    }
    let (bytes, mut symbols) = SCRATCH.with(std::cell::Cell::take);
    let header = Header::parse(data)?;
    let layout = Layout::of(&header)?;
    let scan = Unstuffed::reusing(data.get(header.data_at..)?, &layout, header.interval, bytes)?;
    symbols.clear();
    let out = rewrite(data, &header, &layout, &scan, &mut symbols);
    // Kept for the next JPEG unless one huge JPEG made them big.
    if scan.bytes.capacity() + symbols.capacity() * 4 <= KEPT_BYTES {
        SCRATCH.with(|s| s.set((scan.bytes, symbols)));
    }
    out
}

/// Most bytes of scratch kept for the next JPEG.
const KEPT_BYTES: usize = 16 << 20;

/// [`optimize_tables`] with its buffers: `symbols` empty, to be filled.
fn rewrite(
    data: &[u8],
    header: &Header,
    layout: &Layout,
    scan: &Unstuffed,
    symbols: &mut Vec<Symbol>,
) -> Option<Vec<u8>> {
    // Pass 1: every symbol, each table's counts, and where each restart interval's symbols end.
    let mut counts = [0u32; 8 * 256];
    let mut interval_ends = Vec::with_capacity(scan.ends.len());
    let mcus = Mcus::of(header, layout)?;
    let slots: Vec<(u32, u32)> = header.components.iter().map(|c| (c.dc as u32, 4 + c.ac as u32)).collect();
    let per_interval = if header.interval == 0 { layout.mcus } else { u64::from(header.interval) };
    let (mut start, mut mcu) = (0usize, 0u64);
    for &end in &scan.ends {
        let mut r = Reader::at(&scan.bytes, start);
        let last = (mcu + per_interval).min(layout.mcus);
        while mcu < last {
            for &c in mcus.blocks {
                let (dc_slot, ac_slot) = slots[c];
                // DC: a category, then that many bits.
                let (s, bits) = dc_code(&mcus.dc[c], &mut r)?;
                let sym = s | dc_slot << 8;
                counts[sym as usize] += 1;
                symbols.push(sym | (bits as u32) << 16);
                // AC: run/size symbols to EOB or the 63rd coefficient.
                // One refill for two codes: a code with its bits takes at most 27 of the 56 or
                // more a refill leaves, and the DC's refill serves the first AC code too.
                let mut k = 1u32;
                let mut refill = false;
                while k < 64 {
                    if refill {
                        r.refill();
                    }
                    refill = !refill;
                    let (len, rs) = mcus.ac[c].decode(r.acc)?;
                    let size = u32::from(rs & 15);
                    // The top `size` bits after the code, without a branch on size 0 (the
                    // shift by one first keeps the second below 64).
                    let bits = ((r.acc << len) >> 1 >> (63 - size)) as u32;
                    r.consume(len + size);
                    let sym = u32::from(rs) | ac_slot << 8;
                    counts[sym as usize] += 1;
                    symbols.push(sym | bits << 16);
                    if rs == 0 {
                        break; // EOB
                    }
                    // A run and a coefficient; ZRL (0xF0) is 16 zeros, the same sum.
                    k += u32::from(rs >> 4) + 1;
                }
                if k > 64 {
                    return None;
                }
            }
            mcu += 1;
        }
        // The interval's data ends within its last byte.
        if r.pos() > end * 8 || end * 8 - r.pos() >= 8 {
            return None;
        }
        interval_ends.push(symbols.len());
        start = end;
    }
    if mcu != layout.mcus {
        return None;
    }

    emit(data, header, &slots, &counts, symbols, &interval_ends)
}

/// The JPEG of a scan given as its symbols (`symbols`, the end of each restart interval's in
/// `interval_ends`, each table's counts in `counts`, each scan component's DC and AC table in
/// `slots`), with the tables libjpeg builds from those counts: the segments of `data` before its
/// scan (as `header` parsed them), each DHT written again with the rebuilt tables, then the
/// symbols with their new codes, a restart marker after each interval but the last, and EOI.
pub(super) fn emit(
    data: &[u8],
    header: &Header,
    slots: &[(u32, u32)],
    counts: &[u32; 8 * 256],
    symbols: &[Symbol],
    interval_ends: &[usize],
) -> Option<Vec<u8>> {
    // The tables the scan uses, rebuilt; for each symbol (table and symbol, as in `Symbol`'s
    // low 11 bits), its code shifted past its coefficient bits and the bits they take together.
    let mut specs: [Option<Spec>; 8] = Default::default();
    let mut codes = [(0u32, 0u32); 8 * 256];
    for &(d, a) in slots {
        for slot in [d as usize, a as usize] {
            if specs[slot].is_none() {
                let spec = optimal_table(counts[slot * 256..][..256].try_into().ok()?)?;
                for (&(code, len), &symbol) in canonical(&spec)?.iter().zip(&spec.symbols) {
                    let size = if slot < 4 { u32::from(symbol) } else { u32::from(symbol & 15) };
                    codes[slot * 256 + usize::from(symbol)] = (code << size, u32::from(len) + size);
                }
                specs[slot] = Some(spec);
            }
        }
    }

    // The segments before the scan, each DHT written again with the rebuilt tables.
    let mut out = Vec::with_capacity(emitted_bytes(header, &specs, counts, &codes, interval_ends.len()));
    let mut at = 0;
    for (segment, tables_at) in &header.dht_segments {
        out.extend_from_slice(data.get(at..segment.start)?);
        write_dht(&mut out, data.get(*tables_at..segment.end)?, &specs)?;
        at = segment.end;
    }
    out.extend_from_slice(data.get(at..header.data_at)?);

    // Pass 2: the symbols with the new codes, a restart marker after each interval but the last.
    let mut w = BitWriter { out, acc: 0, bits: 0 };
    let mut from = 0;
    for (i, &end) in interval_ends.iter().enumerate() {
        if i > 0 {
            w.marker(0xD0 + ((i - 1) % 8) as u8);
        }
        for &sym in symbols.get(from..end)? {
            let (code, len) = codes[(sym & 0x7FF) as usize];
            w.put(u64::from(code | sym >> 16), len);
        }
        from = end;
    }
    let mut out = w.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(out)
}

/// The bytes [`emit`] writes, but for the stuffed zeros, plus room for four times the stuffing
/// of random bits (a zero after each 0xFF: 1 byte in 256): the segments before the scan with
/// every rebuilt table (`specs`) added, every symbol's code and coefficient bits (`counts` ×
/// `codes`), each interval's padding and marker, and EOI. The output is made in the memory it
/// keeps (a writer holds every image of a small file until it chooses its page size): sized by
/// the count of symbols instead, it reserved 1.45× the bytes of the writer's images (now 1.03×;
/// 936 re-encoded corpus JPEGs at max 256), each reservation a first touch of fresh memory.
fn emitted_bytes(
    header: &Header,
    specs: &[Option<Spec>; 8],
    counts: &[u32; 8 * 256],
    codes: &[(u32, u32); 8 * 256],
    intervals: usize,
) -> usize {
    let bits: u64 = counts.iter().zip(codes).map(|(&n, &(_, len))| u64::from(n) * u64::from(len)).sum();
    let scan = usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX);
    let tables: usize = specs.iter().flatten().map(|spec| 17 + spec.symbols.len()).sum();
    // (An interval ends in at most a byte of padding and a 2-byte marker.)
    (header.data_at + tables).saturating_add(scan).saturating_add(scan / 64).saturating_add(3 * intervals + 2)
}

/// Writes a DHT segment whose tables are `tables` (the segment's body), each table the scan
/// uses replaced by its rebuilt one.
fn write_dht(out: &mut Vec<u8>, mut tables: &[u8], specs: &[Option<Spec>; 8]) -> Option<()> {
    let start = out.len();
    out.extend_from_slice(&[0xFF, 0xC4, 0, 0]);
    while let [tc_th, rest @ ..] = tables {
        let (class, id) = (usize::from(tc_th >> 4), usize::from(tc_th & 15));
        let n: usize = rest.get(..16)?.iter().map(|&c| usize::from(c)).sum();
        out.push(*tc_th);
        // (Header::parse took only classes 0 and 1 and ids 0–3.)
        match specs.get(class * 4 + id).and_then(Option::as_ref) {
            Some(spec) => {
                out.extend_from_slice(&spec.counts);
                out.extend_from_slice(&spec.symbols);
            }
            None => out.extend_from_slice(rest.get(..16 + n)?),
        }
        tables = rest.get(16 + n..)?;
    }
    let len = u16::try_from(out.len() - start - 2).ok()?;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    Some(())
}

/// libjpeg's `jpeg_gen_optimal_table` (jchuff.c), step for step, so that the tables (and so
/// the bytes) are those libjpeg-turbo writes: Huffman's procedure over the symbols counted plus
/// a pseudo-symbol 256 of count 1 (so that no code is all ones), ties to the larger symbol
/// index; lengths over 16 folded back as Annex K.2 says; symbols of each length in order.
/// `None` for counts no real scan has (a code longer than 32 bits before folding).
fn optimal_table(counts: &[u32; 256]) -> Option<Spec> {
    const MAX_CLEN: usize = 32;
    let mut freq = [0i64; 257];
    let mut nz_index = [0usize; 257];
    let mut codesize = [0usize; 257];
    let mut others = [-1i32; 257];
    let mut num_nz = 0;
    for (i, f) in counts.iter().map(|&c| i64::from(c)).chain([1]).enumerate() {
        if f != 0 {
            nz_index[num_nz] = i;
            freq[num_nz] = f;
            num_nz += 1;
        }
    }
    loop {
        let (mut c1, mut c2) = (-1i32, -1i32);
        let (mut v, mut v2) = (1_000_000_000i64, 1_000_000_000i64);
        for (i, &f) in freq.iter().enumerate().take(num_nz) {
            if f <= v2 {
                if f <= v {
                    (c2, v2) = (c1, v);
                    (v, c1) = (f, i as i32);
                } else {
                    (v2, c2) = (f, i as i32);
                }
            }
        }
        if c2 < 0 {
            break;
        }
        let (mut a, mut b) = (c1 as usize, c2 as usize);
        freq[a] += freq[b];
        freq[b] = 1_000_000_001;
        codesize[a] += 1;
        while others[a] >= 0 {
            a = others[a] as usize;
            codesize[a] += 1;
        }
        others[a] = b as i32;
        codesize[b] += 1;
        while others[b] >= 0 {
            b = others[b] as usize;
            codesize[b] += 1;
        }
    }
    let mut bits = [0i32; MAX_CLEN + 1];
    for &size in &codesize[..num_nz] {
        *bits.get_mut(size)? += 1;
    }
    let mut bit_pos = [0usize; MAX_CLEN + 1];
    let mut p = 0usize;
    for i in 1..=MAX_CLEN {
        bit_pos[i] = p;
        p += bits[i] as usize;
    }
    let mut i = MAX_CLEN;
    while i > 16 {
        while bits[i] > 0 {
            let mut j = i - 2;
            while bits[j] == 0 {
                j -= 1;
            }
            bits[i] -= 2;
            bits[i - 1] += 1;
            bits[j + 1] += 2;
            bits[j] -= 1;
        }
        i -= 1;
    }
    while bits[i] == 0 {
        i -= 1;
    }
    bits[i] -= 1;
    let mut spec_counts = [0u8; 16];
    for (count, &b) in spec_counts.iter_mut().zip(&bits[1..=16]) {
        *count = u8::try_from(b).ok()?;
    }
    let mut symbols = vec![0u8; num_nz - 1];
    for k in 0..num_nz - 1 {
        let at = bit_pos[codesize[k]];
        *symbols.get_mut(at)? = u8::try_from(nz_index[k]).ok()?;
        bit_pos[codesize[k]] += 1;
    }
    Some(Spec { counts: spec_counts, symbols })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_symbol_gets_a_one_bit_code() {
        let mut counts = [0u32; 256];
        counts[0] = 10;
        let spec = optimal_table(&counts).unwrap();
        assert_eq!(spec.counts[0], 1);
        assert_eq!(spec.symbols, vec![0]);
    }

    #[test]
    fn codes_are_at_most_16_bits_and_complete_minus_one() {
        // Fibonacci-like counts make Huffman's codes as long as they get: folded to 16 bits.
        let mut counts = [0u32; 256];
        let (mut a, mut b) = (1u32, 1u32);
        for c in counts.iter_mut().take(40) {
            *c = a;
            (a, b) = (b, a.saturating_add(b).min(50_000_000));
        }
        let spec = optimal_table(&counts).unwrap();
        assert_eq!(spec.symbols.len(), 40);
        let mut sorted = spec.symbols.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 40);
        // Kraft: the codes with the pseudo-symbol's fill the code space exactly.
        let kraft: u64 = spec.counts.iter().enumerate().map(|(l, &n)| u64::from(n) << (15 - l)).sum();
        assert_eq!(kraft + 1, 1 << 16);
        assert!(canonical(&spec).is_some());
    }
}
