//! Crops of JPEGs without restart markers (what FFCV's writer stores) cut out through a seek
//! index ([`SeekIndex`]): the crop's MCUs as a JPEG of their own, decoded like a restart-marker
//! slice ([`super::restart`]) instead of entropy-decoding everything above and left of the
//! crop's end.
//!
//! The index of a JPEG is built the first time one of its crops is decoded (one entropy-level
//! pass over it, ~0.2 ms for a 436×363 photo; the JPEG is checked by it too) and kept for the
//! process, by the XXH3-128 hash of its bytes: the same bytes find it again in the next epoch
//! whatever loader, file or sample they come from, and other bytes can never use it. A JPEG
//! the index declines (progressive, damaged, ...) is remembered as such and takes the caller's
//! other path. The indexes are held up to a budget, 512 MiB by default (about 900,000 256×192
//! photos at ~600 bytes each with their entry), `BETON_SEEK_INDEX_MB` to change it (`0`: no
//! index; a value that is not a number is reported on stderr and the default kept): once it is
//! spent, JPEGs not yet indexed are decoded as before.
//!
//! Where the crop lies, in MCUs, is exactly what [`super::restart::slice`] cuts from the same
//! JPEG with a restart marker per MCU, and the coefficients are the same, so the pixels are
//! those of beton's own files: an FFCV-written file and the same images written by beton load
//! alike.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use beton_storage::jpeg::entropy::SeekIndex;
use beton_storage::jpeg::PlaneLayout;

use super::restart::{mcu_span, Slice};
use crate::image::ops::Crop;

/// Indexes kept per process by default, in MiB.
const DEFAULT_BUDGET_MB: usize = 512;

/// What an entry costs beyond its index (the key, the `Arc`, the map's slot).
const ENTRY_BYTES: usize = 64;

const SHARDS: usize = 16;

/// The seek indexes of this process, by the hash of their JPEG's bytes.
pub(crate) struct Cache {
    shards: [Mutex<HashMap<u128, Option<Arc<SeekIndex>>>>; SHARDS],
    used: AtomicUsize,
    budget: usize,
}

static CACHE: LazyLock<Cache> = LazyLock::new(|| {
    let mb = match std::env::var("BETON_SEEK_INDEX_MB") {
        Ok(v) => v.trim().parse::<usize>().unwrap_or_else(|_| {
            eprintln!("beton: BETON_SEEK_INDEX_MB={v:?} is not a number of MiB; seek indexes use {DEFAULT_BUDGET_MB}");
            DEFAULT_BUDGET_MB
        }),
        Err(_) => DEFAULT_BUDGET_MB,
    };
    Cache::new(mb.saturating_mul(1 << 20))
});

impl Cache {
    fn new(budget: usize) -> Cache {
        Cache {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            used: AtomicUsize::new(0),
            budget,
        }
    }

    /// The index of `data`: kept, or built and kept while the budget lasts; `None` when `data`
    /// cannot be indexed, or is not indexed yet and the budget is spent (or 0).
    fn index(&self, data: &[u8]) -> Option<Arc<SeekIndex>> {
        if self.budget == 0 {
            return None;
        }
        let key = xxhash_rust::xxh3::xxh3_128(data);
        let shard = &self.shards[(key % SHARDS as u128) as usize];
        if let Some(kept) = shard.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return kept.clone();
        }
        if self.used.load(Ordering::Relaxed) >= self.budget {
            return None;
        }
        // Built outside the lock; two threads may build the same index, the first one is kept.
        let built = SeekIndex::build(data).map(Arc::new);
        let cost = ENTRY_BYTES + built.as_ref().map_or(0, |i| i.heap_bytes());
        match shard.lock().unwrap_or_else(PoisonError::into_inner).entry(key) {
            Entry::Occupied(kept) => kept.get().clone(),
            Entry::Vacant(slot) => {
                if self.used.fetch_add(cost, Ordering::Relaxed) + cost <= self.budget {
                    slot.insert(built.clone());
                } else {
                    self.used.fetch_sub(cost, Ordering::Relaxed);
                }
                built
            }
        }
    }
}

/// What [`Cache::window`] made of a crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// The crop's MCUs are in `out`, a JPEG lying where the slice says in the original.
    Slice(Slice),
    /// The crop needs every MCU: decode the original.
    Whole,
}

