import os

import numpy as np
import pytest

from beton.fields import BytesField, FloatField, IntField, JSONField, NDArrayField, RGBImageField, TextField
from beton.writer import DatasetWriter


class Samples:
    """Sample i: label i, score i / 2, blob of i % 7 bytes of i % 256, meta {"i": i},
    arr float32 2x3 = arange + i, a raw 4x5 image of value i % 256, name "t{i}"."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return (i, i / 2, np.full(i % 7, i % 256, np.uint8), {"i": i},
                np.arange(6, dtype=np.float32).reshape(2, 3) + i, np.full((4, 5, 3), i % 256, np.uint8), f"t{i}")


FIELDS = {"label": IntField(), "score": FloatField(), "blob": BytesField(), "meta": JSONField(),
          "arr": NDArrayField(np.float32, (2, 3)), "image": RGBImageField(), "name": TextField()}


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "small.beton"
    DatasetWriter(path, FIELDS, num_workers=2, progress=False).from_indexed_dataset(Samples(600))
    return path


@pytest.fixture(scope="session")
def torch():
    """The torch module; the test is skipped where torch is not installed, except with
    BETON_REQUIRE_TORCH=1 (scripts/test.sh, so CI), where a missing or broken torch fails it."""
    if os.environ.get("BETON_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")
