"""What reads back is what was written: a differential harness over the write paths.

For each write path (``from_indexed_dataset``, ``from_iterable``, ``from_arrow``,
``from_webdataset``, a dataset directory's ``append``, ``concat``, ``compact``, ``export``, Ray
Data's ``write_beton``) and writer thread counts 1 to 4, values of every field type are written
and read back through ``ds[i]``, ``ds.table()`` and the Loader, and compared with the values given
(the reference): floats and arrays bit for bit (NaN payloads, -0.0, subnormals), text with NULs
and astral code points, int64's extremes, arrays of every dtype the writer takes, big-endian
ones included. Where a write is cheap the values are property-based (hypothesis, seeded: the
same examples every run); random sequences of edits (``append``, ``update_rows``, ``delete``,
``add_column``, ``drop_column``, ``compact``, ``restore``) on a dataset directory are checked
against a plain Python model, every version re-read at the end. Datasets with global state
(FFCV's ``np.random.seed(i)`` idiom) and datasets that detect concurrent calls check that user
code never runs concurrently. With ``BETON_FFCV_PYTHON`` set to FFCV 1.0.2's python, FFCV reads
each file FFCV can read too.

Known bugs are ``xfail(strict=True)`` with their reason: each starts passing (and fails the
suite) once fixed."""

import hashlib
import io
import json
import math
import os
import shutil
import struct
import subprocess
import tarfile
import tempfile
import threading
import time
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

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
#
# The values: property-based (hypothesis strategies below) where a write is cheap
# (``from_indexed_dataset``, ``from_iterable``, ``from_arrow``, the edit sequences); seeded rows
# with the edge cases first (``random_rows``) where a write is slow (webdataset shards, dataset
# directories, Ray). Floats and arrays are compared bit for bit: NaN payloads, -0.0 and
# subnormals must come back as they went in.

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


# Hypothesis: deterministic for CI (a fixed seed per test, or derandomize; no example
# database), a modest number of examples, no deadline (a write takes what the machine gives).
# Shrinking a failure (each step a write and reads) can take minutes: only with
# BETON_HYPOTHESIS_SHRINK=1, when reproducing one (the seed gives the same failing example).
PROPERTY = settings(database=None, deadline=None, max_examples=10,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate]
                    + ([Phase.shrink] if os.environ.get("BETON_HYPOTHESIS_SHRINK") == "1" else []),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


def bits_float(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


# The edges, drawn often (a few examples need not meet them by chance), then anything.
INT64 = st.sampled_from([0, 1, -1, 2**63 - 1, -2**63, 2**53 + 1, -2**31 - 1]) | st.integers(-2**63, 2**63 - 1)
# -0.0; NaNs: quiet, negative, signalling, with a payload; subnormals; ±inf; the largest.
FLOAT64 = st.sampled_from([bits_float(b) for b in (
    0x8000000000000000, 0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8DEAD0000BEEF,
    0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x8000000000000001, 0x7FF0000000000000, 0xFFF0000000000000,
    0x7FEFFFFFFFFFFFFF)]) | st.floats(width=64)
# Any code point but surrogates (not UTF-8): NUL, astral planes, the last one.
TEXT = st.sampled_from(["", "\0", "a\0b", "é漢字🙂", "\U0010ffff", "\r\n\t "]) | st.text(max_size=16)
# JSON: NaN and ±inf are not JSON and are refused (test_lossy_values_are_refused).
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=6)
# Array dtypes, big-endian ones included (stored little-endian, read back as such).
DTYPES = ["?", "u1", "i1", "<u2", ">i2", "<i4", ">u4", "<i8", ">u8", "<f2", ">f4", "<f8", "<c8", ">c16"]
IMAGES = hnp.arrays(np.uint8, st.tuples(st.integers(1, 6), st.integers(1, 6), st.just(3)))


