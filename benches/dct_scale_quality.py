"""Usage: PY benches/dct_scale_quality.py IMAGEFOLDER [N] [GAP]

PY: a python with Pillow, numpy and OpenCV (FFCV's venv: /root/.cache/beton-ffcv-venv/bin/python).

Would decoding at a DCT scale (libjpeg's scaled IDCT, 1/2, 1/4, 1/8) before the writer's area
averaging cost picture quality? For the first N JPEGs of the folder (default 200) and several
max_resolution values, compares with a Lanczos downscale of the whole decode, and with OpenCV's
INTER_AREA (FFCV's writer resize):
  old: the whole decode, area averaging (Pillow's BOX, as beton's writer);
  new: Pillow's `draft` (libjpeg's scaled decode) at the coarsest power-of-two scale that leaves
       at least GAP times the target (default 1: just covering it), then area averaging of the
       image's true extent.
Prints the mean |difference| in levels per setting. 2026-11-30 results: benches/README.md
(`ffcv_writer.py`, "Measured and not taken").
"""
import glob
import sys

import cv2
import numpy as np
from PIL import Image


def main():
    folder = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    gap = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    files = sorted(glob.glob(folder + "/*/*.jpg"))[:n]
    for max_res in [40, 60, 100, 128, 200]:
        acc = {k: [] for k in ["old-area", "new-area", "old-lanczos", "new-lanczos"]}
        for f in files:
            im = Image.open(f)
            im.load()
            w, h = im.size
            r = max_res / max(w, h)
            if r >= 1:
                continue
            t = (max(1, int(r * w)), max(1, int(r * h)))
            full = im.convert("RGB")
            area = cv2.resize(np.asarray(full), t, interpolation=cv2.INTER_AREA).astype(float)
            lanczos = np.asarray(full.resize(t, Image.LANCZOS)).astype(float)
            old = np.asarray(full.resize(t, Image.BOX)).astype(float)
            s = next((d for d in (8, 4, 2) if -(-w // d) >= gap * t[0] and -(-h // d) >= gap * t[1]), 1)
            d = Image.open(f)
            if s > 1:
                d.draft("RGB", (w // s, h // s))
            new = np.asarray(d.convert("RGB").resize(t, Image.BOX, box=(0, 0, w / s, h / s))).astype(float)
            for k, a, b in [("old-area", old, area), ("new-area", new, area),
                            ("old-lanczos", old, lanczos), ("new-lanczos", new, lanczos)]:
                acc[k].append(np.abs(a - b).mean())
        if acc["old-area"]:
            print(f"max {max_res:4d}: {len(acc['old-area'])} images, "
                  + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in acc.items()))


if __name__ == "__main__":
    main()
