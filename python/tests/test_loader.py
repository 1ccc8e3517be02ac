"""The Loader from Python: FFCV's batch semantics, zero-copy batches that stay valid, pipelines,
queries as indices, resume, distributed shares."""

import gc
import os
import threading

import numpy as np
import pytest

import beton
from beton.loader import Loader, OrderOption


def test_partial_batches_like_ffcv(small):
    assert len(Loader(small, batch_size=7)) == 85
    assert len(Loader(small, batch_size=7, drop_last=False)) == 86
    assert len(Loader(small, batch_size=60)) == 10 == len(Loader(small, batch_size=60, drop_last=False))
    sizes = [len(b[0]) for b in Loader(small, batch_size=7, drop_last=False)]
    assert sizes == [7] * 85 + [5]


def test_values_and_disabled_fields(small):
    loader = Loader(small, batch_size=50, order=OrderOption.RANDOM, seed=1,
                    pipelines={"blob": None, "meta": None, "name": None})
    assert loader.fields == ["label", "score", "arr"]  # the image has no decoder yet: skipped
    seen = []
    for label, score, arr in loader:
        np.testing.assert_array_equal(score, label / 2)
        np.testing.assert_array_equal(arr, np.arange(6, dtype=np.float32).reshape(2, 3)[None] + label[:, None, None])
        seen.extend(label.tolist())
    assert sorted(seen) == list(range(600))


def test_same_seed_same_batches_whatever_the_workers(small):
    def epoch(workers):
        return [b[0].tolist() for b in Loader(small, batch_size=32, num_workers=workers, seed=5,
                                              order=OrderOption.QUASI_RANDOM)]
    assert epoch(1) == epoch(2) == epoch(3)


def test_held_batches_stay_valid(small):
    loader = Loader(small, batch_size=10, order=OrderOption.RANDOM, batches_ahead=1, num_workers=2,
                    pipelines={"meta": None, "name": None})
    kept = list(loader)  # every batch held at once
    for label, score, blob, arr in kept:
        np.testing.assert_array_equal(score, label / 2)
        assert (blob[:, 0][label % 7 > 0] == (label % 256)[label % 7 > 0]).all()


def test_query_as_indices_and_transforms(small):
    torch = pytest.importorskip("torch")
    from beton.transforms import Convert, Squeeze, ToTensor

    ds = beton.open(small)
    loader = Loader(small, batch_size=8, indices=ds.where("label % 10 = 3"),
                    pipelines={"label": [ToTensor(), Convert(torch.float32)], "score": None, "blob": None,
                               "meta": None, "arr": None, "name": None})
    labels = [b[0] for b in loader]
    assert all(t.dtype == torch.float32 for t in labels)
    assert torch.cat(labels).tolist() == [float(i) for i in range(3, 600, 10)][:56]
    double = Loader(small, batch_size=4, pipelines={"label": [lambda x: x * 2], "score": None, "blob": None,
                                                    "meta": None, "arr": None, "name": None})
    assert next(iter(double))[0].tolist() == [0, 2, 4, 6]


def test_resume_gives_the_rest_of_the_epoch(small):
    def make():
        return Loader(small, batch_size=16, order=OrderOption.RANDOM, seed=11,
                      pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None})
    full = [b[0].tolist() for b in make()]
    first = make()
    it = iter(first)
    head = [next(it)[0].tolist() for _ in range(5)]
    state = first.state()
    second = make()
    second.resume(state)
    tail = [b[0].tolist() for b in second]
    assert head + tail == full


def test_distributed_shares_are_disjoint(small):
    shares = []
    for rank in range(2):
        loader = Loader(small, batch_size=10, order=OrderOption.RANDOM, distributed=(rank, 2), seed=2,
                        pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None})
        shares.append({i for b in loader for i in b[0].tolist()})
    assert not (shares[0] & shares[1]) and len(shares[0] | shares[1]) == 600


def test_early_breaks_keep_threads_flat(small):
    loader = Loader(small, batch_size=8, num_workers=2, pipelines={"meta": None, "name": None})
    baseline = threading.active_count(), len(os.listdir("/proc/self/task"))
    for _ in range(100):
        for k, _b in enumerate(loader):
            if k == 2:
                break
    gc.collect()
    assert len(os.listdir("/proc/self/task")) <= baseline[1] + 4
