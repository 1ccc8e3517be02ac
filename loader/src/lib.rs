//! beton-loader: the training data loader over `.beton` files.
//!
//! - [`Loader`] (built with [`Loader::builder`]): FFCV's loader. Each [`Epoch`] starts a pool of
//!   threads that build several batches at once, each straight into an output slot allocated once
//!   per loader; batches come out in order as [`Batch`]es, and a slot is not reused while its
//!   batch is held. `os_cache(false)` reads pages through an order-aware, bounded process cache
//!   (`cache.rs`). [`EpochStats`] says what an epoch read and where the time went;
//!   [`Epoch::state`] / [`Loader::resume`] continue an interrupted epoch exactly.
//! - [`decode`]: [`FieldDecoder`]s write one sample's field into its rows of a batch (scalars,
//!   arrays, padded bytes/JSON/text); [`image`]: FFCV's image decoders with crop-aware,
//!   DCT-scaled JPEG decoding and FFCV's image transforms, fused per sample.
//! - [`PageMap`], [`order`], [`plan_epoch`], [`LoaderState`]: *which samples each rank reads, in
//!   which order, in which batches*, the part that must be identical on every rank and
//!   reproducible after a restart: FFCV's orders ([`OrderOption`]: `SEQUENTIAL`, `RANDOM`,
//!   `QUASI_RANDOM`, or a custom [`Order`]) with FFCV's / PyTorch's distributed semantics.
//! - `gpu` (feature `cuda`): the GPU path's foundation, a CUDA context that fails cleanly without
//!   a driver and the normalisation kernel with its CPU twin (docs/GPU.md).
//!
//! Every random choice derives from `(seed, epoch)` (orders) or `(seed, epoch, sample)`
//! (augmentations) alone, through ChaCha8 seeded by SplitMix64 with hand-written bounded draws
//! (as beton-dataset's index sets), so ranks agree without communicating, batches do not depend on
//! the thread count, and a dependency upgrade cannot change an order: golden tests pin each one.
//!
//! ```
//! use beton_loader::{plan_epoch, EpochContext, OrderOption, PageMap};
//! use beton_dataset::IndexSet;
//!
//! let indices = IndexSet::all(600);
//! let pages = PageMap::from_pages((0..600).map(|i| i / 10).collect()); // 10 samples a page
//! let ctx = EpochContext { indices: &indices, pages: &pages, seed: 7, epoch: 0, batch_size: 7 };
//! let order = OrderOption::QuasiRandom { buffer_pages: None };
//! let plan = plan_epoch(&order, &ctx, 0, 1, true)?;
//! assert_eq!(plan.num_batches(), 85); // 600 / 7, the partial batch dropped
//! assert!(plan.batches().all(|b| b.len() == 7));
//! # Ok::<(), beton_loader::Error>(())
//! ```
//!
//! [`Dataset`]: beton_storage::Dataset

mod cache;
pub mod decode;
mod engine;
pub mod error;
#[doc(hidden)]
pub mod fuzz;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod image;
pub mod order;
pub mod pages;
pub mod parts;
mod random;
mod slots;
pub mod state;

pub use decode::{
    BoolDecoder, BytesDecoder, ColumnSpec, ElemType, FieldDecoder, FloatDecoder, IntDecoder, NDArrayDecoder,
    SampleContext,
};
pub use engine::{Epoch, EpochStats, Loader, LoaderBuilder};
pub use error::{Error, Result};
pub use image::{
    CenterCropRGBImageDecoder, ImagePipeline, NormalizeImage, RandomResizedCropRGBImageDecoder,
    SimpleRGBImageDecoder,
};
pub use order::{plan_epoch, EpochContext, EpochPlan, Order, OrderOption};
pub use pages::PageMap;
pub use parts::{Part, Parts};
pub use slots::{Batch, Column};
pub use state::LoaderState;

/// Reports a test that cannot run on this machine (a CPU without the instructions it tests):
/// `SKIPPED: <test>: <why>` written straight to stderr, past libtest's capture, in one write so
/// that it stays on one line; `scripts/test.sh` counts these lines as skipped, not passed.
#[cfg(test)]
pub(crate) fn skip_test(test: &str, why: &str) {
    use std::io::Write;
    let line = format!("SKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}
