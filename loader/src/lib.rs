//! beton-loader: the training data loader over `.beton` files.
//!
//! This crate decides *which samples each rank reads, in which order, in which batches*, the part
//! of a loader that must be identical on every rank and reproducible after a restart:
//!
//! - [`PageMap`]: the page every sample lives on, built once per loader from a [`Dataset`]
//!   (beton_storage::Dataset).
//! - [`order`]: FFCV's traversal orders ([`OrderOption`]: `SEQUENTIAL`, `RANDOM`, `QUASI_RANDOM`,
//!   or a custom [`Order`]), and [`plan_epoch`], which turns an order into one rank's
//!   [`EpochPlan`] of batches with FFCV's / PyTorch's distributed semantics.
//! - [`LoaderState`]: what a checkpoint stores to resume mid-epoch, checked against the loader
//!   it is resumed in.
//!
//! Every random choice derives from `(seed, epoch)` alone, through ChaCha8 seeded by SplitMix64
//! with hand-written bounded draws (as beton-query's index sets), so ranks agree without
//! communicating and a dependency upgrade cannot change an order: golden tests pin each one.
//!
//! ```
//! use beton_loader::{plan_epoch, EpochContext, OrderOption, PageMap};
//! use beton_query::IndexSet;
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
pub mod image;
pub mod order;
pub mod pages;
mod random;
mod slots;
pub mod state;

pub use decode::{ColumnSpec, ElemType, FieldDecoder, SampleContext};
pub use engine::{Epoch, EpochStats, Loader, LoaderBuilder};
pub use error::{Error, Result};
pub use image::{
    CenterCropRGBImageDecoder, ImagePipeline, NormalizeImage, RandomResizedCropRGBImageDecoder,
    SimpleRGBImageDecoder,
};
pub use order::{plan_epoch, EpochContext, EpochPlan, Order, OrderOption};
pub use pages::PageMap;
pub use slots::{Batch, Column};
pub use state::LoaderState;
