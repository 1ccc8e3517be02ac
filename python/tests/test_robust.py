"""Never a dead interpreter: every risky call runs in a child Python, which must end with a
Python exception (printed as ``RAISED <type>: <message>``), never a signal or a hang."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import beton
from beton.fields import BytesField, IntField, RGBImageField
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter


def run_child(code: str, timeout: float = 120) -> str:
    """Runs ``code`` in a fresh interpreter; returns its stdout. Fails on a signal or a hang."""
    script = "import sys, traceback\ntry:\n" + textwrap.indent(textwrap.dedent(code), "    ") + (
        "\nexcept Exception as e:\n    print(f'RAISED {type(e).__name__}: {e}')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"child died (returncode {done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def write_blobs(path, n=200, size=20_000):
    DatasetWriter(path, {"label": IntField(), "blob": BytesField()}, num_workers=1, progress=False) \
        .from_indexed_dataset([(i, np.full(size, i % 256, np.uint8)) for i in range(n)])


def test_a_huge_size_word_is_an_exception_not_an_abort(tmp_path):
    path = tmp_path / "bad.beton"
    write_blobs(path)
    data = bytearray(path.read_bytes())
    # The row of sample 5: label 5, the blob's pointer, then its size word (20000).
    size = (20_000).to_bytes(8, "little")
    rows = [k for k in range(len(data) - 24) if data[k:k + 8] == (5).to_bytes(8, "little")
            and data[k + 16:k + 24] == size]
    offset = rows[0] + 16
    data[offset:offset + 8] = (1 << 42).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    out = run_child(f"""
        import beton
        from beton.loader import Loader
        for batch in Loader({str(path)!r}, batch_size=16):
            pass
        print("NO ERROR")
    """)
    assert "RAISED CorruptFileError" in out and "sample 5, field 'blob'" in out, out
    out = run_child(f"""
        import beton
        beton.open({str(path)!r})[5]
    """)
    assert "RAISED CorruptFileError" in out and "sample 5" in out, out


def test_a_file_truncated_while_open_is_an_oserror_not_sigbus(tmp_path):
    path = tmp_path / "cut.beton"
    write_blobs(path, n=400, size=30_000)
    out = run_child(f"""
        import os, beton
        from beton.loader import Loader
        ds = beton.open({str(path)!r})
        loader = Loader(ds, batch_size=16, num_workers=2)
        os.truncate({str(path)!r}, os.path.getsize({str(path)!r}) // 3)
        try:
            for _ in loader:
                pass
            print("LOADER NO ERROR")
        except OSError as e:
            print("LOADER OSError", e)
        ds[399]
    """)
    assert "LOADER OSError" in out and "cut.beton" in out, out
    assert "RAISED BetonIOError" in out and "truncated or changed" in out, out


def test_sql_of_any_size(tmp_path):
    path = tmp_path / "q.beton"
    write_blobs(path, n=100, size=10)
    ds = beton.open(path)
    chain = " OR ".join(f"label = {i % 50}" for i in range(20_000))
    assert len(ds.where(chain)) == 50
    many = ", ".join(str(i) for i in range(100_000))
    assert len(ds.where(f"label IN ({many})")) == 100
    out = run_child(f"""
        import beton
        beton.open({str(path)!r}).where("(" * 100_000 + "label = 1" + ")" * 100_000)
    """)
    assert "RAISED QueryError" in out and "line 1" in out, out


def test_a_handle_never_writes_into_a_replaced_file(tmp_path):
    path = tmp_path / "d.beton"
    write_blobs(path, n=10, size=5)
    old = beton.open(path)
    write_blobs(path, n=12, size=5)  # another write to the same path
    with pytest.raises(OSError, match="no longer the one this handle opened"):
        old.save_splits(flagged=beton.IndexSet([1, 2]))
    assert beton.open(path).splits() == {}
    new = beton.open(path)
    new.save_splits(flagged=beton.IndexSet([1, 2]))
    assert len(beton.open(path).split("flagged")) == 2


def test_bad_loader_arguments_name_themselves(small):
    for kwargs, name in [({"batch_size": -1}, "batch_size"), ({"batch_size": 0}, "batch_size"),
                         ({"batch_size": 8, "num_workers": 100_000}, "threads"),
                         ({"batch_size": 8, "batches_ahead": -2}, "batches_ahead"),
                         ({"batch_size": 8, "seed": -1}, "seed"),
                         ({"batch_size": 8, "indices": [3, -1]}, "indices")]:
        with pytest.raises(ValueError, match=name):
            Loader(small, **kwargs)


def test_repeated_indices_are_read_as_often_as_given(small):
    rows = [5, 5, 5, 9, 1, 9]
    for order in (OrderOption.SEQUENTIAL, OrderOption.RANDOM, OrderOption.QUASI_RANDOM):
        loader = Loader(small, batch_size=4, order=order, indices=rows, drop_last=False,
                        pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None, "image": None})
        seen = sorted(x for (label,) in loader for x in label.ravel().tolist())
        assert seen == sorted(rows), order
    # A set stays a set.
    assert len(Loader(small, batch_size=1, indices=beton.IndexSet([5, 5, 9]))) == 2


def test_sequential_reads_a_list_of_indices_in_the_order_given(small):
    """FFCV's ``indices``: SEQUENTIAL yields them as given, repeats repeated."""
    only_label = {"blob": None, "meta": None, "name": None, "arr": None, "score": None, "image": None}
    for rows in ([5, 3, 1], [9, 2, 9, 0, 2], [1, 2, 3]):
        loader = Loader(small, batch_size=2, indices=rows, drop_last=False, pipelines=only_label)
        assert [x for (label,) in loader for x in label.ravel().tolist()] == rows
        assert [x for (label,) in loader for x in label.ravel().tolist()] == rows, "and the same every epoch"
        assert loader.indices.tolist() == rows and loader.indices.dtype == np.uint64  # FFCV's array
        assert sorted(set(rows)) == loader.index_set.tolist()


def test_skip_bad_leaves_out_unreadable_images_and_names_them(tmp_path):
    root = tmp_path / "folder"
    (root / "a").mkdir(parents=True)
    import shutil
    from pathlib import Path

    photos = sorted((Path(__file__).resolve().parents[2] / "examples" / "data" / "imagefolder").rglob("*.jpg"))
    for i, photo in enumerate(photos[:3]):
        shutil.copy(photo, root / "a" / f"ok{i}.jpg")
    (root / "a" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    out = tmp_path / "f.beton"
    fields = {"image": RGBImageField(), "label": IntField()}
    with pytest.raises(ValueError, match="broken.jpg"):
        DatasetWriter(out, fields, progress=False).from_imagefolder(root)
    assert not out.exists()
    report = DatasetWriter(out, fields, progress=False, skip_bad=True).from_imagefolder(root)
    assert report["num_samples"] == 3
    assert [(i, "broken.jpg" in why) for i, why in report["skipped"]] == [(0, True)]
    assert len(beton.open(out)) == 3
