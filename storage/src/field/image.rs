//! RGBImageField (FFCV type 2) and GreyImageField (beton extension): FFCV's packed row struct
//! `{mode <u1, width <u2, height <u2, data_ptr <u8}`, and a JPEG or raw `u8` pixels as payload.
//! Encoding (resizing, JPEG or raw by the write mode) is `crate::image`'s.

use super::extension::{Extension, ExtensionKind};
use super::kind::{
    mismatch, word, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext, FieldKind, Input,
    LoadAs, IMAGE_SLOT, TYPE_CUSTOM, TYPE_RGB_IMAGE,
};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::image::{self, Channels, ImageMode, ImageSource, Pixels};
use crate::value::{ImageRef, SampleValue, Value, ValueKind};

/// An image field of `channels`.
#[derive(Debug)]
pub(super) struct Image {
    channels: Channels,
}

/// RGBImageField.
pub(super) const RGB: Image = Image { channels: Channels::Rgb };
/// GreyImageField.
pub(super) const GREY: Image = Image { channels: Channels::Grey };

pub(super) fn parse_rgb(d: &Described<'_>) -> Option<std::result::Result<(), String>> {
    d.is(TYPE_RGB_IMAGE, "rgb_image").then_some(Ok(()))
}

pub(super) fn parse_grey(d: &Described<'_>) -> Option<std::result::Result<(), String>> {
    d.is_extension(ExtensionKind::GreyImage, "grey_image").then_some(Ok(()))
}

impl FieldKind for Image {
    fn name(&self) -> &'static str {
        match self.channels {
            Channels::Rgb => "RGBImageField",
            Channels::Grey => "GreyImageField",
        }
    }

    fn short_name(&self) -> &'static str {
        match self.channels {
            Channels::Rgb => "rgb_image",
            Channels::Grey => "grey_image",
        }
    }

    fn type_id(&self) -> u8 {
        match self.channels {
            Channels::Rgb => TYPE_RGB_IMAGE,
            Channels::Grey => TYPE_CUSTOM,
        }
    }

    fn slot(&self) -> Slot {
        IMAGE_SLOT
    }

    fn payload_ptr_offset(&self) -> Option<usize> {
        Some(5)
    }

    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        match self.channels {
            Channels::Rgb => Box::new([0u8; ARGS_SIZE]),
            Channels::Grey => Extension::to_arguments(ExtensionKind::GreyImage, IMAGE_SLOT, &[]),
        }
    }

    fn input(&self) -> Input {
        Input::Image
    }

    fn value_kind(&self) -> ValueKind {
        ValueKind::Image
    }

    fn zero(&self) -> (SampleValue, &'static str) {
        let channels = self.channels as u8;
        let pixels = Pixels { width: 1, height: 1, channels, data: vec![0; usize::from(channels)] };
        (SampleValue::Image(ImageSource::Pixels(pixels)), "a 1x1 black image")
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], cx: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        let src = match value {
            SampleValue::Image(src) => src,
            v => return Err(mismatch(self, &v)),
        };
        let (img, flattened) = image::encode_image_flattened(&src, cx.image, self.channels, cx.draw)?;
        if let (true, Some(count)) = (flattened, cx.alpha_flattened) {
            count.set(count.get() + 1);
        }
        slot[0] = img.mode as u8;
        slot[1..3].copy_from_slice(&img.width.to_le_bytes());
        slot[3..5].copy_from_slice(&img.height.to_le_bytes());
        Ok(Some(img.data))
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        let mode = ImageMode::from_byte(slot[0])
            .ok_or_else(|| cx.corrupt(format!("image mode {} is neither 0 (jpg) nor 1 (raw)", slot[0])))?;
        let width = u16::from_le_bytes([slot[1], slot[2]]);
        let height = u16::from_le_bytes([slot[3], slot[4]]);
        let data = cx.payload(word(slot, 5), None)?;
        let raw_len = width as u64 * height as u64 * self.channels as u64;
        if mode == ImageMode::Raw && data.len() as u64 != raw_len {
            return Err(cx.corrupt(format!(
                "raw {width}×{height} image needs {raw_len} bytes, its allocation has {}",
                data.len()
            )));
        }
        Ok(Value::Image(ImageRef { mode, width, height, channels: self.channels, data }))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![
            ColumnDef { suffix: Some("mode"), source: ColumnSource::ImageMode },
            ColumnDef { suffix: Some("width"), source: ColumnSource::ImageWidth },
            ColumnDef { suffix: Some("height"), source: ColumnSource::ImageHeight },
            ColumnDef { suffix: Some("nbytes"), source: ColumnSource::ImageNbytes },
        ]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Image
    }
}
