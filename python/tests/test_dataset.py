"""beton.open: values, Arrow tables (the native buffers, no copy) and polars, SQL, IndexSet, splits, errors."""

import numpy as np
import pyarrow as pa
import pytest

import beton


def test_values_round_trip(small):
    ds = beton.open(small)
    assert len(ds) == 600
    assert ds.schema["arr"] == ("ndarray", "<f4", (2, 3))
    s = ds[123]
    assert s["label"] == 123 and s["score"] == 61.5 and s["name"] == "t123"
    assert s["blob"] == bytes([123]) * (123 % 7)
    assert s["meta"] == {"i": 123}
    np.testing.assert_array_equal(s["arr"], np.arange(6, dtype=np.float32).reshape(2, 3) + 123)
    assert s["image"].shape == (4, 5, 3) and (s["image"] == 123).all()
    assert ds[-1]["label"] == 599
    with pytest.raises(IndexError):
        ds[600]


def test_table_and_polars(small):
    ds = beton.open(small)
    t = ds.table()
    assert t.num_rows == 600
    assert t.column("label").to_pylist() == list(range(600))
    assert t.schema.field("image.width").type == pa.uint16()
    only = ds.table(["label", "score"])
    assert only.column_names == ["label", "score"]
    df = ds.to_polars(["label", "name"])
    assert df.shape == (600, 2) and df["name"][7] == "t7"
    assert pa.table(ds).num_rows == 600  # the Arrow C stream protocol


def test_table_is_the_native_arrow_buffers_and_polars_gets_the_same_rows(small):
    ds = beton.open(small)
    numeric = ["index", "label", "score", "blob", "image.width", "image.height", "image.nbytes"]
    ds.table(numeric)  # warm-up: pyarrow's one-off allocations (type and schema caches)
    before = pa.total_allocated_bytes()
    t = ds.table(numeric)
    # Imported through the Arrow C stream, the columns are Rust's buffers: pyarrow's memory pool
    # allocated nothing for them (a copy of the table would take t.nbytes from it).
    assert pa.total_allocated_bytes() - before == 0 < t.nbytes
    copy = pa.Table.from_pydict(t.to_pydict(), schema=t.schema)
    assert pa.total_allocated_bytes() - before >= t.nbytes, "the pool counts copies (the check can fail)"
    assert copy.equals(t)
    assert t.column("score").to_numpy().tolist() == [i / 2 for i in range(600)]
    assert t.column("blob").to_pylist() == [i % 7 for i in range(600)]
    every = ds.table()
    df = ds.to_polars()
    assert df.columns == every.column_names and df.height == 600
    assert df.to_dict(as_series=False) == every.to_pydict()


def test_query_where_and_index_sets(small):
    ds = beton.open(small)
    got = ds.query("SELECT label % 3 AS k, count(*) AS n FROM samples GROUP BY label % 3 ORDER BY k")
    assert got.to_pydict() == {"k": [0, 1, 2], "n": [200, 200, 200]}
    sel = ds.where("label < 10 OR name LIKE 't59%'")
    assert sel.tolist() == list(range(10)) + [59] + list(range(590, 600))
    a, b = beton.IndexSet(range(0, 10)), beton.IndexSet([5, 20, 3, 3])
    assert (a | b).tolist() == list(range(10)) + [20]
    assert (a & b).tolist() == [3, 5] and (a - b).tolist() == [0, 1, 2, 4, 6, 7, 8, 9]
    tr, va = beton.IndexSet.all(600).split([0.9, 0.1], seed=4)
    assert len(tr) == 540 and len(va) == 60 and not (tr & va)
    assert beton.IndexSet.from_bytes(tr.to_bytes()) == tr
    # numpy views the ids in place, read-only, and the view keeps the set alive.
    view = np.asarray(ds.where("label < 10 OR name LIKE 't59%'"))
    import gc

    gc.collect()
    assert view.dtype == np.uint64 and view.tolist() == sel.tolist() and not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1
    assert np.asarray(beton.IndexSet([])).shape == (0,)
    with pytest.raises(ValueError, match="no column named 'nope'"):
        ds.where("nope < 3")
    with pytest.raises(ValueError, match="line 1, column"):
        ds.where("label <")


def test_named_splits(small, tmp_path):
    path = tmp_path / "copy.beton"
    path.write_bytes(small.read_bytes())
    ds = beton.open(path)
    tr, va = beton.IndexSet.all(600).split([0.8, 0.2], seed=1)
    ds.save_splits(train=tr, val=va)
    again = beton.open(path)
    assert again.split("val") == va and set(again.splits()) == {"train", "val"}
    assert again.where("in_split('val') AND label < 100").tolist() == [i for i in va.tolist() if i < 100]
    again.remove_splits("train")
    assert set(beton.open(path).splits()) == {"val"}
    with pytest.raises(KeyError, match="no split named 'train'"):
        again.split("train")


def test_bad_files_raise_clear_errors(small, tmp_path):
    with pytest.raises(OSError):
        beton.open(tmp_path / "missing.beton")
    cut = tmp_path / "cut.beton"
    cut.write_bytes(small.read_bytes()[:5000])
    with pytest.raises(beton.CorruptFileError, match="byte"):
        beton.open(cut)
