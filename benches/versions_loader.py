"""The loader and SQL over an edited version vs its compaction, side by side in one run.

1. Images/s of the `Loader` (RRC 160 + flip + NormalizeImage f16, 2 workers, batch 256) over a
   version with 10% of its rows deleted and two added columns (int and float, in column files),
   against the same version compacted into one data file. Epochs interleaved, median of rounds.
2. A 3-predicate SQL query over a table-only dataset of 100 data files (appended one by one)
   against the same rows in one data file.

    python benches/versions_loader.py CORPUS_DIR [--rounds 5] [--rows 1000000] [--reuse]

CORPUS_DIR: an ImageFolder (`benches/bench-corpus.sh DIR 2000 5 0`), written as JPEGs at most
256 px (raw pixels of 100,000 images would outgrow the page cache). beton from the
release build (`cd python && maturin develop --release`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa

import beton
from beton.fields import FloatField, IntField, RGBImageField
from beton.fields.decoders import RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter


def epoch_rate(path, version=None) -> float:
    mean, std = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255
    loader = Loader(path, batch_size=256, num_workers=2, order=OrderOption.RANDOM, seed=0, version=version,
                    pipelines={"image": [RandomResizedCropRGBImageDecoder((160, 160)), RandomHorizontalFlip(),
                                         NormalizeImage(mean, std, np.float16)],
                               "label": None, "k": None, "q": None})
    t0 = time.perf_counter()
    n = 0
    for (images,) in loader:
        n += len(images)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", default=os.path.join("target", "tmp", "versions-loader"))
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the edited and compacted datasets a previous run left in --dir")
    args = ap.parse_args()
    edited = os.path.join(args.dir, "edited")
    compacted = os.path.join(args.dir, "compacted")
    reuse = args.reuse and os.path.isdir(edited) and os.path.isdir(compacted)
    if not reuse:
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)

    # 1. Loader: an edited version vs its compaction.
    if not reuse:
        DatasetWriter(edited + os.sep, {"image": RGBImageField(write_mode="jpg", max_resolution=256), "label": IntField()},
                      progress=False).from_imagefolder(args.corpus)
        ds = beton.open(edited)
        ds.delete("index % 10 = 3")
        ds.add_column("k", "label * 2")
        ds.add_column("q", np.random.default_rng(0).random(len(ds)))
        shutil.copytree(edited, compacted)
        beton.open(compacted).compact()
    ds = beton.open(edited)
    epoch_rate(edited), epoch_rate(compacted)  # warm the page cache
    ratios, e_rates, c_rates = [], [], []
    for _ in range(args.rounds):
        e, c = epoch_rate(edited), epoch_rate(compacted)
        e_rates.append(e)
        c_rates.append(c)
        ratios.append(e / c)
    print(f"loader, RRC 160 + flip + normalise, {len(ds)} images (10% deleted, 2 added columns), "
          f"{args.rounds} interleaved rounds:")
    print(f"  edited version {statistics.median(e_rates):,.0f} img/s, compacted {statistics.median(c_rates):,.0f} "
          f"img/s: ratio {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})")

    # 2. SQL over 100 data files vs one.
    shutil.rmtree(os.path.join(args.dir, "one"), ignore_errors=True)
    shutil.rmtree(os.path.join(args.dir, "many"), ignore_errors=True)
    n, parts = args.rows, 100
    rng = np.random.default_rng(1)
    t = pa.table({"label": rng.integers(0, 10, n), "score": rng.random(n), "size": rng.integers(0, 1000, n)})
    fields = {"label": IntField(), "score": FloatField(), "size": IntField()}
    one = os.path.join(args.dir, "one")
    many = os.path.join(args.dir, "many")
    DatasetWriter(one + os.sep, fields, progress=False).from_arrow(t)
    step = n // parts
    for k in range(parts):
        DatasetWriter(many + os.sep, fields, progress=False).from_arrow(t.slice(k * step, step))
    sql = "label = 3 AND score > 0.5 AND size < 500"
    q_one, q_many = [], []
    for _ in range(args.rounds):
        for path, out in ((one, q_one), (many, q_many)):
            d = beton.open(path)
            t0 = time.perf_counter()
            got = d.where(sql)
            out.append(time.perf_counter() - t0)
    assert len(beton.open(one).where(sql)) == len(beton.open(many).where(sql))
    print(f"SQL '{sql}' on {n:,} rows, fresh open each time, median of {args.rounds}:")
    print(f"  100 data files {statistics.median(q_many) * 1e3:.1f} ms, one data file {statistics.median(q_one) * 1e3:.1f} "
          f"ms: ratio {statistics.median(q_many) / statistics.median(q_one):.2f} ({len(got):,} rows match)")


if __name__ == "__main__":
    main()
