"""The base of field types: what the native writer needs to know and how values convert."""

from typing import Any, Dict, Optional

import numpy as np


# The native class of each beton field type.
_NATIVE = {"int": "IntField", "float": "FloatField", "bool": "BoolField", "text": "TextField", "bytes": "BytesField",
           "json": "JSONField", "ndarray": "NDArrayField", "torch_tensor": "TorchTensorField", "array": "ArrayField",
           "rgb_image": "RGBImageField", "grey_image": "GreyImageField"}


class Field:
    """A field type. ``native()`` is it for the native writer (a ``beton._native.Field``, its
    arguments checked there); ``encode`` turns a Python value into what the writer takes (ints,
    floats, bytes, str, or image sources)."""

    type_name = ""

    def options(self) -> Optional[Dict[str, Any]]:
        return None

    def native(self):
        """This field type as a ``beton._native.Field``.

        Raises
        ------
        TypeError
            For a field class beton cannot write (an FFCV-style custom field, whose
            ``encode(destination, field, malloc)`` writes FFCV's memory directly).
        """
        from beton import _native

        if self.type_name not in _NATIVE:
            raise TypeError(f"{type(self).__name__}: beton writes its own field types (beton.fields), "
                            "not FFCV-style custom fields")
        return getattr(_native, _NATIVE[self.type_name])(**(self.options() or {}))

    def encode(self, value: Any) -> Any:
        return value


def exact_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as a C-contiguous little-endian array of ``dtype``, refusing a conversion that
    changes values: an integer out of the dtype's range (300 into uint8 would wrap to 44), a
    float with a fraction or NaN into integers, a bool from anything but bools. Floats into a
    narrower float round as floats do (an inf that was finite is refused).

    Raises
    ------
    ValueError
        Naming the first value that does not fit, its position and the dtype.
    """
    dtype = np.dtype(dtype)
    target = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
    src = value if isinstance(value, np.ndarray) else np.asarray(value)
    if src.dtype == target or src.dtype == dtype:
        return np.ascontiguousarray(src, dtype=target)
    if src.dtype.kind not in "biuf":
        if src.dtype == object and src.size:
            src = np.asarray(src.tolist())  # a list of Python numbers
        if src.dtype.kind not in "biuf":
            raise ValueError(f"values of dtype {src.dtype} do not convert to {dtype} without loss")
    with np.errstate(all="ignore"):
        out = np.ascontiguousarray(src, dtype=target)
        if target.kind == "b":
            bad = ~((src == 0) | (src == 1)) if src.dtype.kind != "b" else np.zeros(src.shape, bool)
        elif target.kind in "iu":
            back = out.astype(src.dtype) if src.dtype.kind != "b" else out.astype(bool)
            bad = back != src
            if src.dtype.kind == "f":
                bad |= ~np.isfinite(src)
        else:  # float target: a finite value stays finite (1e300 into float32 would be inf)
            bad = np.isfinite(src) & ~np.isfinite(out)
    if np.any(bad):
        pos = tuple(int(k) for k in np.argwhere(bad)[0])
        where = f" at {pos}" if pos else ""
        raise ValueError(f"value {src[pos]!r}{where} does not fit {dtype} "
                         f"(it would be stored as {out[pos]!r}); convert it explicitly first")
    return out


# FFCV's type of a field descriptor's 1024-byte argument blob.
ARG_TYPE = np.dtype([("", "<u1", 1024)])


def native_fields(fields: Dict[str, "Field"]) -> Dict[str, Any]:
    """``{name: field.native()}`` in the same order: what the native writers take."""
    return {name: field.native() for name, field in fields.items()}
