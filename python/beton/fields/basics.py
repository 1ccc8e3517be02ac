"""FFCV's IntField and FloatField, and beton's BoolField. Each stores what it is given or
refuses it: no value is changed on the way in (``int(1.5)`` would store 1, ``bool("False")``
True)."""

import numbers

import numpy as np

from beton import _native
from beton.fields.base import Field
from beton.fields.decoders import BasicDecoder, BoolDecoder, FloatDecoder, IntDecoder  # noqa: F401 (FFCV's path)
from beton.fields.registry import register
# Names FFCV's ffcv.fields.basics binds (user code imports them from here).
from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401
from beton.pipeline.operation import Operation  # noqa: F401
from beton.pipeline.state import State  # noqa: F401


def _type_name(value) -> str:
    return type(value).__name__


@register("int", _native.IntField, IntDecoder, type_id=1, arrow=True)
class IntField(Field):
    """A 64-bit signed integer per sample."""

    metadata_type = np.dtype("<i8")

    def _value(self, value):
        if isinstance(value, numbers.Integral):  # int, bool, numpy integers
            return int(value)
        if hasattr(value, "__index__"):  # 0-d integer tensors and arrays
            return value.__index__()
        if isinstance(value, numbers.Real) or hasattr(value, "item"):
            v = value.item() if hasattr(value, "item") else value
            if isinstance(v, numbers.Integral):
                return int(v)
            if isinstance(v, float) and v.is_integer():
                return int(v)  # 2.0: the same number
            raise ValueError(f"{v!r} is not an integer (IntField stores int64; round or convert it first)")
        raise TypeError(f"an IntField takes an integer, not {_type_name(value)} {value!r:.60}")


@register("float", _native.FloatField, FloatDecoder, type_id=0, arrow=True)
class FloatField(Field):
    """A 64-bit float per sample."""

    metadata_type = np.dtype("<f8")

    def _value(self, value):
        if isinstance(value, (str, bytes)) or value is None:
            raise TypeError(f"a FloatField takes a number, not {_type_name(value)} {value!r:.60}")
        return float(value)


@register("bool", _native.BoolField, BoolDecoder, extension=2, arrow=True)
class BoolField(Field):
    """A bool per sample (beton extension; FFCV sees an opaque custom field)."""

    metadata_type = np.dtype("<u1")

    def _value(self, value):
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return bool(value)
        if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
            v = value.item()
            if isinstance(v, bool):
                return v
            value = v
        if isinstance(value, numbers.Integral) and int(value) in (0, 1):
            return bool(value)
        raise TypeError(f"a BoolField takes True, False, 0 or 1, not {_type_name(value)} {value!r:.60}")

