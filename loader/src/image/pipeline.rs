//! [`ImagePipeline`]: an image decoder, then per-sample operations, then optionally
//! [`NormalizeImage`], run as one [`FieldDecoder`] on the worker thread that decodes the sample.
//!
//! ```
//! use beton_loader::image::{
//!     Cutout, ImagePipeline, Layout, NormalizeImage, RandomResizedCropRGBImageDecoder,
//!     RandomHorizontalFlip,
//! };
//! let pipeline = ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((224, 224)))
//!     .then(RandomHorizontalFlip::default())
//!     .then(Cutout { crop_size: 16, fill: [0, 0, 0] })
//!     .normalize(NormalizeImage::imagenet().layout(Layout::Chw));
//! // loader_builder.decoder("image", std::sync::Arc::new(pipeline))
//! # let _ = pipeline;
//! ```
//!
//! Without normalisation the decoder writes into the batch slot and the operations work there;
//! with it, the `u8` image lives in a per-thread scratch buffer and only the floats are written
//! to the slot, through a per-channel lookup table (256 entries: one multiply-add per value is
//! done once per pipeline, not per pixel).
use std::any::Any;
use std::sync::{Arc, RwLock};

use beton_storage::{Dataset, Value};

use crate::decode::{ColumnSpec, ElemType, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::image::codec::color::Source;
use crate::image::decoders::{CenterCropRGBImageDecoder, PlanarDecode, RandomResizedCropRGBImageDecoder};
use crate::image::normalize::Prepared;
use crate::image::ops::{ImageMut, ImageOp, Layout, NormalizeImage};
use crate::image::rng::SampleRng;
use crate::image::scratch;

/// The output size each epoch's `columns` declared, for `decode` (which only sees slot bytes).
type Sizes = RwLock<Vec<(u64, (usize, usize))>>;

/// An image decoder followed by per-sample operations and an optional normalisation, itself a
/// [`FieldDecoder`]. Operation `k` draws from [`SampleRng::for_op`]`(ctx, k)`.
pub struct ImagePipeline {
    decoder: Arc<dyn FieldDecoder>,
    /// The decoder's planar path, when it is a crop decoder.
    planar: Option<Arc<dyn PlanarDecode>>,
    ops: Vec<Arc<dyn ImageOp>>,
    /// The normalisation, prepared.
    normalize: Option<Prepared>,
    sizes: Sizes,
}

impl std::fmt::Debug for ImagePipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePipeline")
            .field("ops", &self.ops)
            .field("normalize", &self.normalize.as_ref().map(|p| p.n))
            .finish_non_exhaustive()
    }
}

impl ImagePipeline {
    /// A pipeline over `decoder`, which must write one `u8` column `[h, w, 3]` (the RGB image
    /// decoders of this module).
    pub fn new(decoder: impl FieldDecoder + 'static) -> Self {
        // The crop decoders also decode to planes; one object serves as both.
        let decoder = Arc::new(decoder);
        let any: Arc<dyn Any + Send + Sync> = decoder.clone();
        let planar: Option<Arc<dyn PlanarDecode>> = match any.downcast::<RandomResizedCropRGBImageDecoder>() {
            Ok(d) => Some(d),
            Err(any) => any.downcast::<CenterCropRGBImageDecoder>().ok().map(|d| d as _),
        };
        ImagePipeline { decoder, planar, ops: Vec::new(), normalize: None, sizes: Sizes::default() }
    }

    /// Appends an operation.
    pub fn then(mut self, op: impl ImageOp + 'static) -> Self {
        self.ops.push(Arc::new(op));
        self
    }

    /// Appends an operation already shared (an operation object built once and used by several
    /// pipelines, as the Python bindings do).
    pub fn then_shared(mut self, op: Arc<dyn ImageOp>) -> Self {
        self.ops.push(op);
        self
    }

    /// Ends the pipeline with a normalisation to floats.
    pub fn normalize(mut self, n: NormalizeImage) -> Self {
        self.normalize = Some(Prepared::new(n));
        self
    }

    fn size(&self, epoch: u64) -> Result<(usize, usize)> {
        let sizes = self.sizes.read().map_err(|_| Error::Decode("image pipeline lock poisoned".into()))?;
        sizes
            .iter()
            .find(|(e, _)| *e == epoch)
            .map(|&(_, s)| s)
            .ok_or_else(|| Error::Decode(format!("image pipeline: no columns declared for epoch {epoch}")))
    }

    /// Runs the first `n` operations on `pixels`.
    fn run_ops(
        &self,
        n: usize,
        pixels: &mut [u8],
        (h, w): (usize, usize),
        ctx: &SampleContext,
    ) -> Result<()> {
        let mut image = ImageMut::new(pixels, h, w)?;
        for (k, op) in self.ops.iter().enumerate().take(n) {
            op.apply(&mut image, &mut SampleRng::for_op(ctx, k as u64));
        }
        Ok(())
    }

    /// How many operations run on the `u8` image before a normalisation, and whether the
    /// horizontal flips after them (folded into the normalisation's writes) mirror this sample:
    /// each draws from its own stream as its `apply` would, so the pixels are the same.
    fn split_flips(&self, ctx: &SampleContext) -> (usize, bool) {
        let kept = self.ops.iter().rposition(|op| op.horizontal_flip().is_none()).map_or(0, |k| k + 1);
        let flip = self.ops.iter().enumerate().skip(kept).fold(false, |flip, (k, op)| {
            let p = op.horizontal_flip().unwrap_or(0.0);
            flip ^ SampleRng::for_op(ctx, k as u64).chance(p)
        });
        (kept, flip)
    }
}

