"""Small data files stay small (issue 39): without a page size, the writer chooses it from the
payload (docs/FORMAT.md §5), and FFCV 1.0.2 reads such files as beton does.

FFCV's view was recorded by ``tests/ffcv/record_small_pages.py`` (run with FFCV's python) into
``data/ffcv_small_pages/expected.json.gz`` from the files ``write_files`` writes: the recording keeps
each file's sha256, and the test first checks that beton still writes those very bytes. The same
program then runs with ``ffcv`` replaced by ``beton`` (as ``test_ffcv_programs.py`` runs FFCV's
programs) and must see what FFCV saw: every sample's label and payloads through the ``Reader``;
the SEQUENTIAL batches through the OS cache and the process cache (which reads whole pages); and
in QUASI_RANDOM order (drawn from the page map; FFCV's draws differ from beton's) every sample
once, with its values. With ``BETON_FFCV_PYTHON`` set, FFCV records afresh from the files written
now. To re-record the committed expectations after a change of the writer's bytes:
``python python/tests/test_small_pages.py FFCV_PYTHON``.
"""

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from beton.fields import IntField, NDArrayField, RGBImageField
from beton.writer import DatasetWriter

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
RECORDER = os.path.join(REPO, "tests", "ffcv", "record_small_pages.py")
RECORDING = os.path.join(HERE, "data", "ffcv_small_pages", "expected.json.gz")
FOLDER = os.path.join(REPO, "examples", "data", "imagefolder")
MIB = 1 << 20

# torch < 2.6 tensors warn when numpy converts them (no `copy` keyword in their __array__).
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def image(i, size):
    """A deterministic ``size`` × ``size`` RGB image, different for every ``i``."""
    y, x = np.mgrid[0:size, 0:size]
    return np.stack([(x * 7 + i * 11) % 256, (y * 5 + i * 3) % 256, (x + y + i) % 256], -1).astype(np.uint8)


