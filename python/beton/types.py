"""FFCV's ``ffcv.types``: the ``.beton`` file format as numpy dtypes (header, field descriptor,
allocation entry) and the map from a field's type id to its class. docs/FORMAT.md is the full
grammar."""

import struct
from typing import Dict, List, Optional

import numpy as np

from beton import _native
# The field classes, bound here as FFCV's module binds its own.
from beton.fields import (BoolField, BytesField, FloatField, GreyImageField, IntField, JSONField,  # noqa: F401
                          NDArrayField, RGBImageField, TextField)
from beton.fields.base import Field  # noqa: F401 (FFCV's module binds it)
from beton.fields.ndarray import ArrayField, TorchTensorField  # noqa: F401 (TorchTensorField: FFCV's module binds it)
from beton.fields.registry import CUSTOM_TYPE_ID, KINDS, of_extension

CURRENT_VERSION = 2

HeaderType = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"), ("num_samples", "<u8"),
                       ("alloc_table_ptr", "<u8")], align=True)

ALLOC_TABLE_TYPE = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])

FieldDescType = np.dtype([("type_id", "<u1"), ("name", ("<u1", 16)), ("arguments", ("<u1", (1024,)))], align=True)

# Type id -> field class (255: a custom field, whose class the reader must be given; FFCV's
# TorchTensorField (6) reads as an NDArrayField, as in FFCV), from beton.fields.registry.
TYPE_ID_HANDLER: Dict[int, Optional[type]] = {CUSTOM_TYPE_ID: None}
TYPE_ID_HANDLER.update(sorted((kind.type_id, kind.read_as or kind.field) for kind in KINDS.values() if kind.ffcv))


def _extension_from_binary(arguments):
    """The field of a type-255 descriptor: one of beton's extension types (a ``BETONEXT``
    blob, parsed natively), a ``BytesField`` of its row bytes for an extension this beton does
    not know, or None for a custom field."""
    raw = bytes(arguments)
    if raw[:8] != b"BETONEXT":
        return None
    number, size, align, plen = struct.unpack_from("<HIII", raw, 10)
    kind = of_extension(number)
    if kind is not None:
        return kind.field_of(_native.field_of_descriptor(CUSTOM_TYPE_ID, raw)[1])
    field = BytesField()  # an unknown beton extension: its row bytes
    field.metadata_type = np.dtype((np.void, size))
    return field


def metadata_type_of(handler) -> np.dtype:
    """A field's row dtype (``handler.metadata_type`` for FFCV-style custom fields)."""
    explicit = getattr(handler, "metadata_type", None)
    if explicit is None:
        kind = KINDS.get(getattr(handler, "type_name", ""))
        explicit = None if kind is None else getattr(kind.field, "metadata_type", None)
    if explicit is None:
        raise TypeError(f"field {type(handler).__name__}: no metadata_type")
    return np.dtype(explicit)


def get_handlers(field_descriptors):
    """A field object per descriptor (``None`` for an unknown custom field)."""
    handlers = []
    for desc in field_descriptors:
        type_id = int(desc["type_id"])
        if type_id not in TYPE_ID_HANDLER:
            raise ValueError(f"field type id {type_id} is not one of FFCV's (0-6, 255)")
        cls = TYPE_ID_HANDLER[type_id]
        handlers.append(_extension_from_binary(desc["arguments"]) if cls is None
                        else cls._of_arguments(desc["arguments"]))
    return handlers


def get_metadata_type(handlers: List) -> np.dtype:
    """The data table's row dtype for these fields."""
    return np.dtype([("", metadata_type_of(h)) for h in handlers], align=True)
