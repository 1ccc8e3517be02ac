"""Batches go to any framework without a copy: the loader's CPU arrays (numpy views of its slots)
and its native columns export DLPack, and ``torch.from_dlpack`` / ``numpy.from_dlpack`` see the
same memory. A tensor taken that way keeps its batch's slot alive."""

import numpy as np

import beton
from beton.loader import Loader

ONLY_LABEL_AND_ARR = {"label": [], "arr": [], "score": None, "blob": None, "meta": None, "name": None,
                      "image": None}


def test_numpy_from_dlpack_shares_the_batch_memory(small):
    loader = Loader(small, batch_size=8, pipelines=ONLY_LABEL_AND_ARR)
    labels, arrs = next(iter(loader))
    assert labels.__dlpack_device__() == (1, 0)
    again = np.from_dlpack(arrs)
    assert again.ctypes.data == arrs.ctypes.data and again.shape == arrs.shape


def test_native_columns_export_dlpack(small):
    native = beton._native.Loader(beton.open(small)._native, 4, fields=["label"])
    batch = next(native.epoch())
    column = batch.column("label")
    assert column.__dlpack_device__() == (1, 0)
    viewed = np.from_dlpack(column)
    assert viewed.tolist() == [0, 1, 2, 3]
    assert viewed.ctypes.data == column.__array_interface__["data"][0]


def test_torch_from_dlpack_is_zero_copy_and_keeps_the_slot(small, torch):
    loader = Loader(small, batch_size=8, batches_ahead=1, num_workers=2, pipelines=ONLY_LABEL_AND_ARR)
    held = []
    for labels, arrs in loader:
        t = torch.from_dlpack(arrs)
        assert t.data_ptr() == arrs.ctypes.data, "torch sees the slot itself, no copy"
        held.append((torch.from_dlpack(labels), t))
        del labels, arrs
    # Every slot is still held by its tensors: none was reused for a later batch.
    for labels, arrs in held:
        base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        assert torch.equal(arrs, base[None] + labels[:, :, None].float())  # labels: FFCV's (B, 1)


def test_the_index_pseudo_field_gives_each_batchs_rows(small):
    from beton.loader import OrderOption

    pipelines = dict(ONLY_LABEL_AND_ARR, arr=None, index=[])
    loader = Loader(small, batch_size=16, order=OrderOption.RANDOM, seed=4, pipelines=pipelines)
    assert loader.fields == ["label", "index"]
    for labels, index in loader:
        assert index.dtype == np.uint64 and (index == np.asarray(labels).ravel()).all()
    assert "index" not in Loader(small, batch_size=16, pipelines=ONLY_LABEL_AND_ARR).fields
