"""Edits store what was asked or refuse (issue 36): appending an ImageFolder labels by class name
and keeps paths, class names are versioned, updates refuse values that do not fit their field
(a differential test against a plain Python model), new columns may not shadow derived ones, and
bad row ids are named."""

import os
import random
import shutil

import numpy as np
import pytest

import beton
from beton import IndexSet
from beton.fields import BoolField, FloatField, IntField, RGBImageField, TextField
from beton.writer import DatasetWriter

PHOTOS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder", "fish")


def image_folder(root, classes, count):
    """An ImageFolder at ``root`` with ``count`` photos per class (copies of bundled photos)."""
    files = sorted(os.listdir(PHOTOS))
    for c, name in enumerate(classes):
        os.makedirs(root / name)
        for k in range(count):
            shutil.copy(os.path.join(PHOTOS, files[(c * count + k) % len(files)]), root / name / f"{name}-{k}.jpg")
    return root


def versions(path):
    return [v["version"] for v in beton.open(path).versions()]


@pytest.fixture()
def animals(tmp_path):
    """A dataset directory written from an ImageFolder of bird, cat, cow with paths, and a
    second ImageFolder of cow and dog."""
    base = image_folder(tmp_path / "base", ["bird", "cat", "cow"], 2)
    more = image_folder(tmp_path / "more", ["cow", "dog"], 3)
    DatasetWriter(tmp_path / "a.beton", {"image": RGBImageField(max_resolution=16), "label": IntField()},
                  progress=False).from_imagefolder(base, with_path=True)
    return beton.import_file(tmp_path / "ds", tmp_path / "a.beton"), more


def test_appending_an_imagefolder_labels_by_class_name_and_keeps_paths(animals, tmp_path):
    ds, more = animals
    assert ds.classes == ["bird", "cat", "cow"]
    ds.append(more, max_resolution=16, progress=False)
    assert ds.version == 2 and len(ds) == 12
    assert ds.classes == ["bird", "cat", "cow", "dog"]
    table = ds.table(["label", "path"]).to_pydict()
    for label, path in zip(table["label"], table["path"], strict=True):
        # Every row's label names its folder; its path is relative to the folder appended.
        assert ds.classes[label] == path.split(os.sep)[0], (label, path)
    assert table["label"][6:] == [2, 2, 2, 3, 3, 3]
    assert table["path"][6:] == [f"cow{os.sep}cow-{k}.jpg" for k in range(3)] + [f"dog{os.sep}dog-{k}.jpg" for k in range(3)]
    # Version 1 keeps its class names; the export carries the new ones.
    assert beton.open(tmp_path / "ds", version=1).classes == ["bird", "cat", "cow"]
    ds.export(tmp_path / "out.beton", progress=False)
    assert beton.open(tmp_path / "out.beton").classes == ["bird", "cat", "cow", "dog"]


def test_a_file_whose_labels_name_other_classes_is_refused(animals, tmp_path):
    ds, more = animals
    DatasetWriter(tmp_path / "more.beton", {"image": RGBImageField(max_resolution=16), "label": IntField()},
                  progress=False).from_imagefolder(more, with_path=True)
    with pytest.raises(ValueError, match="label 0 is 'cow', the dataset's is 'bird'"):
        ds.append(tmp_path / "more.beton")
    assert versions(tmp_path / "ds") == [1]


def test_class_names_are_edited_as_versions(animals, tmp_path):
    ds, _ = animals
    ds.set_classes(["bird", "cat", "cow", "dog"], message="dogs to come")
    ds.rename_class("cow", "cattle")
    assert ds.classes == ["bird", "cat", "cattle", "dog"]
    log = ds.versions()
    assert [v["operation"] for v in log] == ["import", "classes", "classes"] and log[1]["message"] == "dogs to come"
    assert beton.open(tmp_path / "ds", version=2).classes == ["bird", "cat", "cow", "dog"]
    with pytest.raises(ValueError, match="cannot be dropped or reordered"):
        ds.set_classes(["cat", "bird", "cattle", "dog"])
    with pytest.raises(ValueError, match="class 3 already"):
        ds.rename_class("bird", "dog")
    assert ds.version == 3 and versions(tmp_path / "ds") == [1, 2, 3]


