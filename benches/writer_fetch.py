"""How fast DatasetWriter takes samples from a Python dataset, by fetch cost and worker count.

The writer fetches samples on the calling thread, one at a time and in order (user code never
runs concurrently: a dataset with global state writes its own values), while the writer's
threads encode the chunk fetched before. So a dataset whose ``__getitem__`` is cheap is bound
by encoding, and one whose ``__getitem__`` waits (I/O, a C decoder that releases the GIL) is
bound by that wait, whatever ``num_workers``: 1 / fetch time samples per second.

    python benches/writer_fetch.py [--fetch-ms 0 2] [--workers 1 2] [--n 4000]
"""

import argparse
import os
import tempfile
import time

import numpy as np

from beton.fields import IntField, RGBImageField
from beton.writer import DatasetWriter


class Waiting:
    """``n`` 64x64 images, each fetch waiting ``ms`` milliseconds with the GIL released."""

    def __init__(self, n, ms):
        self.n, self.ms = n, ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.ms:
            time.sleep(self.ms / 1000)
        return (i, np.full((64, 64, 3), i % 256, np.uint8))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fetch-ms", type=float, nargs="+", default=[0, 2])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--n", type=int, default=4000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for ms in args.fetch_ms:
            n = args.n if ms == 0 else max(200, int(args.n / 4))
            for w in args.workers:
                t = time.perf_counter()
                DatasetWriter(os.path.join(d, f"x{ms}-{w}.beton"),
                              {"i": IntField(), "img": RGBImageField(write_mode="jpg")},
                              num_workers=w, progress=False).from_indexed_dataset(Waiting(n, ms), chunksize=64)
                dt = time.perf_counter() - t
                print(f"fetch {ms:g} ms, {w} workers: {n / dt:,.0f} samples/s ({n} samples in {dt:.2f} s)")


if __name__ == "__main__":
    main()
