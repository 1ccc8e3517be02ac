"""``DatasetWriter.from_arrow``: Arrow columns read by Rust (``_native.write_arrow``), with the
same bytes as the per-row path, and errors that name the field, the column and the row."""

import glob
import json
import os

import numpy as np
import pyarrow as pa
import pytest

import beton
from beton import _native
from beton.fields import (ArrayField, BoolField, BytesField, FloatField, GreyImageField, IntField, JSONField,
                          NDArrayField, RGBImageField, TextField)
from beton.writer import DatasetWriter

# The view types are pyarrow >= 16.
STRING_TYPES = [pa.string(), pa.large_string()] + ([pa.string_view()] if hasattr(pa, "string_view") else [])
BINARY_TYPES = [pa.binary(), pa.large_binary()] + ([pa.binary_view()] if hasattr(pa, "binary_view") else [])
IMAGES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder",
                                       "*", "*.jpg")))[:6]


def write_arrow(path, fields, table, **kw):
    kw.setdefault("progress", False)
    return DatasetWriter(path, fields, **kw).from_arrow(table)


def write_rows(path, fields, rows, **kw):
    kw.setdefault("progress", False)
    return DatasetWriter(path, fields, **kw).from_indexed_dataset(rows)


def read(path):
    ds = beton.open(path)
    return [ds[i] for i in range(len(ds))]


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


# ---------------------------------------------------------------------------------------------
# Round trips, one per field type and Arrow type.

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@pytest.mark.parametrize("arrow_type", INT_TYPES, ids=str)
def test_int_field_takes_every_integer_type(tmp_path, arrow_type):
    info = np.iinfo(arrow_type.to_pandas_dtype())
    values = [int(info.min), 0, 1, int(min(info.max, 2**63 - 1))]
    write_arrow(tmp_path / "a.beton", {"x": IntField()}, pa.table({"x": pa.array(values, arrow_type)}))
    assert [r["x"] for r in read(tmp_path / "a.beton")] == values


@pytest.mark.parametrize("arrow_type", [pa.float16(), pa.float32(), pa.float64(), pa.int64(), pa.uint8()], ids=str)
def test_float_field_takes_floats_and_integers(tmp_path, arrow_type):
    values = [0.0, -1.5, 2.25, 100.0] if pa.types.is_floating(arrow_type) else [0, 1, 2, 100]
    write_arrow(tmp_path / "a.beton", {"x": FloatField()}, pa.table({"x": pa.array(values, arrow_type)}))
    assert [r["x"] for r in read(tmp_path / "a.beton")] == [float(v) for v in values]


def test_large_int64_to_float_rounds_as_python_does(tmp_path):
    values = [2**53 + 1, 2**63 - 1, -(2**62) - 3]
    write_arrow(tmp_path / "a.beton", {"x": FloatField()}, pa.table({"x": pa.array(values, pa.int64())}))
    assert [r["x"] for r in read(tmp_path / "a.beton")] == [float(v) for v in values]


def test_bool_field(tmp_path):
    write_arrow(tmp_path / "a.beton", {"x": BoolField()}, pa.table({"x": [True, False, True]}))
    assert [r["x"] for r in read(tmp_path / "a.beton")] == [True, False, True]


@pytest.mark.parametrize("arrow_type", STRING_TYPES, ids=str)
def test_text_field_takes_every_string_type(tmp_path, arrow_type):
    values = ["", "a", "héllo wörld ✓", "x" * 1000]
    write_arrow(tmp_path / "a.beton", {"t": TextField()}, pa.table({"t": pa.array(values, arrow_type)}))
    assert [r["t"] for r in read(tmp_path / "a.beton")] == values


@pytest.mark.parametrize("arrow_type", STRING_TYPES, ids=str)
def test_json_field_takes_json_text(tmp_path, arrow_type):
    objs = [{"i": 1}, [1, 2, {"a": None}], "s", 3.5, None]
    col = pa.array([json.dumps(o) for o in objs], arrow_type)
    write_arrow(tmp_path / "a.beton", {"j": JSONField()}, pa.table({"j": col}))
    assert [r["j"] for r in read(tmp_path / "a.beton")] == objs


def test_json_field_serialises_other_columns(tmp_path):
    objs = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    write_arrow(tmp_path / "a.beton", {"j": JSONField()}, pa.table({"j": objs}))
    assert [r["j"] for r in read(tmp_path / "a.beton")] == objs