@st.composite
def tables(draw, images=True, max_rows=12):
    """``(fields, rows)``: every field type, the arrays' dtypes and shapes drawn too, and rows of
    values for them."""
    nd_dtype, a_dtype = np.dtype(draw(st.sampled_from(DTYPES))), np.dtype(draw(st.sampled_from(DTYPES)))
    nd_shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    fields = {"i": IntField(), "f": FloatField(), "b": BoolField(), "t": TextField(), "blob": BytesField(),
              "j": JSONField(), "nd": NDArrayField(nd_dtype, nd_shape), "a": ArrayField(a_dtype)}
    values = {"i": INT64, "f": FLOAT64, "b": st.booleans(), "t": TEXT, "blob": st.binary(max_size=24), "j": JSON,
              "nd": hnp.arrays(nd_dtype, nd_shape), "a": hnp.arrays(a_dtype, st.integers(0, 5))}
    if images:
        fields["img"], values["img"] = RGBImageField(), IMAGES
    rows = draw(st.lists(st.fixed_dictionaries(values), min_size=1, max_size=max_rows))
    return fields, rows


def little(a):
    """An array as beton stores it: C order, little-endian."""
    a = np.asarray(a)
    return np.asarray(a, a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype, order="C")


def float_bits(x):
    return struct.pack("<d", x)


class _Null:
    """A missing value (SQL NULL) in a model: not JSON's null, which is a value."""

    def __repr__(self):
        return "NULL"


NULL = _Null()


def same_value(kind, got, want):
    """Equal as stored: floats and arrays bit for bit, JSON as its text, others by type and value;
    NULL reads as None."""
    if want is NULL:
        return got is None
    if isinstance(want, float):
        return isinstance(got, float) and float_bits(got) == float_bits(want)
    if isinstance(want, np.ndarray):
        got, want = np.asarray(got), little(want)
        return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    if kind == "json":
        return json.dumps(got) == json.dumps(want)
    return type(got) is type(want) and got == want


def is_vector(field):
    """Whether ``ds.table()`` shows the field as a vector column: a 1-D array of ints or floats
    (beton stores them little-endian whatever the dtype's order; docs/SQL.md, "Vectors")."""
    if field.type_name not in ("ndarray", "torch_tensor"):
        return False
    dtype = np.dtype(field.dtype)
    return len(field.shape) == 1 and dtype.kind in "iuf"


def table_value(field, want):
    """What ``ds.table()`` shows of a value: ints, floats, bools, text themselves; a payload its
    size (bytes in bytes, JSON text in bytes with its closing NUL (docs/FORMAT.md), an ndarray
    in bytes, an array in elements)."""
    if want is NULL:
        return NULL
    kind = field.type_name
    if kind in ("int", "float", "bool", "text"):
        return want
    if kind == "bytes":
        return len(want)
    if kind == "json":
        return len(field.encode(want).encode()) + 1
    if kind == "ndarray":
        return np.asarray(want).nbytes
    if kind == "array":
        return np.asarray(want).size
    raise AssertionError(kind)


