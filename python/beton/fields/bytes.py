"""FFCV's BytesField, and beton's TextField (UTF-8 text, queryable in SQL)."""

import numpy as np

from beton import _native
from beton.fields.base import Field
from beton.fields.decoders import BytesDecoder  # noqa: F401 (FFCV's path)
from beton.fields.registry import register
from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)


@register("bytes", _native.BytesField, BytesDecoder, type_id=3)
class BytesField(Field):
    """Variable-length bytes per sample (numpy uint8 arrays or bytes)."""

    metadata_type = np.dtype([("ptr", "<u8"), ("size", "<u8")])

    def _value(self, value):
        if isinstance(value, np.ndarray):
            if value.dtype != np.uint8:  # astype would wrap or truncate other values
                raise TypeError(f"a BytesField takes bytes or a uint8 array, not an array of {value.dtype}")
            return value.tobytes()
        if isinstance(value, (str, int)) or value is None:  # bytes(3) is three zero bytes
            raise TypeError(f"a BytesField takes bytes or a uint8 array, not {type(value).__name__} {value!r:.60}")
        return bytes(value)


@register("text", _native.TextField, BytesDecoder, extension=1, arrow=True)
class TextField(Field):
    """UTF-8 text per sample (beton extension)."""

    metadata_type = np.dtype([("ptr", "<u8"), ("size", "<u8")])

    def _value(self, value):
        if not isinstance(value, str):  # str(None) is 'None', str(b"x") is "b'x'"
            raise TypeError(f"a TextField takes str, not {type(value).__name__} {value!r:.60}")
        return value

