"""The columnar copy from Python: made after ``DatasetWriter``'s writes by a background worker
(waited for at exit), read in place by ``ds.table()``, ``ds.where`` and ``ds.query``, reported by
``ds.explain``, and optional (a file without one gives the same answers)."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa

import beton
from beton import DatasetWriter
from beton.fields import FloatField, IntField, TextField

ROWS = 70_000  # above beton_query::columnar::MIN_ROWS (65,536)


def _write(path, rows=ROWS, wait=True):
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
    if wait:
        beton._native.wait_for_columnar_copies()
    return table


def test_the_writer_makes_the_copy_and_queries_read_it(tmp_path):
    path = tmp_path / "t.beton"
    source = _write(path)
    copy = tmp_path / "t.beton.columns.arrow"
    assert copy.exists(), "made by the writer"
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


def test_the_copy_is_made_after_the_write_returns_and_queries_meanwhile_agree(tmp_path):
    path = tmp_path / "t.beton"
    source = _write(path, wait=False)
    # Whether or not the worker is done: the same rows (from the data table until it is).
    expect = [k for k, lab in enumerate(source["label"].to_pylist()) if lab < 3]
    assert list(beton.open(path).where("label < 3")) == expect
    beton._native.wait_for_columnar_copies()
    assert (tmp_path / "t.beton.columns.arrow").exists()
    assert beton.open(path).explain("label < 3").scan["row_major"] == 0
    assert list(beton.open(path).where("label < 3")) == expect


def test_a_script_that_ends_right_after_its_write_leaves_the_copy(tmp_path):
    path = tmp_path / "t.beton"
    script = (
        "import sys, numpy as np, pyarrow as pa; from beton import DatasetWriter; from beton.fields import IntField; "
        f"DatasetWriter(sys.argv[1], {{'label': IntField()}}, progress=False).from_arrow("
        f"pa.table({{'label': np.arange({ROWS})}}))"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=120)
    assert (tmp_path / "t.beton.columns.arrow").exists(), "the interpreter waited for the worker"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")], "no half-made copy left"


def test_a_forked_child_does_not_wait_for_its_parents_worker(tmp_path):
    if not hasattr(os, "fork"):
        return
    _write(tmp_path / "a.beton", wait=False)
    pid = os.fork()
    if pid == 0:  # the child: its exit handlers run (os._exit would skip them)
        code = 0
        try:
            beton._native.wait_for_columnar_copies()
        except BaseException:
            code = 1
        os._exit(code)
    deadline = 30
    import time

    start = time.monotonic()
    while time.monotonic() - start < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        raise AssertionError("the child waited for a worker it does not have")
    beton._native.wait_for_columnar_copies()
    assert (tmp_path / "a.beton.columns.arrow").exists()


def test_files_that_move_on_get_no_copy_and_leave_nothing_behind(tmp_path):
    # A dataset directory's write goes through a temporary file in _tmp/ that becomes a version:
    # it gets no copy of its own (the worker would race the folder's removal).
    directory = str(tmp_path / "dir") + os.sep
    _write(directory, wait=True)
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
    beton._native.wait_for_columnar_copies()
    with pa.memory_map(str(tmp_path / "f.beton.columns.arrow")) as f:
        stamp = json.loads(pa.ipc.open_file(f).schema.metadata[b"beton.source"])
    # Stamped with the file as it is after the class names were stored: valid, not rebuilt.
    assert stamp["mtime_ns"] == os.stat(path).st_mtime_ns and stamp["len"] == os.path.getsize(path)
    assert beton.open(path).classes[:2] == sorted(os.listdir(folder))[:2]
