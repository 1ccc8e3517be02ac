//! The image code's per-thread scratch: every `thread_local!` buffer of a sample's decode and
//! this thread's TurboJPEG decompressor, reused from one sample to the next on a worker thread,
//! never shared. Each is borrowed for one step and given back; the steps that nest (the
//! pipeline's image around a decoder's planes around a JPEG slice) use different buffers.
//!
//! (The resampler's weights stay with the resampler, `crate::image::resample`: they are its
//! state between calls rather than scratch, and its private types would make this module depend
//! on it.)

use std::cell::RefCell;

use beton_storage::jpeg::Decompressor;

use crate::error::{Error, Result};

thread_local! {
    /// This thread's strict decompressor, made on first use.
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };

    /// The slice JPEG and the marker positions of a restart-marker slice
    /// (`crate::image::codec`).
    pub(crate) static SLICE: RefCell<(Vec<u8>, Vec<usize>)> = const { RefCell::new((Vec::new(), Vec::new())) };

    /// The decoded crop region (or grey plane) of the sample being decoded
    /// (`crate::image::decoders`).
    pub(crate) static REGION: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };

    /// The raw planes of the JPEG being decoded, and those planes resized to the output size,
    /// one after another (`crate::image::decoders`).
    pub(crate) static PLANES: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };

    /// The `u8` image of a normalising pipeline before normalisation (`crate::image::pipeline`).
    pub(crate) static IMAGE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's decompressor, creating it on first use.
///
/// # Errors
/// When libjpeg-turbo cannot make a decompressor, or what `f` returns.
pub(crate) fn with_decompressor<T>(f: impl FnOnce(&mut Decompressor) -> Result<T>) -> Result<T> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Decompressor::new().map_err(crate::error::from_codec)?);
        }
        match slot.as_mut() {
            Some(d) => f(d),
            None => Err(Error::Decode("libjpeg-turbo: no decompressor".into())),
        }
    })
}
