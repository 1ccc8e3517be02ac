"""``DatasetWriter.from_arrow`` on a table of numbers against memory-speed references, in one run.

    target/py-venv/bin/python benches/write_arrow.py [--rows N] [--reps R] [--old] [--chunks]

Writes ``--rows`` (default 1,000,000) rows of an int64 ``label`` and a float64 ``score``:

* ``from_arrow``: ``DatasetWriter(...).from_arrow(table)`` (Arrow read by Rust, no Python per row);
* ``ipc``, ``parquet``: the same table through ``pyarrow.ipc`` (Arrow file, uncompressed) and
  ``pyarrow.parquet`` (uncompressed), each file then fsynced as beton's writer does: the
  memory-speed reference;
* ``--old``: the per-row path ``from_arrow`` had before (``to_pylist`` and a Python call per
  row), once (it takes tens of seconds);
* ``--chunks``: ``_native.write_arrow`` at several ``chunk_size``s and worker counts, to show
  how much of the time is the storage writer's per-chunk cost.

Each figure is the best of ``--reps`` runs, the writers interleaved; read the ratios.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from beton import _native
from beton.fields import FloatField, IntField
from beton.writer import DatasetWriter

FIELDS = {"label": IntField(), "score": FloatField()}


def fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def from_arrow(table, path):
    DatasetWriter(path, FIELDS, progress=False).from_arrow(table)


def ipc(table, path):
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    fsync(path)


def parquet(table, path):
    pq.write_table(table, path, compression="none")
    fsync(path)


def old_path(table, path):
    """What ``from_arrow`` did before ``write_arrow``: Python lists, one Python call per row."""
    cols = {name: table.column(name).to_pylist() for name in FIELDS}
    writer = DatasetWriter(path, FIELDS, progress=False)
    writer._write(table.num_rows, lambda i: {k: v[i] for k, v in cols.items()})


def native(chunk_size, workers):
    def run(table, path):
        _native.write_arrow(path, [f.spec(k) for k, f in FIELDS.items()], table, chunk_size=chunk_size,
                            num_workers=workers)
    return run


def best(fn, table, path, reps):
    times = []
    for _ in range(reps):
        if os.path.exists(path):
            os.remove(path)
        t = time.perf_counter()
        fn(table, path)
        times.append(time.perf_counter() - t)
    return min(times), os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--old", action="store_true", help="also time the old per-row path (once)")
    ap.add_argument("--chunks", action="store_true", help="also time chunk sizes and worker counts")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    table = pa.table({"label": rng.integers(0, 1000, args.rows, dtype=np.int64),
                      "score": rng.random(args.rows)})
    print(f"{args.rows:,} rows (int64 label, float64 score), {table.nbytes / 2**20:.1f} MiB of Arrow data, "
          f"{os.cpu_count()} cpus, best of {args.reps}")
    runs = [("from_arrow", from_arrow), ("pyarrow.ipc", ipc), ("pyarrow.parquet", parquet)]
    if args.chunks:
        for chunk in (256, 4096, 65536):
            for workers in (1, 0):
                runs.append((f"write_arrow chunk={chunk} workers={workers or 'all'}", native(chunk, workers)))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BETON_BENCH_DIR")) as d:
        results = {}
        for _ in range(args.reps):  # interleaved rounds: noise hits every writer alike
            for name, fn in runs:
                t, size = best(fn, table, os.path.join(d, name.replace(" ", "_")), 1)
                prev = results.get(name)
                results[name] = (min(t, prev[0]) if prev else t, size)
        if args.old:
            results["old per-row path"] = best(old_path, table, os.path.join(d, "old.beton"), 1)
    ref = results["pyarrow.ipc"][0]
    print(f"{'writer':<36} {'seconds':>9} {'rows/s':>14} {'MiB':>7} {'x ipc':>7}")
    for name, (t, size) in results.items():
        print(f"{name:<36} {t:9.3f} {args.rows / t:14,.0f} {size / 2**20:7.1f} {t / ref:7.2f}")


if __name__ == "__main__":
    main()