def test_json_field_takes_the_json_extension_type(tmp_path):
    if not hasattr(pa, "json_"):
        pytest.skip("pa.json_() is pyarrow >= 19")
    col = pa.ExtensionArray.from_storage(pa.json_(), pa.array(['{"a": [1, 2]}', "null"]))
    write_arrow(tmp_path / "a.beton", {"j": JSONField()}, pa.table({"j": col}))
    assert [r["j"] for r in read(tmp_path / "a.beton")] == [{"a": [1, 2]}, None]


def test_json_field_rejects_text_that_is_not_json(tmp_path):
    with pytest.raises(ValueError, match="sample 1"):
        write_arrow(tmp_path / "a.beton", {"j": JSONField()}, pa.table({"j": ["1", "{not json"]}))
    assert not (tmp_path / "a.beton").exists()


@pytest.mark.parametrize("arrow_type", BINARY_TYPES, ids=str)
def test_bytes_field_takes_every_binary_type(tmp_path, arrow_type):
    values = [b"", b"\x00\x01", bytes(range(256)) * 3]
    write_arrow(tmp_path / "a.beton", {"b": BytesField()}, pa.table({"b": pa.array(values, arrow_type)}))
    assert [bytes(r["b"]) for r in read(tmp_path / "a.beton")] == values


def test_bytes_field_takes_fixed_size_binary(tmp_path):
    values = [b"abcd", b"efgh"]
    write_arrow(tmp_path / "a.beton", {"b": BytesField()}, pa.table({"b": pa.array(values, pa.binary(4))}))
    assert [bytes(r["b"]) for r in read(tmp_path / "a.beton")] == values


def arrays23(n):
    return [np.arange(6, dtype=np.float32).reshape(2, 3) * (i + 1) for i in range(n)]


@pytest.mark.parametrize("how", ["binary", "fixed_size_list", "list", "large_list", "list_of_float64"])
def test_ndarray_field(tmp_path, how):
    arrays = arrays23(4)
    flat = [a.ravel() for a in arrays]
    col = {
        "binary": lambda: pa.array([a.tobytes() for a in arrays], pa.binary()),
        "fixed_size_list": lambda: pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(flat)), 6),
        "list": lambda: pa.array([f.tolist() for f in flat], pa.list_(pa.float32())),
        "large_list": lambda: pa.array([f.tolist() for f in flat], pa.large_list(pa.float32())),
        "list_of_float64": lambda: pa.array([f.tolist() for f in flat], pa.list_(pa.float64())),  # cast
    }[how]()
    write_arrow(tmp_path / "a.beton", {"a": NDArrayField(np.float32, (2, 3))}, pa.table({"a": col}))
    for r, a in zip(read(tmp_path / "a.beton"), arrays):
        np.testing.assert_array_equal(r["a"], a)


def test_ndarray_field_checks_the_size(tmp_path):
    col = pa.array([[1.0] * 6, [1.0] * 5], pa.list_(pa.float32()))
    with pytest.raises(ValueError, match="sample 1"):
        write_arrow(tmp_path / "a.beton", {"a": NDArrayField(np.float32, (2, 3))}, pa.table({"a": col}))


@pytest.mark.parametrize("arrow_type", [pa.list_(pa.int32()), pa.large_list(pa.int32()), pa.list_(pa.int64())],
                         ids=str)
def test_array_field_from_lists(tmp_path, arrow_type):
    values = [[], [1], [1, -2, 3], list(range(100))]
    write_arrow(tmp_path / "a.beton", {"a": ArrayField(np.int32)}, pa.table({"a": pa.array(values, arrow_type)}))
    got = [r["a"] for r in read(tmp_path / "a.beton")]
    assert [g.tolist() for g in got] == values and all(g.dtype == np.int32 for g in got)


def test_array_field_from_bytes(tmp_path):
    values = [np.array([1.5, 2.5], np.float64), np.array([], np.float64)]
    col = pa.array([v.tobytes() for v in values], pa.binary())
    write_arrow(tmp_path / "a.beton", {"a": ArrayField(np.float64)}, pa.table({"a": col}))
    assert [r["a"].tolist() for r in read(tmp_path / "a.beton")] == [v.tolist() for v in values]


@pytest.mark.parametrize("field", [RGBImageField(write_mode="jpg", max_resolution=48), GreyImageField()],
                         ids=["rgb_jpg", "grey_raw"])
