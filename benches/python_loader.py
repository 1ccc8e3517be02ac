"""The Python loader against the Rust loader, FFCV 1.0.2's own Loader and torch's DataLoader +
torchvision, on the same JPEGs, in one run.

- beton (Rust): ``beton bench FILE --images rrc:SIZE --threads W --batch-size B --order random
  --epochs 2`` (the native pipeline alone: random resized crop + flip + normalize to f16), a fresh
  process each round; its second epoch counts (the first is that process's warm-up).
- beton (Python): ``beton.loader.Loader`` with the same pipeline, iterated from Python, each
  batch touched (``images[:, 0, 0, 0].sum()``) so nothing is skipped.
- FFCV 1.0.2 (when ``ffcv`` imports, i.e. run with FFCV's venv from ``tests/ffcv/ffcv-env.sh``
  with beton's wheel installed in it): FFCV's ``Loader`` with its RandomResizedCrop + flip +
  ``NormalizeImage`` (f16, on the CPU: FFCV's jitted table lookup, channels-last output) on a
  file FFCV's own ``DatasetWriter`` wrote from DIR, and beton's Python ``Loader`` on that same
  file (no restart markers: beton's packed-RGB path).
- torch: ``torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(DIR, transform))`` with
  ``RandomResizedCrop(SIZE)``, ``RandomHorizontalFlip()``, ``ToTensor()``, ``Normalize``, W
  workers (persistent), batch B, on the original files (beton's file stores the same JPEGs,
  passed through).

How it is measured, for a shared machine: rounds, each running one whole epoch of every loader
in turn (the order reversed every other round); round 0 is a warm-up (numba compilation, worker
start-up, page cache) and is discarded. Each round gives each loader's images/s and the ratio
"beton Python / that loader"; the table shows the median images/s with its min-max over rounds,
and the median of the per-round ratios with their min-max. Use enough images that an epoch takes
seconds (10,000: ``benches/bench-corpus.sh DIR 10000 10 0``; FFCV's epochs of 1,000 images dip at
random). The .beton files written from DIR are kept (--out) and reused by later runs.

Needs beton installed and, for the torch row, torch + torchvision (skipped without them).
Usage: ``python benches/python_loader.py DIR [--size 160] [--workers 2] [--batch-size 256]
[--rounds 5] [--beton-bin PATH]`` with DIR an ImageFolder.
"""

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import parse  # noqa: E402
from machine import machine  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def epoch_rate(loader):
    """A function running one epoch of `loader` and returning its images/s, reading one value of
    each image batch (so the batch is really there)."""
    def run():
        t0, n = time.perf_counter(), 0
        for images, _labels in loader:
            images[:, 0, 0, 0].sum()
            n += len(images)
        return n / (time.perf_counter() - t0)
    return run


def beton_loader(path, a):
    """beton's Python Loader on `path`: RRC + flip + NormalizeImage (f16), RANDOM order."""
    pipeline = [RandomResizedCropRGBImageDecoder((a.size, a.size)), RandomHorizontalFlip(),
                NormalizeImage(MEAN, STD, np.float16)]
    return Loader(path, batch_size=a.batch_size, num_workers=a.workers, order=OrderOption.RANDOM,
                  pipelines={"image": pipeline})


def rust_rate(path, a):
    """The Rust loader alone (`beton bench`) as a function returning its second epoch's images/s."""
    cmd = [a.beton_bin, "bench", path, "--images", f"rrc:{a.size}", "--threads", str(a.workers),
           "--batch-size", str(a.batch_size), "--epochs", "2", "--order", "random"]

    def run():
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return [float(m.group(1)) for m in re.finditer(r"^\s+\d+\s+[\d.]+\s+(\d+)", out, re.M)][-1]
    return run


