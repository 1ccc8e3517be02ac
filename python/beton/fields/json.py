"""FFCV's JSONField: any JSON-serialisable value per sample."""

import json

import numpy as np

from beton.fields.base import Field  # noqa: F401 (FFCV's module binds it)
from beton.fields.bytes import BytesField

# FFCV's module constants: JSON text is UTF-8, and a NUL (which JSON text never holds) ends it.
ENCODING = "utf8"
SEPARATOR = "\0"


class JSONField(BytesField):
    """FFCV's ``JSONField`` (a ``BytesField``, as in FFCV): a JSON document per sample."""

    type_name = "json"

    metadata_type = np.dtype([("ptr", "<u8"), ("size", "<u8")])

    def get_decoder_class(self):
        from beton.fields.decoders import BytesDecoder

        return BytesDecoder

    @classmethod
    def _of_details(cls, details):
        return BytesField()  # FFCV's JSONField inherits BytesField.from_binary: a BytesField

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
