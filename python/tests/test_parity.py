"""The Python API at par with the CLI: explain, ImageFolder paths and class names, a copy that
never re-encodes, readable reprs, and numpydoc docstrings with examples everywhere public."""

import doctest
import inspect
import os
import pydoc

import numpy as np
import pytest

import beton
import beton.dataset
import beton.writer
import beton.loader.loader
from beton import IndexSet
from beton.fields import FloatField, IntField, RGBImageField, TextField
from beton.writer import DatasetWriter

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
CLASSES = sorted(d for d in os.listdir(ROOT) if not d.startswith("."))


def _photos(path, **kw):
    w = DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", max_resolution=96), "label": IntField()},
                      num_workers=2, progress=False)
    return w, w.from_imagefolder(ROOT, **kw)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """The 155 bundled photos as JPEGs, with their paths."""
    path = tmp_path_factory.mktemp("parity") / "photos.beton"
    _photos(path, with_path=True)
    return path


def stored(native, i):
    """Sample ``i`` with images as their stored bytes (mode, size and payload)."""
    return native.get(i, decode_images=False)


# 1. explain
def test_explain_file_gives_the_plan_and_its_fields(photos):
    ds = beton.open(photos)
    e = ds.explain("label < 3 AND path LIKE '%a%'")
    assert e.columns == ["label", "path"] and e.heap_columns == ["path"]
    assert e.ids == ds.where("label < 3 AND path LIKE '%a%'")
    assert e.rows_matched == len(e.ids) and e.num_rows == len(ds) == 155
    assert 0 < e.matched["bytes"] < e.total["bytes"] and e.matched["pages"] <= e.total["pages"]
    assert e.total["allocations"] == 2 * 155  # image and path payloads
    assert e.data_files == [] and e.version == 0  # a .beton file is version 0 of itself
    text = str(e)
    for line in ("file:", "columns:", "heap columns:", "rows matched:", "allocations:", "pages:",
                 "payload bytes:"):
        assert line in text, text
    assert f"{e.rows_matched} of 155" in text
    assert repr(e).startswith("Explain(") and "rows matched" in repr(e)
    with pytest.raises(ValueError, match="no column named 'nosuch'"):
        ds.explain("nosuch > 1")
    with pytest.raises(ValueError, match="SQL"):
        ds.explain("label <")


def test_explain_version_names_data_files(photos, tmp_path):
    ds = beton.import_file(tmp_path / "ds", photos)
    ds.append(photos)
    e = ds.explain("label = 1")
    assert e.version == 2 and len(e.data_files) == 2
    assert sum(f["rows_matched"] for f in e.data_files) == e.rows_matched == 2 * len(beton.open(photos).where("label = 1"))
    assert "data file 0" in str(e) and "data file 1" in str(e) and "dataset:" in str(e)


# 2. from_imagefolder with paths
def test_from_imagefolder_with_path_adds_the_path_field(photos):
    ds = beton.open(photos)
    assert ds.schema == {"image": "rgb_image", "label": "int", "path": "text"}
    for i in (0, 77, 154):
        row = ds[i]
        assert os.path.isfile(os.path.join(ROOT, row["path"]))
        assert row["path"].split(os.sep)[0] == CLASSES[row["label"]]


def test_from_imagefolder_writer_fields_include_the_path_field(tmp_path):
    w, report = _photos(tmp_path / "p.beton", with_path=True, path_field="file")
    assert list(w.fields) == ["image", "label", "file"] and isinstance(w.fields["file"], TextField)
    assert report["classes"] == CLASSES and report["num_samples"] == 155


