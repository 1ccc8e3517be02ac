//! The one JPEG marker parser: a walk over the marker segments from SOI to the first SOS that
//! records what beton needs from them, without decoding anything.
//!
//! This code never panics for any input: it reads `data` with checked indexing only, and a
//! malformed segment just ends the walk (whoever decodes the JPEG reports it corrupt).

/// The frame header (the first SOFn segment).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The SOF marker byte: 0xC0 baseline, 0xC1 extended sequential (both Huffman), 0xC2
    /// progressive, 0xC3 lossless, 0xC5..=0xCF hierarchical or arithmetic.
    pub marker: u8,
    /// Byte offset in the JPEG of the frame's height field (the width follows it).
    pub size_at: usize,
    /// Bits per sample.
    pub precision: u8,
    /// Width in pixels.
    pub width: u16,
    /// Height in pixels.
    pub height: u16,
    /// Number of components.
    pub num_components: u8,
    /// Horizontal and vertical sampling factors of the first 4 components (0 when absent).
    pub sampling: [(u8, u8); 4],
}

impl Frame {
    /// Baseline or extended sequential, Huffman-coded (SOF0, SOF1): what restart-marker slicing
    /// can cut.
    pub fn is_sequential_huffman(&self) -> bool {
        matches!(self.marker, 0xC0 | 0xC1)
    }
}

/// The first scan header (SOS segment).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Components in the scan.
    pub num_components: u8,
    /// Spectral selection start and end and successive approximation (`Ss`, `Se`, `Ah·16+Al`):
    /// `[0, 63, 0]` for a sequential scan.
    pub spectral: Option<[u8; 3]>,
    /// Byte offset of the first entropy-coded byte (just after the SOS segment).
    pub data_at: usize,
}

/// What the marker segments before the first scan say.
#[derive(Debug, Default, Clone, Copy)]
pub struct Markers<'a> {
    /// The TIFF structure of the first APP1 "Exif" segment.
    pub exif: Option<&'a [u8]>,
    /// The transform byte of an Adobe APP14 segment.
    pub adobe_transform: Option<u8>,
    /// The restart interval in MCUs in effect for the first scan (the last DRI segment before
    /// it, as libjpeg reads it); 0 when there is none.
    pub restart_interval: u16,
    /// The first frame header.
    pub frame: Option<Frame>,
    /// The first scan header, when the walk reached it (every segment before it well formed).
    pub scan: Option<Scan>,
    /// Whether a marker without a segment (RSTn, SOI, TEM) came between SOI and SOS.
    pub stray_marker: bool,
}

impl Markers<'_> {
    /// The EXIF orientation tag (1–8); `None` when absent, unreadable or out of range (a broken
    /// EXIF block does not make the image unreadable).
    pub fn orientation(&self) -> Option<u32> {
        let exif = exif::Reader::new().read_raw(self.exif?.to_vec()).ok()?;
        let field = exif.get_field(exif::Tag::Orientation, exif::In::PRIMARY)?;
        field.value.get_uint(0).filter(|o| (1..=8).contains(o))
    }
}

/// Where the next 0xFF byte of `data` is, from `at` on: a scan's next marker or stuffed byte.
/// Sixteen bytes a test on x86-64 (SSE2, every such CPU), without the setup of a general search
/// call: in a JPEG with a restart marker every MCU the next one is a few dozen bytes away.
#[inline]
pub fn next_ff(data: &[u8], mut at: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        while at + 16 <= data.len() {
            // SAFETY: bytes `at..at + 16` of `data` (checked just above); SSE2 is in x86-64's
            // baseline.
            let mask = unsafe {
                let v = _mm_loadu_si128(data.as_ptr().add(at).cast());
                _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(-1)))
            };
            if mask != 0 {
                return Some(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
    }
    data.get(at..)?.iter().position(|&b| b == 0xFF).map(|i| at + i)
}

