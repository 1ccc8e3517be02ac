"""Edits of a versioned dataset, beton vs pylance (Lance), side by side in one run.

On a table-only dataset of N rows (id int64, label int64, score float64), each engine:
relabels 1% of the rows (an update with a predicate), deletes 1%, adds a float column to every
row (a SQL expression), appends 10,000 rows; for each: seconds and bytes written (the growth of
the dataset's directory). Then: opening the latest of 100 versions, and (beton only: Lance has no
diff) the diff of two versions. Best of ROUNDS rounds, engines interleaved.

    python benches/versions_compare.py [--rows 1000000] [--rounds 3] [--dir target/tmp/versions]

Needs pyarrow, numpy and pylance (`pip install pylance`); beton from the release build
(`cd python && maturin develop --release`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import pyarrow as pa


def du(path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def table(n: int, first: int = 0) -> pa.Table:
    rng = np.random.default_rng(first)
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "label": ids % 10, "score": rng.random(n)})


class Edits:
    """The row edits both version benchmarks time, on ``self.ds``: relabel every 100th row and
    delete the next ones (``key`` picks them), the new label written as ``label`` (beton takes a
    value, Lance a SQL expression)."""

    key = "id"
    label: int | str = 7

    def relabel(self):
        self.ds.update({"label": self.label}, where=f"{self.key} % 100 = 0")

    def delete(self):
        self.ds.delete(f"{self.key} % 100 = 1")


class Beton(Edits):
    name = "beton"

    def create(self, path, t):
        import beton
        from beton.fields import FloatField, IntField
        from beton.writer import DatasetWriter

        DatasetWriter(path + os.sep, {"id": IntField(), "label": IntField(), "score": FloatField()},
                      progress=False).from_arrow(t)
        self.ds = beton.open(path)

    def add_column(self):
        self.ds.add_column("q", "score * 2.0")

    def append(self, t):
        from beton.fields import FloatField, IntField
        from beton.writer import DatasetWriter

        DatasetWriter(str(self.ds.path) + os.sep, {"id": IntField(), "label": IntField(), "score": FloatField()},
                      progress=False).from_arrow(t)

    def count(self, path):
        import beton

        return len(beton.open(path))

    def open_latest(self, path):
        import beton

        return beton.open(path).version

    def small_update(self, k):
        self.ds.update({"label": k % 10}, where=f"id = {k}")


class Lance(Edits):
    name = "pylance"
    label = "7"

    def create(self, path, t):
        import lance

        self.ds = lance.write_dataset(t, path)

    def add_column(self):
        self.ds.add_columns({"q": "score * 2.0"})

    def append(self, t):
        import lance

        self.ds = lance.write_dataset(t, self.ds.uri, mode="append")

    def count(self, path):
        import lance

        return lance.dataset(path).count_rows()

    def open_latest(self, path):
        import lance

        return lance.dataset(path).version

    def small_update(self, k):
        self.ds.update({"label": str(k % 10)}, where=f"id = {k}")


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--versions", type=int, default=100)
    ap.add_argument("--dir", default=os.path.join("target", "tmp", "versions"))
    args = ap.parse_args()
    base, more = table(args.rows), table(10_000, first=args.rows)
    engines = [Beton(), Lance()]
    best: dict = {}
    written: dict = {}
    for r in range(args.rounds):
        for e in engines:
            path = os.path.join(args.dir, f"{e.name}-{r}")
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(args.dir, exist_ok=True)
            e.create(path, base)
            size0 = du(path)
            for step, f in [("relabel 1%", e.relabel), ("delete 1%", e.delete), ("add a float column", e.add_column),
                            ("append 10,000 rows", lambda: e.append(more))]:
                before = du(path)
                s = timed(f)
                key = (step, e.name)
                best[key] = min(best.get(key, s), s)
                written[key] = du(path) - before
            assert e.count(path) == args.rows - args.rows // 100 + 10_000, e.name
            written[("dataset", e.name)] = size0
            shutil.rmtree(path, ignore_errors=True)
    # Open the latest of many versions.
    for e in engines:
        path = os.path.join(args.dir, f"{e.name}-versions")
        shutil.rmtree(path, ignore_errors=True)
        e.create(path, table(10_000))
        for k in range(args.versions - 1):
            e.small_update(k)
        opens = []
        for _ in range(max(5, args.rounds)):
            opens.append(timed(lambda: e.open_latest(path)))
        best[("open latest of %d versions" % args.versions, e.name)] = min(opens)
        shutil.rmtree(path, ignore_errors=True)
    # beton's diff of two versions of the big dataset.
    b = Beton()
    path = os.path.join(args.dir, "beton-diff")
    shutil.rmtree(path, ignore_errors=True)
    b.create(path, base)
    b.relabel()
    b.delete()
    diff_s = min(timed(lambda: b.ds.diff(1, b.ds.version)) for _ in range(args.rounds))
    shutil.rmtree(path, ignore_errors=True)

    print(f"{args.rows:,} rows (id, label, score); best of {args.rounds} rounds, engines interleaved")
    print(f"dataset on disk: beton {written[('dataset', 'beton')] / 1e6:.1f} MB, "
          f"pylance {written[('dataset', 'pylance')] / 1e6:.1f} MB")
    print(f"{'edit':<28} {'beton s':>9} {'pylance s':>10} {'ratio':>7} {'beton MB':>9} {'pylance MB':>11}")
    steps = ["relabel 1%", "delete 1%", "add a float column", "append 10,000 rows"]
    for step in steps:
        bt, lt = best[(step, "beton")], best[(step, "pylance")]
        print(f"{step:<28} {bt:9.4f} {lt:10.4f} {bt / lt:6.2f}x {written[(step, 'beton')] / 1e6:9.2f} "
              f"{written[(step, 'pylance')] / 1e6:11.2f}")
    key = "open latest of %d versions" % args.versions
    bt, lt = best[(key, "beton")], best[(key, "pylance")]
    print(f"{key:<28} {bt * 1e3:8.2f}ms {lt * 1e3:9.2f}ms {bt / lt:6.2f}x")
    print(f"{'diff of two versions':<28} {diff_s * 1e3:8.1f}ms {'(none)':>10}")


if __name__ == "__main__":
    main()
