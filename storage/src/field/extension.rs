//! beton's extension fields, stored through FFCV's own extension point: type id 255 with a tagged
//! argument blob.
//!
//! FFCV 1.0.2 gives type id 255 to any `Field` class it does not know and, on reading, asks the
//! caller for a handler by field name (`custom_handlers`). beton's extension fields therefore load
//! in FFCV with a stub class of the right row dtype (docs/FORMAT.md gives it), and every
//! FFCV-typed column of the file stays readable as is.
//!
//! The blob (little-endian):
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 8 | magic `BETONEXT` |
//! | 8 | 2 | blob version, 1 |
//! | 10 | 2 | kind: 1 text, 2 bool, 3 variable-length array, 4 grey image |
//! | 12 | 4 | row slot size in bytes |
//! | 16 | 4 | row slot alignment |
//! | 20 | 4 | parameter length `L` |
//! | 24 | `L` | parameters: the element type string (`<f4`) for arrays, empty otherwise |
//!
//! Storing the row slot in the blob lets any reader skip an extension kind it does not know.

use crate::format::{Slot, ARGS_SIZE};

/// The magic at the start of an extension blob.
pub const MAGIC: &[u8; 8] = b"BETONEXT";
/// The blob layout version written by this crate.
pub const BLOB_VERSION: u16 = 1;
const PARAMS_OFFSET: usize = 24;

/// Kinds of extension field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ExtensionKind {
    /// UTF-8 text: row `{ptr <u8, size <u8}`, payload the UTF-8 bytes (no NUL).
    Text = 1,
    /// A boolean: row `<u1`, 0 or 1.
    Bool = 2,
    /// A variable-length 1-D array: row `{ptr <u8, len <u8}` (len in elements), payload the
    /// elements back to back.
    Array = 3,
    /// A single-channel image: row `{mode <u1, width <u2, height <u2, data_ptr <u8}` (packed, as
    /// RGBImage), payload a greyscale JPEG or `width × height` raw bytes.
    GreyImage = 4,
}

/// A parsed extension blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// The kind number (known or not).
    pub kind: u16,
    /// The row slot.
    pub slot: Slot,
    /// Kind-specific parameters.
    pub params: Vec<u8>,
}

impl Extension {
    /// Parses a blob; `Ok(None)` when it does not start with [`MAGIC`] (a foreign custom field).
    ///
    /// # Errors
    /// A beton blob with an unknown version, an alignment that is not 1, 2, 4 or 8, or parameters
    /// running past the blob. Never panics.
    pub fn parse(args: &[u8; ARGS_SIZE]) -> Result<Option<Extension>, String> {
        if &args[..8] != MAGIC {
            return Ok(None);
        }
        let u16_at = |o: usize| u16::from_le_bytes([args[o], args[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([args[o], args[o + 1], args[o + 2], args[o + 3]]);
        let version = u16_at(8);
        if version != BLOB_VERSION {
            return Err(format!("beton extension blob version {version} (this reader knows {BLOB_VERSION})"));
        }
        let size = u32_at(12) as usize;
        let align = u32_at(16) as usize;
        if ![1, 2, 4, 8].contains(&align) {
            return Err(format!("beton extension row alignment {align} is not 1, 2, 4 or 8"));
        }
        let len = u32_at(20) as usize;
        if len > ARGS_SIZE - PARAMS_OFFSET {
            return Err(format!("beton extension parameters of {len} bytes run past the blob"));
        }
        Ok(Some(Extension {
            kind: u16_at(10),
            slot: Slot { size, align },
            params: args[PARAMS_OFFSET..PARAMS_OFFSET + len].to_vec(),
        }))
    }

    /// Builds the blob for `kind` with `slot` and `params` (at most 1000 bytes).
    pub fn to_arguments(kind: ExtensionKind, slot: Slot, params: &[u8]) -> Box<[u8; ARGS_SIZE]> {
        let mut args = Box::new([0u8; ARGS_SIZE]);
        args[..8].copy_from_slice(MAGIC);
        args[8..10].copy_from_slice(&BLOB_VERSION.to_le_bytes());
        args[10..12].copy_from_slice(&(kind as u16).to_le_bytes());
        args[12..16].copy_from_slice(&(slot.size as u32).to_le_bytes());
        args[16..20].copy_from_slice(&(slot.align as u32).to_le_bytes());
        let len = params.len().min(ARGS_SIZE - PARAMS_OFFSET);
        args[20..24].copy_from_slice(&(len as u32).to_le_bytes());
        args[PARAMS_OFFSET..PARAMS_OFFSET + len].copy_from_slice(&params[..len]);
        args
    }
}
