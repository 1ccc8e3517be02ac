#!/usr/bin/env python3
"""beton's SQL layer against polars, DuckDB and pyarrow.compute, in one run, on the same data.

1. Makes (once) a venv under target/bench-venv with polars, duckdb and pyarrow from PyPI, and re-runs
   itself in it.
2. Runs `cargo bench --bench query_compare -- --rows N ...`: it writes the .beton file (once),
   times beton (open-to-first-result; each query warm and cold) and exports the queried columns
   as an Arrow IPC file. Its last stdout line is a JSON report. The binary allocates with mimalloc,
   as beton's CLI and Python extension do (and as a program embedding beton should): it keeps
   freed memory for the next query, where glibc returns every block over 32 MiB to the kernel on
   free and each repetition would pay page faults for its large results (row ids, widened
   columns); polars (jemalloc) and pyarrow (its memory pool) keep theirs too.
3. Loads that IPC file (pyarrow memory-mapped; polars from that Arrow table, outside the timing),
   times the same three queries with polars (eager API, and its SQLContext), DuckDB (SQL over the
   Arrow table, registered without a copy; results fetched as Arrow) and pyarrow.compute,
   median of K runs, checks that the results agree with beton's, and prints a table of ratios;
   then every form of WHERE (between columns, arithmetic, BETWEEN, IN, LIKE, IS NOT NULL, OR,
   NOT) against polars SQL and DuckDB, row counts checked, in `--form-rounds` interleaved rounds
   (the binary again with `--forms-only`, then polars SQL, then DuckDB), the ratio per round.

Usage: python3 benches/query_compare.py [--rows N] [--runs K] [--file PATH] [--threads T] [--form-rounds R]
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


def run_beton(args, *extra):
    cmd = ["cargo", "bench", "--bench", "query_compare", "--", "--rows", str(args.rows), "--runs", str(args.runs),
           *extra]
    if args.file:
        cmd += ["--file", args.file]
    env = dict(os.environ)
    if args.threads:
        # beton's parallel kernels run on rayon's pool.
        env["RAYON_NUM_THREADS"] = str(args.threads)
    print("$", " ".join(cmd), file=sys.stderr)
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
    p.add_argument("--form-rounds", type=int, default=5,
                   help="interleaved rounds of the WHERE forms (beton's binary, then polars SQL, then DuckDB)")
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

    # Every form of WHERE: polars SQL and DuckDB on the same rows, the same row counts; in
    # interleaved rounds (beton's binary with --forms-only, then polars SQL, then DuckDB: each the
    # median of --runs), the ratio taken per round.
    rounds = {f["sql"]: {"beton": [], "polars SQL": [], "DuckDB": [], "rows": f["rows"]} for f in beton["forms"]}
    for r in range(args.form_rounds):
        forms = beton["forms"] if r == 0 else run_beton(args, "--forms-only")["forms"]
        for form in forms:
            got = rounds[form["sql"]]
            assert form["rows"] == got["rows"], form
            sql = f"SELECT index FROM samples WHERE {form['sql']}"
            pl_ms, _, pl_out = timed(lambda: ctx.execute(sql, eager=True), args.runs)
            duck_ms, _, duck_out = timed(lambda: duck_sql(sql), args.runs)
            assert pl_out.height == form["rows"], (form["sql"], "polars SQL", pl_out.height, form["rows"])
            assert duck_out.num_rows == form["rows"], (form["sql"], "DuckDB", duck_out.num_rows, form["rows"])
            got["beton"].append(form["warm_ms"])
            got["polars SQL"].append(pl_ms)
            got["DuckDB"].append(duck_ms)

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
    for b in [beton]:
        print(
            f"beton open-to-first-result: {b['open_to_first_result_ms']:.1f} ms "
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
        "| query | beton warm | beton cold "
        "| polars | polars SQL | DuckDB | pyarrow | beton/polars | beton/polars SQL | beton/DuckDB | beton/pyarrow |"
    )
    print(header)
    print("|---|" + "---:|" * 10)
    for key, label_ in [("where", "3-predicate WHERE"), ("group_by", "GROUP BY label count"), ("top", "ORDER BY score LIMIT 100")]:
        warm, cold = q[key]["warm_ms"], q[key]["cold_ms"]
        pol, sql, duck_, pa_ = (results[f"{e}/{key}"][0] for e in ("polars", "polars-sql", "duckdb", "pyarrow"))
        print(
            f"| {label_} | {warm:.1f} | {cold:.1f} "
            f"| {pol:.1f} | {sql:.1f} | {duck_:.1f} | {pa_:.1f} "
            f"| {warm / pol:.2f} | {warm / sql:.2f} | {warm / duck_:.2f} | {warm / pa_:.2f} |"
        )
    print()
    print(f"every form of WHERE: {args.form_rounds} interleaved rounds, each engine the median of {args.runs} runs "
          "a round; ms are medians over the rounds; ratios the median of the per-round ratios (min-max)")
    print("| WHERE form | rows | beton warm | polars SQL | DuckDB | beton/polars SQL | beton/DuckDB |")
    print("|---|" + "---:|" * 6)
    for sql, got in rounds.items():
        cells = []
        for other in ("polars SQL", "DuckDB"):
            ratios = [b / o for b, o in zip(got["beton"], got[other])]
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        print(
            f"| `{sql}` | {got['rows']:,} | {statistics.median(got['beton']):.1f} "
            f"| {statistics.median(got['polars SQL']):.1f} | {statistics.median(got['DuckDB']):.1f} "
            f"| {cells[0]} | {cells[1]} |"
        )
    print()
    print("ratios: beton warm / the other engine; below 1 means beton is faster")
    print()
    print("all four engines agree on every result")
    print(json.dumps({"beton": beton, "python": {k: {"median_ms": v[0], "min_ms": v[1]} for k, v in results.items()}}))


if __name__ == "__main__":
    main()