def test_from_imagefolder_errors_name_what_is_wrong(tmp_path):
    extra = DatasetWriter(tmp_path / "x.beton", {"image": RGBImageField(), "label": IntField(), "score": FloatField()},
                          progress=False)
    with pytest.raises(ValueError, match=r"it has \['score'\] too"):
        extra.from_imagefolder(ROOT)
    wrong_label = DatasetWriter(tmp_path / "x.beton", {"image": RGBImageField(), "label": FloatField()}, progress=False)
    with pytest.raises(TypeError, match="'label' gets the labels: it must be an IntField, not FloatField"):
        wrong_label.from_imagefolder(ROOT)
    wrong_path = DatasetWriter(tmp_path / "x.beton", {"image": RGBImageField(), "label": IntField(),
                                                      "path": IntField()}, progress=False)
    with pytest.raises(TypeError, match="'path' is a IntField; the image paths are text"):
        wrong_path.from_imagefolder(ROOT, with_path=True)
    missing = DatasetWriter(tmp_path / "x.beton", {"img": RGBImageField(), "label": IntField()}, progress=False)
    with pytest.raises(ValueError, match=r"it lacks \['image'\]"):
        missing.from_imagefolder(ROOT)
    assert not os.path.exists(tmp_path / "x.beton")


# 3. class names
def test_classes_stored_in_the_file_and_not_a_split(photos, tmp_path):
    ds = beton.open(photos)
    assert ds.classes == CLASSES
    assert ds.splits() == {}
    ds.save_splits(val=IndexSet([1, 2]))
    assert list(beton.open(photos).splits()) == ["val"] and beton.open(photos).classes == CLASSES
    ds.remove_splits("val")
    with pytest.raises(ValueError, match="reserved"):
        ds.save_splits(**{":classes": IndexSet([1])})
    assert beton.open(photos).classes == CLASSES
    plain = tmp_path / "plain.beton"
    DatasetWriter(plain, {"x": IntField()}, progress=False).from_iterable([(1,), (2,)])
    assert beton.open(plain).classes is None


def test_classes_kept_across_versions(photos, tmp_path):
    ds = beton.import_file(tmp_path / "ds", photos)
    assert ds.classes == CLASSES
    ds.append(photos)
    ds.delete("label = 0")
    ds.update({"label": "label + 0"})
    assert ds.classes == CLASSES
    ds.compact()
    assert ds.classes == CLASSES and beton.open(tmp_path / "ds", version=1).classes == CLASSES
    out = tmp_path / "out.beton"
    ds.export(out, where="label = 1")
    assert beton.open(out).classes == CLASSES
    # A dataset without class names takes those of appended data; a directory written from an
    # ImageFolder has them.
    plain = tmp_path / "plain.beton"
    DatasetWriter(plain, {"image": RGBImageField(), "label": IntField(), "path": TextField()},
                  progress=False).from_iterable([(np.zeros((4, 4, 3), np.uint8), 0, "x")])
    d2 = beton.import_file(tmp_path / "d2", plain)
    assert d2.classes is None
    assert d2.append(photos).classes == CLASSES
    _, report = _photos(str(tmp_path / "d3") + os.sep)
    assert report["version"] == 1 and beton.open(tmp_path / "d3").classes == CLASSES


# 4. a copy that never re-encodes
def _assert_same_stored(src_native, rows, dst):
    out = beton.open(dst)._native
    assert len(out) == len(rows)
    for k, i in enumerate(rows):
        a, b = stored(src_native, i), stored(out, k)
        assert list(b) == list(a) and all(a[f] == b[f] for f in a), (i, k)


def test_copy_of_a_file_keeps_every_stored_byte(photos, tmp_path):
    src = beton.open(photos)
    out = tmp_path / "copy.beton"
    w = DatasetWriter(out, {"image": RGBImageField(), "label": IntField(), "path": TextField()}, progress=False)
    report = w.from_indexed_dataset(src)
    assert report["num_samples"] == 155
    _assert_same_stored(src._native, range(155), out)
    assert all(stored(src._native, i)["image"][1] == "jpg" for i in range(155))
    assert beton.open(out).classes == CLASSES


