"""What reads back is what was written: a differential harness over the write paths.

For each write path (``from_indexed_dataset``, ``from_iterable``, ``from_arrow``,
``from_webdataset``, ``from_imagefolder``, a dataset directory's ``append``, ``concat``,
``compact``, ``export``) and writer thread counts 1 to 4, random values of every field type are
written and read back through ``ds[i]``, ``ds.table()`` and the Loader, and compared with the
values given (the reference). Datasets with global state (FFCV's ``np.random.seed(i)`` idiom)
and datasets that detect concurrent calls check that user code never runs concurrently.
With ``BETON_FFCV_PYTHON`` set to FFCV 1.0.2's python, FFCV reads each file FFCV can read too.
"""

import hashlib
import io
import json
import math
import os
import subprocess
import tarfile
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import beton
from beton.fields import (ArrayField, BoolField, BytesField, FloatField, IntField, JSONField, NDArrayField,
                          RGBImageField, TextField)
from beton.writer import DatasetWriter

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
WORKERS = [1, 2, 3, 4]


# ---------------------------------------------------------------------------------------------
# User code is never run concurrently.

class GlobalState:
    """FFCV's idiom: each sample seeds numpy's global generator, then draws from it. Two calls
    overlapping (one seeding between the other's seed and draw) give wrong values."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        np.random.seed(i)
        time.sleep(0)  # a switch point: lets another thread in, were there one
        x = np.random.randn(4, 8).astype(np.float32)
        return (i, x)


def expected_global_state(i):
    return np.random.RandomState(i).randn(4, 8).astype(np.float32)


class Exclusive:
    """A dataset that fails when two calls overlap, and records the order of calls."""

    def __init__(self, n):
        self.n = n
        self.inside = 0
        self.calls = []
        self.threads = set()
        self.lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with self.lock:
            self.inside += 1
            overlapping = self.inside > 1
        try:
            if overlapping:
                raise RuntimeError(f"__getitem__({i}) called while another call runs")
            time.sleep(0.0002)  # releases the GIL: another writer thread could enter here
            self.calls.append(i)
            self.threads.add(threading.get_ident())
            return (i, np.full(3, i % 256, np.uint8))
        finally:
            with self.lock:
                self.inside -= 1


@pytest.mark.parametrize("workers", WORKERS)
def test_dataset_with_global_state_writes_its_values(tmp_path, workers):
    n = 512
    path = tmp_path / "g.beton"
    DatasetWriter(path, {"i": IntField(), "x": NDArrayField(np.float32, (4, 8))}, num_workers=workers,
                  progress=False).from_indexed_dataset(GlobalState(n), chunksize=32)
    ds = beton.open(path)
    wrong = [i for i in range(n) if ds[i]["i"] != i or not np.array_equal(ds[i]["x"], expected_global_state(i))]
    assert wrong == [], f"{len(wrong)} samples differ at {workers} workers, first {wrong[:5]}"


@pytest.mark.parametrize("workers", WORKERS)
def test_user_code_runs_one_call_at_a_time_in_order(tmp_path, workers):
    data = Exclusive(700)
    indices = list(range(699, -1, -3))
    DatasetWriter(tmp_path / "e.beton", {"i": IntField(), "b": BytesField()}, num_workers=workers,
                  progress=False).from_indexed_dataset(data, indices=indices, chunksize=16)
    assert data.calls == indices  # in write order, each once
    assert data.threads == {threading.get_ident()}  # on the calling thread
    ds = beton.open(tmp_path / "e.beton")
    assert [ds[k]["i"] for k in range(len(indices))] == indices


@pytest.mark.parametrize("workers", [1, 4])
def test_field_encode_is_user_code_too(tmp_path, workers):
    """A custom ``encode`` (a subclass of a beton field) is called one sample at a time."""
    inside = []
    overlaps = []

    class Scaled(FloatField):
        def encode(self, value):
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(value)
            time.sleep(0.0001)
            inside.pop()
            return super().encode(value * 2)

    DatasetWriter(tmp_path / "s.beton", {"v": Scaled()}, num_workers=workers, progress=False).from_iterable(
        [(float(i),) for i in range(300)])
    assert overlaps == []
    assert beton.open(tmp_path / "s.beton").table()["v"].to_pylist() == [2.0 * i for i in range(300)]


def test_a_failing_sample_stops_the_fetching(tmp_path):
    """No sample after one that raised is fetched, and the error names the sample."""
    calls = []

    class Failing:
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            calls.append(i)
            if i == 37:
                raise KeyError("no such thing")
            return (i,)

    with pytest.raises(Exception, match="37"):
        DatasetWriter(tmp_path / "f.beton", {"i": IntField()}, num_workers=3, progress=False).from_indexed_dataset(
            Failing(), chunksize=10)
    assert max(calls) == 37
    assert not (tmp_path / "f.beton").exists()


# ---------------------------------------------------------------------------------------------
# Every field type through every write path.

FIELDS = {
    "i": IntField(), "f": FloatField(), "b": BoolField(), "t": TextField(), "blob": BytesField(),
    "j": JSONField(), "nd": NDArrayField(np.int16, (2, 3)), "a": ArrayField(np.float32),
    "img": RGBImageField(),
}
SPECIAL_FLOATS = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]
SPECIAL_INTS = [0, -1, 2**63 - 1, -2**63, 1]


def random_rows(n, seed):
    """n rows of random values of every field type, edge cases first."""
    r = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        i = SPECIAL_INTS[k] if k < len(SPECIAL_INTS) else int(r.integers(-2**40, 2**40))
        f = SPECIAL_FLOATS[k] if k < len(SPECIAL_FLOATS) else float(r.normal() * 10 ** int(r.integers(-5, 5)))
        t = ["", "é漢字🙂", "a\x00b"][k] if k < 3 else "".join(chr(int(c)) for c in r.integers(32, 0x3000, r.integers(0, 12)))
        blob = bytes(r.integers(0, 256, int(r.integers(0, 40)), dtype=np.uint8))
        j = [None, {"k": [1, 2.5, "x"]}, "s"][k % 3] if k < 3 else {"n": int(r.integers(0, 9)), "v": [float(r.random())]}
        nd = r.integers(-2**15, 2**15, (2, 3)).astype(np.int16)
        a = r.normal(size=int(r.integers(0, 6))).astype(np.float32)
        h, w = int(r.integers(1, 9)), int(r.integers(1, 9))
        img = r.integers(0, 256, (h, w, 3), dtype=np.uint8)
        rows.append({"i": i, "f": f, "b": bool(r.integers(0, 2)), "t": t, "blob": blob, "j": j, "nd": nd,
                     "a": a, "img": img})
    return rows


def same_value(name, got, want):
    if isinstance(want, float):
        return (math.isnan(want) and math.isnan(got)) or (got == want and math.copysign(1, got) == math.copysign(1, want))
    if isinstance(want, np.ndarray):
        got = np.asarray(got)
        return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    return type(got) is type(want) and got == want


def check_reads(path, rows, fields=FIELDS):
    """ds[i], ds.table() and the Loader give back ``rows`` exactly."""
    ds = beton.open(path)
    assert len(ds) == len(rows)
    for k, want in enumerate(rows):
        got = ds[k]
        for name in fields:
            assert same_value(name, got[name], want[name]), f"row {k}, field {name!r}: {got[name]!r} != {want[name]!r}"
    table = ds.table()
    for name, kind in (("i", int), ("f", float), ("b", bool)):
        if name in fields:
            col = table[name].to_pylist()
            for k, want in enumerate(rows):
                assert same_value(name, kind(col[k]), want[name]), f"table row {k}, {name!r}"
    if "img" in fields:
        assert table["img.width"].to_pylist() == [r["img"].shape[1] for r in rows]
        assert table["img.height"].to_pylist() == [r["img"].shape[0] for r in rows]
    check_loader(path, rows, fields)
    check_with_ffcv(path, rows, fields)


def check_loader(path, rows, fields):
    from beton.fields.decoders import FloatDecoder, IntDecoder, NDArrayDecoder
    from beton.loader import Loader, OrderOption

    pipelines = {name: None for name in beton.open(path).schema}
    wanted = [n for n in ("i", "f", "nd") if n in fields]
    decoders = {"i": IntDecoder(), "f": FloatDecoder(), "nd": NDArrayDecoder()}
    for n in wanted:
        pipelines[n] = [decoders[n]]
    seen = {n: [] for n in wanted}
    batches = 0
    for batch in Loader(str(path), batch_size=7, num_workers=2, order=OrderOption.SEQUENTIAL,
                        pipelines=pipelines, drop_last=False):
        batches += 1
        for n, values in zip(wanted, batch):
            seen[n].extend(np.asarray(values).reshape(len(values), -1))
    assert batches == -(-len(rows) // 7)  # every batch, none dropped
    for n in wanted:
        assert len(seen[n]) == len(rows)
        for k, (got, row) in enumerate(zip(seen[n], rows)):
            want = np.asarray(row[n]).reshape(-1)
            if n == "f":
                assert np.array_equal(got.astype(np.float64), want, equal_nan=True), f"Loader row {k}"
            else:
                assert np.array_equal(got, want), f"Loader row {k}, {n!r}"


def check_with_ffcv(path, rows, fields):
    """FFCV 1.0.2 (BETON_FFCV_PYTHON) reads the same ints, floats and arrays. FFCV has no bool,
    text or variable-length array field: a file with one is read with stubs (--custom)."""
    ffcv = os.environ.get("BETON_FFCV_PYTHON")
    if not ffcv:
        return
    out = str(path) + ".ffcv.json"
    custom = []
    for name, f in fields.items():
        if f.type_name in ("bool", "text", "array"):
            custom += ["--custom", f"{name}=" + {"bool": "'<u1'", "text": "[('ptr','<u8'),('size','<u8')]",
                                                "array": "[('ptr','<u8'),('size','<u8')]"}[f.type_name]]
    subprocess.run([ffcv, os.path.join(REPO, "tests", "ffcv", "ffcv-load.py"), str(path), "--json", out, *custom],
                   check=True, capture_output=True)
    samples = json.load(open(out))["samples"]
    assert len(samples) == len(rows)
    for k, (s, row) in enumerate(zip(samples, rows)):
        # ffcv-load.py's shapes (tests/data/ffcv/*.expected.json): ints as they are, floats as
        # {"hex": float.hex}, arrays as {"sha256"} of their bytes.
        if "i" in fields:
            assert s["i"] == row["i"], f"FFCV row {k}, field 'i'"
        if "f" in fields:
            assert s["f"]["hex"] == float(row["f"]).hex(), f"FFCV row {k}, field 'f'"
        if "nd" in fields:
            want = hashlib.sha256(np.ascontiguousarray(row["nd"], "<i2").tobytes()).hexdigest()
            assert s["nd"]["sha256"] == want, f"FFCV row {k}, field 'nd'"


def indexed(rows, fields=FIELDS):
    return [tuple(r[n] for n in fields) for r in rows]


@pytest.mark.parametrize("workers", WORKERS)
def test_from_indexed_dataset_and_iterable(tmp_path, workers):
    rows = random_rows(60, seed=workers)
    w = DatasetWriter(tmp_path / "a.beton", FIELDS, num_workers=workers, progress=False)
    w.from_indexed_dataset(indexed(rows), chunksize=8)
    check_reads(tmp_path / "a.beton", rows)
    DatasetWriter(tmp_path / "b.beton", FIELDS, num_workers=workers, progress=False).from_iterable(
        iter([dict(r) for r in rows]))
    check_reads(tmp_path / "b.beton", rows)


@pytest.mark.parametrize("workers", WORKERS)
def test_from_arrow(tmp_path, workers):
    rows = random_rows(50, seed=10 + workers)
    fields = {k: v for k, v in FIELDS.items() if k != "img"}
    table = pa.table({
        "i": pa.array([r["i"] for r in rows], pa.int64()),
        "f": pa.array([r["f"] for r in rows], pa.float64()),
        "b": pa.array([r["b"] for r in rows]),
        "t": pa.array([r["t"] for r in rows]),
        "blob": pa.array([r["blob"] for r in rows], pa.binary()),
        "j": pa.array([json.dumps(r["j"]) for r in rows]),
        "nd": pa.array([r["nd"].tobytes() for r in rows], pa.binary()),
        "a": pa.array([r["a"].tolist() for r in rows], pa.list_(pa.float32())),
    })
    DatasetWriter(tmp_path / "a.beton", fields, num_workers=workers, progress=False).from_arrow(table)
    check_reads(tmp_path / "a.beton", rows, fields)


@pytest.mark.parametrize("workers", [1, 3])
def test_from_webdataset(tmp_path, workers):
    pytest.importorskip("webdataset")
    rows = random_rows(40, seed=20 + workers)
    fields = {"i": IntField(), "t": TextField(), "blob": BytesField()}
    shards = []
    for s in range(2):
        shard = tmp_path / f"shard-{s}.tar"
        with tarfile.open(shard, "w") as tar:
            for k in range(s * 20, s * 20 + 20):
                for ext, data in (("cls", str(rows[k]["i"]).encode()), ("txt", rows[k]["t"].encode()),
                                  ("bin", rows[k]["blob"])):
                    info = tarfile.TarInfo(f"{k:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(str(shard))
    threads = set()

    def pipeline(d):
        def one(x):
            threads.add(threading.get_ident())
            return (int(x[0]), x[1].decode(), x[2])
        return d.to_tuple("cls", "txt", "bin").map(one)

    DatasetWriter(tmp_path / "w.beton", fields, num_workers=workers, progress=False).from_webdataset(shards, pipeline)
    assert threads == {threading.get_ident()}
    check_reads(tmp_path / "w.beton", rows, fields)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_dataset_directory_paths(tmp_path, workers):
    """append, concat, compact and export of a dataset directory read back what was given."""
    rows = random_rows(45, seed=30 + workers)
    a, b = rows[:30], rows[30:]
    DatasetWriter(tmp_path / "a.beton", FIELDS, num_workers=workers, progress=False).from_indexed_dataset(indexed(a))
    DatasetWriter(tmp_path / "b.beton", FIELDS, num_workers=workers, progress=False).from_indexed_dataset(indexed(b))
    ds = beton.import_file(tmp_path / "ds", tmp_path / "a.beton").append(str(tmp_path / "b.beton"))
    check_reads(ds.path, rows)
    ds = ds.delete("i % 3 = 0")
    kept = [r for r in rows if r["i"] % 3 != 0]
    check_reads(ds.path, kept)
    compacted = ds.compact(num_workers=workers, progress=False)
    check_reads(compacted.path, kept)
    out = tmp_path / "exported.beton"
    compacted.export(out, num_workers=workers, progress=False)
    check_reads(out, kept)
    beton.concat([tmp_path / "a.beton", tmp_path / "b.beton"], tmp_path / "c.beton")
    check_reads(tmp_path / "c.beton", rows)


# ---------------------------------------------------------------------------------------------
# A value the field cannot hold as given is refused, naming the sample and the field.

@pytest.mark.parametrize("field, value, match", [
    (IntField(), 1.5, "1.5 is not an integer"),
    (IntField(), "3", "IntField takes an integer"),
    (IntField(), None, "IntField takes an integer"),
    (FloatField(), "1.5", "FloatField takes a number"),
    (BoolField(), "False", "BoolField takes"),
    (BoolField(), 2, "BoolField takes"),
    (TextField(), None, "TextField takes str"),
    (TextField(), b"x", "TextField takes str"),
    (BytesField(), 3, "BytesField takes bytes"),
    (BytesField(), np.array([300], np.int64), "uint8 array"),
    (NDArrayField(np.uint8, (2,)), np.array([1, 300]), "does not fit uint8"),
    (NDArrayField(np.int32, (2,)), np.array([1.0, 2.5]), "does not fit int32"),
    (NDArrayField(np.int32, (2,)), np.array([1.0, np.nan]), "does not fit int32"),
    (NDArrayField(np.float32, (1,)), np.array([1e300]), "does not fit float32"),
    (NDArrayField(np.bool_, (2,)), np.array([0, 2]), "does not fit bool"),
    (ArrayField(np.uint16), [-1], "does not fit uint16"),
    (RGBImageField(), np.zeros((4, 4, 3), np.float32), "uint8"),
])
def test_lossy_values_are_refused(tmp_path, field, value, match):
    with pytest.raises((TypeError, ValueError), match=match) as e:
        DatasetWriter(tmp_path / "x.beton", {"v": field}, progress=False).from_iterable(
            [(field_ok(field),), (value,)])
    assert "'v'" in str(e.value) and "1" in str(e.value)  # the field and the sample
    assert not (tmp_path / "x.beton").exists()


def field_ok(field):
    """A value ``field`` takes: the sample before the refused one."""
    if field.type_name == "rgb_image":
        return np.zeros((4, 4, 3), np.uint8)
    if hasattr(field, "dtype"):
        return np.zeros(getattr(field, "shape", (1,)), field.dtype)
    return {"int": 1, "float": 1.0, "bool": True, "text": "a", "bytes": b"a"}[field.type_name]


@pytest.mark.parametrize("field, value, stored", [
    (IntField(), 2.0, 2), (IntField(), np.int8(-3), -3), (IntField(), True, 1), (IntField(), np.float32(4), 4),
    (BoolField(), 1, True), (BoolField(), np.bool_(False), False), (FloatField(), 3, 3.0),
    (NDArrayField(np.uint8, (2,)), [1, 255], np.array([1, 255], np.uint8)),
    (NDArrayField(np.int32, (2,)), np.array([1.0, -2.0]), np.array([1, -2], np.int32)),
    (NDArrayField(np.float32, (1,)), np.array([0.1]), np.array([0.1], np.float32)),
])
def test_values_that_fit_are_stored_exactly(tmp_path, field, value, stored):
    DatasetWriter(tmp_path / "x.beton", {"v": field}, progress=False).from_iterable([(value,)])
    got = beton.open(tmp_path / "x.beton")[0]["v"]
    assert np.array_equal(got, stored) and np.asarray(got).dtype == np.asarray(stored).dtype
