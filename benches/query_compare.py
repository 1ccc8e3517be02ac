#!/usr/bin/env python3
"""beton's SQL layer against polars, DuckDB and pyarrow.compute, in one run, on the same data.

1. Makes (once) a venv under target/bench-venv with polars, duckdb and pyarrow from PyPI, and re-runs
   itself in it.
2. Runs `cargo bench --bench query_compare -- --rows N ...`: it writes the .beton file (once),
   times beton (open-to-first-result; each query warm and cold) and exports the queried columns
   as an Arrow IPC file. Its last stdout line is a JSON report. It runs twice: with glibc malloc's
   defaults, and with malloc keeping freed memory (GLIBC_TUNABLES, below), which is what the
   allocators bundled with polars (jemalloc) and pyarrow (its memory pool) do. On the VM this was
   written on, touching fresh pages costs more than the queries' arithmetic, and glibc returns
   every block over 32 MiB to the kernel on free, so the default run pays page faults for every
   large result (row ids, widened columns) on every repetition.
3. Loads that IPC file (pyarrow memory-mapped; polars from that Arrow table, outside the timing),
   times the same three queries with polars (eager API, and its SQLContext), DuckDB (SQL over the
   Arrow table, registered without a copy; results fetched as Arrow) and pyarrow.compute,
   median of K runs, checks that the results agree with beton's, and prints a table of ratios;
   then every form of WHERE (between columns, arithmetic, BETWEEN, IN, LIKE, IS NOT NULL, OR,
   NOT) against polars SQL and DuckDB, row counts checked.

Usage: python3 benches/query_compare.py [--rows N] [--runs K] [--file PATH] [--threads T]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "target" / "bench-venv"
PACKAGES = ["polars", "pyarrow", "duckdb"]

WHERE_SQL = 'label < 500 AND score > 0.25 AND "image.width" >= 2'
GROUP_SQL = "SELECT label, count(*) AS n FROM samples GROUP BY label"
TOP_SQL = "SELECT index, score FROM samples ORDER BY score DESC LIMIT 100"


def ensure_venv():
    """Re-executes this script in target/bench-venv (created on first use)."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} with {' '.join(PACKAGES)}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # A no-op once installed; adds an engine to a venv made before it was compared.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PACKAGES], check=True)
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


# Large blocks from the heap and never trimmed: freed memory is reused without new page faults.
RETAIN = "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295"