/// Walks the marker segments of `data` up to the first SOS. Never fails: anything malformed
/// (no SOI, a byte that is not a marker, a segment past the end) just ends the walk, with
/// [`Markers::scan`] `None`.
pub fn parse(data: &[u8]) -> Markers<'_> {
    let mut found = Markers::default();
    let mut dri = None;
    if !data.starts_with(&[0xFF, 0xD8]) {
        return found;
    }
    let mut pos = 2usize;
    loop {
        if data.get(pos) != Some(&0xFF) {
            break;
        }
        // Fill bytes before a marker.
        while data.get(pos) == Some(&0xFF) {
            pos += 1;
        }
        let Some(&marker) = data.get(pos) else { break };
        pos += 1;
        match marker {
            0x01 | 0xD0..=0xD8 => {
                found.stray_marker = true;
                continue;
            }
            0xD9 => break,
            _ => {}
        }
        let Some(&[hi, lo]) = data.get(pos..pos.saturating_add(2)) else { break };
        let seg_len = usize::from(u16::from_be_bytes([hi, lo]));
        if seg_len < 2 {
            break;
        }
        let Some(end) = pos.checked_add(seg_len) else { break };
        let Some(seg) = data.get(pos + 2..end) else { break };
        let be16 = |at: usize| Some(u16::from_be_bytes([*seg.get(at)?, *seg.get(at + 1)?]));
        match marker {
            0xE1 if found.exif.is_none() => {
                if let Some(tiff) = seg.strip_prefix(b"Exif\0\0") {
                    found.exif = Some(tiff);
                }
            }
            0xEE if seg.starts_with(b"Adobe") => {
                if let Some(&t) = seg.get(11) {
                    found.adobe_transform = Some(t);
                }
            }
            // The last DRI before the scan is the one in effect for it (as libjpeg reads).
            0xDD => dri = be16(0),
            // SOFn (0xC4 DHT, 0xC8 JPG and 0xCC DAC are not frames).
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF if found.frame.is_none() => {
                let comps = seg.get(5).copied().unwrap_or(0);
                let mut sampling = [(0, 0); 4];
                for (c, s) in sampling.iter_mut().enumerate().take(usize::from(comps)) {
                    if let Some(&hv) = seg.get(6 + 3 * c + 1) {
                        *s = (hv >> 4, hv & 15);
                    }
                }
                found.frame = Some(Frame {
                    marker,
                    size_at: pos + 3,
                    precision: seg.first().copied().unwrap_or(0),
                    height: be16(1).unwrap_or(0),
                    width: be16(3).unwrap_or(0),
                    num_components: comps,
                    sampling,
                });
            }
            0xDA => {
                let ns = seg.first().copied().unwrap_or(0);
                let at = 1 + 2 * usize::from(ns);
                let spectral = seg.get(at..at + 3).and_then(|s| s.try_into().ok());
                found.scan = Some(Scan { num_components: ns, spectral, data_at: end });
                break;
            }
            _ => {}
        }
        pos = end;
    }
    found.restart_interval = dri.unwrap_or(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_ff_finds_what_a_byte_search_finds() {
        let mut next = beton_testkit::xorshift(0xffff_0000_1234);
        for round in 0..5_000u32 {
            let len = (next() % 100) as usize;
            // 0xFF now and then, more often in some rounds.
            let every = 2 + round % 60;
            let data: Vec<u8> = (0..len)
                .map(|_| if next() % u64::from(every) == 0 { 0xFF } else { (next() % 255) as u8 })
                .collect();
            for at in 0..=len + 1 {
                let expected = data.get(at..).and_then(|d| d.iter().position(|&b| b == 0xFF)).map(|i| at + i);
                assert_eq!(next_ff(&data, at), expected, "{data:02x?} from {at}");
            }
        }
    }

    #[test]
    fn reads_frame_restart_interval_and_scan_of_a_baseline_jpeg() {
        // SOI, DRI (1 MCU), SOF0 (8-bit, 16×8, 3 components 2x1, 1x1, 1x1), SOS (3 components).
        let mut data = vec![0xFF, 0xD8, 0xFF, 0xDD, 0, 4, 0, 1];
        data.extend_from_slice(&[0xFF, 0xC0, 0, 17, 8, 0, 8, 0, 16, 3, 1, 0x21, 0, 2, 0x11, 1, 3, 0x11, 1]);
        data.extend_from_slice(&[0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0, 0xAB]);
        let m = parse(&data);
        assert_eq!(m.restart_interval, 1);
        let f = m.frame.unwrap();
        assert!(f.is_sequential_huffman());
        assert_eq!((f.width, f.height, f.precision, f.num_components), (16, 8, 8, 3));
        assert_eq!(f.sampling, [(2, 1), (1, 1), (1, 1), (0, 0)]);
        assert_eq!(&data[f.size_at..f.size_at + 4], &[0, 8, 0, 16]);
        let s = m.scan.unwrap();
        assert_eq!((s.num_components, s.spectral, s.data_at), (3, Some([0, 63, 0]), data.len() - 1));
        assert!(!m.stray_marker);
    }

    #[test]
    fn the_last_restart_interval_before_the_scan_is_the_one_in_effect() {
        // SOI, DRI 1, DRI 3, SOS: libjpeg decodes the scan with interval 3; a slicer that took 1
        // would cut the entropy data at the wrong markers.
        let mut data = vec![0xFF, 0xD8, 0xFF, 0xDD, 0, 4, 0, 1, 0xFF, 0xDD, 0, 4, 0, 3];
        data.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 63, 0, 0xAB]);
        assert_eq!(parse(&data).restart_interval, 3);
        // After the scan, a DRI does not count for it.
        data.extend_from_slice(&[0xFF, 0xDD, 0, 4, 0, 9]);
        assert_eq!(parse(&data).restart_interval, 3);
    }

    #[test]
    fn a_cut_or_malformed_header_ends_the_walk_without_a_scan() {
        let data = [0xFF, 0xD8, 0xFF, 0xDD, 0, 4, 0, 1, 0xFF, 0xDA, 0, 12, 3];
        for cut in 0..data.len() {
            let m = parse(&data[..cut]);
            assert!(m.scan.is_none(), "{cut}");
        }
        assert!(parse(&[0xFF, 0xD8, 0x00, 0xFF]).scan.is_none());
        assert!(parse(&[0xFF, 0xD8, 0xFF, 0xD0, 0xFF, 0xD9]).stray_marker);
    }

    proptest::proptest! {
        /// Any bytes: no panic.
        #[test]
        fn never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let mut data = data;
            if data.len() >= 2 {
                data[0] = 0xFF;
                data[1] = 0xD8;
            }
            let _ = parse(&data);
        }
    }
}
