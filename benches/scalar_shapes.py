"""The Python Loader's speed with FFCV's (B, 1) scalar batches vs the flat (B,) ones.

    python benches/scalar_shapes.py [--rows 2000000] [--rounds 7] [--batch 512]

Writes a file of int and float fields, then reads every batch of one epoch through
``Loader(..., pipelines={"label": [IntDecoder()], "score": [FloatDecoder()]})`` (FFCV's
shape) and the same with ``flat=True``, interleaved round by round; prints batches/s of each
and the per-round ratio. The (B, 1) batch is a reshape (a view) of the native (B,) column.
"""
import argparse
import os
import tempfile
import time

import numpy as np

from beton.fields import FloatField, IntField
from beton.fields.decoders import FloatDecoder, IntDecoder
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter


def epoch(path, batch, flat):
    loader = Loader(path, batch_size=batch, num_workers=2, order=OrderOption.RANDOM, seed=0,
                    pipelines={"label": [IntDecoder(flat=flat)], "score": [FloatDecoder(flat=flat)]})
    t0 = time.perf_counter()
    n = 0
    for label, score in loader:
        n += 1
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scalars.beton")
        import pyarrow as pa

        table = pa.table({"label": np.arange(args.rows, dtype=np.int64) % 1000,
                          "score": np.random.RandomState(0).rand(args.rows)})
        DatasetWriter(path, {"label": IntField(), "score": FloatField()}, progress=False).from_arrow(table)
        epoch(path, args.batch, False)  # warm-up
        ratios, ffcv_shape, flat = [], [], []
        for r in range(args.rounds):
            a, b = (epoch(path, args.batch, False), epoch(path, args.batch, True)) if r % 2 == 0 else \
                tuple(reversed((epoch(path, args.batch, True), epoch(path, args.batch, False))))
            ffcv_shape.append(a)
            flat.append(b)
            ratios.append(a / b)
        print(f"{args.rows:,} rows, batch {args.batch}, {args.rounds} rounds")
        print(f"(B, 1): {np.median(ffcv_shape):,.0f} batches/s (rounds {min(ffcv_shape):,.0f}-{max(ffcv_shape):,.0f})")
        print(f"(B,):   {np.median(flat):,.0f} batches/s (rounds {min(flat):,.0f}-{max(flat):,.0f})")
        print(f"ratio (B, 1) / (B,): median {np.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
