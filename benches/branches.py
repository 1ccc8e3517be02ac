"""Merging a branch, against the edits it brings and the diff it is made of, on one machine.

On a table-only dataset of N rows (id int64, label int64, score float64): branch ``b`` relabels
1% of the rows, deletes 1% and appends 10,000 rows; main relabels another 1% and appends 10,000.
Each round times, on fresh copies made the same way:

- ``merge``: ``main.merge("b")`` (diffs from the common ancestor on both sides, then one commit of
  deletion files, patches and the branch's shared data file);
- ``diff``: ``main.diff("main", "b")`` alone (one of the two diffs a merge reads);
- ``direct``: the branch's three edits made on main directly (what a merge spares the curator).

It prints the median and range of ``merge / direct`` and ``merge / diff`` over the rounds, the
seconds, the bytes the merge writes, and the process's peak RSS.

    python benches/branches.py [--rows 1000000] [--rounds 3] [--dir target/tmp/branches]

beton from the release build (`cd python && maturin develop --release`).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa

import beton
from beton.writer import DatasetWriter


def du(path) -> int:
    return sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(path) for f in fs)


def table(n: int, first: int = 0) -> pa.Table:
    rng = np.random.default_rng(first)
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "label": ids % 10, "score": rng.random(n)})


def write(path, t: pa.Table):
    from beton.fields import FloatField, IntField

    DatasetWriter(path, {"id": IntField(), "label": IntField(), "score": FloatField()},
                  progress=False).from_arrow(t)


def branch_edits(ds, extra):
    ds.update({"label": 7}, where="id % 100 = 0")
    ds.delete("id % 100 = 1")
    ds.append(extra)


def prepare(root, src, extra_b, extra_m):
    d = os.path.join(root, "ds")
    shutil.rmtree(d, ignore_errors=True)
    main = beton.import_file(d, src)
    b = main.branch("b")
    branch_edits(b, extra_b)
    main.update({"label": 8}, where="id % 100 = 2")
    main.append(extra_m)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join("target", "tmp", "branches"))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    src = os.path.join(args.dir, "src.beton")
    extra_b, extra_m = os.path.join(args.dir, "b.beton"), os.path.join(args.dir, "m.beton")
    write(src, table(args.rows))
    write(extra_b, table(10_000, args.rows))
    write(extra_m, table(10_000, args.rows + 10_000))
    rows = []
    for r in range(args.rounds):
        d = prepare(args.dir, src, extra_b, extra_m)
        ds = beton.open(d)
        t0 = time.perf_counter()
        ds.diff("main", "b")
        t_diff = time.perf_counter() - t0
        before = du(d)
        t0 = time.perf_counter()
        report = ds.merge("b")
        t_merge = time.perf_counter() - t0
        written = du(d) - before
        assert report["committed"] and report["rows_added"] == 10_000, report
        # The same edits on main directly, on a fresh copy.
        d2 = os.path.join(args.dir, "direct")
        shutil.rmtree(d2, ignore_errors=True)
        direct = beton.import_file(d2, src)
        t0 = time.perf_counter()
        branch_edits(direct, extra_b)
        t_direct = time.perf_counter() - t0
        rows.append((t_merge, t_diff, t_direct, written))
        print(f"round {r + 1}: merge {t_merge * 1e3:.0f} ms, diff {t_diff * 1e3:.0f} ms, "
              f"direct edits {t_direct * 1e3:.0f} ms, merge wrote {written / 1e6:.2f} MB", flush=True)

    def ratio(k):
        vals = [row[0] / row[k] for row in rows]
        return f"{statistics.median(vals):.2f}x ({min(vals):.2f}-{max(vals):.2f})"

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"{args.rows:,} rows: merge / direct edits {ratio(2)}, merge / one diff {ratio(1)}; "
          f"merge {statistics.median(r[0] for r in rows) * 1e3:.0f} ms median, "
          f"writes {statistics.median(r[3] for r in rows) / 1e6:.2f} MB; peak RSS {rss:.2f} GB")


if __name__ == "__main__":
    main()
