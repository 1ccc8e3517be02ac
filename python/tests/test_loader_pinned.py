"""The loader's batches for a seed are pinned: the same batches release after release, whatever
the way an order is computed (issue 39 made the orders generate as they are read instead of
whole before the first batch; these values came from the whole-epoch code, commit ea736c6).

Every order, on one process and distributed, over every row, a set and a list with repeats, on
a table of 300,000 rows on 2 MiB pages (three pages of its data table: QUASI_RANDOM groups by
them). Each case pins the first two batches (of 64) of epochs 0 and 1: their first four labels
and a hash of the whole batch. RANDOM on one process is also checked against its definition,
numpy's ``default_rng(seed + epoch).permutation``, on a set large enough (2^20 rows) that the
first batches are traced before the shuffle is whole."""

import hashlib

import numpy as np
import pytest

from beton import IndexSet
from beton.fields import IntField
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter

ROWS = 300_000

# (order, distributed, indices) -> per batch (epoch 0 batch 0, e0 b1, e1 b0, e1 b1):
# (first four labels, sha256 of the batch's labels as <u8, first 16 hex digits).
GOLDEN = {
    ("RANDOM", None, None): [([256255, 165161, 137484, 168220], "593b9aa887c0f064"), ([33334, 244054, 15037, 43063], "1bac15d4d7d4d016"), ([251181, 252304, 190003, 79338], "875071fbefc658ff"), ([21311, 295506, 60019, 255760], "338352b81f28edde")],  # noqa: E501
    ("QUASI_RANDOM", None, None): [([291344, 271776, 285796, 277760], "9bb2d492d1006273"), ([188962, 242003, 38845, 102044], "e1475db29841f864"), ([265061, 218964, 47465, 292654], "b50728ef0a8eb32c"), ([222881, 254278, 31655, 86656], "fc0176c23e4f3f58")],  # noqa: E501
    ("RANDOM", (0, 2), None): [([142039, 43125, 150133, 104841], "ba84f3bcddb6bd11"), ([270289, 17986, 43455, 59764], "b6c0a8e0e915fd94"), ([89160, 125549, 15559, 282478], "8f3ad74114d673c1"), ([138684, 265412, 156560, 280520], "5a4a06d6f72891c4")],  # noqa: E501
    ("RANDOM", (1, 2), None): [([132403, 278809, 213098, 42728], "fe72aa849eb071a5"), ([143837, 232220, 68694, 48606], "5b6edcc2383f9c22"), ([290918, 18940, 242600, 280611], "6af17d2e96e0518c"), ([56412, 214628, 149024, 154019], "77e352d08ae8102d")],  # noqa: E501
    ("QUASI_RANDOM", (0, 2), None): [([182123, 257376, 69543, 1194], "51bed4958bd60f7f"), ([128392, 50570, 10443, 39403], "64d5ea7555fcac50"), ([293758, 268893, 282330, 297346], "686a1f061e91acd6"), ([273521, 275757, 272108, 265500], "8f3244173f8aaa14")],  # noqa: E501
    ("QUASI_RANDOM", (1, 2), None): [([285184, 296836, 292767, 276783], "c472ed56c35bc605"), ([269414, 281061, 268972, 293516], "06a5517ca305f24e"), ([58969, 245441, 91909, 45998], "50b0e5077691f0e5"), ([184907, 156826, 134963, 102846], "8b950cf97e7f9d3e")],  # noqa: E501
    ("SEQUENTIAL", (1, 3), None): [([1, 4, 7, 10], "d94d04d49ca547b0"), ([193, 196, 199, 202], "36d185beb5fd5eac"), ([1, 4, 7, 10], "d94d04d49ca547b0"), ([193, 196, 199, 202], "36d185beb5fd5eac")],  # noqa: E501
    ("RANDOM", None, "thirds"): [([135210, 214305, 298614, 136359], "0a9a1bf1a9d6a5cc"), ([242916, 119388, 189390, 228690], "1a0de55b95c57598"), ([119706, 296916, 116508, 125217], "34084fe09c031239"), ([148125, 174375, 185865, 122982], "8df07606f7f79873")],  # noqa: E501
    ("QUASI_RANDOM", None, "thirds"): [([299415, 263070, 280725, 267462], "6c5d99cd09af1b3e"), ([207183, 130866, 111030, 277338], "3d3d657714d0cbe4"), ([218964, 47466, 288666, 140142], "baaf90cae677ca4b"), ([298863, 279963, 7674, 293262], "e04815b95819c867")],  # noqa: E501
    ("QUASI_RANDOM", (1, 2), "thirds"): [([285183, 296835, 292767, 276786], "906e3686c31202a1"), ([269517, 281124, 269079, 293538], "78ebe74cd7f0f3cf"), ([58968, 245442, 91911, 46002], "4aacd606ebe23da5"), ([184944, 156876, 135027, 102927], "3f15b4330461adb3")],  # noqa: E501
    ("RANDOM", None, "repeats"): [([3, 3, 3, 5], "9c4c23a5182ba356"), ([3, 3, 3, 9], "94226f4f9ba6cb22"), ([3, 3, 9, 9], "46eb6bb64fc95909"), ([5, 5, 5, 9], "62db8c05a236e063")],  # noqa: E501
}


def write(path, rows):
    import pyarrow as pa

    DatasetWriter(path, {"label": IntField()}, page_size=2 << 20, progress=False).from_arrow(
        pa.table({"label": np.arange(rows)}))
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write(tmp_path_factory.mktemp("pinned") / "rows.beton", ROWS)


def indices_of(name):
    return {None: None, "thirds": IndexSet(list(range(0, ROWS, 3))), "repeats": [5, 3, 3, 9] * 40_000}[name]


def batches(path, order, distributed, indices, seed=7, epochs=2, per_epoch=2, batch_size=64):
    """The first `per_epoch` batches' labels of each of the first `epochs` epochs."""
    loader = Loader(path, batch_size=batch_size, order=OrderOption[order], seed=seed,
                    distributed=distributed or False, indices=indices)
    out = []
    for _ in range(epochs):
        it = iter(loader)
        out.extend(np.asarray(next(it)[0]).ravel().astype("<u8") for _ in range(per_epoch))
        it.close()
    return out


@pytest.mark.parametrize("case", list(GOLDEN), ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_first_batches_are_pinned(table, case):
    order, distributed, indices = case
    got = [(b[:4].tolist(), hashlib.sha256(b.tobytes()).hexdigest()[:16])
           for b in batches(table, order, distributed, indices_of(indices))]
    assert got == GOLDEN[case]


def test_random_is_numpys_permutation_past_the_traced_elements(tmp_path):
    # 2^20 rows: FFCV's RANDOM traces its first elements, and the rest comes from the shuffle
    # finished on another thread; 210 batches of 64 reach past the 8,192 traced.
    n = 1 << 20
    path = write(tmp_path / "million.beton", n)
    for epoch, got in enumerate([batches(path, "RANDOM", None, None, seed=3, epochs=1, per_epoch=210)]):
        want = np.random.default_rng(3 + epoch).permutation(n)[:210 * 64]
        np.testing.assert_array_equal(np.concatenate(got), want)
