//! FFCV's `SimpleRGBImageDecoder`.

use beton_storage::{Dataset, Value};

use super::{check_slot, crop_resize_into, image_field, not_an_image, rgb_column};
use crate::decode::{stored_sizes, ColumnSpec, FieldData, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::image::ops::{Crop, Interpolation};

/// FFCV's `SimpleRGBImageDecoder`: every image whole, at its stored size, which must be the same
/// for all samples (checked when an epoch starts).
#[derive(Debug, Default, Clone, Copy)]
pub struct SimpleRGBImageDecoder;

impl FieldDecoder for SimpleRGBImageDecoder {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &FieldData<'_>, _epoch: u64) -> Result<Vec<ColumnSpec>> {
        let name = image_field(field, "SimpleRGBImageDecoder")?;
        let sizes = match field.single_file() {
            // One data file: its rows' sizes, read straight from the table.
            Some((ds, k)) => stored_sizes(ds, k).collect::<Vec<_>>(),
            None => field.image_sizes()?,
        };
        let mut sizes = sizes.into_iter().enumerate();
        let Some((_, first)) = sizes.next() else {
            return rgb_column(name, (1, 1), "SimpleRGBImageDecoder");
        };
        if let Some((i, (h, w))) = sizes.find(|&(_, s)| s != first) {
            return Err(Error::InvalidArgument {
                what: format!("decoder for field '{name}'"),
                why: format!(
                    "SimpleRGBImageDecoder needs images of one size: sample 0 is {}x{} (h x w), \
                     sample {i} is {h}x{w}; use a crop decoder",
                    first.0, first.1
                ),
            });
        }
        rgb_column(name, first, "SimpleRGBImageDecoder")
    }

    fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        let img = value.as_image().ok_or_else(not_an_image)?;
        let size = (usize::from(img.height), usize::from(img.width));
        check_slot(out, size)?;
        crop_resize_into(
            &img,
            Crop::full(u32::from(img.width), u32::from(img.height)),
            size,
            1.0,
            Interpolation::default(),
            out[0],
        )
    }
}
