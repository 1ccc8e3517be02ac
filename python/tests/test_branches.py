"""Branches from Python as curators use them: a branch per curator, edits on each, a merge with
its conflicts table and resolutions, the Loader and SQL on a branch, two processes committing to
two branches while a third merges, and an export of a merged version that FFCV's reader takes."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import beton
from beton.fields import IntField, RGBImageField
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


def labels_by_id(ds):
    t = ds.table(["row_id", "label"])
    return dict(zip(t.column("row_id").to_pylist(), t.column("label").to_pylist()))


@pytest.fixture()
def ds_dir(tmp_path):
    out = tmp_path / "a.beton"
    DatasetWriter(out, {"image": RGBImageField(max_resolution=48), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER)
    beton.import_file(tmp_path / "ds", out)
    return tmp_path / "ds"


def test_two_curators_branch_and_merge(ds_dir, tmp_path):
    main = beton.open(ds_dir)
    base = labels_by_id(main)
    alice = main.branch("relabel")
    assert alice.branch_name == "relabel" and main.branch_name == "main"
    alice.update({"label": 42}, where="row_id IN (3, 4)")
    bob = beton.open(ds_dir).branch("cleanup")
    bob.delete("row_id = 10")
    bob.append(IMAGEFOLDER, max_resolution=48)
    # Each branch sees its own edits only; main none.
    assert labels_by_id(beton.open(ds_dir)) == base
    assert beton.open(ds_dir, branch="relabel")[3]["label"] == 42
    # History of a branch stays on it: its version 1 is main's, its version 2 its own.
    assert alice.checkout(2).branch_name == "relabel" and alice.checkout(2)[3]["label"] == 42
    assert labels_by_id(alice.checkout(1)) == base
    assert [v["branch"] for v in alice.versions()] == ["main", "relabel"]
    assert [b["name"] for b in main.branches()] == ["main", "cleanup", "relabel"]
    assert main.diff("main", "relabel")["changed"] == {"label": [3, 4]}
    # The merge preview: each changed row's thumbnail on main beside its thumbnail on the
    # branch, the changed cell highlighted in a table of both versions' values.
    g = main.gallery(diff=("main", "relabel"), size=32)
    page = g.to_html()
    assert "2 rows changed, 0 added, 0 deleted (columns label)" in g.to_html()
    pos = {rid: i for i, rid in enumerate(main.table(["row_id"]).column("row_id").to_pylist())}
    assert g.changes == [(3, "changed", pos[3], pos[3], ["label"]), (4, "changed", pos[4], pos[4], ["label"])]
    for rid in (3, 4):
        tile = page[page.index(f'data-row-id="{rid}"'):]
        tile = tile[:tile.index("</figure>")]
        assert tile.count("<img ") == 2 and 'data-change="changed"' in tile and ">main · #" in tile
        old = f"{base[rid]} ({main.classes[base[rid]]})"  # a label shows its class name
        assert f'<tr class="changed" data-column="label"><td>label</td><td>{old}</td><td>42</td></tr>' in tile
    preview = main.gallery(diff=("main", "cleanup"), size=32)
    html = preview.to_html()
    assert preview.matched == 156 and "0 rows changed, 155 added, 1 deleted" in html
    assert [(k, r) for k, r, _ in preview.groups] == [("added", 155), ("deleted", 1)]
    assert preview.changes[-1] == (10, "deleted", pos[10], None, [])
    assert 'class="badge deleted"' in html and 'class="badge added"' in html
    # Narrowed by SQL (in each version), and as a PNG contact sheet.
    narrowed = main.gallery(diff=("main", "cleanup"), where="row_id = 10")
    assert [c.kind for c in narrowed.changes] == ["deleted"]
    assert main.gallery(diff=("main", "relabel"), size=32).to_png().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="groups by change"):
        main.gallery(diff=("main", "relabel"), by="label")
    # Merges: different cells and rows combine; appended rows keep their (disjoint) ids.
    r = main.merge("relabel", message="labels fixed")
    assert r["committed"] and r["cells_set"] == 2 and main.version == 2
    r = main.merge("cleanup")
    assert r["rows_added"] == 155 and r["rows_deleted"] == 1
    merged = labels_by_id(main)
    assert merged[3] == merged[4] == 42 and 10 not in merged and len(main) == 155 + 154
    assert main.versions()[-1]["merged"] == ("cleanup", bob.version)
    # Images came over byte for byte.
    ids = main.table(["row_id"]).column("row_id").to_pylist()
    k = ids.index(max(ids))
    assert np.array_equal(main[k]["image"], bob[len(bob) - 1]["image"])
    # The Loader and SQL on a branch.
    loader = Loader(ds_dir, batch_size=8, order=OrderOption.SEQUENTIAL, drop_last=False, branch="relabel",
                    pipelines={"image": None}, fields=["label"])
    got = [int(x) for b in loader for x in np.asarray(b[0]).reshape(-1)]
    assert got.count(42) == 2 and len(got) == 155
    assert len(beton.open(ds_dir, branch="relabel").where("label = 42")) == 2
    # An export of the merged version is a plain .beton file, which FFCV 1.0.2 reads too.
    main.export(tmp_path / "merged.beton")
    assert len(beton.open(tmp_path / "merged.beton")) == len(main)
    ffcv = os.environ.get("BETON_FFCV_PYTHON")
    if ffcv:
        out = tmp_path / "merged.json"
        repo = os.path.join(os.path.dirname(__file__), "..", "..")
        done = subprocess.run([ffcv, os.path.join(repo, "tests", "ffcv", "ffcv-load.py"), str(tmp_path / "merged.beton"),
                               "--json", str(out)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = [s["label"] for s in json.load(open(out))["samples"]]
        assert seen == main.table(["label"]).column("label").to_pylist()
        # Every data file of every branch, the merged ones' included, is a file FFCV reads.
        files = sorted(p for p in ds_dir.rglob("*.beton"))
        assert len(files) >= 2
        for f in files:
            done = subprocess.run([ffcv, os.path.join(repo, "tests", "ffcv", "ffcv-load.py"), str(f)],
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (f, done.stderr[-3000:])


def test_conflicts_table_and_resolutions(ds_dir):
    main = beton.open(ds_dir)
    fix = main.branch("fix")
    fix.update({"label": 7}, where="row_id IN (1, 2)")
    fix.delete("row_id = 5")
    main.update({"label": 9}, where="row_id IN (1, 5)")
    with pytest.raises(beton.MergeConflictError) as err:
        main.merge("fix")
    assert isinstance(err.value, beton.ConflictError)
    t = err.value.conflicts
    assert isinstance(t, pa.Table) and t.column_names == ["row_id", "column", "base", "ours", "theirs", "kind"]
    rows = t.to_pylist()
    assert [(c["row_id"], c["column"], c["kind"]) for c in rows] == [(1, "label", "cell"), (5, None, "update_delete")]
    assert (rows[0]["ours"], rows[0]["theirs"]) == ("9", "7")
    assert main.version == 2, "nothing committed"
    # One by one: a value for the cell, a side for the row.
    resolve = [{"row_id": 1, "column": "label", "value": 100}, {"row_id": 5, "column": None, "take": "theirs"}]
    r = main.merge("fix", resolve=resolve)
    assert len(r["resolved"]) == 2
    got = labels_by_id(main)
    assert got[1] == 100 and got[2] == 7 and 5 not in got
    with pytest.raises(ValueError, match="strategy"):
        main.merge("fix", strategy="mine")
    with pytest.raises(ValueError, match="no such branch"):
        main.merge("nope")
    assert main.merge("fix")["committed"] is False


def test_two_processes_on_two_branches_and_a_merging_third(ds_dir):
    main = beton.open(ds_dir)
    main.branch("a")
    main.branch("b")
    script = textwrap.dedent("""
        import sys, beton
        ds = beton.open(sys.argv[1], branch=sys.argv[2])
        for k in range(int(sys.argv[3])):
            ds.update({"label": 1000 + k}, where=f"row_id = {sys.argv[4]}")
    """)
    rounds = 20
    procs = [subprocess.Popen([sys.executable, "-c", script, str(ds_dir), b, str(rounds), rid])
             for b, rid in (("a", "20"), ("b", "30"))]
    merged = 0
    while any(p.poll() is None for p in procs):
        for b in ("a", "b"):
            try:
                merged += beton.open(ds_dir).merge(b, strategy="theirs")["committed"]
            except beton.ConflictError:
                pass  # main moved while merging: the next round merges again
    assert [p.wait() for p in procs] == [0, 0]
    for b in ("a", "b"):
        beton.open(ds_dir).merge(b)
    got = labels_by_id(beton.open(ds_dir))
    assert got[20] == got[30] == 1000 + rounds - 1
    heads = {b["name"]: b["head"] for b in beton.open(ds_dir).branches()}
    assert heads["a"] == heads["b"] == 1 + rounds
    # Every version of every branch still reads.
    for b in ("main", "a", "b"):
        for v in beton.open(ds_dir, branch=b).versions():
            assert len(beton.open(ds_dir, branch=b, version=v["version"])) == 155


def test_the_diff_gallery_outlines_a_changed_image(ds_dir):
    main = beton.open(ds_dir)
    branch = main.branch("recolor")
    red = np.zeros((20, 30, 3), np.uint8)
    red[..., 0] = 255
    branch.update_rows([5], {"image": [red]}, message="a red image")
    g = main.gallery(diff=("main", "recolor"), size=32)
    (change,) = g.changes
    assert change.kind == "changed" and change.row_id == 5 and "image" in change.changed
    # Both frames outlined: the thumbnails are the change.
    assert g.to_html().count('class="frame changed"') == 2
    # Versions by number on the handle's branch: the same rows.
    assert [c.row_id for c in branch.gallery(diff=(1, 2)).changes] == [5]
    # Row numbers narrow to rows of the newer version.
    assert [c.row_id for c in branch.gallery(diff=(1, 2), where=[4, 5]).changes] == [5]
    assert branch.gallery(diff=(1, 2), where=[6]).changes == []
    assert branch.gallery(diff=(1, 2), progress=True).matched == 1
