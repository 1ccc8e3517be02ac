"""FFCV's ``ffcv.types``: the ``.beton`` file format as numpy dtypes (header, field descriptor,
allocation entry) and the map from a field's type id to its class. docs/FORMAT.md is the full
grammar."""

import struct
from typing import List

import numpy as np

from beton.fields import (BoolField, BytesField, FloatField, GreyImageField, IntField, JSONField, NDArrayField,
                          RGBImageField, TextField)
from beton.fields.base import Field  # noqa: F401 (FFCV's module binds it)
from beton.fields.ndarray import ArrayField, TorchTensorField  # noqa: F401 (TorchTensorField: FFCV's module binds it)

CURRENT_VERSION = 2

HeaderType = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"), ("num_samples", "<u8"),
                       ("alloc_table_ptr", "<u8")], align=True)

ALLOC_TABLE_TYPE = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])

FieldDescType = np.dtype([("type_id", "<u1"), ("name", ("<u1", 16)), ("arguments", ("<u1", (1024,)))], align=True)

# Type id -> field class (255: a custom field, whose class the reader must be given; FFCV's
# TorchTensorField (6) reads as an NDArrayField, as in FFCV).
TYPE_ID_HANDLER = {255: None, 0: FloatField, 1: IntField, 2: RGBImageField, 3: BytesField, 4: NDArrayField,
                   5: JSONField, 6: NDArrayField}

_IMAGE = np.dtype([("mode", "<u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")])
_PTR_SIZE = np.dtype([("ptr", "<u8"), ("size", "<u8")])
_METADATA = {FloatField: np.dtype("<f8"), IntField: np.dtype("<i8"), RGBImageField: _IMAGE, GreyImageField: _IMAGE,
             BytesField: _PTR_SIZE, JSONField: _PTR_SIZE, TextField: _PTR_SIZE, NDArrayField: np.dtype("<u8"),
             BoolField: np.dtype("<u1"), ArrayField: np.dtype([("ptr", "<u8"), ("len", "<u8")])}
# beton's extension kinds (type 255 with a BETONEXT blob, docs/FORMAT.md section 8).
_EXTENSIONS = {1: TextField, 2: BoolField, 3: ArrayField, 4: GreyImageField}


def _ndarray_from_binary(arguments):
    import json

    raw = bytes(arguments)
    shape = [s for s in struct.unpack_from("<32Q", raw, 0)]
    shape = tuple(shape[:max([k + 1 for k, s in enumerate(shape) if s] or [0])])
    (length,) = struct.unpack_from("<Q", raw, 256)
    descr = json.loads(raw[264:264 + length].decode("ascii"))
    dtype = np.dtype(descr[0][1] if len(descr) == 1 and descr[0][0] == "" else [tuple(d) for d in descr])
    return NDArrayField(dtype, shape)


def _extension_from_binary(arguments):
    raw = bytes(arguments)
    if raw[:8] != b"BETONEXT":
        return None
    kind, size, align, plen = struct.unpack_from("<HIII", raw, 10)
    cls = _EXTENSIONS.get(kind)
    if cls is ArrayField:
        return ArrayField(raw[24:24 + plen].decode("ascii"))
    if cls is not None:
        return cls()
    field = BytesField()  # an unknown beton extension: its row bytes
    field.metadata_type = np.dtype((np.void, size))
    return field


def metadata_type_of(handler) -> np.dtype:
    """A field's row dtype (``handler.metadata_type`` for FFCV-style custom fields)."""
    explicit = getattr(handler, "metadata_type", None)
    if explicit is not None:
        return np.dtype(explicit)
    for cls in type(handler).__mro__:
        if cls in _METADATA:
            return _METADATA[cls]
    raise TypeError(f"field {type(handler).__name__}: no metadata_type")


def get_handlers(field_descriptors):
    """A field object per descriptor (``None`` for an unknown custom field)."""
    handlers = []
    for desc in field_descriptors:
        type_id = int(desc["type_id"])
        if type_id not in TYPE_ID_HANDLER:
            raise ValueError(f"field type id {type_id} is not one of FFCV's (0-6, 255)")
        cls = TYPE_ID_HANDLER[type_id]
        if cls is None:
            handlers.append(_extension_from_binary(desc["arguments"]))
        elif cls is NDArrayField:
            handlers.append(_ndarray_from_binary(desc["arguments"]))
        else:
            handlers.append(cls())
    return handlers


def get_metadata_type(handlers: List) -> np.dtype:
    """The data table's row dtype for these fields."""
    return np.dtype([("", metadata_type_of(h)) for h in handlers], align=True)
