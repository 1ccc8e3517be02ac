"""The Python loader against the Rust loader and against torch's DataLoader + torchvision, on the
same JPEGs, in one run.

- beton (Rust): ``beton bench FILE --images rrc:SIZE --threads W --batch-size B`` (the native
  pipeline alone: random resized crop + flip + normalize to f16).
- beton (Python): ``beton.loader.Loader`` with the same pipeline, iterated from Python, each
  batch touched (``images.sum()`` of one pixel per image) so nothing is skipped.
- torch: ``torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(DIR, transform))`` with
  ``RandomResizedCrop(SIZE)``, ``RandomHorizontalFlip()``, ``ToTensor()``, ``Normalize``, W
  workers, batch B, on the original files (beton's file stores the same JPEGs, passed through).

- FFCV 1.0.2 (when ``ffcv`` imports, i.e. run with FFCV's venv from ``tests/ffcv/ffcv-env.sh``
  with beton's wheel installed in it): FFCV's ``Loader`` with its RandomResizedCrop + flip +
  ``NormalizeImage`` (f16, on the CPU: FFCV's jitted table lookup, channels-last output) on a
  file FFCV's own ``DatasetWriter`` wrote from DIR, and beton's Python ``Loader`` on that same
  file.

Needs beton installed and, for the torch row, torch + torchvision (skipped without them).
Usage: ``python benches/python_loader.py DIR [--size 160] [--workers 2] [--batch-size 256]
[--epochs 3]`` with DIR an ImageFolder, e.g. ``benches/bench-corpus.sh DIR 1000 5 0``.
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def timed_epochs(make_iter, epochs):
    """Images/s of each epoch after the first (warm-up)."""
    rates = []
    for e in range(epochs):
        t0, n = time.perf_counter(), 0
        for images, _labels in make_iter():
            n += len(images)
        if e > 0:
            rates.append(n / (time.perf_counter() - t0))
    return float(np.median(rates)), rates


def touched(loader):
    """An epoch of `loader` as `timed_epochs` takes it, reading one value of each image batch (so
    the batch is really there)."""
    def epoch():
        for images, labels in loader:
            images[:, 0, 0, 0].sum()
            yield images, labels
    return epoch


def beton_rate(path, a):
    """beton's Python Loader on `path`: RRC + flip + NormalizeImage (f16), RANDOM order."""
    pipeline = [RandomResizedCropRGBImageDecoder((a.size, a.size)), RandomHorizontalFlip(),
                NormalizeImage(MEAN, STD, np.float16)]
    loader = Loader(path, batch_size=a.batch_size, num_workers=a.workers, order=OrderOption.RANDOM,
                    pipelines={"image": pipeline})
    return timed_epochs(touched(loader), a.epochs)


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
    return [("FFCV 1.0.2 Loader, FFCV's file", *timed_epochs(touched(loader), a.epochs)),
            ("beton, Python Loader, FFCV's file", *beton_rate(path, a))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--size", type=int, default=160)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--beton-bin", default="target/release/beton")
    ap.add_argument("--out", default="target/python-loader-bench.beton")
    a = ap.parse_args()

    if not os.path.exists(a.out):
        DatasetWriter(a.out, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                      progress=False).from_imagefolder(a.dir)
    n = len(beton.open(a.out))
    rows = []

    out = subprocess.run([a.beton_bin, "bench", a.out, "--images", f"rrc:{a.size}", "--threads", str(a.workers),
                          "--batch-size", str(a.batch_size), "--epochs", str(a.epochs), "--order", "random"],
                         capture_output=True, text=True, check=True).stdout
    rust = [float(m.group(1)) for m in re.finditer(r"^\s+\d+\s+[\d.]+\s+(\d+)", out, re.M)][1:]
    rows.append(("beton, Rust (beton bench)", float(np.median(rust)), rust))

    rows.append(("beton, Python Loader", *beton_rate(a.out, a)))

    try:
        import ffcv  # noqa: F401  (FFCV's own venv: tests/ffcv/ffcv-env.sh, beton's wheel installed in it)
    except ImportError as e:
        print(f"(FFCV rows skipped: {e})")
    else:
        rows.extend(ffcv_rows(a))

    try:
        import torch
        import torchvision
        from torchvision import transforms as T

        tf = T.Compose([T.RandomResizedCrop(a.size, antialias=True), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN / 255, STD / 255)])
        ds = torchvision.datasets.ImageFolder(a.dir, transform=tf)
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                         drop_last=True, persistent_workers=True)
        rows.append((f"torch DataLoader + torchvision {torchvision.__version__}", *timed_epochs(lambda: dl, a.epochs)))
    except ImportError as e:
        print(f"(torch row skipped: {e})")

    print(f"\n{n} images from {a.dir}, RRC {a.size} + flip + normalize, {a.workers} workers, batch {a.batch_size}, "
          f"median of epochs 2..{a.epochs} (images/s)")
    base = rows[0][1]
    for name, rate, all_rates in rows:
        print(f"  {name:45s} {rate:9.0f}   {rate / base:5.2f}x the Rust bench   {[round(r) for r in all_rates]}")


if __name__ == "__main__":
    sys.exit(main())
