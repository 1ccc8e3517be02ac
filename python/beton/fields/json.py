"""FFCV's JSONField: any JSON-serialisable value per sample."""

import json

import numpy as np

from beton import _native
from beton.fields.base import Field  # noqa: F401 (FFCV's module binds it)
from beton.fields.bytes import BytesField
from beton.fields.decoders import BytesDecoder
from beton.fields.registry import json_value, register

# FFCV's module constants: JSON text is UTF-8, and a NUL (which JSON text never holds) ends it.
ENCODING = "utf8"
SEPARATOR = "\0"


@register("json", _native.JSONField, BytesDecoder, type_id=5, value=json_value)
class JSONField(BytesField):
    """FFCV's ``JSONField`` (a ``BytesField``, as in FFCV): a JSON document per sample."""

    metadata_type = np.dtype([("ptr", "<u8"), ("size", "<u8")])

    @classmethod
    def from_binary(cls, binary):
        """FFCV's ``from_binary``: the blob checked to describe a JSON field, then a
        ``BytesField`` (FFCV's ``JSONField`` inherits ``BytesField.from_binary``)."""
        super().from_binary(binary)
        return BytesField()

    def _value(self, value):
        return json.dumps(value)

    @staticmethod
    def unpack(batch):
        """FFCV's ``JSONField.unpack``: a loader batch of the field (rows of UTF-8 bytes, padded
        with zeros; a numpy array or a CPU tensor) back to the Python values, one per row."""
        out = []
        for row in np.asarray(batch, dtype=np.uint8):
            end = np.flatnonzero(row == 0)  # JSON text has no NUL: the first one ends the value
            out.append(json.loads(row[:end[0] if len(end) else len(row)].tobytes().decode("utf-8")))
        return out
