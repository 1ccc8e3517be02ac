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


# FFCV's type of a field descriptor's 1024-byte argument blob.
ARG_TYPE = np.dtype([("", "<u1", 1024)])


def native_fields(fields: Dict[str, "Field"]) -> Dict[str, Any]:
    """``{name: field.native()}`` in the same order: what the native writers take."""
    return {name: field.native() for name, field in fields.items()}