def test_copy_of_a_subset_a_field_selection_and_a_shuffle(photos, tmp_path):
    src = beton.open(photos)
    picked = src.where("label IN (1, 4)")
    out = tmp_path / "sub.beton"
    DatasetWriter(out, {"image": RGBImageField(), "label": IntField(), "path": TextField()},
                  progress=False).from_indexed_dataset(src, indices=picked)
    _assert_same_stored(src._native, picked.tolist(), out)
    out2 = tmp_path / "shuffled.beton"
    w = DatasetWriter(out2, {"label": IntField(), "image": RGBImageField()}, seed=3, progress=False)
    w.from_indexed_dataset(src, indices=picked, shuffle_indices=True)
    order = picked.tolist()
    import random

    random.Random(3).shuffle(order)
    copied = beton.open(out2)
    assert list(copied.schema) == ["label", "image"]
    for k, i in enumerate(order):
        assert stored(copied._native, k)["image"] == stored(src._native, i)["image"]
        assert copied[k]["label"] == src[i]["label"]


def test_copy_of_a_version_keeps_every_stored_byte(photos, tmp_path):
    ds = beton.import_file(tmp_path / "ds", photos)
    ds.append(photos)
    ds.update({"label": 9}, where="label = 0")
    ds.delete("index % 5 = 0")
    out = tmp_path / "v.beton"
    DatasetWriter(out, {"image": RGBImageField(), "label": IntField(), "path": TextField()},
                  progress=False).from_indexed_dataset(ds)
    _assert_same_stored(ds._native, range(len(ds)), out)
    assert 9 in beton.open(out).table(["label"]).column("label").to_pylist()


def test_copy_falls_back_to_encoding_when_types_differ_or_asked(photos, tmp_path):
    src = beton.open(photos)
    out = tmp_path / "raw.beton"
    DatasetWriter(out, {"image": RGBImageField(write_mode="raw"), "label": IntField()},
                  progress=False).from_indexed_dataset(src, indices=[0, 1], copy_stored=False)
    assert stored(beton.open(out)._native, 0)["image"][1] == "raw"
    np.testing.assert_array_equal(beton.open(out)[1]["image"], src[1]["image"])
    with pytest.raises(KeyError, match="no field 'caption'"):
        DatasetWriter(tmp_path / "y.beton", {"caption": TextField()}, progress=False).from_indexed_dataset(src)


# 5. reprs
def test_reprs_are_short_and_say_what_matters(photos, tmp_path):
    ds = beton.open(photos)
    r = repr(ds)
    assert str(photos) in r and "155 rows" in r and "version 0, .beton file" in r
    assert "image rgb_image" in r and "label int" in r and "path text" in r
    assert "splits: none" in r and f"classes ({len(CLASSES)}): {CLASSES[0]}" in r
    q = ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label")
    assert repr(q).startswith(f"QueryResult: {len(CLASSES)} rows x 2 columns (label: int64, n: int64)")
    assert q.column("n").to_pylist()[0] > 0 and q.num_rows == len(q) == len(CLASSES)
    import pyarrow as pa

    assert pa.table(q).equals(q.table)
    s = ds.where("label < 3")
    assert repr(s).startswith(f"IndexSet({len(s)} ids: [0, 1, 2, 3, 4, 5, ...], fingerprint 0x")
    assert f"{s.fingerprint():#018x}" in repr(s)


def test_reprs_of_a_million_rows_stay_short(tmp_path):
    import pyarrow as pa

    n = 1_000_000
    path = tmp_path / "big.beton"
    DatasetWriter(path, {"label": IntField(), "name": TextField()}, progress=False).from_arrow(
        pa.table({"label": np.arange(n) % 10, "name": pa.array(["a long enough caption"] * n)}))
    ds = beton.open(path)
    ds.save_splits(all=IndexSet.all(n))
    for text in (repr(ds), repr(ds.query("SELECT * FROM samples")), repr(ds.where("label > 0")),
                 repr(ds.explain("label > 0"))):
        assert len(text) < 1200, text
    assert "1,000,000 rows" in repr(ds) and "1,000,000 rows" in repr(ds.query("SELECT * FROM samples"))
    assert "... 999,995 more rows" in repr(ds.query("SELECT * FROM samples"))