def write_files(d):
    """The files of the recording, written with the default page size: two raw images; 300
    raw images with an array each; 100 JPEGs. Returns their paths."""
    raw = RGBImageField(write_mode="raw")
    files = {
        "two.beton": ({"image": raw, "label": IntField()}, [(image(i, 48), i) for i in range(2)]),
        "raw.beton": ({"image": raw, "array": NDArrayField(np.dtype("u1"), (100,)), "label": IntField()},
                      [(image(i, 24), (np.arange(100) + i).astype(np.uint8), i) for i in range(300)]),
        "jpg.beton": ({"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                      [(image(i, 32), i) for i in range(100)]),
    }
    paths = []
    for name, (fields, samples) in files.items():
        path = os.path.join(str(d), name)
        DatasetWriter(path, fields, num_workers=1, progress=False).from_indexed_dataset(samples)
        paths.append(path)
    return paths


def as_beton():
    """The recorder with ``ffcv`` replaced by ``beton`` (the only change an FFCV user makes)."""
    with open(RECORDER) as f:
        source = f.read().replace("ffcv", "beton")
    module = types.ModuleType("record_small_pages_beton")
    exec(compile(source, RECORDER, "exec"), module.__dict__)
    return module


def record(python, paths, out):
    done = subprocess.run([python, RECORDER, out, *paths], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"FFCV could not read the files: {done.stderr[-3000:]}"


def payload_and_fixed(path):
    """A file's payload bytes, and the bytes any layout has: header, descriptors, table, the
    default room for splits (64 KiB + 2 per sample) and the allocation table."""
    from beton.reader import Reader

    r = Reader(path)
    n, table = int(r.num_samples), r.alloc_table
    fixed = 24 + 1041 * int(r.num_fields) + n * r.metadata.dtype.itemsize + (64 << 10) + 2 * n + 24 * len(table)
    return int(table["size"].sum()), fixed


def test_small_files_are_their_payload_plus_a_bounded_overhead(tmp_path):
    from beton.reader import Reader

    for path in write_files(tmp_path):
        payload, fixed = payload_and_fixed(path)
        page = int(Reader(path).page_size)
        size = os.path.getsize(path)
        assert page < 8 * MIB, (path, page)
        # Padding: at most a page at each end of the pages, and the tails pages leave.
        assert size <= fixed + payload + payload // 8 + 2 * page, (path, size, payload, page)
    # Two images: about their bytes, not two 8 MiB pages (FFCV's default, still given at will).
    two = os.path.join(str(tmp_path), "two.beton")
    assert os.path.getsize(two) < 100 << 10
    fields = {"image": RGBImageField(write_mode="raw"), "label": IntField()}
    ffcv_layout = str(tmp_path / "two-8mib.beton")
    report = DatasetWriter(ffcv_layout, fields, page_size=8 << 20, progress=False).from_indexed_dataset(
        [(image(i, 48), i) for i in range(2)])
    assert report["page_size"] == 8 << 20 and os.path.getsize(ffcv_layout) > 16 * MIB
    with pytest.raises(ValueError, match="page_size"):
        DatasetWriter(str(tmp_path / "x.beton"), fields, page_size=0, progress=False).from_indexed_dataset([])
    # The example ImageFolder (155 images, 2.5 MB as JPEGs, up to 190 KB each): 3.4 MB, not
    # 16.8 MB. Its 256 KiB pages hold one or two of the largest images, whose tails a page
    # leaves empty (a sample lies in one page); any two consecutive pages hold more than a page.
    out = str(tmp_path / "folder.beton")
    report = DatasetWriter(out, {"image": RGBImageField(write_mode="jpg", jpeg_restart_interval=0),
                                 "label": IntField()}, progress=False).from_imagefolder(FOLDER)
    payload, fixed = payload_and_fixed(out)
    assert report["page_size"] < 8 * MIB and report["file_len"] == os.path.getsize(out)
    assert os.path.getsize(out) <= fixed + payload * 3 // 2 + 2 * report["page_size"], report
    assert os.path.getsize(out) < 4 * MIB, report


def test_appending_two_images_writes_about_their_bytes(tmp_path):
    import beton

    def folder(name, files):
        root = tmp_path / name / "fish"
        root.mkdir(parents=True)
        for f in files:
            shutil.copy(os.path.join(FOLDER, "fish", f), root / f)
        return tmp_path / name

    jpegs = sorted(f for f in os.listdir(os.path.join(FOLDER, "fish")) if f.endswith(".jpg"))
    options = dict(write_mode="jpg", jpeg_restart_interval=0, progress=False)
    ds_dir = tmp_path / "ds"
    beton_options = {"image": RGBImageField(write_mode="jpg", jpeg_restart_interval=0), "label": IntField()}
    DatasetWriter(str(ds_dir) + "/", beton_options, progress=False).from_imagefolder(folder("a", jpegs[:2]))

    def tree_bytes():
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(ds_dir) for f in fs)

    before = tree_bytes()
    ds = beton.open(str(ds_dir))
    ds.append(folder("b", jpegs[2:4]), **options)
    added = tree_bytes() - before
    image_bytes = sum(os.path.getsize(os.path.join(FOLDER, "fish", f)) for f in jpegs[2:4])
    # The images, the data file's head (table, 64 KiB of room for splits) and pages of about
    # their size, the version's metadata: not 16 MiB.
    assert added < image_bytes + (192 << 10), (added, image_bytes)
    assert len(beton.open(str(ds_dir))) == 4


def test_ffcv_reads_small_pages_as_beton_does(tmp_path):
    paths = write_files(tmp_path)
    live = os.environ.get("BETON_FFCV_PYTHON")
    recording = RECORDING
    if live:
        recording = str(tmp_path / "expected.json")
        record(live, paths, recording)
    with (gzip.open(recording, "rt") if recording.endswith(".gz") else open(recording)) as f:
        ffcv = json.load(f)["files"]
    assert sorted(ffcv) == sorted(os.path.basename(p) for p in paths)
    beton_views = as_beton()
    for path in paths:
        name = os.path.basename(path)
        want = ffcv[name]
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        assert digest == want["sha256"], (
            f"{name}: beton no longer writes the bytes FFCV's view was recorded from; re-record with "
            f"python python/tests/test_small_pages.py FFCV_PYTHON")
        assert want["page_size"] < 2 * MIB, f"{name}: the recording is of pages FFCV's writer would refuse"
        got = beton_views.reader_view(path)
        assert got == {k: want[k] for k in got}, f"{name}: the Reader's view"
        decoded = [n for n in got["fields"] if n in ("label", "image", "array")]
        for order in ("SEQUENTIAL", "QUASI_RANDOM"):
            for os_cache in (True, False):
                key = f"{order}/os_cache={os_cache}"
                mine = beton_views.loader_view(path, decoded, order, os_cache)
                theirs = want[key]
                if order == "SEQUENTIAL":
                    assert [b["label"] for b in mine] == [b["label"] for b in theirs], f"{name} {key}"
                compare_samples(name, key, per_sample(mine), per_sample(theirs), jpeg=name == "jpg.beton")


def per_sample(batches):
    """{label: {field: [sha256, mean]}} over every batch; each label exactly once."""
    out = {}
    for b in batches:
        for k, label in enumerate(b["label"]):
            assert label not in out, f"label {label} read twice"
            out[label] = {name: v[k] for name, v in b.items() if name != "label"}
    return out


def compare_samples(name, key, mine, theirs, jpeg):
    assert sorted(mine) == sorted(theirs) == list(range(len(theirs))), f"{name} {key}: every sample once"
    for label, fields in theirs.items():
        for field, (digest, mean) in fields.items():
            got_digest, got_mean = mine[label][field]
            if jpeg and field == "image":  # two JPEG codecs' rounding: pixels within a level
                assert abs(got_mean - mean) < 1.0, f"{name} {key} sample {label}: mean {got_mean}, FFCV's {mean}"
            else:
                assert got_digest == digest, f"{name} {key} sample {label} field {field}"


if __name__ == "__main__":
    # Re-records the committed expectations with FFCV's python (argv[1]).
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
        plain = os.path.join(d, "expected.json")
        record(sys.argv[1], write_files(d), plain)
        with open(plain, "rb") as f, gzip.open(RECORDING, "wb") as out:
            out.write(f.read())
    print(f"recorded {RECORDING}")