@pytest.mark.parametrize("source", ["paths", "bytes"])
def test_image_fields_from_paths_and_encoded_bytes(tmp_path, field, source):
    assert IMAGES
    if source == "paths":
        col = pa.array(IMAGES, pa.string())
        rows = [(p,) for p in IMAGES]
    else:
        blobs = [open(p, "rb").read() for p in IMAGES]
        col = pa.array(blobs, pa.binary())
        rows = [(b,) for b in blobs]
    write_arrow(tmp_path / "a.beton", {"image": field}, pa.table({"image": col}))
    write_rows(tmp_path / "b.beton", {"image": field}, rows)
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")
    images = read(tmp_path / "a.beton")
    assert len(images) == len(IMAGES) and all(r["image"].ndim == 3 for r in images)


# ---------------------------------------------------------------------------------------------
# The same bytes as the per-row path, whatever the workers.

FIELDS = {"label": IntField(), "score": FloatField(), "flag": BoolField(), "name": TextField(),
          "meta": JSONField(), "blob": BytesField(), "arr": NDArrayField(np.float32, (2, 3)),
          "var": ArrayField(np.int16)}


def table_and_rows(n):
    label = [i * 7 - 3 for i in range(n)]
    score = [i / 3 for i in range(n)]
    flag = [i % 3 == 0 for i in range(n)]
    name = [f"sample {i}" * (i % 4) for i in range(n)]
    meta = [{"i": i, "odd": bool(i % 2)} for i in range(n)]
    blob = [bytes([i % 256]) * (i % 9) for i in range(n)]
    arr = arrays23(n)
    var = [np.arange(i % 5, dtype=np.int16) - i for i in range(n)]
    table = pa.table({
        "label": label, "score": score, "flag": flag, "name": name,
        "meta": [json.dumps(m) for m in meta], "blob": pa.array(blob, pa.binary()),
        "arr": pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate([a.ravel() for a in arr])), 6),
        "var": pa.array([v.tolist() for v in var], pa.list_(pa.int16())),
    })
    rows = list(zip(label, score, flag, name, meta, blob, arr, var))
    return table, rows


def test_same_bytes_as_the_per_row_path(tmp_path):
    table, rows = table_and_rows(1000)
    a = write_arrow(tmp_path / "a.beton", FIELDS, table)
    b = write_rows(tmp_path / "b.beton", FIELDS, rows)
    assert a["num_samples"] == b["num_samples"] == 1000
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")


def test_workers_do_not_change_the_bytes(tmp_path):
    table, _ = table_and_rows(2000)
    write_arrow(tmp_path / "one.beton", FIELDS, table, num_workers=1, page_size=2 << 20)
    write_arrow(tmp_path / "two.beton", FIELDS, table, num_workers=2, page_size=2 << 20)
    assert same_bytes(tmp_path / "one.beton", tmp_path / "two.beton")


def test_values_read_back_equal_the_table(tmp_path):
    table, rows = table_and_rows(50)
    write_arrow(tmp_path / "a.beton", FIELDS, table)
    for r, row in zip(read(tmp_path / "a.beton"), rows):
        label, score, flag, name, meta, blob, arr, var = row
        assert (r["label"], r["score"], r["flag"], r["name"], r["meta"]) == (label, score, flag, name, meta)
        assert bytes(r["blob"]) == blob
        np.testing.assert_array_equal(r["arr"], arr)
        np.testing.assert_array_equal(r["var"], var)
    t = beton.open(tmp_path / "a.beton").table(["label", "score", "flag", "name"])
    for col in ("label", "score", "flag", "name"):
        assert t.column(col).to_pylist() == table.column(col).to_pylist()


# ---------------------------------------------------------------------------------------------
# Chunks, slices, batches, other libraries.

def test_chunked_columns_and_unaligned_chunks(tmp_path):
    label = pa.chunked_array([[0, 1, 2], [], [3, 4, 5, 6], [7]])
    name = pa.chunked_array([["a"], ["b", "c", "d", "e", "f"], ["g", "h"]], pa.large_string())
    table = pa.table({"label": label, "name": name})
    write_arrow(tmp_path / "a.beton", {"label": IntField(), "name": TextField()}, table)
    rows = read(tmp_path / "a.beton")
    assert [r["label"] for r in rows] == list(range(8)) and "".join(r["name"] for r in rows) == "abcdefgh"


def test_record_batches_and_slices(tmp_path):
    table, rows = table_and_rows(300)
    batches = table.slice(10, 250).to_batches(max_chunksize=37)
    assert len(batches) > 1
    write_arrow(tmp_path / "a.beton", FIELDS, pa.Table.from_batches(batches))
    write_rows(tmp_path / "b.beton", FIELDS, rows[10:260])
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")


