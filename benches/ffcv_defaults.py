"""The Python Loader's speed under FFCV's defaults (issue 37) vs beton's earlier ones, side by
side in one process, interleaved round by round:

- **scalar shapes**: a labels-and-scores loader (batch 512, RANDOM) with FFCV's ``(B, 1)``
  batches (``IntDecoder()``, a reshape of the native column) vs ``IntDecoder(flat=True)``;
- **RANDOM's order**: an image loader (RRC 160 + flip + NormalizeImage f16, batch 256,
  2 threads) with RANDOM as FFCV's ``np.random.default_rng(seed + epoch).permutation`` (the
  order handed to the native engine per epoch) vs the native ChaCha8 shuffle
  (``distributed=(0, 1)``, which keeps the native order).

    python benches/ffcv_defaults.py IMAGE_DIR [--rows 2000000] [--rounds 7] [--repeat 13]

IMAGE_DIR is an ImageFolder (``examples/data/imagefolder``, or ``benches/bench-corpus.sh``'s);
its images are written once at max_resolution 256 and read ``--repeat`` times per epoch.
Prints each variant's median rate, its range, and the median of per-round ratios; RSS at the end.
"""
import os
import resource
import tempfile
import time

import numpy as np

from beton.fields import FloatField, IntField, RGBImageField
from beton.fields.decoders import FloatDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter

from bench_args import parse

MEAN, STD = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255


def scalars(path, flat):
    loader = Loader(path, batch_size=512, num_workers=2, order=OrderOption.RANDOM, seed=0,
                    pipelines={"label": [IntDecoder(flat=flat)], "score": [FloatDecoder(flat=flat)]})
    t0, n = time.perf_counter(), 0
    for _ in loader:
        n += 1
    return n / (time.perf_counter() - t0)


def images(path, indices, native_order):
    loader = Loader(path, batch_size=256, num_workers=2, order=OrderOption.RANDOM, seed=0, indices=indices,
                    distributed=(0, 1) if native_order else False, drop_last=False,
                    pipelines={"image": [RandomResizedCropRGBImageDecoder((160, 160)), RandomHorizontalFlip(),
                                         NormalizeImage(MEAN, STD, np.float16)], "label": [IntDecoder()]})
    t0, n = time.perf_counter(), 0
    for batch, _ in loader:
        n += len(batch)
    return n / (time.perf_counter() - t0)


def compare(name, unit, a_name, b_name, run_a, run_b, rounds):
    run_a(), run_b()  # warm-up
    a, b, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            x, y = run_a(), run_b()
        else:
            y, x = run_b(), run_a()
        a.append(x)
        b.append(y)
        ratios.append(x / y)
    print(f"{name}: {a_name} {np.median(a):,.0f} {unit} ({min(a):,.0f}-{max(a):,.0f}), "
          f"{b_name} {np.median(b):,.0f} ({min(b):,.0f}-{max(b):,.0f}); ratio median {np.median(ratios):.3f} "
          f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")


def main():
    args = parse("IMAGES", rows=2_000_000, rounds=7, repeat=13)
    with tempfile.TemporaryDirectory() as tmp:
        import pyarrow as pa

        sp = os.path.join(tmp, "scalars.beton")
        table = pa.table({"label": np.arange(args.rows, dtype=np.int64) % 1000,
                          "score": np.random.RandomState(0).rand(args.rows)})
        DatasetWriter(sp, {"label": IntField(), "score": FloatField()}, progress=False).from_arrow(table)
        ip = os.path.join(tmp, "images.beton")
        n = DatasetWriter(ip, {"image": RGBImageField(write_mode="jpg", max_resolution=256), "label": IntField()},
                          progress=False).from_imagefolder(args.images)["num_samples"]
        indices = list(range(n)) * args.repeat
        compare(f"scalars, {args.rows:,} rows, batch 512", "batches/s", "(B, 1)", "(B,)",
                lambda: scalars(sp, False), lambda: scalars(sp, True), args.rounds)
        compare(f"images, {n} x {args.repeat} per epoch, RRC 160", "img/s", "FFCV's RANDOM", "native RANDOM",
                lambda: images(ip, indices, False), lambda: images(ip, indices, True), args.rounds)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
