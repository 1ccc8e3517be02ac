"""Ray Data (beton.ray) in local mode, ray.init(num_cpus=2): reads with a predicate and columns,
writes then reads back, exact row counts, an ImageFolder written through Ray by 2 workers equal to
DatasetWriter.from_imagefolder's (what `beton write-imagefolder` writes), and failed writes that
commit nothing.

ray[data] is installed by scripts/test.sh; BETON_REQUIRE_RAY=1 (set there) makes these tests fail
rather than skip where it is missing."""

import os

import numpy as np
import pytest

import beton
from beton.fields import IntField, RGBImageField, TextField
from beton.writer import DatasetWriter

if os.environ.get("BETON_REQUIRE_RAY") != "1":
    pytest.importorskip("ray.data")
import ray  # noqa: E402

import beton.ray as bray  # noqa: E402

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


@pytest.fixture(scope="module", autouse=True)
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The ImageFolder as from_imagefolder writes it (JPEG, at most 64 px, with paths)."""
    out = tmp_path_factory.mktemp("ray") / "folder.beton"
    DatasetWriter(out, {"image": RGBImageField(write_mode="jpg", max_resolution=64), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER, with_path=True)
    return out


def rows_by_path(table):
    """A take() table's rows as {path: row}, images as (mode, width, height, bytes)."""
    out = {}
    for row in table.to_pylist():
        img = row.get("image")
        if img is not None:
            row["image"] = (img["mode"], img["width"], img["height"], img["data"])
        out[row["path"]] = row
    return out


def test_read_with_a_predicate_and_columns(folder):
    ds = beton.open(folder)
    rows = ds.where("label < 3 AND image.width > 40")
    assert 0 < len(rows) < len(ds)
    read = bray.read_beton(folder, where="label < 3 AND image.width > 40", columns=["label", "path"])
    # Counted from the plan (exact, nothing read), then the rows themselves.
    assert read.count() == len(rows)
    got = read.to_arrow_refs()
    table = __import__("pyarrow").concat_tables(ray.get(got))
    assert table.column_names == ["label", "path"]
    want = ds.take(rows, ["label", "path"])
    assert sorted(table.to_pylist(), key=lambda r: r["path"]) == sorted(want.to_pylist(), key=lambda r: r["path"])
    # Every field by default; Ray's own select_columns is pushed down to the read.
    assert bray.read_beton(folder).columns() == ["image", "label", "path"]
    assert bray.read_beton(folder).select_columns(["path"]).take(1)[0].keys() == {"path"}
    with pytest.raises(KeyError, match="no field 'nope'"):
        bray.read_beton(folder, columns=["nope"])
    with pytest.raises(ValueError):
        bray.read_beton(folder, where="label <")


def test_read_a_version_of_a_dataset_directory(folder, tmp_path, monkeypatch):
    """Read tasks follow data files and deletions, and a read is pinned to one version."""
    d = beton.concat([folder, folder], tmp_path / "two")
    d.delete(where="label = 0")
    n2, v = len(d), d.version
    assert d.versions()[-1]["data_files"] == 2
    read = bray.read_beton(tmp_path / "two", override_num_blocks=5)
    assert read.count() == n2
    # A small dataset: one task per data file, whatever the parallelism (a task reads at least
    # _TASK_BYTES where there is that much).
    assert len(bray.BetonDatasource(tmp_path / "two").get_read_tasks(200)) == 2
    # Five read tasks of exact sizes, none across the two data files (155 rows each, less deletions).
    monkeypatch.setattr(bray, "_TASK_BYTES", 1)
    tasks = bray.BetonDatasource(tmp_path / "two").get_read_tasks(5)
    assert len(tasks) == 5 and sum(t.metadata.num_rows for t in tasks) == n2
    # The two data files keep the same rows: the boundary between them ends a task.
    assert n2 % 2 == 0 and n2 // 2 in np.cumsum([t.metadata.num_rows for t in tasks]).tolist()
    assert all(t.metadata.size_bytes > 0 for t in tasks)
    labels = sorted(r["label"] for r in read.select_columns(["label"]).take_all())
    assert labels == sorted(d.table(["label"]).column("label").to_pylist())
    d.delete(where="label = 1")
    assert bray.read_beton(tmp_path / "two", version=v).count() == n2
    assert bray.read_beton(tmp_path / "two").count() == len(d) < n2