def test_a_record_batch_and_a_dict_of_lists(tmp_path):
    batch = pa.record_batch({"label": [5, 6]})
    write_arrow(tmp_path / "a.beton", {"label": IntField()}, batch)
    write_arrow(tmp_path / "b.beton", {"label": IntField()}, {"label": [5, 6]})
    assert [r["label"] for r in read(tmp_path / "a.beton")] == [5, 6]
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")


def test_empty_table(tmp_path):
    report = write_arrow(tmp_path / "a.beton", {"label": IntField(), "name": TextField()},
                         pa.table({"label": pa.array([], pa.int64()), "name": pa.array([], pa.string())}))
    assert report["num_samples"] == 0 and len(beton.open(tmp_path / "a.beton")) == 0


def test_columns_mapping_and_one_column_for_two_fields(tmp_path):
    table = pa.table({"y": [1, 2, 3], "unused": ["a", "b", "c"]})
    w = DatasetWriter(tmp_path / "a.beton", {"label": IntField(), "score": FloatField()}, progress=False)
    w.from_arrow(table, columns={"label": "y", "score": "y"})
    assert [(r["label"], r["score"]) for r in read(tmp_path / "a.beton")] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    with pytest.raises(KeyError, match="no column 'label'"):
        w.from_arrow(table)


def test_dictionary_columns_are_decoded(tmp_path):
    col = pa.array(["cat", "dog", "cat"]).dictionary_encode()
    write_arrow(tmp_path / "a.beton", {"t": TextField()}, pa.table({"t": col}))
    assert [r["t"] for r in read(tmp_path / "a.beton")] == ["cat", "dog", "cat"]


def test_polars(tmp_path):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"label": [1, 2, 3], "score": [0.5, 1.5, 2.5], "name": ["a", "bb", "ccc"],
                       "blob": [b"x", b"", b"zz"]})
    fields = {"label": IntField(), "score": FloatField(), "name": TextField(), "blob": BytesField()}
    write_arrow(tmp_path / "a.beton", fields, df)
    write_rows(tmp_path / "b.beton", fields, list(df.iter_rows()))
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")


def test_pandas(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"label": [1, 2, 3], "score": [0.5, 1.5, 2.5], "name": ["a", "bb", "ccc"]},
                      index=[10, 20, 30])
    fields = {"label": IntField(), "score": FloatField(), "name": TextField()}
    write_arrow(tmp_path / "a.beton", fields, df)
    write_rows(tmp_path / "b.beton", fields, [(1, 0.5, "a"), (2, 1.5, "bb"), (3, 2.5, "ccc")])
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")


# ---------------------------------------------------------------------------------------------
# Errors: raised before anything is written, naming field, column and row.

def test_a_null_names_field_column_and_row(tmp_path):
    table = pa.table({"x": pa.chunked_array([[1, 2], [3, None, 5]])})
    w = DatasetWriter(tmp_path / "a.beton", {"label": IntField()}, progress=False)
    with pytest.raises(ValueError, match=r"field 'label' \(column 'x'\): row 3 is null"):
        w.from_arrow(table, columns={"label": "x"})
    assert not (tmp_path / "a.beton").exists()


@pytest.mark.parametrize("field,col", [
    (TextField(), pa.array(["a", None])),
    (BytesField(), pa.array([b"a", None])),
    (FloatField(), pa.array([1.0, None])),
    (BoolField(), pa.array([True, None])),
    (RGBImageField(), pa.array(["a.jpg", None])),
    (ArrayField(np.int32), pa.array([[1], None], pa.list_(pa.int32()))),
], ids=["text", "bytes", "float", "bool", "image", "array"])
def test_nulls_in_every_kind_of_column(tmp_path, field, col):
    with pytest.raises(ValueError, match=r"field 'f' \(column 'f'\): row 1 is null"):
        write_arrow(tmp_path / "a.beton", {"f": field}, pa.table({"f": col}))


def test_a_null_array_element_names_its_row(tmp_path):
    col = pa.array([[1, 2], [3], [4, None]], pa.list_(pa.int32()))
    with pytest.raises(ValueError, match=r"field 'a' \(column 'a'\): row 2 has a null element"):
        write_arrow(tmp_path / "a.beton", {"a": ArrayField(np.int32)}, pa.table({"a": col}))


