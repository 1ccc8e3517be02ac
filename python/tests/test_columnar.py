"""The columnar copy from Python: made by ``DatasetWriter`` where it is cheap beside the write
(payloads dominate the file) and by the first query otherwise (table-only files), read in place
by ``ds.table()``, ``ds.where`` and ``ds.query``, reported by ``ds.explain``, and optional (a file
without one gives the same answers)."""

import os

import numpy as np
import pyarrow as pa

import beton
from beton import DatasetWriter
from beton.fields import FloatField, IntField, TextField

ROWS = 70_000  # above beton_query::columnar::MIN_ROWS (65,536)


def _write(path, rows=ROWS):
    i = np.arange(rows, dtype=np.int64)
    table = pa.table(
        {
            "label": (i * 2654435761) % 97,
            "score": i / 8.0,
            "caption": pa.array([f"c{k % 5}" for k in range(rows)]),
        }
    )
    DatasetWriter(path, {"label": IntField(), "score": FloatField(), "caption": TextField()}, progress=False).from_arrow(
        table
    )
    return table


def test_the_first_query_makes_a_table_only_files_copy_and_queries_read_it(tmp_path):
    path = tmp_path / "t.beton"
    source = _write(path)
    copy = tmp_path / "t.beton.columns.arrow"
    # Table-only: the copy would double the write, so the write makes none; the first query does.
    assert not copy.exists()
    assert len(beton.open(path).where("label < 10")) == sum(1 for k in range(ROWS) if (k * 2654435761) % 97 < 10)
    assert copy.exists(), "made by the first query"
    # It is a plain Arrow IPC file: pyarrow reads it.
    with pa.memory_map(str(copy)) as f:
        held = pa.ipc.open_file(f).read_all()
    assert held.column_names == ["label", "score"]
    assert held.schema.metadata[b"beton.columnar"] == b"1"

    ds = beton.open(path)
    t = ds.table()
    assert t.column("label").to_pylist()[:5] == source.column("label").to_pylist()[:5]
    assert t.column("score").equals(source.column("score"))
    ids = ds.where("label < 10 AND score >= 100")
    expect = [k for k, (lab, s) in enumerate(zip(source["label"].to_pylist(), source["score"].to_pylist())) if lab < 10 and s >= 100]
    assert list(ids) == expect
    grouped = ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label").table
    assert grouped.column("n").to_pylist()[:3] == [int(((source["label"].to_numpy() == k)).sum()) for k in range(3)]

    e = ds.explain("label < 10 AND caption = 'c1'")
    assert e.scan["columnar_columns"] == ["label"]
    assert e.scan["columnar"] == ROWS * 8 and e.scan["row_major"] == 0
    assert "from the columnar copy (label)" in str(e)


def test_a_file_without_its_copy_gives_the_same_answers(tmp_path):
    path = tmp_path / "t.beton"
    _write(path)
    ds = beton.open(path)
    ds.where("label = 0")  # makes the copy
    with_copy = (list(ds.where("label BETWEEN 3 AND 9")), ds.table().column("score").to_pylist()[-3:])
    os.remove(tmp_path / "t.beton.columns.arrow")
    os.environ["BETON_COLUMNAR"] = "off"
    try:
        ds = beton.open(path)
        assert (list(ds.where("label BETWEEN 3 AND 9")), ds.table().column("score").to_pylist()[-3:]) == with_copy
        assert ds.explain("label = 3").scan["row_major"] > 0
        assert not (tmp_path / "t.beton.columns.arrow").exists(), "off: none made"
    finally:
        del os.environ["BETON_COLUMNAR"]
    # On: the next query makes it again.
    assert list(beton.open(path).where("label BETWEEN 3 AND 9")) == with_copy[0]
    assert (tmp_path / "t.beton.columns.arrow").exists()


def test_saving_splits_keeps_the_copy_valid(tmp_path):
    path = tmp_path / "t.beton"
    _write(path)
    ds = beton.open(path)
    ds.save_splits(low=ds.where("label < 5"))
    e = beton.open(path).explain("in_split('low') AND score > 1")
    assert e.scan["columnar_columns"] == ["score"], e.scan
    assert e.rows_matched == len(ds.where("label < 5 AND score > 1"))


def test_the_writer_makes_the_copy_where_payloads_dominate_the_file(tmp_path):
    from beton.fields import BytesField

    path = tmp_path / "b.beton"
    DatasetWriter(path, {"label": IntField(), "blob": BytesField()}, progress=False).from_arrow(
        pa.table({"label": np.arange(ROWS), "blob": pa.array([b"x" * 300] * ROWS, pa.binary())}))
    assert (tmp_path / "b.beton.columns.arrow").exists(), "made by the writer"
    assert beton.open(path).explain("label < 3").scan["row_major"] == 0


def test_files_that_move_on_get_no_copy_and_leave_nothing_behind(tmp_path):
    # A dataset directory's write goes through a temporary file in _tmp/ that becomes a version:
    # it gets no copy of its own (the worker would race the folder's removal).
    directory = str(tmp_path / "dir") + os.sep
    _write(directory)
    leftovers = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path / "dir" / "_tmp") for f in fs]
    assert leftovers == []
    assert len(beton.open(directory).where("label < 3")) == sum(1 for k in range(ROWS) if (k * 2654435761) % 97 < 3)


def test_an_imagefolder_copy_is_made_after_its_class_names(tmp_path, monkeypatch):
    import json

    folder = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
    from beton.fields import RGBImageField

    monkeypatch.setenv("BETON_COLUMNAR", "always")
    path = tmp_path / "f.beton"
    DatasetWriter(path, {"image": RGBImageField(max_resolution=32), "label": IntField()},
                  progress=False).from_imagefolder(folder)
    with pa.memory_map(str(tmp_path / "f.beton.columns.arrow")) as f:
        stamp = json.loads(pa.ipc.open_file(f).schema.metadata[b"beton.source"])
    # Stamped with the file as it is after the class names were stored: valid, not rebuilt.
    assert stamp["mtime_ns"] == os.stat(path).st_mtime_ns and stamp["len"] == os.path.getsize(path)
    assert beton.open(path).classes[:2] == sorted(os.listdir(folder))[:2]