def test_write_then_read_back(tmp_path):
    items = [{"x": i, "y": i / 4, "ok": i % 2 == 0, "name": f"n{i}", "v": np.arange(3, dtype=np.float32) + i}
             for i in range(1000)]
    src = ray.data.from_items(items, override_num_blocks=4)
    out = src.write_beton(tmp_path / "w")
    assert out.version == 1 and len(out) == 1000
    assert out.versions()[-1]["data_files"] == 4
    assert out.schema["x"] == "int" and out.schema["name"] == "text"
    back = sorted(bray.read_beton(tmp_path / "w").take_all(), key=lambda r: r["x"])
    assert [r["x"] for r in back] == list(range(1000))
    assert back[7]["name"] == "n7" and back[7]["ok"] is False and back[8]["y"] == 2.0
    assert np.frombuffer(back[5]["v"], dtype=np.float32).tolist() == [5.0, 6.0, 7.0]
    # Into an existing dataset: one more version appending the rows, row ids going on.
    again = bray.write_beton(src, tmp_path / "w", message="more")
    assert again.version == 2 and len(again) == 2000
    assert again.versions()[-1]["message"] == "more"
    assert bray.read_beton(tmp_path / "w").count() == 2000
    # Nothing left behind in _tmp/.
    assert os.listdir(tmp_path / "w" / "_tmp") == []


def test_imagefolder_through_ray_equals_from_imagefolder(folder, tmp_path):
    """The ImageFolder read as files by Ray, labelled by folder, written by 2 write tasks: the
    same table and the same stored images as from_imagefolder's file."""
    root = os.path.abspath(IMAGEFOLDER)
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())

    def label(batch):
        rel = [os.path.relpath(p, root) for p in batch["path"]]
        return {"image": list(batch["bytes"]), "label": [classes.index(r.split(os.sep)[0]) for r in rel],
                "path": rel}

    files = ray.data.read_binary_files(root, include_paths=True).map_batches(label).repartition(2)
    fields = {"image": RGBImageField(write_mode="jpg", max_resolution=64), "label": IntField(), "path": TextField()}
    out = bray.write_beton(files, tmp_path / "through_ray", fields=fields)
    assert out.versions()[-1]["data_files"] == 2
    ref = beton.open(folder)
    assert len(out) == len(ref) == 155
    assert rows_by_path(out.take(range(len(out)))) == rows_by_path(ref.take(range(len(ref))))
    cols = ["image.mode", "image.width", "image.height", "image.nbytes", "label", "path"]
    assert out.table(cols).sort_by("path").equals(ref.table(cols).sort_by("path"))


def test_take_round_trips_through_write_beton(folder, tmp_path):
    """read_beton then write_beton: the same fields (take's columns say theirs) and bytes."""
    out = bray.read_beton(folder, override_num_blocks=3).write_beton(tmp_path / "copy")
    ref = beton.open(folder)
    assert out.schema == ref.schema
    assert rows_by_path(out.take(range(len(out)))) == rows_by_path(ref.take(range(len(ref))))


def test_a_failed_write_commits_nothing(tmp_path):
    def boom(batch):
        if 500 in batch["x"]:
            raise RuntimeError("boom at 500")
        return batch

    bad = ray.data.from_items([{"x": i} for i in range(1000)], override_num_blocks=4).map_batches(boom)
    with pytest.raises(Exception, match="boom at 500"):
        bray.write_beton(bad, tmp_path / "failed")
    assert not beton._native.Dataset.is_dataset_dir(str(tmp_path / "failed"))
    assert [f for f in os.listdir(tmp_path / "failed" / "_tmp")] == []
    # A column no field takes: refused on the driver, naming it.
    with pytest.raises(TypeError, match="column 'm'"):
        bray.write_beton(ray.data.from_items([{"m": {"a": 1}}]), tmp_path / "dicts")
    with pytest.raises(ValueError, match="names a .beton file"):
        bray.write_beton(ray.data.from_items([{"x": 1}]), "s3://bucket/ds.beton")