def test_uint64_overflow_names_the_row(tmp_path):
    table = pa.table({"x": pa.array([0, 2**63 - 1, 2**63], pa.uint64())})
    with pytest.raises(ValueError, match=r"field 'x' \(column 'x'\): row 2 holds 9223372036854775808"):
        write_arrow(tmp_path / "a.beton", {"x": IntField()}, table)
    assert not (tmp_path / "a.beton").exists()


@pytest.mark.parametrize("field,col,why", [
    (IntField(), pa.array(["1"]), "int fields take an integer column, not Utf8"),
    (IntField(), pa.array([1.0]), "int fields take an integer column, not Float64"),
    (FloatField(), pa.array(["1"]), "float fields take a float or integer column"),
    (BoolField(), pa.array([1]), "bool fields take a boolean column"),
    (TextField(), pa.array([b"x"]), "text fields take a string"),
    (BytesField(), pa.array(["x"]), "bytes fields take a binary"),
    (NDArrayField(np.float32, (1,)), pa.array([1.0]), "ndarray fields of float32 take a binary"),
    (ArrayField(np.int32), pa.array([["a"]]), "array fields of int32 take a binary"),
    (RGBImageField(), pa.array([1]), "rgb_image fields take a string"),
], ids=["int<-str", "int<-float", "float<-str", "bool<-int", "text<-bytes", "bytes<-str", "ndarray<-float",
        "array<-list<str>", "image<-int"])
def test_wrong_types_name_field_and_column(tmp_path, field, col, why):
    with pytest.raises(TypeError, match=r"field 'f' \(column 'c'\): " + why):
        DatasetWriter(tmp_path / "a.beton", {"f": field}, progress=False).from_arrow(pa.table({"c": col}),
                                                                                    columns={"f": "c"})
    assert not (tmp_path / "a.beton").exists()


def test_a_list_cast_that_loses_values_is_an_error(tmp_path):
    col = pa.array([[1.5]], pa.list_(pa.float64()))
    with pytest.raises(ValueError, match=r"field 'a' \(column 'a'\)"):
        write_arrow(tmp_path / "a.beton", {"a": ArrayField(np.int32)}, pa.table({"a": col}))


def test_a_missing_image_file_names_it_or_is_skipped(tmp_path):
    col = pa.array([IMAGES[0], str(tmp_path / "missing.jpg"), IMAGES[1]])
    with pytest.raises(ValueError, match=r"sample 1, field .image.: .*missing.jpg"):
        write_arrow(tmp_path / "a.beton", {"image": RGBImageField()}, pa.table({"image": col}))
    report = write_arrow(tmp_path / "a.beton", {"image": RGBImageField()}, pa.table({"image": col}), skip_bad=True)
    assert report["num_samples"] == 2 and [i for i, _ in report["skipped"]] == [1]


def test_chunk_size_follows_the_row_size():
    from beton.writer import _arrow_chunk_size

    numbers = pa.table({"x": pa.array(range(10), pa.int64())})
    big = pa.table({"b": pa.array([b"x" * (1 << 20)] * 4)})
    assert _arrow_chunk_size({"x": IntField()}, numbers) == 65536
    assert _arrow_chunk_size({"b": BytesField()}, big) == 256
    assert _arrow_chunk_size({"x": IntField(), "i": GreyImageField()}, numbers) == 256


# ---------------------------------------------------------------------------------------------
# The native function: stream objects, progress, cancelling.

def test_native_takes_a_capsule_or_a_stream_object(tmp_path):
    table = pa.table({"x": [1, 2]})
    _native.write_arrow(str(tmp_path / "a.beton"), {"x": _native.IntField()}, table)
    _native.write_arrow(str(tmp_path / "b.beton"), {"x": _native.IntField()}, table.__arrow_c_stream__())
    assert same_bytes(tmp_path / "a.beton", tmp_path / "b.beton")
    with pytest.raises(TypeError, match="Arrow C stream"):
        _native.write_arrow(str(tmp_path / "c.beton"), {"x": _native.IntField()}, [1, 2])
    with pytest.raises(ValueError, match="2 columns for 1 fields"):
        _native.write_arrow(str(tmp_path / "c.beton"), {"x": _native.IntField()}, pa.table({"a": [1], "b": [2]}))