N = 16


@pytest.fixture()
def table_ds(tmp_path):
    """A dataset of N rows: label int, score float, flag bool, caption text; and its model."""
    model = {"label": [i % 5 for i in range(N)], "score": [i * 0.25 - 1.0 for i in range(N)],
             "flag": [i % 3 == 0 for i in range(N)], "caption": [f"c{i}" for i in range(N)]}
    fields = {"label": IntField(), "score": FloatField(), "flag": BoolField(), "caption": TextField()}
    DatasetWriter(tmp_path / "t.beton", fields, progress=False).from_iterable(zip(*model.values()))
    return beton.import_file(tmp_path / "ds", tmp_path / "t.beton"), model


def read(ds):
    return ds.table(["label", "score", "flag", "caption"]).to_pydict()


def test_updates_that_do_not_fit_are_refused_and_commit_nothing(table_ds):
    ds, model = table_ds
    for call, match in [
        (lambda: ds.update({"label": 1.5}), r"field 'label'.*Float64.*row 0: 1\.5"),
        (lambda: ds.update({"label": "score"}, where="index >= 5"), r"field 'label'.*row 5: 0\.25"),
        (lambda: ds.update({"label": True}), r"field 'label'.*Boolean"),
        (lambda: ds.update({"flag": 1}), r"field 'flag'.*not even 0 or 1"),
        (lambda: ds.update({"caption": 3}), r"field 'caption'.*VARCHAR"),
        (lambda: ds.update_rows([2, 5], {"label": [2.9]}), r"field 'label'.*row 2: 2\.9"),
        (lambda: ds.update_rows([2, 5], {"label": [1, 2**63]}), r"'label': value 1 \(9223372036854775808\) is past int64"),
        (lambda: ds.update_rows([2, 5], {"label": np.array([1, 2**63], np.uint64)}), r"row 5.*int64"),
        (lambda: ds.update_rows([2], {"score": [2**60 + 1]}), r"row 2: the integer 1152921504606846977"),
        (lambda: ds.update_rows([2], {"label": [2**64]}), r"values for 'label': value 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    assert ds.version == 1 and versions(ds.path) == [1] and read(ds) == model
    # Explicit conversions: CAST truncates toward zero, round() then CAST rounds half away from 0.
    ds.update({"label": "CAST(score AS BIGINT)"})
    assert read(ds)["label"] == [int(s) for s in model["score"]]
    ds.update({"label": "CAST(round(score * 2) AS BIGINT)"})
    assert read(ds)["label"] == [int(np.sign(s) * np.floor(abs(s * 2) + 0.5)) for s in model["score"]]
    ds.update_rows([1], {"score": [3]})  # an int a float holds exactly
    assert read(ds)["score"][1] == 3.0


def test_array_fields_and_typed_columns_refuse_silent_casts(tmp_path):
    from beton.fields import ArrayField, NDArrayField

    fields = {"small": NDArrayField(np.int8, (2,)), "seq": ArrayField(np.uint16)}
    DatasetWriter(tmp_path / "a.beton", fields, progress=False).from_iterable(
        [(np.array([1, 2], np.int8), np.array([3], np.uint16))] * 3)
    ds = beton.import_file(tmp_path / "ds", tmp_path / "a.beton")
    for values, match in [
        ({"small": [np.array([1, 300])]}, r"'small'.*300 is past int8's range \(-128 to 127\)"),
        ({"small": [np.array([1.0, 2.5])]}, r"'small'.*float64 values do not fit int8"),
        ({"seq": [[-1]]}, r"'seq'.*-1 is past uint16's range"),
        ({"seq": [[True]]}, r"'seq'.*bool values do not fit uint16"),
    ]:
        with pytest.raises(ValueError, match=match):
            ds.update_rows([1], values)
    with pytest.raises(ValueError, match=r"field 'x'.*Float64"):
        ds.add_column("x", [1.5, 2.0, 3.0], field=IntField())
    assert versions(ds.path) == [1]
    ds.update_rows([1], {"small": [np.array([-128, 127], np.int64)], "seq": [[65535]]})
    assert ds[1]["small"].tolist() == [-128, 127] and ds[1]["seq"].tolist() == [65535]
    ds.add_column("x", [1, 2, 3], field=FloatField())
    assert ds.table(["x"]).column("x").to_pylist() == [1.0, 2.0, 3.0]


def test_update_rows_puts_each_value_in_the_row_given(table_ds):
    ds, model = table_ds
    ds.update_rows([4, 3, 9], {"label": [40, 30, 90], "caption": ["d", "c", "i"]})
    got = read(ds)
    assert [got["label"][i] for i in (3, 4, 9)] == [30, 40, 90]
    assert [got["caption"][i] for i in (3, 4, 9)] == ["c", "d", "i"]
    with pytest.raises(ValueError, match="row 4 is given twice"):
        ds.update_rows([4, 1, 4], {"label": [1, 2, 3]})


def test_bad_row_ids_are_named(table_ds):
    ds, _ = table_ds
    for call, error, match in [
        (lambda: ds.update_rows([1, -1], {"label": [0, 0]}), IndexError, "update_rows: ids: row -1 is negative"),
        (lambda: ds.update_rows([N], {"label": [0]}), IndexError, f"update_rows: ids: row {N} is out of range"),
        (lambda: ds.update_rows([1.5], {"label": [0]}), TypeError, r"update_rows: ids: 1\.5 is not a row number"),
        (lambda: ds.delete([3, -2]), IndexError, "delete: where: row -2 is negative"),
        (lambda: ds.delete(IndexSet([N + 5])), IndexError, f"delete: where: row {N + 5} is out of range"),
        (lambda: ds.take([0, -1]), IndexError, "take: indices: row -1 is negative"),
        (lambda: ds.take(np.array([2**40])), IndexError, "take: indices: row 1099511627776 is out of range"),
        (lambda: ds.take([True]), TypeError, "take: indices: True is not a row number"),
    ]:
        with pytest.raises(error, match=match):
            call()
    assert versions(ds.path) == [1]
    with pytest.raises(ValueError, match=r"IndexSet: id -3 \(position 1\) is negative"):
        IndexSet([2, -3])
    with pytest.raises(TypeError, match=r"IndexSet: 2\.5 \(position 0\) is not an int"):
        IndexSet([2.5])


def test_new_columns_may_not_shadow_derived_ones(tmp_path):
    DatasetWriter(tmp_path / "i.beton", {"image": RGBImageField(), "label": IntField()}, progress=False
                  ).from_iterable([(np.zeros((4, 6, 3), np.uint8), 0), (np.zeros((5, 7, 3), np.uint8), 1)])
    ds = beton.import_file(tmp_path / "ds", tmp_path / "i.beton")
    for name in ["image.width", "Image.Height", "index", "row_id", "LABEL", "samples.x"]:
        with pytest.raises(ValueError, match="choose another name|exists already"):
            ds.add_column(name, [1, 2])
        with pytest.raises(ValueError, match="choose another name|exists already"):
            ds.add_column(name, "label + 1")
    assert versions(tmp_path / "ds") == [1]
    # What SQL reads under a column's name is what ds[i] shows.
    ds.add_column("width", "image.width * 10")
    assert [r["width"] for r in (ds[0], ds[1])] == ds.query("SELECT width FROM samples")["width"].to_pylist() == [60, 70]


# A differential test: random updates, each applied to a plain Python model by the documented
# rules, must leave the dataset equal to the model; a refused one must commit nothing.
EXPRS = {  # expression: (its type, its value on a row of the model)
    "label + 1": ("int", lambda r: r["label"] + 1),
    "score * 2": ("float", lambda r: r["score"] * 2),
    "CAST(score AS BIGINT)": ("int", lambda r: int(r["score"])),
    "label > 2": ("bool", lambda r: r["label"] > 2),
    "'x'": ("text", lambda r: "x"),
    "1.5": ("float", lambda r: 1.5),
    "caption": ("text", lambda r: r["caption"]),
    "CAST(label AS DOUBLE)": ("float", lambda r: float(r["label"])),
}
KINDS = {"label": "int", "score": "float", "flag": "bool", "caption": "text"}
PREDICATES = {None: lambda i, r: True, "label = 1": lambda i, r: r["label"] == 1, "index < 5": lambda i, r: i < 5}


def fits(field, kind, value=None):
    """Whether a value of ``kind`` goes into ``field`` as it is (and the value stored)."""
    want = KINDS[field]
    if want == kind:
        return True
    return want == "float" and kind == "int" and (value is None or float(value) == value)


def random_values(rng, n):
    kind = rng.choice(["int", "float", "bool", "text", "big"])
    if kind == "int":
        return kind, [rng.randint(-9, 9) for _ in range(n)]
    if kind == "big":
        return "int", [rng.choice([2**53, 2**53 + 1, -(2**60) - 1, 7]) for _ in range(n)]
    if kind == "float":
        return kind, [rng.choice([rng.uniform(-4, 4), float(rng.randint(-3, 3))]) for _ in range(n)]
    if kind == "bool":
        return kind, [rng.random() < 0.5 for _ in range(n)]
    return kind, ["".join(rng.choice("abc") for _ in range(rng.randint(0, 3))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(10))
def test_random_updates_match_a_plain_model(table_ds, seed):
    ds, model = table_ds
    rng = random.Random(seed)
    for _ in range(5):
        rows = [dict(zip(model, vals)) for vals in zip(*model.values())]
        field = rng.choice(list(KINDS))
        expected = {k: list(v) for k, v in model.items()}
        if rng.random() < 0.5:
            ids = rng.sample(range(N), rng.randint(1, 4))  # in any order
            kind, values = random_values(rng, 1 if rng.random() < 0.3 else len(ids))
            ok = all(fits(field, kind, v) for v in values)
            for k, i in enumerate(ids):
                expected[field][i] = values[0 if len(values) == 1 else k]
            call = lambda: ds.update_rows(ids, {field: values})  # noqa: E731
        else:
            expr, where = rng.choice(list(EXPRS)), rng.choice(list(PREDICATES))
            kind, value = EXPRS[expr]
            ok = fits(field, kind)
            for i, r in enumerate(rows):
                if PREDICATES[where](i, r):
                    expected[field][i] = value(r)
            call = lambda: ds.update({field: expr}, where=where)  # noqa: E731
        before = ds.version
        if ok:
            call()
            assert ds.version == before + 1
            model = {k: [float(x) if KINDS[k] == "float" else x for x in v] for k, v in expected.items()}
        else:
            with pytest.raises(ValueError, match=f"'{field}'"):
                call()
            assert ds.version == before and versions(ds.path)[-1] == before
        assert read(ds) == model


def test_appended_jpegs_are_checked_unless_verify_is_off(animals, tmp_path):
    ds, _ = animals
    photo = open(os.path.join(PHOTOS, sorted(os.listdir(PHOTOS))[0]), "rb").read()
    cut = photo[: len(photo) // 2] + b"\xff\xd9"  # the scan cut short, an EOI after it
    for name, data in [("good", photo), ("cut", cut)]:
        os.makedirs(tmp_path / name / "cow")
        (tmp_path / name / "cow" / f"{name}.jpg").write_bytes(data)

    def stored(row):
        return ds.take([row], ["image"]).column("image")[0]["data"].as_py()

    # Checked (the default): the corrupt JPEG is refused, naming it, and nothing is committed.
    with pytest.raises(ValueError, match=r"cut\.jpg.*corrupt JPEG"):
        ds.append(tmp_path / "cut", write_mode="jpg", progress=False)
    assert versions(tmp_path / "ds") == [1]
    # verify=False: stored exactly as given, corrupt or not.
    ds.append(tmp_path / "cut", write_mode="jpg", verify=False, progress=False)
    assert stored(len(ds) - 1) == cut
    ds.append(tmp_path / "good", write_mode="jpg", verify=False, progress=False)
    assert stored(len(ds) - 1) == photo
    # Checked and given a restart marker per MCU (a DRI segment): other bytes, the same pixels.
    ds.append(tmp_path / "good", write_mode="jpg", progress=False)
    checked = stored(len(ds) - 1)
    assert checked != photo and b"\xff\xdd\x00\x04\x00\x01" in checked
    assert np.array_equal(ds[len(ds) - 1]["image"], ds[len(ds) - 2]["image"])
    assert versions(tmp_path / "ds") == [1, 2, 3, 4]