/// The seek indexes of this process (see the module docs).
pub(crate) fn cache() -> &'static Cache {
    &CACHE
}

impl Cache {
    /// Writes into `out` a JPEG of the MCUs of `data` (a `width × height` JPEG without restart
    /// markers) that cover `crop` widened by `margin` pixels, through its seek index; `None`
    /// when it has no index (see the module docs) or its MCU grid is not that of a
    /// `width × height` image.
    pub(crate) fn window(
        &self,
        data: &[u8],
        (width, height): (u32, u32),
        crop: Crop,
        margin: u32,
        out: &mut Vec<u8>,
    ) -> Option<Window> {
        let Some(Span { index, cols, rows, at: (x, y), .. }) =
            self.span(data, (width, height), crop, margin)?
        else {
            return Some(Window::Whole);
        };
        let (w, h) = index.window(data, cols, rows, out)?;
        Some(Window::Slice(Slice { x, y, width: w, height: h }))
    }
}

/// The MCUs of an indexed JPEG that a crop needs: where they begin in the image and their size
/// in pixels.
struct Span {
    index: Arc<SeekIndex>,
    cols: std::ops::Range<u32>,
    rows: std::ops::Range<u32>,
    at: (u32, u32),
    size: (u32, u32),
}

impl Cache {
    /// The MCUs `crop` widened by `margin` needs in `data`, a `width × height` JPEG, through
    /// its index: `None` when it has none (or another size), `Some(None)` when they would be the
    /// whole image.
    fn span(
        &self,
        data: &[u8],
        (width, height): (u32, u32),
        crop: Crop,
        margin: u32,
    ) -> Option<Option<Span>> {
        let index = self.index(data)?;
        let (mw, mh) = index.mcu_size();
        if index.mcus() != (width.div_ceil(mw), height.div_ceil(mh)) {
            return None;
        }
        let (cols, rows) = mcu_span(crop, margin, (width, height), (mw, mh))?;
        if u64::from(cols.len() as u32) * u64::from(rows.len() as u32)
            >= u64::from(index.mcus().0) * u64::from(index.mcus().1)
        {
            return Some(None);
        }
        let at = (cols.start * mw, rows.start * mh);
        let size = ((cols.end * mw).min(width) - at.0, (rows.end * mh).min(height) - at.1);
        Some(Some(Span { index, cols, rows, at, size }))
    }
}

impl Cache {
    /// [`Cache::window`]'s MCUs decoded straight into raw planes at scale 1/`denom` (1, 2 or
    /// 4; no window JPEG written: [`SeekIndex::window_planes`]), in `buf` as `layout` lays out
    /// planes of the window's scaled size: `(the planes' layout, where the window begins, its
    /// size unscaled)`. `None` where [`Cache::window`] would give `None` or the whole image, or
    /// the planes decoder declines.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn planes(
        &self,
        data: &[u8],
        (width, height): (u32, u32),
        crop: Crop,
        margin: u32,
        denom: u32,
        buf: &mut Vec<u8>,
        layout: impl FnOnce((u32, u32)) -> Option<PlaneLayout>,
    ) -> Option<PlaneWindow> {
        let Span { index, cols, rows, at, size } = self.span(data, (width, height), crop, margin)??;
        let layout = layout((size.0.div_ceil(denom), size.1.div_ceil(denom)))?;
        buf.resize(layout.bytes, 0);
        let decoded = index.window_planes(data, cols, rows, denom, buf, layout.geometry())?;
        (decoded == size).then_some((layout, at, size))
    }
}

