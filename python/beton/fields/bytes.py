"""FFCV's BytesField, and beton's TextField (UTF-8 text, queryable in SQL)."""

import numpy as np

from beton.fields.base import Field


class BytesField(Field):
    """Variable-length bytes per sample (numpy uint8 arrays or bytes)."""

    type_name = "bytes"

    def encode(self, value):
        if isinstance(value, np.ndarray):
            return value.astype(np.uint8, copy=False).tobytes()
        return bytes(value)


class TextField(Field):
    """UTF-8 text per sample (beton extension)."""

    type_name = "text"

    def encode(self, value):
        return str(value)


from beton.fields.decoders import BytesDecoder  # noqa: E402,F401 (FFCV's path)
