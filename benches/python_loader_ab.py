"""beton's Python Loader, two builds side by side (e.g. a release wheel of the parent commit and
one of HEAD, each installed in its own venv), interleaved round by round on each file given:

- images/s of RRC-160 + flip + NormalizeImage (f16), batch 256, 2 threads, RANDOM (the native
  pipeline through the Python layer);
- batches/s of a label-only loader, batch 64 (the Python layer's per-batch overhead).

Each round runs each interpreter once (a fresh process; the median of its epochs after a warm-up)
and reports new/old per round; the summary is the median ratio and its range.

Usage: ``python benches/python_loader_ab.py FILE... --old VENV_OLD/bin/python --new VENV_NEW/bin/python
[--rounds 7] [--ffcv-written DIR [--ffcv-python PY]]``, each FILE an image .beton with fields image
and label (``beton write-imagefolder DIR FILE`` over ``benches/bench-corpus.sh DIR 10000 10 0``).
Build the wheels in separate target dirs: two checkouts sharing one can package each other's
stale artifacts.

``--ffcv-written DIR`` adds the file most users start from: DIR (an ImageFolder) written the way
FFCV writes it, without restart markers, so that every change to the image path is also measured
on that path. With ``--ffcv-python`` (the python of FFCV 1.0.2's venv, ``tests/ffcv/ffcv-env.sh``)
FFCV's own ``DatasetWriter`` writes it (jpg, quality 90, max_resolution 256, as
``benches/python_loader.py``); without, the new build's writer with ``jpeg_restart_interval=0``
and ``jpeg_passthrough=False`` (FFCV's layout: every image re-encoded, no restart markers). The
file is written once, before the rounds, into a temporary folder.
"""

import argparse
import json
import statistics
import subprocess
import tempfile

CHILD = r'''
import sys, time, json
import numpy as np
from beton.loader import Loader, OrderOption
from beton.fields.decoders import RandomResizedCropRGBImageDecoder
from beton.transforms import NormalizeImage, RandomHorizontalFlip
path = sys.argv[1]
MEAN = np.array([0.485, 0.456, 0.406]) * 255; STD = np.array([0.229, 0.224, 0.225]) * 255
img = Loader(path, batch_size=256, num_workers=2, order=OrderOption.RANDOM, seed=0,
             pipelines={"image": [RandomResizedCropRGBImageDecoder((160, 160)), RandomHorizontalFlip(),
                                  NormalizeImage(MEAN, STD, np.float16)], "label": None})
lab = Loader(path, batch_size=64, num_workers=2, order=OrderOption.RANDOM, seed=0,
             pipelines={"image": None, "label": []})
def rate(loader, epochs, per_image, repeat):
    out = []
    for e in range(epochs + 1):
        t0, n = time.perf_counter(), 0
        for _ in range(repeat):
            for (x,) in loader:
                np.asarray(x).reshape(len(x), -1)[:, 0].astype(np.float32).sum()
                n += len(x) if per_image else 1
        if e:
            out.append(n / (time.perf_counter() - t0))
    return float(np.median(out))
print(json.dumps({"rrc_images_s": rate(img, 2, True, 1), "label_batches_s": rate(lab, 5, False, 10)}))
'''


# FFCV 1.0.2's DatasetWriter over an ImageFolder, as an FFCV user writes it (run in FFCV's venv).
FFCV_WRITE = r'''
import sys
from ffcv.fields import IntField, RGBImageField
from ffcv.writer import DatasetWriter
from torchvision.datasets import ImageFolder
folder, out = sys.argv[1], sys.argv[2]
ds = ImageFolder(folder)
DatasetWriter(out, {"image": RGBImageField(write_mode="jpg", max_resolution=256, jpeg_quality=90),
                    "label": IntField()}, num_workers=2).from_indexed_dataset(ds)
'''

# The same layout from beton's writer: every image re-encoded, no restart markers.
BETON_WRITE = r'''
import sys
from beton.fields import IntField, RGBImageField
from beton.writer import DatasetWriter
folder, out = sys.argv[1], sys.argv[2]
DatasetWriter(out, {"image": RGBImageField(write_mode="jpg", max_resolution=256, jpeg_quality=90,
                                           jpeg_restart_interval=0, jpeg_passthrough=False),
                    "label": IntField()}, num_workers=2, progress=False).from_imagefolder(folder)
'''


def ffcv_written(folder, tmp, new_python, ffcv_python):
    """DIR written without restart markers (by FFCV when its python is given): the file's path."""
    out = f"{tmp}/ffcv-written.beton"
    python, script, who = (ffcv_python, FFCV_WRITE, "FFCV 1.0.2") if ffcv_python else \
        (new_python, BETON_WRITE, "beton (restart interval 0, no passthrough)")
    subprocess.run([python, "-I", "-c", script, folder, out], cwd=tmp, check=True, capture_output=True, text=True)
    print(f"{out}: {folder} written by {who}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--old", required=True, help="python of the baseline build")
    ap.add_argument("--new", required=True, help="python of the build measured")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ffcv-written", metavar="DIR", help="also measure DIR written as FFCV writes it")
    ap.add_argument("--ffcv-python", metavar="PY", help="FFCV 1.0.2's python, to write --ffcv-written with FFCV")
    a = ap.parse_args()
    if not a.files and not a.ffcv_written:
        ap.error("give a FILE or --ffcv-written DIR")
    with tempfile.TemporaryDirectory() as tmp:
        files = list(a.files)
        if a.ffcv_written:
            files.append(ffcv_written(a.ffcv_written, tmp, a.new, a.ffcv_python))
        rows = {f: [] for f in files}
        for r in range(a.rounds):
            for f in files:
                got = {}
                # The order alternates, so that a drift in the machine's load falls on both.
                for name in ("new", "old") if r % 2 == 0 else ("old", "new"):
                    out = subprocess.run([getattr(a, name), "-I", "-c", CHILD, f], cwd=tmp, check=True,
                                         capture_output=True, text=True).stdout
                    got[name] = json.loads(out)
                rows[f].append(got)
                print(f"round {r + 1}, {f}: " + ", ".join(
                    f"{k} new {got['new'][k]:,.0f} old {got['old'][k]:,.0f} ({got['new'][k] / got['old'][k]:.3f}x)"
                    for k in got["new"]), flush=True)
    for f, got in rows.items():
        for k in got[0]["new"]:
            ratios = [g["new"][k] / g["old"][k] for g in got]
            print(f"{f}: {k}: median new/old {statistics.median(ratios):.3f} "
                  f"(range {min(ratios):.3f}-{max(ratios):.3f}), "
                  f"median new {statistics.median(g['new'][k] for g in got):,.0f}, "
                  f"old {statistics.median(g['old'][k] for g in got):,.0f}")


if __name__ == "__main__":
    main()
