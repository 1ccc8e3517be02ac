"""A script keeps working as the dataset grows (issue 36, item 9): the Loader reads the fields it
is given, ``export(columns=)`` leaves fields out and says when FFCV needs stubs, tags can be
deleted so that cleanup frees what they pinned, gallery captions print short floats."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import IntDecoder
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture()
def grown(tmp_path):
    """A dataset directory of the example ImageFolder, to which a curator added two columns."""
    out = tmp_path / "a.beton"
    DatasetWriter(out, {"image": RGBImageField(max_resolution=32), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER, with_path=True)
    ds = beton.import_file(tmp_path / "ds", out)
    ds.add_column("score", np.linspace(0, 1, len(ds)))
    ds.add_column("wide", "image.width > image.height")
    return ds


def batches(loader):
    out = list(loader)
    assert len(out) == len(loader) and out, "every batch, and at least one"
    return out


def test_ffcv_default_reads_every_field(grown):
    from beton.fields.decoders import CenterCropRGBImageDecoder

    loader = Loader(grown, batch_size=50, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"image": [CenterCropRGBImageDecoder((16, 16), 1.0)], "path": None})
    # image, label, score, wide: FFCV's rule, every field but those whose pipeline is None.
    assert loader.fields == ["image", "label", "score", "wide"]
    assert len(batches(loader)[0]) == 4


def test_fields_keeps_a_training_loop_working_after_columns_are_added(grown):
    from beton.fields.decoders import CenterCropRGBImageDecoder

    loader = Loader(grown, batch_size=50, order=OrderOption.SEQUENTIAL, drop_last=False,
                    fields=["image", "label"], pipelines={"image": [CenterCropRGBImageDecoder((16, 16), 1.0)]})
    seen = 0
    for images, labels in batches(loader):  # the FFCV loop, unchanged by the new columns
        assert np.asarray(images).shape[1:] == (16, 16, 3)
        seen += len(labels)
    assert seen == len(grown)
    # In the order given.
    loader = Loader(grown, batch_size=200, order=OrderOption.SEQUENTIAL, drop_last=False,
                    fields=["score", "label"])
    score, label = batches(loader)[0]
    assert np.allclose(np.asarray(score).reshape(-1), grown.table(["score"])["score"].to_numpy())
    assert np.asarray(label).reshape(-1).tolist() == grown.table(["label"])["label"].to_pylist()


def test_fields_from_pipelines(grown):
    loader = Loader(grown, batch_size=200, order=OrderOption.SEQUENTIAL, drop_last=False, fields="pipelines",
                    pipelines={"label": [IntDecoder()], "image": None})
    (label,) = batches(loader)[0]
    assert np.asarray(label).reshape(-1).tolist() == grown.table(["label"])["label"].to_pylist()


@pytest.mark.parametrize("fields, error", [
    (["label", "nope"], KeyError), (["label", "label"], ValueError), ("all", ValueError),
    (["image", "label"], ValueError),  # image's pipeline is None below
])
def test_bad_fields_are_refused(grown, fields, error):
    with pytest.raises(error):
        Loader(grown, batch_size=8, fields=fields, pipelines={"image": None})


def test_export_columns_leaves_fields_out_and_warns_for_ffcv(grown, tmp_path):
    with pytest.warns(beton.FFCVCompatibilityWarning, match=r"path \(text\).*wide \(bool\)"):
        assert grown.export(tmp_path / "all.beton", progress=False) == len(grown)
    assert list(beton.open(tmp_path / "all.beton").schema) == ["image", "label", "path", "score", "wide"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = grown.export(tmp_path / "ffcv.beton", columns=["label", "image", "score"], progress=False)
    assert n == len(grown)
    out = beton.open(tmp_path / "ffcv.beton")
    assert list(out.schema) == ["label", "image", "score"]
    assert out.table(["label"])["label"].to_pylist() == grown.table(["label"])["label"].to_pylist()
    assert out.classes == grown.classes
    with pytest.raises(KeyError, match="nope"):
        grown.export(tmp_path / "x.beton", columns=["label", "nope"], progress=False)
    assert not (tmp_path / "x.beton").exists()


def test_a_deleted_tag_frees_its_version_for_cleanup(grown):
    first = beton.open(grown.path, version=1)
    first.tag("raw")
    assert grown.tags() == {"raw": 1}
    grown.compact(progress=False)  # the latest version no longer needs version 1's data file
    kept = grown.cleanup(keep_versions=1, older_than_seconds=0)
    assert 1 not in kept["versions"]
    assert [v["version"] for v in grown.versions()][0] == 1  # the tag kept it
    with pytest.raises(ValueError, match="no such tag; the tags are: raw"):
        grown.delete_tag("rwa")
    assert grown.delete_tag("raw") == 1
    assert grown.tags() == {}
    removed = grown.cleanup(keep_versions=1, older_than_seconds=0)
    assert 1 in removed["versions"] and removed["bytes"] > 0
    assert [v["version"] for v in grown.versions()] == [grown.version]


def test_cli_deletes_a_tag(grown):
    # The test script's cargo build (CARGO_TARGET_DIR when a checkout shares another's cache).
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    beton_cli = os.path.join(target, "debug", "beton")
    if not os.path.exists(beton_cli):
        pytest.skip(f"the CLI is built by cargo ({beton_cli})")
    grown.tag("v3")
    out = subprocess.run([beton_cli, "tag", "-d", str(grown.path), "v3"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "tag 'v3' deleted" in out.stdout and grown.tags() == {}
    out = subprocess.run([beton_cli, "tag", "-d", str(grown.path), "v3"], capture_output=True, text=True)
    assert out.returncode != 0 and "no such tag" in out.stderr


def test_gallery_captions_print_short_floats(grown):
    import re

    html = grown.gallery(columns=["score"], n=4)._repr_html_()
    shown = re.findall(r"score: ([-0-9.e]+)<", html)
    assert len(shown) == 4 and any("." in s for s in shown), shown
    # k / 154 printed with 6 significant digits, not Python's 17 ("0.33116883116883117").
    assert all(len(s.replace("0.", "", 1).replace(".", "").lstrip("0")) <= 6 for s in shown), shown


def test_progress_is_forced_by_the_environment(tmp_path):
    script = ("import beton.writer as w; print(w._interactive())")
    for value, want in (("1", "True"), ("0", "False")):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=dict(os.environ, BETON_PROGRESS=value), check=True)
        assert out.stdout.strip() == want
