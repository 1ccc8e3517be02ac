"""A dataset directory written before issue 38's one dataset model (a release build of 6ec5143:
import, classes, append, update, delete, add_column, splits, drop_column, tags; nine versions)
opens with today's build and reads, version by version and tag by tag, exactly as the build
that wrote it read it (tests/data/old-dataset/make.py wrote both)."""

import gzip
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

import beton

HERE = Path(__file__).resolve().parents[2] / "tests" / "data" / "old-dataset"


def _make():
    spec = importlib.util.spec_from_file_location("old_dataset_make", HERE / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("old")
    with tarfile.open(HERE / "old.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    with gzip.open(HERE / "expected.json.gz", "rt") as f:
        return tmp / "old", json.load(f)


@pytest.mark.parametrize("at", ["1", "2", "3", "4", "5", "6", "7", "8", "9", "imported", "final"])
def test_an_old_dataset_directory_reads_as_it_did(old, at):
    path, expected = old
    version = int(at) if at.isdigit() else at
    got = _make().read(beton.open(path, version=version))
    assert got == expected[at]


def test_an_old_dataset_directory_takes_new_edits(old, tmp_path):
    path, expected = old
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    ds = beton.open(copy).update({"label": "label + 100"}, where="label = 11")
    assert ds.version == 10
    labels = [s["label"] for s in expected["final"]["samples"]]
    assert [r["label"] for r in (ds[i] for i in range(len(ds)))] == [x + 100 if x == 11 else x for x in labels]


def test_an_old_dataset_directory_becomes_format_3_on_its_first_edit(old, tmp_path):
    """The automatic upgrade (docs/FORMAT.md §13): the first edit of an old directory writes its
    manifest whole in format 3 (a checkpoint: no chain rests on an older format), the next
    ones as deltas on it; every old version still reads as it did."""
    path, expected = old
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    ds = beton.open(copy)
    first = ds.update({"label": 1}, where="index = 0").version
    second = ds.update({"label": 2}, where="index = 1").version  # (an edit moves the handle)

    def stored(v):
        text = (copy / "_versions" / f"{v:020}.json").read_text()
        return json.loads(text[: text.rindex(',"checksum"')] + "}")

    assert (first, second) == (10, 11)
    assert stored(first)["format_version"] == 3 and "fragments" in stored(first)
    assert stored(second)["delta"]["base"] == first and "fragments" not in stored(second)
    reopened = beton.open(copy)
    assert [reopened[i]["label"] for i in range(2)] == [1, 2]
    assert _make().read(beton.open(copy, version="final")) == expected["final"]
