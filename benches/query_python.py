"""beton's SQL from Python, where the users are, against DuckDB and polars SQL on the same rows.

    python benches/query_python.py [--rows 1000000] [--runs 5] [--threads N]   # needs duckdb and polars

Writes (once per run, in a temporary folder) a table of four number columns with
`DatasetWriter.from_arrow`, then times, warm, median of RUNS: `ds.where(...)` and `ds.query(...)`
against DuckDB and polars SQL over `ds.table()` (each engine's own SQL on the same Arrow data,
results materialised as Arrow), all cores for every engine (or `--threads N` for each), and
`ds.table()` itself. Interleaved: each round runs every engine once. Then the write itself, with
beton's columnar-copy policy and with `BETON_COLUMNAR=off`, interleaved, and the first `ds.where`
after each write (for this table-only file the first query makes the copy; off, it gathers from
the rows). Use a release build of beton (`maturin build --release`).
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
# Comparisons between columns (issue 42): fused since then; `(...) = TRUE` is the same rows through
# the general evaluator, which took every such WHERE before.
COLS = "score < weight AND label >= size"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="threads for every engine (0: all cores)")
    p.add_argument("--write-rounds", type=int, default=5)
    a = p.parse_args()
    if a.threads:
        # Before the engines start their pools.
        os.environ["RAYON_NUM_THREADS"] = os.environ["POLARS_MAX_THREADS"] = str(a.threads)
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
        beton.open(path).where(WHERE)  # a table-only file's copy is made by its first query
        ds = beton.open(path)
        table = ds.table()
        indexed = pl.from_arrow(table)  # with beton's `index` column
        ctx = pl.SQLContext(samples=indexed)
        duck = duckdb.connect()
        if a.threads:
            duck.execute(f"SET threads TO {a.threads}")
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
            "WHERE between columns (2 predicates)": [
                ("beton ds.where", lambda: ds.where(COLS)),
                ("beton, general evaluator", lambda: ds.where(f"({COLS}) = TRUE")),
                ("DuckDB", lambda: duck_sql(f"SELECT index FROM samples WHERE {COLS}")),
                ("polars SQL", lambda: ctx.execute(f"SELECT index FROM samples WHERE {COLS}", eager=True)),
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
        # The engines agree on the WHEREs.
        for w in (WHERE, COLS):
            assert len(ds.where(w)) == duck_sql(f"SELECT count(*) AS c FROM samples WHERE {w}")["c"][0].as_py()
        assert ds.where(COLS) == ds.where(f"({COLS}) = TRUE")
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
        copy = os.path.exists(path + ".columns.arrow") and os.environ.get("BETON_COLUMNAR") != "off"
        print(f"{n:,} rows; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"{a.threads or 'all'} threads; median (min-max) of {a.runs} interleaved runs, ms; "
              f"duckdb {duckdb.__version__}, polars {pl.__version__}; columnar copy {'used' if copy else 'off'}")
        for c, fns in cases.items():
            cells = ", ".join(
                f"{name} {statistics.median(times[(c, name)]):.1f} ({min(times[(c, name)]):.1f}-{max(times[(c, name)]):.1f})"
                for name, _ in fns
            )
            print(f"  {c}: {cells}")

        # The write, with beton's policy and with the copy off, interleaved; then the first query.
        fields = {"label": IntField(), "score": FloatField(), "size": IntField(), "weight": FloatField()}
        times = {"write": ([], []), "first ds.where after it": ([], [])}
        for r in range(a.write_rounds):
            for k, off in enumerate((False, True)):
                out = os.path.join(tmp, f"w{r}-{off}.beton")
                if off:
                    os.environ["BETON_COLUMNAR"] = "off"
                t = time.perf_counter()
                DatasetWriter(out, fields, progress=False).from_arrow(data)
                written = time.perf_counter()
                beton.open(out).where(WHERE)
                queried = time.perf_counter()
                os.environ.pop("BETON_COLUMNAR", None)
                assert os.path.exists(out + ".columns.arrow") != off
                times["write"][k].append(written - t)
                times["first ds.where after it"][k].append(queried - written)
                for f in (out, out + ".columns.arrow"):
                    if os.path.exists(f):
                        os.remove(f)
        for name, (on, off) in times.items():
            ratios = [x / y for x, y in zip(on, off)]
            print(f"  {name}: {statistics.median(on) * 1e3:.1f} ms vs {statistics.median(off) * 1e3:.1f} ms with "
                  f"BETON_COLUMNAR=off = {statistics.median(on) / statistics.median(off):.2f}x "
                  f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
