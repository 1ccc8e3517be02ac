"""FFCV's NDArrayField and TorchTensorField (fixed dtype and shape), and beton's ArrayField
(variable length)."""

import numpy as np

from beton.fields.base import Field, exact_array
from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)

# FFCV's layout of an NDArrayField's arguments in the field descriptor: the shape (up to 32
# dimensions, numpy's limit), then the length of the dtype's description that follows.
NDArrayArgsType = np.dtype([("shape", "<u8", 32), ("type_length", "<u8")])


class NDArrayField(Field):
    type_name = "ndarray"

    metadata_type = np.dtype("<u8")

    def get_decoder_class(self):
        return NDArrayDecoder

    @classmethod
    def _of_details(cls, details):
        dtype, shape = details
        return NDArrayField(np.dtype(dtype), tuple(shape))

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


class TorchTensorField(NDArrayField):
    type_name = "torch_tensor"

    def __init__(self, dtype, shape):
        import torch

        np_dtype = torch.empty((), dtype=dtype).numpy().dtype if isinstance(dtype, torch.dtype) else dtype
        super().__init__(np_dtype, shape)

    def _value(self, value):
        if hasattr(value, "numpy"):
            value = value.detach().cpu().numpy()
        return super()._value(value)


class ArrayField(Field):
    """A variable-length 1-D array of a fixed dtype per sample (beton extension)."""

    type_name = "array"

    metadata_type = np.dtype([("ptr", "<u8"), ("len", "<u8")])

    def get_decoder_class(self):
        from beton.fields.decoders import BytesDecoder

        return BytesDecoder

    @classmethod
    def _of_details(cls, details):
        return ArrayField(np.dtype(details[0]))

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def options(self):
        return {"dtype": self.dtype.newbyteorder("<").str if self.dtype.itemsize > 1 else self.dtype.str}

    def _value(self, value):
        return exact_array(value, self.dtype).ravel().tobytes()


from beton.fields.decoders import NDArrayDecoder  # noqa: E402,F401 (FFCV's path)
