"""Every form of WHERE from Python against polars SQL and DuckDB on the same rows (issue 42, item
5): comparisons with numbers, between columns, arithmetic, LIKE, IS NOT NULL, OR, and their
combinations; which of them the fused one-pass path takes shows as the gap to polars.

    python benches/where_forms.py [--rows 2000000] [--runs 7] [--threads N]   # needs duckdb and polars

The table (written once into a temporary folder, `DatasetWriter.from_arrow`): label int in
[0, 1000), score float in [0, 1), size int in [1, 5), weight float ~ N(0, 1), name text of six
short words. Each form: the engines agree on the row count, then `--runs` interleaved rounds
(each engine once per round, all cores or `--threads`), median ms and the median per-round ratio
beton / polars SQL and beton / DuckDB with their ranges. Use a release wheel.
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

FORMS = [
    "label < 500 AND score > 0.25 AND size >= 2",
    "score < weight AND label >= size",
    "label + size < 500",
    "score * 2 > weight",
    "name LIKE 'ab%'",
    "weight IS NOT NULL AND label < 500",
    "label < 500 AND (size = 2 OR size = 3)",
    "label IN (1, 5, 9, 300) OR score > 0.99",
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--threads", type=int, default=0, help="threads for every engine (0: all cores)")
    a = p.parse_args()
    if a.threads:
        os.environ["RAYON_NUM_THREADS"] = os.environ["POLARS_MAX_THREADS"] = str(a.threads)
    import duckdb
    import polars as pl

    import beton
    from beton.fields import FloatField, IntField, TextField
    from beton.writer import DatasetWriter

    rng = np.random.default_rng(0)
    n = a.rows
    words = np.array(["apple", "abacus", "banana", "cherry", "abc", "date"])
    data = pa.table({"label": rng.integers(0, 1000, n), "score": rng.random(n), "size": rng.integers(1, 5, n),
                     "weight": rng.normal(size=n), "name": words[rng.integers(0, 6, n)].tolist()})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.beton")
        DatasetWriter(path, {"label": IntField(), "score": FloatField(), "size": IntField(),
                             "weight": FloatField(), "name": TextField()}, progress=False).from_arrow(data)
        beton.open(path).where("label < 1")  # a table-only file's columnar copy: made by its first query
        ds = beton.open(path)
        indexed = pl.from_arrow(ds.table())
        ctx = pl.SQLContext(samples=indexed)
        duck = duckdb.connect()
        if a.threads:
            duck.execute(f"SET threads TO {a.threads}")
        duck.register("samples", indexed.to_arrow())
        print(f"{n:,} rows, {a.threads or 'all'} threads, {os.cpu_count()} cores; duckdb {duckdb.__version__}, "
              f"polars {pl.__version__}; median of {a.runs} interleaved rounds")
        for w in FORMS:
            engines = {
                "beton": lambda: ds.where(w),
                "polars SQL": lambda: ctx.execute(f"SELECT index FROM samples WHERE {w}", eager=True),
                "DuckDB": lambda: duck.sql(f"SELECT index FROM samples WHERE {w}").to_arrow_table(),
            }
            want = duck.sql(f"SELECT count(*) FROM samples WHERE {w}").fetchall()[0][0]
            assert len(ds.where(w)) == want == len(engines["polars SQL"]()), w
            times = {k: [] for k in engines}
            for _ in range(a.runs):
                for k, fn in engines.items():
                    t = time.perf_counter()
                    fn()
                    times[k].append((time.perf_counter() - t) * 1e3)
            cells = [f"beton {statistics.median(times['beton']):.1f} ms"]
            for other in ("polars SQL", "DuckDB"):
                ratios = [x / y for x, y in zip(times["beton"], times[other])]
                cells.append(f"{other} {statistics.median(times[other]):.1f} ms: beton "
                             f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
            print(f"  {w}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
