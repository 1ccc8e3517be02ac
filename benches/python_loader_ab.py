"""beton's Python Loader, two builds side by side (e.g. a release wheel of the parent commit and
one of HEAD, each installed in its own venv), interleaved round by round on one file:

- images/s of RRC-160 + flip + NormalizeImage (f16), batch 256, 2 threads, RANDOM (the native
  pipeline through the Python layer);
- batches/s of a label-only loader, batch 64 (the Python layer's per-batch overhead).

Each round runs each interpreter once (a fresh process; the median of its epochs after a warm-up)
and reports new/old per round; the summary is the median ratio and its range.

Usage: ``python benches/python_loader_ab.py FILE --old VENV_OLD/bin/python --new VENV_NEW/bin/python
[--rounds 7]``, FILE an image .beton with fields image and label (``beton write-imagefolder DIR FILE``
over ``benches/bench-corpus.sh DIR 10000 10 0``). Build the wheels in separate target dirs:
two checkouts sharing one can package each other's stale artifacts.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--old", required=True, help="python of the baseline build")
    ap.add_argument("--new", required=True, help="python of the build measured")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for r in range(a.rounds):
            got = {}
            for name in ("new", "old"):
                out = subprocess.run([getattr(a, name), "-I", "-c", CHILD, a.file], cwd=tmp, check=True,
                                     capture_output=True, text=True).stdout
                got[name] = json.loads(out)
            rows.append(got)
            print(f"round {r + 1}: " + ", ".join(
                f"{k} new {got['new'][k]:,.0f} old {got['old'][k]:,.0f} ({got['new'][k] / got['old'][k]:.3f}x)"
                for k in got["new"]), flush=True)
    for k in rows[0]["new"]:
        ratios = [g["new"][k] / g["old"][k] for g in rows]
        print(f"{k}: median new/old {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}), "
              f"median new {statistics.median(g['new'][k] for g in rows):,.0f}, "
              f"old {statistics.median(g['old'][k] for g in rows):,.0f}")


if __name__ == "__main__":
    main()
