"""A custom field written in Python (FFCV's documented protocol): a row slot with the value
and the pointer and size of a payload it mallocs in the heap, and its decoder reading the
payload back with memory_read."""
import os
from dataclasses import replace

import numpy as np

from ffcv.fields import Field, IntField
from ffcv.fields.base import ARG_TYPE
from ffcv.fields.basics import IntDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.pipeline.allocation_query import AllocationQuery
from ffcv.pipeline.compiler import Compiler
from ffcv.pipeline.operation import Operation
from ffcv.writer import DatasetWriter

WIDTH = 12


class PaddedDecoder(Operation):
    def declare_state_and_memory(self, previous_state):
        return (replace(previous_state, jit_mode=True, shape=(WIDTH,), dtype=np.dtype("<u1")),
                AllocationQuery((WIDTH,), np.dtype("<u1")))

    def generate_code(self):
        mem_read = self.memory_read
        my_range = Compiler.get_iterator()

        def decode(indices, destination, metadata, storage_state):
            for ix in my_range(indices.shape[0]):
                row = metadata[indices[ix]]
                data = mem_read(row["ptr"], storage_state)
                destination[ix, :] = 0
                destination[ix, :row["size"]] = data[:row["size"]]
            return destination

        return decode


class PaddedBytesField(Field):
    @property
    def metadata_type(self):
        return np.dtype([("tag", "<i4"), ("ptr", "<u8"), ("size", "<u4")])

    @staticmethod
    def from_binary(binary):
        return PaddedBytesField()

    def to_binary(self):
        return np.zeros(1, dtype=ARG_TYPE)[0]

    def encode(self, destination, field, malloc):
        data = np.frombuffer(field, dtype=np.uint8)
        destination["tag"] = 7 * len(field)
        destination["ptr"], buffer = malloc(data.size)
        buffer[:] = data
        destination["size"] = data.size

    def get_decoder_class(self):
        return PaddedDecoder


def run(tmp):
    path = os.path.join(tmp, "custom.beton")
    data = [(i, bytes([(3 * i + k) % 256 for k in range(1 + i % WIDTH)])) for i in range(50)]
    DatasetWriter(path, {"label": IntField(), "blob": PaddedBytesField()}, num_workers=2).from_indexed_dataset(data)
    loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                    custom_fields={"blob": PaddedBytesField},
                    pipelines={"label": [IntDecoder()], "blob": [PaddedDecoder()]})
    out = {}
    for b, (label, blob) in enumerate(loader):
        out[f"label/{b}"], out[f"blob/{b}"] = np.array(label), np.array(blob)
    out["tags"] = np.array(loader.reader.metadata["f1"]["tag"])
    out["sizes"] = np.array(loader.reader.metadata["f1"]["size"])
    return out
