"""FFCV's field protocol on its built-in field objects, as FFCV code calls it:
``metadata_type``, ``to_binary``/``from_binary``, ``get_decoder_class`` and
``encode(destination, value, malloc)`` with a malloc that hands out known pointers."""
import json

import numpy as np

from ffcv.fields import BytesField, FloatField, IntField, JSONField, NDArrayField, RGBImageField


def run(tmp):
    image = (np.arange(4 * 5 * 3) % 251).astype(np.uint8).reshape(4, 5, 3)
    cases = {
        "int": (IntField(), -7),
        "float": (FloatField(), 2.5),
        "bytes": (BytesField(), np.frombuffer(b"payload", dtype=np.uint8)),
        "json": (JSONField(), {"a": [1, 2], "b": "c"}),
        "ndarray": (NDArrayField(np.dtype("<f4"), (2, 3)), np.arange(6, dtype="<f4").reshape(2, 3)),
        "image": (RGBImageField(write_mode="raw"), image),
    }
    out = {}
    for name, (field, value) in cases.items():
        dtype = field.metadata_type
        out[f"{name}/metadata_type"] = np.array(json.dumps(np.dtype(dtype).descr))
        # A descriptor's arguments as FFCV's Reader passes them to from_binary: 1024 uint8s.
        blob = np.frombuffer(np.asarray(field.to_binary()).tobytes(), dtype=np.uint8)
        out[f"{name}/to_binary"] = blob
        again = type(field).from_binary(blob)
        out[f"{name}/from_binary"] = np.array(json.dumps([type(again).__name__, np.dtype(again.metadata_type).descr]))
        if isinstance(again, NDArrayField):
            out[f"{name}/from_binary_array"] = np.array(json.dumps([again.dtype.str, [int(s) for s in again.shape]]))
        out[f"{name}/decoder"] = np.array(field.get_decoder_class().__name__)
        destination = np.zeros(1, dtype=dtype)
        payloads = []

        def malloc(size):
            buffer = np.zeros(size, dtype=np.uint8)
            payloads.append(buffer)
            return 4096 * len(payloads), buffer

        field.encode(destination, value, malloc)
        out[f"{name}/row"] = np.frombuffer(destination.tobytes(), dtype=np.uint8)
        out[f"{name}/payloads"] = np.array(len(payloads))
        for k, buffer in enumerate(payloads):
            out[f"{name}/payload/{k}"] = buffer.copy()
    return out
