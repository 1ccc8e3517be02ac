"""Dataset directories from Python: import, edits as versions, time travel, the Loader on a
version, export, compact, cleanup, concat, diff, a writer given a directory."""

import os

import numpy as np
import pyarrow as pa
import pytest

import beton
from beton.fields import IntField, RGBImageField
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


def labels(ds):
    return ds.table(["label"]).column("label").to_pylist()


def loaded_labels(ds, **kw):
    loader = Loader(ds, batch_size=7, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"image": None}, fields=["label"], **kw)
    return [int(x) for batch in loader for x in np.asarray(batch[0]).reshape(-1)]


@pytest.fixture()
def folder_ds(tmp_path):
    out = tmp_path / "a.beton"
    DatasetWriter(out, {"image": RGBImageField(max_resolution=64), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER)
    return out


def test_curation_session(folder_ds, tmp_path):
    ds = beton.import_file(tmp_path / "ds", folder_ds)
    n = len(ds)
    assert ds.version == 1 and n == 155
    first = labels(ds)

    # Relabel, delete, add a column (SQL and values), each a new version.
    ds.update({"label": 9}, where="label = 5")
    assert ds.version == 2 and labels(ds).count(9) == first.count(5)
    ds.delete("label = 0")
    assert len(ds) == n - first.count(0)
    ds.add_column("score", np.linspace(0, 1, len(ds)))
    ds.add_column("wide", "image.width > image.height")
    assert ds.table(["score"]).column("score").type == pa.float64()
    assert ds.where("score > 0.5 AND wide").tolist() == [
        i for i, (s, w) in enumerate(zip(np.linspace(0, 1, len(ds)), ds.table(["wide"]).column("wide").to_pylist()))
        if s > 0.5 and w]
    ds.update_rows([0, 1], {"score": [5.0, 6.0]})
    assert ds[0]["score"] == 5.0 and ds[1]["score"] == 6.0
    ds.tag("curated")

    # Append an ImageFolder: the added columns are NULL in the new rows (they have no value).
    before = len(ds)
    ds.append(IMAGEFOLDER, max_resolution=64)
    assert len(ds) == before + 155
    assert ds[len(ds) - 1]["score"] is None and ds[len(ds) - 1]["wide"] is None
    assert ds.where("score IS NULL").tolist() == list(range(before, before + 155))
    assert ds.table(["score"]).column("score").null_count == 155

    # The Loader trains on the version: its rows, in index order, edited labels included.
    assert loaded_labels(ds) == labels(ds)
    # The process cache reads the version's data files under one bound.
    assert loaded_labels(ds, os_cache=False) == labels(ds)
    assert loaded_labels(str(tmp_path / "ds"), version="curated") == labels(beton.open(tmp_path / "ds", version="curated"))

    # Time travel and history.
    v1 = beton.open(tmp_path / "ds", version=1)
    assert labels(v1) == first
    ops = [v["operation"] for v in ds.versions()]
    assert ops == ["import", "update", "delete", "add_column", "add_column", "update", "append"]
    d = ds.diff(1, ds.version)
    assert len(d["deleted"]) == first.count(0) and len(d["added"]) == 155
    assert len(d["changed"]["label"]) == first.count(5)
    assert "score" in d["added_columns"]
    ds.restore("curated")
    assert len(ds) == before
    with pytest.raises(KeyError, match="no tag 'nope'"):
        ds.restore("nope")

    # Compact, export (FFCV's format; splits kept), cleanup.
    ds.save_splits(val=ds.where("label = 9"))
    ds.compact()
    assert ds.versions()[-1]["data_files"] == 1 and ds.versions()[-1]["deleted_rows"] == 0
    assert ds.split("val").tolist() == ds.where("label = 9").tolist()
    out = tmp_path / "export.beton"
    assert ds.export(out, where="score < 0.5") == len(ds.where("score < 0.5"))
    exported = beton.open(out)
    assert labels(exported) == [l for l, s in zip(labels(ds), ds.table(["score"]).column("score").to_pylist()) if s < 0.5]
    removed = ds.cleanup(keep_versions=1, older_than_seconds=0)
    assert removed["versions"] and removed["bytes"] > 0
    assert labels(beton.open(tmp_path / "ds")) == labels(ds)
    assert beton.open(tmp_path / "ds", version="curated").version == 6  # tagged: kept


def test_errors_name_what_is_wrong(folder_ds, tmp_path):
    with pytest.raises(TypeError, match="read-only"):
        beton.open(folder_ds).delete("label = 1")
    ds = beton.import_file(tmp_path / "ds", folder_ds)
    with pytest.raises(KeyError, match="nope"):
        ds.update({"nope": 1})
    with pytest.raises(ValueError, match="exists already"):
        ds.add_column("label", [1] * len(ds))
    with pytest.raises(ValueError, match="3 values for 155 rows"):
        ds.add_column("x", [1, 2, 3])
    with pytest.raises(ValueError, match="no version 42"):
        beton.open(tmp_path / "ds", version=42)
    with pytest.raises(ValueError, match="SQL"):
        ds.delete("label = ")
    # A concurrent schema change loses with a ConflictError, and nothing is committed.
    other = beton.open(tmp_path / "ds")
    ds.add_column("a", "label + 1")
    with pytest.raises(beton.ConflictError):
        other.drop_column("label")
    assert [v["operation"] for v in ds.versions()] == ["import", "add_column"]


def test_writer_given_a_directory_and_concat(tmp_path, folder_ds):
    d = tmp_path / "made"
    w = DatasetWriter(str(d) + os.sep, {"image": RGBImageField(max_resolution=32), "label": IntField()},
                      progress=False)
    w.from_imagefolder(IMAGEFOLDER)
    ds = beton.open(d)
    assert ds.version == 1 and len(ds) == 155
    w.from_imagefolder(IMAGEFOLDER)  # into an existing dataset: appended as a new version
    assert beton.open(d).version == 2 and len(beton.open(d)) == 310
    both = beton.concat([folder_ds, d], tmp_path / "both")
    assert len(both) == 155 + 310 and labels(both)[:155] == labels(beton.open(folder_ds))


def test_images_arrays_and_json_are_editable_columns(folder_ds, tmp_path):
    """Any field type: replace images row by row, add an image column, an NDArray column and a
    JSON column; ds[i], the Loader, diff and export see them, the data file is never rewritten."""
    from beton.fields import JSONField, NDArrayField
    from beton.fields.decoders import SimpleRGBImageDecoder

    data_before = open(folder_ds, "rb").read()
    ds = beton.import_file(tmp_path / "ds", folder_ds)
    n = len(ds)
    red = np.zeros((20, 30, 3), np.uint8)
    red[..., 0] = 255
    ds.update_rows([3, 4], {"image": [red, red]}, message="replace two images")
    assert ds[3]["image"].shape == (20, 30, 3) and int(ds[3]["image"][..., 0].mean()) > 200
    assert ds[5]["image"].shape != (20, 30, 3) or not np.array_equal(ds[5]["image"], ds[3]["image"])
    assert ds.table(["image.width"]).column("image.width").to_pylist()[3:5] == [30, 30]
    assert open(folder_ds, "rb").read() == data_before

    thumbs = [np.full((8, 8, 3), i % 256, np.uint8) for i in range(n)]
    ds.add_column("thumb", thumbs, field=RGBImageField(write_mode="raw"))
    ds.add_column("emb", [np.arange(4, dtype=np.float32) + i for i in range(n)],
                  field=NDArrayField(np.float32, (4,)))
    ds.add_column("meta", [{"i": i} for i in range(n)], field=JSONField())
    assert ds[7]["meta"] == {"i": 7}
    np.testing.assert_array_equal(ds[7]["emb"], np.arange(4, dtype=np.float32) + 7)
    np.testing.assert_array_equal(ds[7]["thumb"], thumbs[7])
    # emb, a 1-D array of floats, is a vector column (issue 40): its vectors, not its size.
    assert ds.where("\"thumb.width\" = 8 AND l2_distance(emb, [0, 1, 2, 3]) = 2 * index").tolist() == list(range(n))
    np.testing.assert_array_equal(ds.vectors("emb")[9], np.arange(4, dtype=np.float32) + 9)

    # The loader reads added and replaced values as stored ones.
    loader = Loader(ds, batch_size=5, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"image": None, "thumb": [SimpleRGBImageDecoder()], "meta": None,
                               "label": None})
    batches = [(np.asarray(t), np.asarray(e)) for t, e in loader]  # schema order: thumb, emb
    thumb = np.concatenate([t for t, _ in batches])
    emb = np.concatenate([e for _, e in batches])
    assert emb.shape == (n, 4) and emb[9, 0] == 9
    assert thumb.shape[0] == n and int(thumb[12].mean()) == 12

    # The diff names the replaced images; an export carries every edited value.
    d = ds.diff(1, 2)
    assert d["changed"]["image"] == [3, 4]
    out = tmp_path / "export.beton"
    ds.export(out)
    exported = beton.open(out)
    assert exported[3]["image"].shape == (20, 30, 3) and exported[7]["meta"] == {"i": 7}

    # Wrong values are refused, naming the value.
    with pytest.raises(ValueError, match="value 0"):
        ds.add_column("bad", [np.zeros(3, np.float32)] * n, field=NDArrayField(np.float32, (4,)))