# 6. docstrings
def _public(obj):
    for name, member in inspect.getmembers(obj):
        if name.startswith("_"):
            continue
        if isinstance(member, property) or inspect.isroutine(member) or inspect.isclass(member):
            yield name, member


def _documented():
    for module in (beton.dataset, beton.writer, beton.loader.loader):
        for name, member in _public(module):
            if getattr(member, "__module__", None) != module.__name__:
                continue  # imported names
            yield f"{module.__name__}.{name}", member
            if inspect.isclass(member):
                for mname, m in _public(member):
                    yield f"{module.__name__}.{name}.{mname}", m
    yield "IndexSet", IndexSet
    for mname, m in _public(IndexSet):
        yield f"IndexSet.{mname}", m


@pytest.mark.parametrize("name,obj", list(_documented()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_api_has_a_numpydoc_docstring_with_examples(name, obj):
    doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj) or ""
    assert "Examples\n--------" in doc, f"{name}: no Examples section"
    if inspect.isroutine(obj) and [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]:
        assert "Parameters\n----------" in doc, f"{name}: no Parameters section"


def test_index_set_signatures_and_examples_run():
    assert str(inspect.signature(IndexSet.split)) == "(self, /, fractions, seed=0)"
    assert str(inspect.signature(IndexSet)) == "(ids=())"
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for name, obj in [("IndexSet", IndexSet)] + [(f"IndexSet.{n}", m) for n, m in _public(IndexSet)]:
        for test in finder.find(obj, name, globs={"IndexSet": IndexSet}):
            runner.run(test)
    assert runner.failures == 0 and runner.tries >= 10


def test_help_of_open_is_useful():
    text = pydoc.render_doc(beton.open, renderer=pydoc.plaintext)
    for part in ("Parameters", "Returns", "Raises", "Examples", "version", "beton.open("):
        assert part in text, part


# 7. tqdm
def test_tqdm_is_an_optional_extra_and_the_writers_use_it(monkeypatch):
    import tomllib

    monkeypatch.setenv("BETON_PROGRESS", "1")  # pytest's stderr is no terminal

    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert any(d.startswith("tqdm") for d in extras["progress"])
    tqdm = pytest.importorskip("tqdm")
    bar = beton.writer._progress_bar(5, True)
    assert isinstance(bar, tqdm.tqdm)
    bar.close()
    assert beton.writer._progress_bar(5, False) is None


def test_from_webdataset_writes_the_shards_samples(tmp_path):
    """FFCV's DatasetWriter.from_webdataset: a pipeline over each shard yields field tuples."""
    import io
    import tarfile

    pytest.importorskip("webdataset")
    from beton.fields import BytesField, IntField

    shards = []
    for s in range(2):
        path = tmp_path / f"shard-{s}.tar"
        with tarfile.open(path, "w") as tar:
            for k in range(3):
                for ext, data in (("cls", str(10 * s + k).encode()), ("bin", bytes([s, k]) * (k + 1))):
                    info = tarfile.TarInfo(f"s{s}k{k}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(str(path))
    out = tmp_path / "wds.beton"
    report = DatasetWriter(out, {"blob": BytesField(), "label": IntField()}, progress=False).from_webdataset(
        shards, lambda d: d.to_tuple("bin", "cls").map_tuple(bytes, lambda c: int(c)))
    assert report["num_samples"] == 6
    ds = beton.open(out)
    assert [ds[i]["label"] for i in range(6)] == [0, 1, 2, 10, 11, 12]
    assert bytes(ds[4]["blob"]) == bytes([1, 1]) * 2


def test_chunksize_is_honoured_and_checked(tmp_path):
    from beton.fields import IntField

    w = DatasetWriter(tmp_path / "c.beton", {"x": IntField()}, progress=False)
    with pytest.raises(ValueError, match="chunksize"):
        w.from_indexed_dataset([(i,) for i in range(10)], chunksize=0)
    assert w.from_indexed_dataset([(i,) for i in range(10)], chunksize=3)["num_samples"] == 10