def check_reads(path, rows, fields=FIELDS, version=None, ffcv=True):
    """ds[i], ds.table() and the Loader give back ``rows`` exactly."""
    ds = beton.open(path) if version is None else beton.open(path, version=version)
    assert list(ds.schema) == list(fields)
    assert len(ds) == len(rows)
    for k, want in enumerate(rows):
        got = ds[k]
        assert list(got) == list(fields), f"row {k}: fields {list(got)}"
        for name in fields:
            assert same_value(fields[name].type_name, got[name], want[name]), \
                f"row {k}, field {name!r}: {got[name]!r} != {want[name]!r}"
    table = ds.table()
    assert table.num_rows == len(rows)
    for name, field in fields.items():
        if field.type_name == "rgb_image":
            assert table[f"{name}.width"].to_pylist() == [r[name].shape[1] for r in rows]
            assert table[f"{name}.height"].to_pylist() == [r[name].shape[0] for r in rows]
            assert table[f"{name}.nbytes"].to_pylist() == [r[name].nbytes for r in rows]  # raw pixels
            continue
        if is_vector(field):
            # A vector column (issue 40): each row's elements, bit for bit.
            vectors = table[name].combine_chunks()
            for k, row in enumerate(rows):
                if row[name] is NULL:
                    assert not vectors[k].is_valid, f"table row {k}, {name!r}: a vector for NULL"
                    continue
                got, want = vectors[k].values.to_numpy(zero_copy_only=False), little(np.asarray(row[name]))
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), \
                    f"table row {k}, {name!r}: {got!r} != {want!r}"
            continue
        col = table[name].to_pylist()
        for k, row in enumerate(rows):
            want = table_value(field, row[name])
            assert same_value("table", col[k], want), \
                f"table row {k}, {name!r}: {col[k]!r} != {want!r}"
    check_loader(path, rows, fields, version)
    if ffcv:
        check_with_ffcv(path, rows, fields)