def run_beton(args, tunables=None):
    cmd = ["cargo", "bench", "--bench", "query_compare", "--", "--rows", str(args.rows), "--runs", str(args.runs)]
    if args.file:
        cmd += ["--file", args.file]
    env = dict(os.environ)
    if args.threads:
        # beton's parallel kernels run on rayon's pool.
        env["RAYON_NUM_THREADS"] = str(args.threads)
    if tunables:
        env["GLIBC_TUNABLES"] = tunables
    print("$", f"GLIBC_TUNABLES={tunables}" if tunables else "", " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def timed(fn, runs):
    """Median and min (ms) of `runs` calls, after one untimed call; and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times), result


def main():
    ensure_venv()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--file", help="the .beton file (default: target/bench-data/query-<rows>.beton)")
    p.add_argument("--threads", type=int,
                   help="threads for polars, DuckDB, pyarrow and beton (default: all cores)")
    args = p.parse_args()
    if args.threads:
        # Read by polars when it is imported.
        os.environ["POLARS_MAX_THREADS"] = str(args.threads)

    import duckdb
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc

    if args.threads:
        pa.set_cpu_count(args.threads)
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.threads or os.cpu_count()}").fetchall()
    duck_threads = duck.execute("SELECT current_setting('threads')").fetchall()[0][0]
    threads = (f"polars {pl.thread_pool_size()} threads, DuckDB {duck_threads} threads, "
               f"pyarrow {pa.cpu_count()} threads, beton {args.threads or os.cpu_count()} threads "
               f"(fused WHERE, parallel GROUP BY and ORDER BY)")

    beton = run_beton(args)
    retained = run_beton(args, RETAIN)
    ipc = ROOT / beton["ipc"] if not Path(beton["ipc"]).is_absolute() else Path(beton["ipc"])

    t = time.perf_counter()
    with pa.memory_map(str(ipc), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    pa_load_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    df = pl.from_arrow(table)
    pl_load_ms = (time.perf_counter() - t) * 1e3
    assert df.height == beton["rows"], (df.height, beton["rows"])

    # polars, eager. Row ids stand for beton's IndexSet (arg_where) and its `index` column.
    def pl_where():
        return df.select(
            pl.arg_where((pl.col("label") < 500) & (pl.col("score") > 0.25) & (pl.col("image.width") >= 2))
        ).to_series()

    def pl_group():
        return df.group_by("label").len()

    def pl_top():
        return df.select(pl.int_range(pl.len(), dtype=pl.UInt64).alias("index"), "score").top_k(100, by="score")

    # polars SQL: the frame gets an index column (u32) for the ORDER BY query, outside the timing.
    ctx = pl.SQLContext(samples=df.with_row_index("index"))

    def pl_sql_where():
        return ctx.execute(f"SELECT index FROM samples WHERE {WHERE_SQL}", eager=True)

    def pl_sql_group():
        return ctx.execute(GROUP_SQL, eager=True)

    def pl_sql_top():
        return ctx.execute(TOP_SQL, eager=True)

    # DuckDB: SQL over the Arrow table with an index column (u32, as polars SQL's), registered
    # outside the timing (a scan of Arrow memory, no copy into DuckDB's storage).
    duck.register("samples", df.with_row_index("index").to_arrow())

    def duck_sql(sql):
        # A relation straight to Arrow (a DB-API result would copy the rows once more);
        # `to_arrow_table` in DuckDB 1.4+, `arrow` before.
        result = duck.sql(sql)
        return result.to_arrow_table() if hasattr(result, "to_arrow_table") else result.arrow()

    def duck_where():
        return duck_sql(f"SELECT index FROM samples WHERE {WHERE_SQL}")

    def duck_group():
        return duck_sql(GROUP_SQL)

    def duck_top():
        return duck_sql(TOP_SQL)

    # pyarrow.compute over the memory-mapped table.
    label, score, width = (table.column(c) for c in ("label", "score", "image.width"))

    def pa_where():
        mask = pc.and_(pc.and_(pc.less(label, 500), pc.greater(score, 0.25)), pc.greater_equal(width, 2))
        return pc.indices_nonzero(mask)

    def pa_group():
        return table.group_by("label").aggregate([([], "count_all")])

    def pa_top():
        ids = pc.select_k_unstable(table.select(["score"]), k=100, sort_keys=[("score", "descending")])
        return ids, pc.take(score, ids)

    results = {}
    for name, fn in [
        ("polars/where", pl_where),
        ("polars/group_by", pl_group),
        ("polars/top", pl_top),
        ("polars-sql/where", pl_sql_where),
        ("polars-sql/group_by", pl_sql_group),
        ("polars-sql/top", pl_sql_top),
        ("duckdb/where", duck_where),
        ("duckdb/group_by", duck_group),
        ("duckdb/top", duck_top),
        ("pyarrow/where", pa_where),
        ("pyarrow/group_by", pa_group),
        ("pyarrow/top", pa_top),
    ]:
        results[name] = timed(fn, args.runs)
        print(f"  {name}: {results[name][0]:.1f} ms", file=sys.stderr)

    # The engines agree.
    q = beton["queries"]
    n_where = q["where"]["result"]["rows"]
    assert len(results["polars/where"][2]) == n_where, ("polars where", len(results["polars/where"][2]), n_where)
    assert results["polars-sql/where"][2].height == n_where
    assert len(results["pyarrow/where"][2]) == n_where
    assert results["duckdb/where"][2].num_rows == n_where
    first = q["where"]["result"]["first_ids"]
    assert results["polars/where"][2].head(len(first)).to_list() == first
    assert results["pyarrow/where"][2][: len(first)].to_pylist() == first
    # DuckDB's parallel scan may return matches in any order: the same rows, sorted.
    assert sorted(results["duckdb/where"][2]["index"].to_pylist())[: len(first)] == first

    g = q["group_by"]["result"]
    for name, frame_count in [
        ("polars/group_by", lambda r: (r.height, r["len"].sum(), r.filter(pl.col("label") == 7)["len"].item())),
        ("polars-sql/group_by", lambda r: (r.height, r["n"].sum(), r.filter(pl.col("label") == 7)["n"].item())),
        (
            "duckdb/group_by",
            lambda r: (
                r.num_rows,
                pc.sum(r["n"]).as_py(),
                r.filter(pc.equal(r["label"], 7))["n"][0].as_py(),
            ),
        ),
        (
            "pyarrow/group_by",
            lambda r: (
                r.num_rows,
                pc.sum(r["count_all"]).as_py(),
                r.filter(pc.equal(r["label"], 7))["count_all"][0].as_py(),
            ),
        ),
    ]:
        got = frame_count(results[name][2])
        assert got == (g["groups"], g["total"], g["count_label_7"]), (name, got, g)

    # Every form of WHERE: polars SQL and DuckDB on the same rows, the same row counts.
    form_results = []
    for form in beton["forms"]:
        sql = f"SELECT index FROM samples WHERE {form['sql']}"
        pl_ms, _, pl_out = timed(lambda: ctx.execute(sql, eager=True), args.runs)
        duck_ms, _, duck_out = timed(lambda: duck_sql(sql), args.runs)
        assert pl_out.height == form["rows"], (form["sql"], "polars SQL", pl_out.height, form["rows"])
        assert duck_out.num_rows == form["rows"], (form["sql"], "DuckDB", duck_out.num_rows, form["rows"])
        retained_form = next(f for f in retained["forms"] if f["sql"] == form["sql"])
        form_results.append((form, retained_form, pl_ms, duck_ms))

    top = q["top"]["result"]["ids"]
    assert results["polars/top"][2]["index"].to_list() == top, "polars top-100 ids"
    assert results["polars-sql/top"][2]["index"].to_list() == top, "polars SQL top-100 ids"
    assert results["duckdb/top"][2]["index"].to_pylist() == top, "DuckDB top-100 ids"
    pa_ids, pa_scores = results["pyarrow/top"][2]
    # select_k_unstable returns the k rows unordered: order them by score as beton does.
    order = pc.sort_indices(pa_scores, sort_keys=[("", "descending")])
    assert pc.take(pa_ids, order).to_pylist() == top, "pyarrow top-100 ids"

    # The table.
    rows = beton["rows"]
    print()
    print(f"rows {rows:,}; .beton {beton['file_bytes'] / 1e6:.0f} MB; median of {args.runs} runs, ms; {threads}")
    for name, b in [("malloc defaults", beton), ("malloc retaining", retained)]:
        print(
            f"beton open-to-first-result ({name}): {b['open_to_first_result_ms']:.1f} ms "
            f"(open {b['open_ms']:.1f} + Table::new {b['table_new_ms']:.2f} + first WHERE "
            f"{b['first_query_ms']:.1f}; materialising label, score, image.width alone: "
            f"{sum(b['materialise_ms'][c] for c in ('label', 'score', 'image.width')):.1f})"
        )
        u = b["uncached"]
        print(
            f"  the same with the file dropped from the page cache first: {u['open_to_first_result_ms']:.1f} ms "
            f"(median of 3, {u['open_to_first_result_range_ms'][0]:.0f}-{u['open_to_first_result_range_ms'][1]:.0f}) "
            f"(open {u['open_ms']:.1f} + first WHERE {u['first_query_ms']:.1f})"
            + ("" if u["evicted"] else " [eviction failed: the file may have been cached]")
        )
    print(f"load IPC: pyarrow mmap {pa_load_ms:.1f} ms; polars from Arrow {pl_load_ms:.1f} ms")
    if beton.get("columnar"):
        made = beton.get("columnar_copy_s")
        print(
            f"columnar copy ({beton['columnar_copy_bytes'] / 1e6:.0f} MB) used"
            + (f"; made in {made:.2f} s" if made is not None else "")
            + (f" after a {beton['generate_s']:.1f} s write" if beton.get("generate_s") else "")
        )
    else:
        print("columnar copy: off (BETON_COLUMNAR=off): columns gathered from the rows")
    print()
    header = (
        "| query | beton warm | beton warm, malloc retaining | beton cold | beton cold, retaining "
        "| polars | polars SQL | DuckDB | pyarrow | beton/polars | beton/polars SQL | beton/DuckDB | beton/pyarrow |"
    )
    print(header)
    print("|---|" + "---:|" * 12)
    for key, label_ in [("where", "3-predicate WHERE"), ("group_by", "GROUP BY label count"), ("top", "ORDER BY score LIMIT 100")]:
        warm, cold = q[key]["warm_ms"], q[key]["cold_ms"]
        r = retained["queries"][key]
        assert r["result"] == q[key]["result"]
        pol, sql, duck_, pa_ = (results[f"{e}/{key}"][0] for e in ("polars", "polars-sql", "duckdb", "pyarrow"))
        print(
            f"| {label_} | {warm:.1f} | {r['warm_ms']:.1f} | {cold:.1f} | {r['cold_ms']:.1f} "
            f"| {pol:.1f} | {sql:.1f} | {duck_:.1f} | {pa_:.1f} "
            f"| {warm / pol:.2f} | {warm / sql:.2f} | {warm / duck_:.2f} | {warm / pa_:.2f} |"
        )
    print()
    print("| WHERE form | beton warm | beton warm, malloc retaining | polars SQL | DuckDB | beton/polars SQL | beton/DuckDB |")
    print("|---|" + "---:|" * 6)
    for form, r, pl_ms, duck_ms in form_results:
        warm = form["warm_ms"]
        print(
            f"| `{form['sql']}` | {warm:.1f} | {r['warm_ms']:.1f} | {pl_ms:.1f} | {duck_ms:.1f} "
            f"| {warm / pl_ms:.2f} | {warm / duck_ms:.2f} |"
        )
    print()
    print("ratios: beton warm (malloc defaults) / the other engine; below 1 means beton is faster")
    print()
    print("all four engines agree on every result")
    print(json.dumps({"beton": beton, "beton_retaining": retained, "python": {k: {"median_ms": v[0], "min_ms": v[1]} for k, v in results.items()}}))


if __name__ == "__main__":
    main()
