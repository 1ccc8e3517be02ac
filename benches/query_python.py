"""beton's SQL from Python, where the users are, against DuckDB and polars SQL on the same rows.

    python benches/query_python.py [--rows 1000000] [--runs 5]      # needs duckdb and polars

Writes (once per run, in a temporary folder) a table of four number columns with
`DatasetWriter.from_arrow`, then times, warm, median of RUNS: `ds.where(...)` and `ds.query(...)`
against DuckDB and polars SQL over `ds.table()` (each engine's own SQL on the same Arrow data,
results materialised as Arrow), all cores for every engine, and `ds.table()` itself. Interleaved:
each round runs every engine once. Use a release build of beton (`maturin build --release`).
"""

import argparse
import os
import platform
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

import beton
from beton.fields import FloatField, IntField
from beton.writer import DatasetWriter

WHERE = "label < 500 AND score > 0.25 AND size >= 2"
GROUP = "SELECT label, count(*) AS n, avg(score) AS mean FROM samples GROUP BY label"
TOP = f"SELECT index, score FROM samples WHERE {WHERE} ORDER BY score DESC LIMIT 50"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    import duckdb
    import polars as pl

    rng = np.random.default_rng(0)
    n = a.rows
    data = pa.table({
        "label": rng.integers(0, 1000, n),
        "score": rng.random(n),
        "size": rng.integers(1, 5, n),
        "weight": rng.normal(size=n),
    })
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.beton")
        DatasetWriter(path, {"label": IntField(), "score": FloatField(), "size": IntField(),
                             "weight": FloatField()}, progress=False).from_arrow(data)
        ds = beton.open(path)
        table = ds.table()
        indexed = pl.from_arrow(table)  # with beton's `index` column
        ctx = pl.SQLContext(samples=indexed)
        duck = duckdb.connect()
        duck.register("samples", indexed.to_arrow())

        def duck_sql(sql):
            # A relation straight to Arrow (a DB-API result would copy the rows once more).
            r = duck.sql(sql)
            return r.to_arrow_table() if hasattr(r, "to_arrow_table") else r.arrow()

        cases = {
            "WHERE (3 predicates)": [
                ("beton ds.where", lambda: ds.where(WHERE)),
                ("DuckDB", lambda: duck_sql(f"SELECT index FROM samples WHERE {WHERE}")),
                ("polars SQL", lambda: ctx.execute(f"SELECT index FROM samples WHERE {WHERE}", eager=True)),
            ],
            "GROUP BY with count and avg": [
                ("beton ds.query", lambda: ds.query(GROUP)),
                ("DuckDB", lambda: duck_sql(GROUP)),
                ("polars SQL", lambda: ctx.execute(GROUP, eager=True)),
            ],
            "WHERE + ORDER BY ... LIMIT 50": [
                ("beton ds.query", lambda: ds.query(TOP)),
                ("DuckDB", lambda: duck_sql(TOP)),
                ("polars SQL", lambda: ctx.execute(TOP, eager=True)),
            ],
            "the table (ds.table())": [("beton ds.table", lambda: ds.table())],
        }
        # The engines agree on the WHERE.
        assert len(ds.where(WHERE)) == duck_sql(f"SELECT count(*) AS c FROM samples WHERE {WHERE}")["c"][0].as_py()
        for fns in cases.values():
            for _, fn in fns:
                fn()  # warm
        times = {(c, name): [] for c, fns in cases.items() for name, _ in fns}
        for _ in range(a.runs):
            for c, fns in cases.items():
                for name, fn in fns:
                    t = time.perf_counter()
                    fn()
                    times[(c, name)].append((time.perf_counter() - t) * 1e3)
        print(f"{n:,} rows; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"median of {a.runs} interleaved runs, ms; duckdb {duckdb.__version__}, polars {pl.__version__}")
        for c, fns in cases.items():
            cells = ", ".join(f"{name} {statistics.median(times[(c, name)]):.1f}" for name, _ in fns)
            print(f"  {c}: {cells}")


if __name__ == "__main__":
    main()