impl FieldDecoder for ImagePipeline {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&crate::decode::FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &crate::decode::FieldData<'_>, epoch: u64) -> Result<Vec<ColumnSpec>> {
        let mut cols = self.decoder.columns_of(field, epoch)?;
        let (h, w) = match cols.as_slice() {
            [c] if c.elem == ElemType::U8 && c.shape.len() == 3 && c.shape[2] == 3 => {
                (c.shape[0], c.shape[1])
            }
            _ => {
                return Err(Error::InvalidArgument {
                    what: "ImagePipeline decoder".into(),
                    why: format!("it must write one u8 [h, w, 3] column, not {cols:?}"),
                })
            }
        };
        {
            let mut sizes =
                self.sizes.write().map_err(|_| Error::Decode("image pipeline lock poisoned".into()))?;
            sizes.retain(|(e, _)| *e != epoch);
            sizes.push((epoch, (h, w)));
            // Epochs run one after another; a few are kept for epochs still draining.
            if sizes.len() > 8 {
                sizes.remove(0);
            }
        }
        if let Some(Prepared { n, .. }) = &self.normalize {
            cols[0].elem = n.elem();
            cols[0].shape = match n.layout {
                Layout::Chw => vec![3, h, w],
                Layout::Hwc => vec![h, w, 3],
            };
        }
        Ok(cols)
    }

    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        let size = self.size(ctx.epoch)?;
        let Some(prepared) = &self.normalize else {
            self.decoder.decode(value, ctx, out)?;
            return match out.first_mut() {
                Some(pixels) => self.run_ops(self.ops.len(), pixels, size, ctx),
                None => Err(Error::Decode("no output column".into())),
            };
        };
        let want = size.0 * size.1 * 3 * prepared.n.elem().size();
        let dst = match out.first_mut() {
            Some(dst) if dst.len() == want => dst,
            _ => return Err(Error::Decode("output slot of the wrong size".into())),
        };
        let (kept, flip) = self.split_flips(ctx);
        scratch::IMAGE.with(|cell| {
            let image = &mut *cell.borrow_mut();
            // Only flips between the decoder and the normalisation: the decoder's planes go
            // straight to it.
            if let Some(planar) = self.planar.as_ref().filter(|_| kept == 0) {
                let flip = flip ^ planar.flips(ctx);
                let mut finish = |src: Source<'_>| prepared.write_planes(src, size, flip, image, dst);
                if planar.decode_planes(value, ctx, &mut finish)? {
                    return Ok(());
                }
            }
            image.resize(size.0 * size.1 * 3, 0);
            self.decoder.decode(value, ctx, &mut [image.as_mut_slice()])?;
            self.run_ops(kept, image, size, ctx)?;
            prepared.write(image, size, flip, dst);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::normalize::write_with;
    use crate::image::FloatType;

    /// Horizontal flips at the end of a pipeline are folded into the normalisation: the output
    /// equals running every operation on the `u8` image, then normalising, for each sample.
    #[test]
    fn folded_flips_equal_running_the_ops() {
        use crate::image::{Cutout, RandomHorizontalFlip};
        let img: Vec<u8> = (0..3 * 12 * 19).map(|i| ((i * 31) % 256) as u8).collect();
        let pipelines: Vec<Vec<Arc<dyn ImageOp>>> = vec![
            vec![Arc::new(RandomHorizontalFlip::default())],
            vec![
                Arc::new(RandomHorizontalFlip { flip_prob: 0.7 }),
                Arc::new(RandomHorizontalFlip::default()),
            ],
            vec![
                Arc::new(RandomHorizontalFlip::default()),
                Arc::new(Cutout { crop_size: 5, fill: [1, 2, 3] }),
                Arc::new(RandomHorizontalFlip { flip_prob: 0.3 }),
            ],
        ];
        for layout in [Layout::Chw, Layout::Hwc] {
            let n = NormalizeImage::imagenet().layout(layout).dtype(FloatType::F16);
            for ops in &pipelines {
                let p = ImagePipeline {
                    ops: ops.clone(),
                    ..ImagePipeline::new(crate::image::SimpleRGBImageDecoder)
                };
                let mut flipped = 0;
                for index in 0..64 {
                    let ctx = SampleContext { index, seed: 3, epoch: 1, position: 0 };
                    let mut want_px = img.clone();
                    p.run_ops(ops.len(), &mut want_px, (12, 19), &ctx).unwrap();
                    let mut want = vec![0u8; img.len() * 2];
                    let t = n.table();
                    write_with::<2>(&t, n.layout, &want_px, 12 * 19, &mut want);
                    let (kept, flip) = p.split_flips(&ctx);
                    let mut got_px = img.clone();
                    p.run_ops(kept, &mut got_px, (12, 19), &ctx).unwrap();
                    let mut got = vec![0u8; img.len() * 2];
                    Prepared::new(n).write(&mut got_px, (12, 19), flip, &mut got);
                    assert_eq!(got, want, "{layout:?} {ops:?} sample {index}");
                    flipped += usize::from(flip);
                }
                assert!((8..56).contains(&flipped), "{flipped} of 64 flipped");
            }
        }
    }
}