def ffcv_rows(a):
    """FFCV 1.0.2's own Loader with its RandomResizedCrop + flip + NormalizeImage (f16, CPU) on a
    file FFCV's DatasetWriter wrote from the same folder, and beton's Python Loader on that same
    file (FFCV's bytes: no restart markers, so beton's packed-RGB path)."""
    import torchvision
    from ffcv.fields import IntField as FIntField, RGBImageField as FRGBImageField
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder as FRRC
    from ffcv.loader import Loader as FLoader, OrderOption as FOrder
    from ffcv.transforms import NormalizeImage as FNormalize, RandomHorizontalFlip as FFlip, ToTensor, ToTorchImage
    from ffcv.writer import DatasetWriter as FWriter

    path = a.out.replace(".beton", "-ffcv.beton")
    if not os.path.exists(path):
        ds = torchvision.datasets.ImageFolder(a.dir)
        FWriter(path, {"image": FRGBImageField(write_mode="jpg"), "label": FIntField()},
                num_workers=a.workers).from_indexed_dataset(ds)
    # FFCV's CPU NormalizeImage is a jitted op on HWC arrays: it goes before ToTensor (FFCV's
    # pipeline compiler loops forever on a jitted op after non-jitted ones), and the batch comes
    # out channels-last (HWC memory), FFCV's layout.
    pipeline = [FRRC((a.size, a.size)), FFlip(), FNormalize(MEAN, STD, np.float16), ToTensor(), ToTorchImage()]
    loader = FLoader(path, batch_size=a.batch_size, num_workers=a.workers, order=FOrder.RANDOM,
                     pipelines={"image": pipeline, "label": [IntDecoder(), ToTensor()]})
    return {"FFCV 1.0.2 Loader, FFCV's file": epoch_rate(loader),
            "beton, Python Loader, FFCV's file": epoch_rate(beton_loader(path, a))}


def main():
    # --rounds: timed rounds, after the warm-up round.
    a = parse("DIR", size=160, workers=2, batch_size=256, rounds=5,
              beton_bin=str(Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "beton"),
              out=str(REPO / "target" / "python-loader-bench.beton"))
    print(machine("ffcv", "torch", "torchvision", "numpy", "numba"), flush=True)

    if not os.path.exists(a.out):
        DatasetWriter(a.out, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                      progress=False).from_imagefolder(a.dir)
    n = len(beton.open(a.out))
    ref = "beton, Python Loader"
    runs = {"beton, Rust (beton bench)": rust_rate(a.out, a), ref: epoch_rate(beton_loader(a.out, a))}

    try:
        import ffcv  # noqa: F401  (FFCV's own venv: tests/ffcv/ffcv-env.sh, beton's wheel installed in it)
    except ImportError as e:
        print(f"(FFCV rows skipped: {e})")
    else:
        runs.update(ffcv_rows(a))

    try:
        import torch
        import torchvision
        from torchvision import transforms as T

        tf = T.Compose([T.RandomResizedCrop(a.size, antialias=True), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN / 255, STD / 255)])
        ds = torchvision.datasets.ImageFolder(a.dir, transform=tf)
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                         drop_last=True, persistent_workers=True)
        runs[f"torch DataLoader + torchvision {torchvision.__version__}"] = epoch_rate(dl)
    except ImportError as e:
        print(f"(torch row skipped: {e})")

    rates = {k: [] for k in runs}
    for r in range(a.rounds + 1):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        got = {k: runs[k]() for k in order}
        print(f"# round {r}{' (warm-up, discarded)' if r == 0 else ''}: "
              + ", ".join(f"{k} {v:.0f}" for k, v in got.items()), flush=True)
        if r > 0:
            for k, v in got.items():
                rates[k].append(v)

    print(f"\n{n} images from {a.dir}, RRC {a.size} + flip + normalize, {a.workers} workers, batch {a.batch_size}, "
          f"RANDOM; {a.rounds} interleaved rounds of one epoch each after a warm-up round")
    print(f"  {'loader':45s} {'images/s: median (min-max)':>28}   {ref} / it: median of rounds (min-max)")
    for k, rs in rates.items():
        ratios = [p / x for p, x in zip(rates[ref], rs)]
        print(f"  {k:45s} {statistics.median(rs):9.0f} ({min(rs):5.0f}-{max(rs):5.0f})   "
              f"{statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    ffcv, same = "FFCV 1.0.2 Loader, FFCV's file", "beton, Python Loader, FFCV's file"
    if ffcv in rates:
        ratios = [b / f for b, f in zip(rates[same], rates[ffcv])]
        print(f"  on the same file (FFCV's): beton's Python Loader / FFCV's Loader "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    sys.exit(main())
