//! The fuzz harnesses: what each cargo-fuzz target (`fuzz/fuzz_targets/`) runs on one input,
//! here so that the regression tests replay crash inputs through exactly the same code
//! (`loader/tests/fuzz_regressions.rs`). Each must return (any result is fine) and never
//! panic, abort, hang or raise a signal, whatever `data` holds.

use std::sync::Arc;

use beton_storage::{Channels, FieldType, ImageMode, ImageRef, OpenOptions, Value};

use crate::decode::{default_decoder, FieldDecoder, SampleContext};
use crate::image::{
    CenterCropRGBImageDecoder, ImagePipeline, NormalizeImage, RandomHorizontalFlip,
    RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
};
use crate::{Loader, OrderOption};

/// Target `load`: `data` as a `.beton` file, opened and read through the loader: one epoch of
/// every field with a default decoder, image fields through a random-resized-crop pipeline
/// with flip and normalisation, plus centre-crop and whole-image views of the first image
/// field. The first byte picks the order and batch size.
pub fn load(data: &[u8]) {
    let Some((&pick, file)) = data.split_first() else { return };
    let Ok(ds) = OpenOptions::new().defer_allocation_checks(true).open_bytes(file.to_vec()) else { return };
    if ds.num_samples() > 2048 {
        return;
    }
    let ds = Arc::new(ds);
    let order = match pick % 3 {
        0 => OrderOption::Sequential,
        1 => OrderOption::Random,
        _ => OrderOption::QuasiRandom { buffer_pages: None },
    };
    let mut builder = Loader::builder(Arc::clone(&ds))
        .batch_size(1 + (pick as usize >> 2) % 8)
        .threads(1)
        .order(order)
        .drop_last(false);
    let mut names = Vec::new();
    let mut first_image = None;
    for f in ds.fields() {
        match f.field_type() {
            FieldType::RgbImage | FieldType::GreyImage => {
                let rrc = ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((12, 10)))
                    .then(RandomHorizontalFlip { flip_prob: 0.5 })
                    .normalize(NormalizeImage::new([120.0, 110.0, 100.0], [60.0, 61.0, 62.0]));
                builder = builder.decoder(f.name(), Arc::new(rrc));
                first_image.get_or_insert(f.name().to_string());
            }
            ty if default_decoder(ty).is_none() => continue,
            _ => {}
        }
        names.push(f.name().to_string());
    }
    if let Some(image) = &first_image {
        let centre = ImagePipeline::new(CenterCropRGBImageDecoder::new((7, 9)));
        builder = builder.view("fuzz_centre", image, Arc::new(centre));
        if pick & 0x80 != 0 {
            // Whole images: only for files whose images share one size; else an error, also fine.
            builder = builder.view("fuzz_whole", image, Arc::new(ImagePipeline::new(SimpleRGBImageDecoder)));
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let Ok(mut loader) = builder.fields(&names).build() else { return };
    let Ok(epoch) = loader.next_epoch() else { return };
    for batch in epoch {
        if batch.is_err() {
            break;
        }
    }
}

/// Target `jpeg`: the first 4 bytes are the width and height a row would claim (u16 each), the
/// rest the image payload, decoded as stored (JPEG, or raw when byte 4 is odd) by storage and
/// by the loader's crop decoders (random-resized and centre crops, DCT scaling and restart
/// slicing included).
pub fn jpeg(data: &[u8]) {
    if data.len() < 5 {
        return;
    }
    let width = u16::from_le_bytes([data[0], data[1]]);
    let height = u16::from_le_bytes([data[2], data[3]]);
    let (mode, channels) = match data[4] % 4 {
        1 => (ImageMode::Raw, Channels::Rgb),
        3 => (ImageMode::Raw, Channels::Grey),
        2 => (ImageMode::Jpg, Channels::Grey),
        _ => (ImageMode::Jpg, Channels::Rgb),
    };
    let img = ImageRef { mode, width, height, channels, data: &data[5..] };
    if (width as u64) * (height as u64) <= 1 << 22 {
        let _ = img.decode();
    }
    planes_agree(&data[5..]);
    let decoders: [(Box<dyn FieldDecoder>, usize); 3] = [
        (Box::new(ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((16, 12)))), 16 * 12 * 3),
        (Box::new(ImagePipeline::new(CenterCropRGBImageDecoder::new((5, 33)))), 5 * 33 * 3),
        (
            Box::new(
                ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((8, 8)))
                    .normalize(NormalizeImage::new([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])),
            ),
            8 * 8 * 3 * 4,
        ),
    ];
    for (k, (decoder, bytes)) in decoders.iter().enumerate() {
        let mut out = vec![0u8; *bytes];
        let ctx = SampleContext { index: k as u64, seed: data.len() as u64, epoch: 0, position: 0 };
        let _ = decoder.decode(Value::Image(img), &ctx, &mut [&mut out[..]]);
    }
}

/// beton's planes decoder gives libjpeg-turbo's planes byte for byte, or declines, at each DCT
/// scale it takes (1, 1/2, 1/4): a JPEG it takes that libjpeg-turbo refuses, or planes that
/// differ, panic (what the fuzzer reports).
fn planes_agree(jpeg: &[u8]) {
    use beton_storage::jpeg::{entropy, Decompressor, PlaneLayout, Rect};
    let Ok(mut d) = Decompressor::new() else { return };
    let Ok(h) = d.header(jpeg) else { return };
    if u64::from(h.width) * u64::from(h.height) > 1 << 22 {
        return;
    }
    d.set_own_planes(false);
    for denom in [1, 2, 4] {
        let scaled = (h.width.div_ceil(denom), h.height.div_ceil(denom));
        let Some(layout) = PlaneLayout::of(&h, scaled) else { return };
        let mut ours = vec![0u8; layout.bytes];
        if entropy::decode_planes(jpeg, denom, &mut ours, layout.geometry()).is_none() {
            return;
        }
        if d.set_geometry(denom, Rect::default()).is_err() {
            return;
        }
        let mut theirs = vec![0u8; layout.bytes];
        if let Err(e) = d.decompress_planes(jpeg, &mut theirs, layout.geometry()) {
            panic!("beton's planes decoder took a JPEG libjpeg-turbo refuses at 1/{denom}: {e}");
        }
        assert!(ours == theirs, "beton's planes differ from libjpeg-turbo's at 1/{denom}");
    }
}