/// What [`Cache::planes`] decoded: the planes' count and geometry, where the window begins in
/// the image, and its size (unscaled).
pub(crate) type PlaneWindow = (PlaneLayout, (u32, u32), (u32, u32));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::codec::restart::slice;
    use crate::image::codec::restart::tests::compress;
    use crate::image::codec::testing::crop_in;
    use proptest::prelude::*;

    fn jpeg(w: usize, h: usize, subsamp: i32, interval: i32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..w * h * 3).map(|k| ((k * 37 + k / (w * 3) * 11) % 253) as u8).collect();
        compress(&pixels, w, h, subsamp, 90, interval)
    }

    #[test]
    fn indexes_are_kept_by_their_bytes_within_the_budget() {
        let cache = Cache::new(1 << 20);
        let (a, b) = (jpeg(64, 48, 2, 0), jpeg(64, 40, 2, 0));
        let first = cache.index(&a).expect("indexed");
        assert!(Arc::ptr_eq(&first, &cache.index(&a.clone()).unwrap()), "the same bytes find it again");
        assert!(!Arc::ptr_eq(&first, &cache.index(&b).unwrap()), "other bytes have their own");
        // Declined, and remembered as such: JPEGs with restart markers are sliced as they are.
        assert!(cache.index(&jpeg(64, 48, 2, 1)).is_none());
        assert_eq!(cache.shards.iter().map(|s| s.lock().unwrap().len()).sum::<usize>(), 3);
        // No budget: nothing is built or kept.
        assert!(Cache::new(0).index(&a).is_none());
        // A budget spent: what is kept is still found, nothing new is built.
        let small = Cache::new(1);
        assert!(small.index(&a).is_some(), "the first entry's build is given back, not kept");
        assert_eq!(small.shards.iter().map(|s| s.lock().unwrap().len()).sum::<usize>(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The window of a JPEG without restart markers is, byte for byte of its decoded
        /// pixels, the restart-marker slice of the same JPEG with a marker per MCU: same place,
        /// same size, same pixels.
        #[test]
        fn windows_decode_as_the_restart_slice_of_the_same_jpeg(
            crop in crop_in(203, 157), subsamp in 0i32..5, margin in 0u32..12,
        ) {
            let cache = Cache::new(1 << 20);
            let plain = jpeg(203, 157, subsamp, 0);
            let marked = jpeg(203, 157, subsamp, 1);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let got = cache.window(&plain, (203, 157), crop, margin, &mut a);
            match slice(&marked, (203, 157), crop, margin, &mut b, &mut Vec::new()) {
                Some(want) => {
                    prop_assert_eq!(got, Some(Window::Slice(want)));
                    let decode = |d: &[u8]| {
                        let mut dec = beton_storage::jpeg::Decompressor::new().unwrap();
                        let h = dec.header(d).unwrap();
                        let mut px = vec![0u8; h.width as usize * h.height as usize * 3];
                        dec.decompress(d, &mut px, (h.width, h.height), beton_storage::jpeg::PixelFormat::Rgb)
                            .unwrap();
                        px
                    };
                    prop_assert!(decode(&a) == decode(&b), "pixels differ");
                }
                None => prop_assert_eq!(got, Some(Window::Whole)),
            }
        }

        /// The window decoded straight into planes is libjpeg-turbo's planes of the window
        /// JPEG, byte for byte, at the same place, at each scale.
        #[test]
        fn planes_of_a_window_are_libjpeg_turbos_planes_of_its_jpeg(
            crop in crop_in(203, 157), subsamp in 0i32..5, margin in 0u32..12, scale in 0u32..3,
        ) {
            let denom = 1 << scale;
            let cache = Cache::new(1 << 20);
            let plain = jpeg(203, 157, subsamp, 0);
            let mut d = beton_storage::jpeg::Decompressor::new().unwrap();
            let hd = d.header(&plain).unwrap();
            let mut planes = Vec::new();
            let layout = |size| PlaneLayout::of(&hd, size);
            let got = cache.planes(&plain, (203, 157), crop, margin, denom, &mut planes, layout);
            let mut window = Vec::new();
            match cache.window(&plain, (203, 157), crop, margin, &mut window) {
                Some(Window::Slice(s)) => {
                    let Some((layout, at, size)) = got else {
                        return Err(TestCaseError::fail("not decoded to planes"));
                    };
                    prop_assert_eq!((at, size), ((s.x, s.y), (s.width, s.height)));
                    d.set_own_planes(false);
                    let mut want = vec![0u8; planes.len()];
                    d.header(&window).unwrap();
                    d.set_geometry(denom, beton_storage::jpeg::Rect::default()).unwrap();
                    d.decompress_planes(&window, &mut want, layout.geometry()).unwrap();
                    prop_assert!(planes == want, "planes differ");
                }
                other => prop_assert!(got.is_none(), "{other:?}"),
            }
        }
    }
}
