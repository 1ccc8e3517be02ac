//! What the field types without parameters (Int, Float, Bool, Bytes, JSON, Text) share: each is a
//! unit struct whose [`FieldKind`] is constant facts (names, descriptor id, slot, input, value kind
//! and zero, column, loader layout) plus its own encoder and decoder. [`fixed_kind!`] writes the
//! struct, its `parse` and its [`FieldKind`] from the facts; the type's file writes only its
//! `encode` and `decode` functions.
//!
//! [`FieldKind`]: super::FieldKind

use super::extension::{Extension, ExtensionKind};
use super::kind::{Described, TYPE_CUSTOM};
use crate::format::{Slot, ARGS_SIZE};

/// How a descriptor names a type: FFCV's type id, or beton's extension kind (type 255).
#[derive(Debug, Clone, Copy)]
pub(super) enum Id {
    /// One of FFCV's type ids (0–6); the argument blob is zeros.
    Ffcv(u8),
    /// A beton extension: type 255 with the tagged blob of [`Extension`].
    Extension(ExtensionKind),
}

impl Id {
    /// True for a descriptor with this id, or the short name `short_name`.
    pub(super) fn recognises(self, d: &Described<'_>, short_name: &str) -> bool {
        match self {
            Id::Ffcv(id) => d.is(id, short_name),
            Id::Extension(kind) => d.is_extension(kind, short_name),
        }
    }

    /// The type id stored in the descriptor.
    pub(super) fn type_id(self) -> u8 {
        match self {
            Id::Ffcv(id) => id,
            Id::Extension(_) => TYPE_CUSTOM,
        }
    }

    /// The descriptor's argument blob for a field of this id and `slot`.
    pub(super) fn to_arguments(self, slot: Slot) -> Box<[u8; ARGS_SIZE]> {
        match self {
            Id::Ffcv(_) => Box::new([0u8; ARGS_SIZE]),
            Id::Extension(kind) => Extension::to_arguments(kind, slot, &[]),
        }
    }
}

/// Declares a field type without parameters from its facts: the unit struct, its `parse` (by
/// descriptor id or short name) and its [`FieldKind`](super::FieldKind), whose `encode` and
/// `decode` call the functions of those names in the invoking module:
/// `fn encode(kind: &Kind, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>>`
/// (the slot zeroed; errors as `FieldKind::encode`, the image options are never needed) and
/// `fn decode<'a>(slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>>`.
macro_rules! fixed_kind {
    (
        $(#[$meta:meta])*
        struct $kind:ident = $name:literal, $short:literal, $id:expr;
        slot $slot:expr, payload_ptr $payload:expr, input $input:expr;
        value $value:expr, zero $zero:expr, $zero_name:literal;
        column $column:expr, load $load:expr;
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub(super) struct $kind;

        pub(super) fn parse(
            d: &$crate::field::kind::Described<'_>,
        ) -> Option<std::result::Result<(), String>> {
            $id.recognises(d, $short).then_some(Ok(()))
        }

        impl $crate::field::kind::FieldKind for $kind {
            fn name(&self) -> &'static str {
                $name
            }

            fn short_name(&self) -> &'static str {
                $short
            }

            fn type_id(&self) -> u8 {
                $id.type_id()
            }

            fn slot(&self) -> $crate::format::Slot {
                $slot
            }

            fn payload_ptr_offset(&self) -> Option<usize> {
                $payload
            }

            fn to_arguments(&self) -> Box<[u8; $crate::format::ARGS_SIZE]> {
                $id.to_arguments($slot)
            }

            fn input(&self) -> $crate::field::kind::Input {
                $input
            }

            fn value_kind(&self) -> $crate::value::ValueKind {
                $value
            }

            fn zero(&self) -> ($crate::value::SampleValue, &'static str) {
                ($zero, $zero_name)
            }

            fn encode(
                &self,
                value: $crate::value::SampleValue,
                slot: &mut [u8],
                _: &$crate::field::kind::EncodeContext<'_>,
            ) -> $crate::error::Result<Option<Vec<u8>>> {
                encode(self, value, slot)
            }

            fn decode<'a>(
                &self,
                slot: &'a [u8],
                cx: &$crate::field::kind::DecodeContext<'a, '_>,
            ) -> $crate::error::Result<$crate::value::Value<'a>> {
                decode(slot, cx)
            }

            fn columns(&self) -> Vec<$crate::field::kind::ColumnDef> {
                vec![$crate::field::kind::ColumnDef::plain($column)]
            }

            fn load_as(&self) -> $crate::field::kind::LoadAs {
                $load
            }
        }
    };
}
