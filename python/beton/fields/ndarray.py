"""FFCV's NDArrayField and TorchTensorField (fixed dtype and shape), and beton's ArrayField
(variable length)."""

import json
import struct

import numpy as np

from beton import _native
from beton.fields.base import Field, exact_array
from beton.fields.decoders import BytesDecoder, NDArrayDecoder  # noqa: F401 (FFCV's path)
from beton.fields.registry import array_value, register
from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)

# FFCV's layout of an NDArrayField's arguments in the field descriptor: the shape (up to 32
# dimensions, numpy's limit), then the length of the dtype's description that follows.
NDArrayArgsType = np.dtype([("shape", "<u8", 32), ("type_length", "<u8")])


@register("ndarray", _native.NDArrayField, NDArrayDecoder, type_id=4, value=array_value)
class NDArrayField(Field):
    metadata_type = np.dtype("<u8")

    @classmethod
    def _of_details(cls, details):
        dtype, shape = details
        return NDArrayField(np.dtype(dtype), tuple(shape))

    @classmethod
    def _of_arguments(cls, arguments):
        """FFCV's parse of the descriptor (``NDArrayArgsType``, then the dtype's description as
        JSON), any numpy dtype (structured ones too), as FFCV's ``Reader`` reads it."""
        raw = bytes(arguments)
        shape = [s for s in struct.unpack_from("<32Q", raw, 0)]
        shape = shape[:max([k + 1 for k, s in enumerate(shape) if s] or [0])]
        (length,) = struct.unpack_from("<Q", raw, 256)
        descr = json.loads(raw[264:264 + length].decode("ascii"))
        dtype = np.dtype(descr[0][1] if len(descr) == 1 and descr[0][0] == "" else [tuple(d) for d in descr])
        return NDArrayField(dtype, tuple(shape))

    def __init__(self, dtype, shape):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)

    def options(self):
        return {"dtype": self.dtype.newbyteorder("<").str if self.dtype.itemsize > 1 else self.dtype.str,
                "shape": list(self.shape)}

    def _value(self, value):
        a = exact_array(value, self.dtype)
        if a.shape != self.shape:
            raise ValueError(f"array of shape {a.shape}, the field's is {self.shape}")
        return a.tobytes()


@register("torch_tensor", _native.TorchTensorField, NDArrayDecoder, type_id=6, value=array_value,
          read_as=NDArrayField)
class TorchTensorField(NDArrayField):
    def __init__(self, dtype, shape):
        import torch

        np_dtype = torch.empty((), dtype=dtype).numpy().dtype if isinstance(dtype, torch.dtype) else dtype
        super().__init__(np_dtype, shape)

    def _value(self, value):
        if hasattr(value, "numpy"):
            value = value.detach().cpu().numpy()
        return super()._value(value)


@register("array", _native.ArrayField, BytesDecoder, extension=3, value=array_value)
class ArrayField(Field):
    """A variable-length 1-D array of a fixed dtype per sample (beton extension)."""

    metadata_type = np.dtype([("ptr", "<u8"), ("len", "<u8")])

    @classmethod
    def _of_details(cls, details):
        return ArrayField(np.dtype(details[0]))

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def options(self):
        return {"dtype": self.dtype.newbyteorder("<").str if self.dtype.itemsize > 1 else self.dtype.str}

    def _value(self, value):
        return exact_array(value, self.dtype).ravel().tobytes()