def test_progress_is_reported_and_false_cancels(tmp_path):
    table = pa.table({"x": list(range(1000))})
    calls = []
    _native.write_arrow(str(tmp_path / "a.beton"), {"x": _native.IntField()}, table, chunk_size=100,
                        progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (1000, 1000) and len(calls) == 10
    with pytest.raises(ValueError, match="cancel"):
        _native.write_arrow(str(tmp_path / "b.beton"), {"x": _native.IntField()}, table, chunk_size=100,
                            progress=lambda done, total: False)
    assert not (tmp_path / "b.beton").exists()


def test_an_exception_in_progress_is_reraised(tmp_path):
    def boom(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _native.write_arrow(str(tmp_path / "a.beton"), {"x": _native.IntField()}, pa.table({"x": [1, 2, 3]}),
                            chunk_size=1, progress=boom)
    assert not (tmp_path / "a.beton").exists()


def test_from_arrow_shows_a_tqdm_bar(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setenv("BETON_PROGRESS", "1")  # pytest's stderr is no terminal
    DatasetWriter(tmp_path / "a.beton", {"x": IntField()}, progress=True).from_arrow(pa.table({"x": [1, 2, 3]}))
    assert "3/3" in capsys.readouterr().err


def test_take_gives_every_field_and_from_arrow_stores_it_back(tmp_path):
    """Dataset.take reads payloads (images as stored-bytes structs, not decoded), and a writer
    given take's table stores every value byte for byte, JPEG and raw images alike."""
    src = tmp_path / "src.beton"
    fields = {"jpg": RGBImageField(write_mode="jpg", max_resolution=48), "raw": RGBImageField(max_resolution=24),
              "grey": GreyImageField(max_resolution=16), "label": IntField(), "meta": JSONField(),
              "blob": BytesField(), "arr": NDArrayField(np.dtype("float32"), (2, 3))}
    rows = [{"jpg": p, "raw": p, "grey": p, "label": i, "meta": {"i": i}, "blob": bytes([i]) * i,
             "arr": np.full((2, 3), i, dtype=np.float32)} for i, p in enumerate(IMAGES[:6])]
    write_rows(src, fields, rows)
    ds = beton.open(src)
    table = ds.take([5, 1, 1])
    assert table.column_names == list(fields) and table.num_rows == 3
    assert ds.take(beton.IndexSet([5, 1]), ["label"]).column("label").to_pylist() == [1, 5]
    jpg = table.column("jpg")[0].as_py()
    assert jpg["mode"] == 0 and jpg["data"][:2] == b"\xff\xd8" and max(jpg["width"], jpg["height"]) == 48
    raw = table.column("raw")[0].as_py()
    assert raw["mode"] == 1 and len(raw["data"]) == raw["width"] * raw["height"] * 3
    assert np.array_equal(np.frombuffer(raw["data"], np.uint8).reshape(raw["height"], raw["width"], 3),
                          ds[5]["raw"])
    assert table.column("meta").to_pylist() == ['{"i": 5}', '{"i": 1}', '{"i": 1}']  # the JSON text stored
    # Each column says its field type (what beton.ray.write_beton reads back).
    assert table.schema.field("meta").metadata[b"beton.kind"] == b"json"
    assert table.schema.field("arr").metadata[b"beton.details"] == b'["<f4", [2, 3]]'

    copy = tmp_path / "copy.beton"
    DatasetWriter(copy, fields, progress=False).from_arrow(ds.take(range(len(ds))))
    back = beton.open(copy)
    assert back.take(range(6)).equals(ds.take(range(6)))
    assert back.table().equals(ds.table())

    with pytest.raises(IndexError, match="row 6"):
        ds.take([0, 6])
    with pytest.raises(KeyError, match="nope"):
        ds.take([0], ["nope"])
    # A struct that is not an image as take gives it, or a mode that is neither JPEG nor raw.
    bad = ds.take([0], ["jpg"])
    mode7 = pa.StructArray.from_arrays([pa.array([7], pa.uint8()), bad.column("jpg").combine_chunks().field("width"),
                                        bad.column("jpg").combine_chunks().field("height"),
                                        bad.column("jpg").combine_chunks().field("data")],
                                       names=["mode", "width", "height", "data"])
    with pytest.raises(ValueError, match="row 0: image mode 7"):
        write_arrow(tmp_path / "bad.beton", {"jpg": RGBImageField()}, pa.table({"jpg": mode7}))
    with pytest.raises(TypeError, match="struct column only as Dataset.take gives images"):
        write_arrow(tmp_path / "bad.beton", {"jpg": RGBImageField()},
                    pa.table({"jpg": pa.array([{"a": 1}])}))
    assert not (tmp_path / "bad.beton").exists()
