"""Progress of long calls: ``compact``, ``export``, ``append`` and ``beton.concat`` draw a tqdm
bar on stderr with ``progress=True`` and nothing with ``progress=False``; an exception raised by
a native call's progress callable stops the work, propagates, and leaves no file behind."""

import os

import pytest

import beton
from beton import _native
from beton.fields import IntField, RGBImageField
from beton.writer import DatasetWriter

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


@pytest.fixture()
def edited(tmp_path, small):
    """The 600-sample ``small`` file as a dataset directory less its first 10 rows: 590 rows in
    a data file and a deletion file."""
    ds = beton.import_file(tmp_path / "ds", small)
    return ds.delete("label < 10")


@pytest.fixture()
def folder(tmp_path):
    """A dataset directory of the example ImageFolder (155 images), for ``append``."""
    out = tmp_path / "folder.beton"
    DatasetWriter(out, {"image": RGBImageField(max_resolution=32), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER)
    return beton.import_file(tmp_path / "folder", out)


def files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_long_calls_draw_a_tqdm_bar(edited, folder, small, tmp_path, capsys, monkeypatch):
    """Where someone sees it (a terminal, a notebook; forced here with BETON_PROGRESS=1, as
    pytest's captured stderr is no terminal)."""
    import tqdm  # noqa: F401 (python/requirements-test.txt: the bar is drawn, not skipped)

    monkeypatch.setenv("BETON_PROGRESS", "1")
    capsys.readouterr()
    assert edited.export(tmp_path / "out.beton") == 590
    assert "590/590" in capsys.readouterr().err
    edited.compact()
    assert "590/590" in capsys.readouterr().err
    both = beton.concat([edited, small], tmp_path / "both")
    assert len(both) == 1190 and "1190/1190" in capsys.readouterr().err
    folder.append(IMAGEFOLDER, max_resolution=32)
    assert len(folder) == 310 and "155/155" in capsys.readouterr().err


def test_no_bar_goes_into_a_log(edited, tmp_path):
    """A script whose stderr is a file (a batch job's log) gets no bar by default: tqdm would
    write a line per refresh into the log."""
    import subprocess
    import sys

    log = tmp_path / "job.log"
    script = ("import beton, sys; ds = beton.open(sys.argv[1]); "
              "print(ds.export(sys.argv[2], columns=['label', 'score']))")
    env = {k: v for k, v in os.environ.items() if k != "BETON_PROGRESS"}
    with open(log, "w") as err:
        out = subprocess.run([sys.executable, "-c", script, str(edited.path), str(tmp_path / "o.beton")],
                             stdout=subprocess.PIPE, stderr=err, text=True, env=env, check=True).stdout
    assert out.strip() == "590"
    assert log.read_text() == ""


def test_progress_false_draws_nothing(edited, folder, small, tmp_path, capfd):
    capfd.readouterr()
    edited.export(tmp_path / "out.beton", progress=False)
    edited.compact(progress=False)
    beton.concat([edited, small], tmp_path / "both", progress=False)
    folder.append(IMAGEFOLDER, max_resolution=32, progress=False)
    assert len(edited) == 590 and len(folder) == 310
    assert capfd.readouterr() == ("", "")


def test_an_exception_in_a_native_progress_callable_propagates_and_leaves_no_file(edited, tmp_path):
    calls = []

    def boom(done, total):
        calls.append((done, total))
        raise ValueError("stop here")

    native = edited._native
    out = tmp_path / "out.beton"
    with pytest.raises(ValueError, match="stop here"):
        native.export(str(out), None, 0, boom)
    assert not out.exists() and calls and calls[0][1] == 590

    before = files_under(edited.path)
    with pytest.raises(ValueError, match="stop here"):
        native.compact(0, "", boom)
    assert files_under(edited.path) == before, "no data file, no version"
    assert beton.open(edited.path).version == edited.version

    both = tmp_path / "both"
    with pytest.raises(ValueError, match="stop here"):
        _native.Dataset.concat(str(both), [str(edited.path)], "", boom)
    assert not _native.Dataset.is_dataset_dir(str(both)) and not [f for f in files_under(both) if f.endswith(".beton")]

    # Returning False cancels too, with beton's error.
    with pytest.raises(beton.BetonError, match="cancelled"):
        native.export(str(out), None, 0, lambda done, total: False)
    assert not out.exists()
