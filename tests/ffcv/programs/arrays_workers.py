"""NDArray and int fields written by several workers from a dataset that seeds numpy's global
RNG per sample (FFCV's own test idiom), read back in order."""
import os

import numpy as np

from ffcv.fields import IntField, NDArrayField
from ffcv.fields.basics import IntDecoder
from ffcv.fields.ndarray import NDArrayDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter


class Seeded:
    def __len__(self):
        return 96

    def __getitem__(self, i):
        np.random.seed(i)
        return i, np.random.randn(4, 3).astype("<f4")


def run(tmp):
    path = os.path.join(tmp, "arrays.beton")
    DatasetWriter(path, {"label": IntField(), "value": NDArrayField(np.dtype("<f4"), (4, 3))},
                  num_workers=3).from_indexed_dataset(Seeded())
    loader = Loader(path, batch_size=16, num_workers=2, order=OrderOption.SEQUENTIAL,
                    pipelines={"label": [IntDecoder()], "value": [NDArrayDecoder()]})
    out = {}
    for b, (label, value) in enumerate(loader):
        out[f"label/{b}"], out[f"value/{b}"] = np.array(label), np.array(value)
    return out