def test_write_and_read_a_dataset_on_s3(folder, tmp_path):
    """Write tasks upload their data files into s3://.../data/ themselves; the driver commits
    them with one conditional put; read tasks read the version back by range requests."""
    if os.environ.get("BETON_REQUIRE_MOTO") != "1":
        pytest.importorskip("moto.server")
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    from s3_local import Moto

    server = Moto()
    try:
        server.client().create_bucket(Bucket="data")
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": server.url, "BETON_CACHE_DIR": str(tmp_path / "cache")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # the driver's own reads and commit
        try:
            remote_args = {"runtime_env": {"env_vars": env}}  # the tasks'
            src = bray.read_beton(folder, override_num_blocks=2)
            out = bray.write_beton(src, "s3://data/ray/photos", ray_remote_args=remote_args)
            assert out.path == "s3://data/ray/photos/" and out.version == 1 and len(out) == 155
            assert out.versions()[-1]["data_files"] == 2
            keys = [o["Key"] for o in server.client().list_objects_v2(Bucket="data", Prefix="ray/photos/data/")["Contents"]]
            assert len(keys) == 2
            back = bray.read_beton("s3://data/ray/photos", where="label < 3", columns=["path", "label"],
                                   ray_remote_args=remote_args)
            ref = beton.open(folder)
            assert back.count() == len(ref.where("label < 3"))
            assert sorted(r["path"] for r in back.take_all()) == sorted(
                ref.take(ref.where("label < 3"), ["path"]).column("path").to_pylist())
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        server.stop()


def test_filters_are_pushed_into_the_read_and_keep_rays_answers(tmp_path):
    """Each filter gives Ray's own rows (PyArrow's semantics: NaN is not greater than anything,
    -0.0 equals 0.0), pushed into the read as SQL where beton evaluates it exactly."""
    import pyarrow as pa
    from ray.data.expressions import col, lit

    from beton.fields import BoolField, FloatField

    x = [float("nan"), -float("nan"), -0.0, 0.0, 0.5, 1.0, -1.0, float("inf"), -float("inf"), 2.5]
    n = len(x)
    table = pa.table({"i": list(range(n)), "x": x, "b": [k % 3 == 0 for k in range(n)],
                      "s": ["a", "b'c", "é", "a", "z", "", "b", "c", "a", "q"]})
    path = tmp_path / "t.beton"
    DatasetWriter(path, {"i": IntField(), "x": FloatField(), "b": BoolField(), "s": TextField()},
                  progress=False).from_arrow(table)
    kinds = {"i": "int", "x": "float", "b": "bool", "s": "text"}
    pushed = [
        col("x") > 0.25, col("x") >= 0, col("x") < 1, col("x") <= 0.0, col("x") == 0.0, col("x") != 0.0,
        ~(col("x") > 0.25), lit(1) < col("x"), col("i") >= 3, (col("i") > 2) & (col("x") < 2),
        (col("i") < 2) | (col("s") == "z"), col("b"), ~col("b"), col("b") == True,  # noqa: E712
        col("s") > "b", col("s") == "b'c", col("s").is_in(["a", "é"]), col("i").is_in([1, 4, 9]),
        col("i").not_in([0, 1]), col("i") > 2.5,
    ]
    kept = [col("x") + 1 > 2, col("x").is_in([0.0]), col("i") == col("i"), col("x") > float("nan"),
            col("b") > True, col("i") > 2**60 + 0.5]
    for expr in pushed:
        assert bray._predicate_sql(expr, kinds) is not None, expr
    for expr in kept:
        assert bray._predicate_sql(expr, kinds) is None, expr
    for expr in pushed + kept[:3]:
        want = table.filter(expr.to_pyarrow()).column("i").to_pylist()
        ds = bray.read_beton(path).filter(expr=expr)
        got = sorted(r["i"] for r in ds.take_all())
        assert got == want, (expr, bray._predicate_sql(expr, kinds), got, want)
    # Pushed: the plan has no Filter left, and the read's rows are the matches.
    ds = bray.read_beton(path).filter(expr=col("i") >= 7)
    assert ds.count() == 3  # through a read of no columns
    assert beton.open(path).take([1, 2], []).num_rows == 2
    source = bray.BetonDatasource(path).apply_predicate(col("i") >= 7)
    assert source.pushed_where == ['"i" >= 7'] and source._rows.tolist() == [7, 8, 9]
    import contextlib
    import io

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        ds.explain()
    optimized = shown.getvalue().split("Logical Plan (Optimized)")[1].split("Physical Plan")[0]
    if hasattr(ray.data.Datasource, "supports_predicate_pushdown"):  # Ray 2.60+ pushes filters
        assert "Filter" not in optimized, optimized