def check_loader(path, rows, fields, version=None):
    """The Loader's batches (ints, floats, bools, ndarrays), in order, none dropped."""
    from beton.fields.decoders import BoolDecoder, FloatDecoder, IntDecoder, NDArrayDecoder
    from beton.loader import Loader, OrderOption

    kinds = {"int": IntDecoder, "float": FloatDecoder, "bool": BoolDecoder, "ndarray": NDArrayDecoder}
    schema = beton.open(path).schema if version is None else beton.open(path, version=version).schema
    pipelines = {name: None for name in schema}
    kw = {} if version is None else {"version": version}
    # (Not a field with NULLs: the Loader refuses to decode them, test_nulls.py.)
    wanted = [n for n, f in fields.items() if f.type_name in kinds and all(r[n] is not NULL for r in rows)]
    for n in list(wanted):
        if fields[n].type_name == "ndarray" and fields[n].dtype.kind not in "biuf":
            # Complex arrays: the Loader refuses them (ds[i] and the table read them).
            with pytest.raises(beton.InvalidArgumentError, match="not supported by the loader"):
                iter(Loader(str(path), batch_size=7, pipelines=dict(pipelines, **{n: [NDArrayDecoder()]}), **kw))
            wanted.remove(n)
    for n in wanted:
        pipelines[n] = [kinds[fields[n].type_name]()]
    seen = {n: [] for n in wanted}
    batches = 0
    for batch in Loader(str(path), batch_size=7, num_workers=2, order=OrderOption.SEQUENTIAL,
                        pipelines=pipelines, drop_last=False, **kw):
        batches += 1
        assert len(batch) == len(wanted)
        for n, values in zip(wanted, batch):
            seen[n].extend(list(np.asarray(values)))
    assert batches == -(-len(rows) // 7)  # every batch, none dropped
    for n in wanted:
        assert len(seen[n]) == len(rows)
        for k, (got, row) in enumerate(zip(seen[n], rows)):
            want = little(row[n])
            got = np.asarray(got)
            if fields[n].type_name == "float":
                assert got.dtype == np.float64 and float_bits(got.item()) == float_bits(row[n]), \
                    f"Loader row {k}, {n!r}"
            elif fields[n].type_name == "ndarray":
                assert (got.dtype, got.shape) == (want.dtype, want.shape) and got.tobytes() == want.tobytes(), \
                    f"Loader row {k}, {n!r}"
            else:
                assert got.item() == row[n], f"Loader row {k}, {n!r}"


PAYLOAD_KINDS = ("bytes", "text", "json", "array", "ndarray", "torch_tensor", "rgb_image", "grey_image")


def ffcv_cannot_read(rows, fields):
    """Whether FFCV 1.0.2 cannot read the table: no rows with a payload field, an unsigned array
    wider than a byte (torch 2.2 has no such tensors), or a sample with an empty payload before
    another payload. FFCV 1.0.2's readers look a
    payload up by its pointer, which an empty payload shares with the next one, and FFCV's
    Loader then hangs (its thread fails reshaping an image to 0 bytes). Files FFCV writes have
    the same layout and the same failure (docs/FFCV_DIFFERENCES.md, Files)."""
    names = [n for n, f in fields.items() if f.type_name in PAYLOAD_KINDS]
    if not rows and names:
        return True  # FFCV's decoders size their batches by a max over no rows: a ValueError
    if any(f.type_name in ("ndarray", "torch_tensor") and np.dtype(f.dtype).kind == "u" and np.dtype(f.dtype).itemsize > 1
           for f in fields.values()):
        return True  # FFCV's default pipeline ends in ToTensor, and torch 2.2 has no uint16/32/64 tensors
    if any(f.type_name in ("ndarray", "torch_tensor") and tuple(f.shape) == () for f in fields.values()):
        return True  # a 0-d array: FFCV's writer never finishes on one, its Loader raises IndexError
    for row in rows:
        sizes = [0 if row[n] is NULL else len(row[n]) if isinstance(row[n], (bytes, str)) else np.asarray(row[n]).size
                 for n in names]
        if any(size == 0 and any(sizes[k + 1:]) for k, size in enumerate(sizes)):
            return True
    return False


def check_with_ffcv(path, rows, fields):
    """FFCV 1.0.2 (BETON_FFCV_PYTHON) reads the same ints, floats and arrays. FFCV has no bool,
    text or variable-length array field: a file with one is read with stubs (--custom)."""
    ffcv = os.environ.get("BETON_FFCV_PYTHON")
    if not ffcv or ffcv_cannot_read(rows, fields) or os.path.isdir(path):
        return  # (FFCV reads files; a dataset directory's rows are checked through beton's reader)
    out = str(path) + ".ffcv.json"
    custom = []
    for name, f in fields.items():
        if f.type_name in ("bool", "text", "array"):
            custom += ["--custom", f"{name}=" + {"bool": "'<u1'", "text": "[('ptr','<u8'),('size','<u8')]",
                                                "array": "[('ptr','<u8'),('size','<u8')]"}[f.type_name]]
    done = subprocess.run([ffcv, os.path.join(REPO, "tests", "ffcv", "ffcv-load.py"), str(path), "--json", out,
                           *custom], capture_output=True, timeout=600, text=True)
    assert done.returncode == 0, f"FFCV could not read {path}: {done.stderr[-3000:]}"
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
            want = hashlib.sha256(little(row["nd"]).tobytes()).hexdigest()
            assert s["nd"]["sha256"] == want, f"FFCV row {k}, field 'nd'"


def indexed(rows, fields=FIELDS):
    return [tuple(r[n] for n in fields) for r in rows]


# With FFCV checking each example (a process each), fewer examples.
FFCV_LIVE = bool(os.environ.get("BETON_FFCV_PYTHON"))


@pytest.mark.parametrize("workers", WORKERS)
def test_from_indexed_dataset_and_iterable(tmp_path, workers):
    """Random tables (a seed per worker count), the seeded edge rows and no rows."""

    @seed(workers)
    @settings(PROPERTY, max_examples=3 if FFCV_LIVE else 8)
    @given(data=tables(), chunksize=st.integers(1, 8))
    @example(data=(FIELDS, random_rows(12, seed=workers)), chunksize=5)
    @example(data=(FIELDS, []), chunksize=1)
    def write_and_read(data, chunksize):
        fields, rows = data
        with tempfile.TemporaryDirectory(dir=tmp_path) as d:
            DatasetWriter(f"{d}/a.beton", fields, num_workers=workers, progress=False).from_indexed_dataset(
                indexed(rows, fields), chunksize=chunksize)
            check_reads(f"{d}/a.beton", rows, fields)
            DatasetWriter(f"{d}/b.beton", fields, num_workers=workers, progress=False).from_iterable(
                iter([dict(r) for r in rows]))
            check_reads(f"{d}/b.beton", rows, fields)

    write_and_read()


def png(img):
    """A lossless PNG of an RGB uint8 array (no filter, zlib): what an image column of
    encoded files holds."""
    h, w, _ = img.shape
    raw = b"".join(b"\0" + img[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def arrow_table(fields, rows, as_lists):
    """``rows`` as the Arrow table ``from_arrow`` takes: JSON as its text, images as PNG files'
    bytes, arrays as their bytes or (``as_lists``, where Arrow has the dtype) lists of values."""
    cols = {
        "i": pa.array([r["i"] for r in rows], pa.int64()),
        "f": pa.array([r["f"] for r in rows], pa.float64()),
        "b": pa.array([r["b"] for r in rows], pa.bool_()),
        "t": pa.array([r["t"] for r in rows], pa.string()),
        "blob": pa.array([r["blob"] for r in rows], pa.binary()),
        "j": pa.array([json.dumps(r["j"]) for r in rows], pa.string()),
        "img": pa.array([png(r["img"]) for r in rows], pa.binary()),
    }
    for name in ("nd", "a"):
        dtype = little(np.zeros(0, fields[name].dtype)).dtype
        if as_lists and dtype.kind in "iuf":  # bool: test_from_arrow_bool_lists
            cols[name] = pa.array([little(r[name]).ravel() for r in rows], pa.list_(pa.from_numpy_dtype(dtype)))
        else:
            cols[name] = pa.array([little(r[name]).tobytes() for r in rows], pa.binary())
    return pa.table({n: cols[n] for n in fields})


@pytest.mark.parametrize("workers", WORKERS)
def test_from_arrow(tmp_path, workers):
    """Random tables (a seed per worker count), the seeded edge rows and no rows, arrays as
    bytes or as lists."""

    @seed(10 + workers)
    @settings(PROPERTY, max_examples=3 if FFCV_LIVE else 8)
    @given(data=tables(), as_lists=st.booleans())
    @example(data=(FIELDS, random_rows(12, seed=10 + workers)), as_lists=workers % 2 == 0)
    @example(data=(FIELDS, []), as_lists=False)
    def write_and_read(data, as_lists):
        fields, rows = data
        with tempfile.TemporaryDirectory(dir=tmp_path) as d:
            DatasetWriter(f"{d}/a.beton", fields, num_workers=workers, progress=False).from_arrow(
                arrow_table(fields, rows, as_lists))
            check_reads(f"{d}/a.beton", rows, fields)

    write_and_read()


def test_ndarray_of_shape_0d(tmp_path):
    fields = {"nd": NDArrayField(np.float32, ())}
    rows = [{"nd": np.array(1.5, np.float32)}, {"nd": np.array(-0.0, np.float32)}]
    DatasetWriter(tmp_path / "a.beton", fields, progress=False).from_indexed_dataset(indexed(rows, fields))
    check_reads(tmp_path / "a.beton", rows, fields)


@pytest.mark.parametrize("field", [ArrayField(np.bool_), NDArrayField(np.bool_, (2,))])
def test_from_arrow_bool_lists(tmp_path, field):
    rows = [{"v": np.array([True, False])}, {"v": np.array([False, True])}]
    DatasetWriter(tmp_path / "a.beton", {"v": field}, progress=False).from_arrow(
        pa.table({"v": pa.array([r["v"].tolist() for r in rows], pa.list_(pa.bool_()))}))
    check_reads(tmp_path / "a.beton", rows, {"v": field})


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
# Ray Data's write_beton: a Ray dataset (local mode, as test_ray.py runs it) of every field type
# Ray carries, written by several write tasks as one version, read back in the dataset's order.

@pytest.fixture(scope="module")
def ray_data():
    """Ray in local mode (2 CPUs) and beton.ray; skipped without Ray, except with
    BETON_REQUIRE_RAY=1 (scripts/test.sh), where a missing Ray fails."""
    if os.environ.get("BETON_REQUIRE_RAY") != "1":
        pytest.importorskip("ray.data")
    import ray

    import beton.ray as bray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray, bray
    if started:
        ray.shutdown()


# What a Ray dataset carries as its own types (ints, floats, bools, strings, binary, fixed-shape
# tensors), and JSON text, lists and PNG files' bytes given their field with fields=.
RAY_FIELDS = {k: v for k, v in FIELDS.items()}
RAY_GIVEN = {"j": JSONField(), "a": ArrayField(np.float32), "img": RGBImageField()}


def ray_items(rows, key=False):
    return [{"i": r["i"], "f": r["f"], "b": r["b"], "t": r["t"], "blob": r["blob"], "j": json.dumps(r["j"]),
             "nd": r["nd"], "a": r["a"].tolist(), "img": png(r["img"]), **({"k": k} if key else {})}
            for k, r in enumerate(rows)]


@pytest.mark.parametrize("blocks, workers, concurrency", [(1, 1, None), (3, 4, None), (7, 2, 2)])
def test_ray_write_beton(tmp_path, ray_data, blocks, workers, concurrency):
    """Blocks in order (from_items): one data file per write task, the rows in the dataset's
    order; a second write appends them as the next version."""
    ray, bray = ray_data
    rows = random_rows(30, seed=40 + blocks)
    src = ray.data.from_items(ray_items(rows), override_num_blocks=blocks)
    out = bray.write_beton(src, tmp_path / "r", fields=RAY_GIVEN, num_workers=workers, concurrency=concurrency)
    assert out.version == 1 and out.versions()[-1]["data_files"] == blocks
    check_reads(out.path, rows, RAY_FIELDS)
    again = src.write_beton(tmp_path / "r", fields=RAY_GIVEN, num_workers=workers, concurrency=concurrency)
    assert again.version == 2
    check_reads(again.path, rows + rows, RAY_FIELDS)
    check_reads(again.path, rows, RAY_FIELDS, version=1)


def test_ray_write_beton_after_transforms(tmp_path, ray_data):
    """Through map_batches and repartition: with Ray's preserve_order the version holds the
    dataset's order; without it, Ray's order is its own, and the version holds every row once."""
    ray, bray = ray_data
    rows = random_rows(40, seed=50)
    fields = dict(RAY_FIELDS, k=IntField())
    keyed = [dict(r, k=k) for k, r in enumerate(rows)]
    context = ray.data.DataContext.get_current()
    old = context.execution_options.preserve_order
    try:
        for preserve in (True, False):
            context.execution_options.preserve_order = preserve
            src = (ray.data.from_items(ray_items(rows, key=True), override_num_blocks=5)
                   .map_batches(lambda b: b, batch_format="pyarrow").repartition(3))
            out = bray.write_beton(src, tmp_path / f"t{preserve}", fields=RAY_GIVEN, num_workers=2)
            order = out.table(["k"])["k"].to_pylist()
            assert sorted(order) == list(range(len(rows)))
            if preserve:
                assert order == list(range(len(rows)))
            check_reads(out.path, [keyed[k] for k in order], fields)
    finally:
        context.execution_options.preserve_order = old


@pytest.mark.xfail(strict=True, raises=TypeError, reason=(
    "beton bug: write_beton of numpy arrays of varying lengths (Ray's ArrowVariableShapedTensorType) "
    "refuses the column and says to pass fields={'a': ArrayField(dtype)}; with it, every write task "
    "fails: from_arrow takes no struct<data, shape> column for an array field"))
def test_ray_write_beton_of_varying_length_arrays(tmp_path, ray_data):
    ray, bray = ray_data
    rows = random_rows(12, seed=60)
    src = ray.data.from_items([{"a": r["a"]} for r in rows], override_num_blocks=3)
    out = bray.write_beton(src, tmp_path / "v", fields={"a": ArrayField(np.float32)})
    check_reads(out.path, rows, {"a": ArrayField(np.float32)})


# ---------------------------------------------------------------------------------------------
# Edit sequences against a plain model: random appends, update_rows, deletes, add_column,
# drop_column, compact and restore on a dataset directory; after each, the latest version reads
# as the model says, and at the end every version reads as the model said at that version.

EDIT_FIELDS = {"i": IntField(), "f": FloatField(), "b": BoolField(), "t": TextField(), "blob": BytesField(),
               "j": JSONField(), "nd": NDArrayField(np.int16, (2,))}
KIND_VALUES = {"int": INT64, "float": FLOAT64, "bool": st.booleans(), "text": TEXT, "bytes": st.binary(max_size=8),
               "json": JSON, "ndarray": hnp.arrays(np.int16, (2,))}
# Columns add_column may add: the kinds it takes as values, or as a field's Python values.
NEW_COLUMNS = {"int": IntField, "float": FloatField, "bool": BoolField, "text": TextField, "bytes": BytesField,
               "ndarray": lambda: NDArrayField(np.int16, (2,)), "json": JSONField}
PLAIN_KINDS = ("int", "float", "bool", "text")
COLUMN_NAMES = ["c0", "c1", "c2"]  # few, so that a name dropped (or restored away) is added again


def rows_of(fields, draw, max_size):
    return draw(st.lists(st.fixed_dictionaries({n: KIND_VALUES[f.type_name] for n, f in fields.items()}),
                         min_size=1, max_size=max_size))


class EditSequences(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="beton-edits-")
        self.files = 0
        self.ds = None
        self.fields, self.rows = {}, []
        self.history = {}  # version: (fields, rows)

    def teardown(self):
        try:
            if self.ds is not None:
                for v, (fields, rows) in self.history.items():
                    check_reads(self.ds.path, rows, fields, version=v, ffcv=False)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def file(self, fields, rows):
        self.files += 1
        path = os.path.join(self.tmp, f"f{self.files}.beton")
        DatasetWriter(path, fields, progress=False).from_iterable([tuple(r[n] for n in fields) for r in rows])
        return path

    def committed(self, operation):
        """The edit made one version; the model is that version now."""
        v = len(self.history) + 1
        assert self.ds.version == v and self.ds.versions()[-1]["operation"] == operation
        self.history[v] = ({n: f for n, f in self.fields.items()}, [dict(r) for r in self.rows])
        check_reads(self.ds.path, self.rows, self.fields, ffcv=False)

    @initialize(data=st.data())
    def create(self, data):
        self.fields = dict(EDIT_FIELDS)
        self.rows = rows_of(self.fields, data.draw, 5)
        self.ds = beton.import_file(os.path.join(self.tmp, "ds"), self.file(self.fields, self.rows))
        self.committed("import")

    @rule(data=st.data())
    def append(self, data):
        """A file of some of the fields, in any order: the others are NULL in its rows."""
        names = data.draw(st.lists(st.sampled_from(list(self.fields)), min_size=1, unique=True), "fields")
        fields = {n: self.fields[n] for n in names}
        rows = rows_of(fields, data.draw, 4)
        self.ds.append(self.file(fields, rows))
        self.rows += [{n: r.get(n, NULL) for n in self.fields} for r in rows]
        self.committed("append")

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def update_rows(self, data):
        name = data.draw(st.sampled_from(list(self.fields)), "field")
        ids = data.draw(st.lists(st.integers(0, len(self.rows) - 1), min_size=1, max_size=4, unique=True), "ids")
        values = KIND_VALUES[self.fields[name].type_name]
        if data.draw(st.booleans(), "one value for all"):
            given = data.draw(values, "value")
            new = [given] * len(ids)
            given = [given]
        else:
            new = given = data.draw(st.lists(values, min_size=len(ids), max_size=len(ids)), "values")
        self.ds.update_rows(ids, {name: given})
        for i, v in zip(ids, new):
            self.rows[i][name] = v
        self.committed("update")

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def delete(self, data):
        ids = data.draw(st.lists(st.integers(0, len(self.rows) - 1), min_size=1, unique=True), "ids")
        self.ds.delete(ids)
        self.rows = [r for k, r in enumerate(self.rows) if k not in set(ids)]
        self.committed("delete")

    @precondition(lambda self: any(n not in self.fields for n in COLUMN_NAMES))
    @rule(data=st.data())
    def add_column(self, data):
        self.add(data, [n for n in COLUMN_NAMES if n not in self.fields])

    @precondition(lambda self: self.gone())
    @rule(data=st.data())
    def add_column_again(self, data):
        """A name an older version has (dropped since, or restored away), maybe with another type:
        each version keeps reading its own column."""
        self.add(data, self.gone())

    def gone(self):
        return sorted({n for fields, _ in self.history.values() for n in fields} - set(self.fields))

    def add(self, data, names):
        name = data.draw(st.sampled_from(names), "name")
        # (No rows left: a plain kind's empty list is refused, test_add_column_to_no_rows.)
        kinds = sorted(NEW_COLUMNS) if self.rows else sorted(set(NEW_COLUMNS) - set(PLAIN_KINDS))
        kind = data.draw(st.sampled_from(kinds), "kind")
        field = NEW_COLUMNS[kind]()
        values = data.draw(st.lists(KIND_VALUES[kind], min_size=len(self.rows), max_size=len(self.rows)), "values")
        # Plain values may go without a field (typed by Arrow) when there are some to type.
        bare = kind in PLAIN_KINDS and values and data.draw(st.booleans(), "without field=")
        self.ds.add_column(name, values) if bare else self.ds.add_column(name, values, field=field)
        self.fields[name] = field
        for r, v in zip(self.rows, values):
            r[name] = v
        self.committed("add_column")

    @precondition(lambda self: len(self.fields) > 1)
    @rule(data=st.data())
    def drop_column(self, data):
        name = data.draw(st.sampled_from(list(self.fields)), "name")
        self.ds.drop_column(name)
        del self.fields[name]
        for r in self.rows:
            del r[name]
        self.committed("drop_column")

    @rule(workers=st.integers(1, 4))
    def compact(self, workers):
        self.ds.compact(num_workers=workers, progress=False)
        self.committed("compact")

    @rule(data=st.data())
    def restore(self, data):
        v = data.draw(st.sampled_from(sorted(self.history)), "version")
        self.ds.restore(v)
        fields, rows = self.history[v]
        self.fields, self.rows = dict(fields), [dict(r) for r in rows]
        self.committed("restore")


EditSequences.TestCase.settings = settings(PROPERTY, derandomize=True, max_examples=15, stateful_step_count=10)
TestEditSequences = EditSequences.TestCase


@pytest.mark.parametrize("field", [IntField(), FloatField(), BoolField(), TextField()], ids=lambda f: f.type_name)
def test_add_column_to_no_rows(tmp_path, field):
    DatasetWriter(tmp_path / "a.beton", {"i": IntField()}, progress=False).from_iterable([(1,), (2,)])
    ds = beton.import_file(tmp_path / "ds", tmp_path / "a.beton")
    ds.delete([0, 1])
    ds.add_column("c", [], field=field)
    check_reads(ds.path, [], {"i": IntField(), "c": field})


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
    (JSONField(), math.nan, "not valid JSON"),
    (JSONField(), {"x": [1, -math.inf]}, "not valid JSON"),
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
    return {"int": 1, "float": 1.0, "bool": True, "text": "a", "bytes": b"a", "json": {"ok": 1}}[field.type_name]


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
