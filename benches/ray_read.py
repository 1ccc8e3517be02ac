"""Ray Data: ``beton.ray.read_beton`` against ``ray.data.read_parquet`` over the same table (issue 24).

A table of --rows rows (``label`` int64 in [0, 1000), ``score`` float64, ``ok`` bool, ``name``
text of 8-16 characters; seeded) is written once as a ``.beton`` file (``DatasetWriter.from_arrow``)
and once as Parquet (pyarrow defaults, one file, row groups of 128 Ki rows), then read by Ray
Data in local mode (``ray.init(num_cpus=--cpus)``), each read consuming every block
(``iter_batches(batch_size=None)``, rows counted). Two reads each: every row and column, and
``label < 100`` with only ``label, score`` (beton: ``where=`` and ``columns=``; Parquet:
``columns=`` and ``.filter(expr=col("label") < 100)``, which Ray pushes down into the Parquet read),
and the same with one Ray expression for both (``select_columns`` then ``filter(expr=...)``,
which beton takes as SQL). Rounds alternate the order; round 0 is a
warm-up and is discarded. Reported: rows/s of each (median, min-max) and the median per-round
ratio beton/parquet; beton's ``count()`` (exact from the plan) against Parquet's.

Usage: ``python benches/ray_read.py [--rows 2000000] [--rounds 4] [--cpus 2] [--out target/bench-data]``.
Needs beton installed (a release wheel), ray[data] and pyarrow.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import beton
from beton.fields import BoolField, FloatField, IntField, TextField
from beton.writer import DatasetWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402


def table(n: int) -> pa.Table:
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(8, 17, n)
    chars = letters[rng.integers(0, 26, int(lengths.sum()))]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    names = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer("".join(chars).encode()))
    return pa.table({"label": rng.integers(0, 1000, n), "score": rng.random(n), "ok": rng.random(n) < 0.5,
                     "name": names})


def consume(ds) -> int:
    return sum(len(b) if not hasattr(b, "num_rows") else b.num_rows for b in ds.iter_batches(batch_size=None,
                                                                                            batch_format="pyarrow"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--out", default="target/bench-data")
    a = p.parse_args()

    import ray

    from ray.data.expressions import col

    import beton.ray as bray

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bt, pqf = out / f"ray_read_{a.rows}.beton", out / f"ray_read_{a.rows}.parquet"
    if not bt.exists() or not pqf.exists():
        t = table(a.rows)
        DatasetWriter(bt, {"label": IntField(), "score": FloatField(), "ok": BoolField(), "name": TextField()},
                      progress=False).from_arrow(t)
        pq.write_table(t, pqf, row_group_size=128 * 1024)
    print(machine())
    print(f"{a.rows:,} rows; .beton {os.path.getsize(bt) / 1e6:.1f} MB, Parquet {os.path.getsize(pqf) / 1e6:.1f} MB")

    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    reads = {
        "all rows, all columns": (lambda: bray.read_beton(bt), lambda: ray.data.read_parquet(str(pqf))),
        "label < 100, 2 columns": (
            lambda: bray.read_beton(bt, where="label < 100", columns=["label", "score"]),
            lambda: ray.data.read_parquet(str(pqf), columns=["label", "score"]).filter(expr=col("label") < 100)),
        # The same Ray code for both: beton takes the filter as SQL (predicate pushdown).
        "select_columns + filter(expr=)": (
            lambda: bray.read_beton(bt).select_columns(["label", "score"]).filter(expr=col("label") < 100),
            lambda: ray.data.read_parquet(str(pqf)).select_columns(["label", "score"]).filter(expr=col("label") < 100)),
    }
    n_where = len(beton.open(bt).where("label < 100"))
    assert bray.read_beton(bt).count() == ray.data.read_parquet(str(pqf)).count() == a.rows
    assert bray.read_beton(bt, where="label < 100").count() == n_where
    for name, (read_beton, read_parquet) in reads.items():
        rates = {"beton": [], "parquet": []}
        ratios = []
        for r in range(a.rounds + 1):
            order = [("beton", read_beton), ("parquet", read_parquet)]
            if r % 2:
                order.reverse()
            got = {}
            for who, make in order:
                t0 = time.perf_counter()
                rows = consume(make())
                got[who] = rows / (time.perf_counter() - t0)
                assert rows == (a.rows if name.startswith("all") else n_where), (who, rows)
            if r:
                for who in got:
                    rates[who].append(got[who])
                ratios.append(got["beton"] / got["parquet"])
        line = "; ".join(f"{who} {statistics.median(v) / 1e6:.2f} M rows/s ({min(v) / 1e6:.2f}-{max(v) / 1e6:.2f})"
                         for who, v in rates.items())
        print(f"{name}: {line}; beton/parquet {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f})")
    ray.shutdown()


if __name__ == "__main__":
    main()
