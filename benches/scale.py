"""Issue 39: beton at curation scale, 100 M rows in one data file and in thousands.

Builds (once, cached under --dir) a dataset of N rows (label int, score float) as one data file
and as F data files (beton.concat of F .beton files, one version), then measures, each step in a
fresh process (so peak RSS is the step's own and nothing is warm that should not be):

- open: ``beton.open(DIR)`` of the latest version (warm: best of the rounds; cold: the first
  open after dropping the page cache, where /proc/sys/vm/drop_caches is writable);
- first WHERE (right after the write that made the dataset, nothing cached), warm WHERE
  (``label < 10 AND score > 0.5``), GROUP BY (``label``: count and mean score);
- a SELECT of a few rows in a new process (``SELECT label, score ... WHERE index < 500000``):
  first and again, and the memory the first took (no column made whole for a few rows);
- loader construction + first batch (RANDOM and QUASI_RANDOM, batch 1,024) and peak RSS;
- update of 10 rows, delete of 5 rows, append of 10 rows: seconds and bytes the edit wrote
  (the directory's growth), beside the edit's WHERE alone in a new process; then the first
  WHERE after the write in the same process, and the same WHERE again.

    python benches/scale.py [--rows 100000000] [--files 1,2000] [--open-files 10000]
                            [--dir /tmp/beton-scale] [--rounds 3] [--only open,where,...]

Needs numpy and pyarrow; beton from a release build (`maturin build --release` and a wheel, or
`maturin develop --release`). Building 100 M rows writes about 1.6 GB per layout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from versions_compare import du  # the same folder: run as a script

WHERE = "label < 10 AND score > 0.5"
GROUP_BY = "SELECT label, count(*) AS n, avg(score) AS mean FROM samples GROUP BY label"
SELECT_FEW = "SELECT label, score FROM samples WHERE index < 500000"


def build(dir_: Path, rows: int, files: int) -> Path:
    """The dataset directory of ``rows`` rows in ``files`` data files (made once)."""
    import numpy as np
    import pyarrow as pa

    import beton
    from beton.fields import FloatField, IntField
    from beton.writer import DatasetWriter

    out = dir_ / f"ds-{rows}-{files}"
    if (out / ".complete").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    src = dir_ / f"src-{rows}-{files}"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    per = -(-rows // files)
    sources = []
    t0 = time.perf_counter()
    for k in range(files):
        first, n = k * per, min(per, rows - k * per)
        if n <= 0:
            break
        rng = np.random.default_rng(k)
        label = (np.arange(first, first + n, dtype=np.int64) * 7919) % 1000
        path = src / f"part-{k:05}.beton"
        w = DatasetWriter(str(path), {"label": IntField(), "score": FloatField()})
        w.from_arrow(pa.table({"label": label, "score": rng.random(n)}))
        sources.append(str(path))
    t1 = time.perf_counter()
    beton.concat(sources, str(out), progress=False)
    t2 = time.perf_counter()
    shutil.rmtree(src)
    (out / ".complete").write_text(json.dumps({"write_s": t1 - t0, "concat_s": t2 - t1}))
    print(f"# built {out}: {files} files x {per} rows, write {t1 - t0:.1f} s, concat {t2 - t1:.2f} s",
          file=sys.stderr)
    return out


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """This process's peak RSS: the kernel's high-water mark of its memory (VmHWM). Not
    ``ru_maxrss``, which Linux carries across ``execve`` from the forking parent: every step
    forked from a parent that had just built 100 M rows reported the parent's 5.5 GB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def usage() -> tuple:
    """(system CPU seconds so far, anonymous resident MB now): what a first query's fresh memory costs."""
    anon = 0.0
    try:
        with open("/proc/self/status") as f:
            anon = next((int(line.split()[1]) / 1024 for line in f if line.startswith("RssAnon:")), 0.0)
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime, anon


# ---- steps, each run in a child process: `scale.py --step NAME DIR` prints one JSON line ----

def step_open(d: str) -> dict:
    import beton
    t = time.perf_counter()
    ds = beton.open(d)
    n = len(ds)
    return {"s": time.perf_counter() - t, "rows": n}


def step_where(d: str) -> dict:
    import beton
    ds = beton.open(d)
    u = usage()
    t = time.perf_counter()
    first = ds.where(WHERE)
    t1 = time.perf_counter()
    u1 = usage()
    warm = []
    for _ in range(5):
        t2 = time.perf_counter()
        again = ds.where(WHERE)
        warm.append(time.perf_counter() - t2)
    assert len(again) == len(first)
    g = []
    for _ in range(3):
        t3 = time.perf_counter()
        res = ds.query(GROUP_BY)
        g.append(time.perf_counter() - t3)
    return {"first_s": t1 - t, "first_sys_s": u1[0] - u[0], "first_anon_mb": u1[1] - u[1],
            "warm_s": min(warm), "group_by_s": min(g), "matched": len(first),
            "groups": len(res), "rss_mb": peak_rss_mb()}


def step_select(d: str) -> dict:
    import beton
    ds = beton.open(d)
    u = usage()
    t = time.perf_counter()
    rows = ds.query(SELECT_FEW).num_rows
    t1 = time.perf_counter()
    u1 = usage()
    again = []
    for _ in range(3):
        t2 = time.perf_counter()
        ds.query(SELECT_FEW)
        again.append(time.perf_counter() - t2)
    return {"first_s": t1 - t, "again_s": min(again), "anon_mb": u1[1] - u[1], "rows": rows}


def step_loader(d: str, order: str) -> dict:
    import beton
    from beton.fields.decoders import FloatDecoder, IntDecoder
    from beton.loader import OrderOption
    t = time.perf_counter()
    loader = beton.Loader(d, batch_size=1024, num_workers=2, order=getattr(OrderOption, order), seed=0,
                          pipelines={"label": [IntDecoder()], "score": [FloatDecoder()]})
    t1 = time.perf_counter()
    it = iter(loader)
    batch = next(it)
    t2 = time.perf_counter()
    return {"construct_s": t1 - t, "first_batch_s": t2 - t1, "total_s": t2 - t, "rss_mb": peak_rss_mb(),
            "batch": len(batch[0])}


def edit_predicate(n: int, kind: str) -> str:
    """The rows an edit of ``kind`` picks in a dataset of ``n`` rows."""
    if kind == "update":
        return f"index >= {n // 2} AND index < {n // 2 + 10}"
    return f"index >= {n // 3} AND index < {n // 3 + 5}"


def step_edit_where(d: str, kind: str) -> dict:
    """The WHERE an edit evaluates, alone, in a new process (what the edit's cost is held to)."""
    import beton
    ds = beton.open(d)
    t = time.perf_counter()
    rows = ds.where(edit_predicate(len(ds), kind))
    return {"s": time.perf_counter() - t, "rows": len(rows)}


def step_edit(d: str, kind: str) -> dict:
    import numpy as np
    import pyarrow as pa

    import beton
    from beton.fields import FloatField, IntField
    from beton.writer import DatasetWriter
    ds = beton.open(d)
    n = len(ds)
    extra = None
    if kind == "append":
        extra = Path(d).parent / "append-10.beton"
        w = DatasetWriter(str(extra), {"label": IntField(), "score": FloatField()})
        w.from_arrow(pa.table({"label": np.arange(10, dtype=np.int64), "score": np.zeros(10)}))
    # The version as a curation script has it before editing: queried once.
    ds.where(WHERE)
    before = du(Path(d))
    t = time.perf_counter()
    if kind == "update":
        ds.update({"label": 999}, where=edit_predicate(n, kind))
    elif kind == "delete":
        ds.delete(edit_predicate(n, kind))
    else:
        ds.append(str(extra))
    s = time.perf_counter() - t
    wrote = du(Path(d)) - before
    # The first query after the write, in the same process, and the same query again.
    t = time.perf_counter()
    ds.where(WHERE)
    first = time.perf_counter() - t
    t = time.perf_counter()
    ds.where(WHERE)
    warm = time.perf_counter() - t
    out = {"s": s, "bytes": wrote, "first_s": first, "warm_s": warm}
    if extra:
        # Appends in a row through one handle (a labelling tool's batches): their median, and
        # the versions the directory holds (each commit lists them).
        times = []
        for _ in range(19):
            t = time.perf_counter()
            ds.append(str(extra))
            times.append(time.perf_counter() - t)
        out["median_s"] = statistics.median(times)
        out["versions"] = len(list((Path(d) / "_versions").glob("*.json")))
        extra.unlink()
    return out


def child(step: str, d: str, *args: str) -> dict:
    cmd = [sys.executable, __file__, "--step", step, d, *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000_000)
    p.add_argument("--files", default="1,2000")
    p.add_argument("--open-files", type=int, default=10_000, help="also build this many files for open (0: no)")
    p.add_argument("--dir", default="/tmp/beton-scale")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="open,where,loader,edit")
    p.add_argument("--drop-copies", action="store_true",
                   help="remove the columnar copies first (measures the first query of data files without)")
    p.add_argument("--step", nargs="+", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.step:
        name, d, *rest = a.step
        fn = {"open": step_open, "where": step_where, "loader": step_loader, "edit": step_edit,
              "edit_where": step_edit_where, "select": step_select}[name]
        print(json.dumps(fn(d, *rest)))
        return

    import beton
    from machine import machine  # benches/machine.py
    print(machine())
    print(f"# beton {beton.__version__} from {Path(beton.__file__).parent}; rows {a.rows:,}")
    root = Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    only = set(a.only.split(","))
    layouts = [int(f) for f in a.files.split(",") if f]
    open_only = [a.open_files] if a.open_files and a.open_files not in layouts else []
    for files in layouts + open_only:
        # The first query after the write: right after the build, or with the columnar copies
        # removed (what a write leaves when it does not make them).
        fresh = not (root / f"ds-{a.rows}-{files}" / ".complete").exists() or a.drop_copies
        d = build(root, a.rows, files)
        if a.drop_copies:
            for c in (d / "data").glob("*.columns.arrow"):
                c.unlink()
        print(f"\n## {a.rows:,} rows in {files:,} data file(s): {d} ({du(d) / 1e9:.2f} GB)")
        if fresh and "where" in only and files in layouts:
            r = child("where", str(d))
            print(f"first WHERE after the write {r['first_s'] * 1e3:8.1f} ms ({r['first_s'] / r['warm_s']:.2f}x its"
                  f" process's warm WHERE, {r['warm_s'] * 1e3:.1f} ms; in it {r['first_sys_s'] * 1e3:.0f} ms of"
                  f" system time, {r['first_anon_mb']:.0f} MB of fresh anonymous memory)")
        cold = None
        if "open" in only:
            cold = child("open", str(d)) if drop_caches() else None
            warm = min(child("open", str(d))["s"] for _ in range(a.rounds))
            print(f"open latest             {warm * 1e3:8.1f} ms warm"
                  + (f", {cold['s'] * 1e3:.1f} ms page cache dropped" if cold else " (cannot drop the page cache)"))
        if files not in layouts:
            continue
        if "where" in only:
            if cold:
                # The page cache was dropped for the cold open: a first WHERE that reads the
                # columns from disk, apart from the rounds below (page cache warm).
                r = child("where", str(d))
                print(f"first WHERE, page cache dropped {r['first_s'] * 1e3:8.1f} ms")
            rs = [child("where", str(d)) for _ in range(a.rounds)]
            # Item 3's check is per process: its first query against its own warm one.
            ratios = [r["first_s"] / r["warm_s"] for r in rs]
            print(f"first WHERE (new process) {min(r['first_s'] for r in rs) * 1e3:6.1f} ms"
                  f" (per round, x its process's warm WHERE: {', '.join(f'{x:.2f}' for x in ratios)});"
                  f" warm WHERE {min(r['warm_s'] for r in rs) * 1e3:.1f} ms ({rs[0]['matched']:,} rows);"
                  f" GROUP BY {min(r['group_by_s'] for r in rs) * 1e3:.1f} ms;"
                  f" peak RSS {max(r['rss_mb'] for r in rs):.0f} MB")
            sel = [child("select", str(d)) for _ in range(a.rounds)]
            print(f"SELECT of {sel[0]['rows']:,} rows (new process) first"
                  f" {min(r['first_s'] for r in sel) * 1e3:.1f} ms, again {min(r['again_s'] for r in sel) * 1e3:.1f} ms,"
                  f" {max(r['anon_mb'] for r in sel):.0f} MB of anonymous memory in the first")
        if "loader" in only:
            for order in ("RANDOM", "QUASI_RANDOM"):
                rs = [child("loader", str(d), order) for _ in range(a.rounds)]
                best = min(rs, key=lambda r: r["total_s"])
                print(f"Loader {order:<12} construct {best['construct_s'] * 1e3:7.1f} ms + first batch "
                      f"{best['first_batch_s'] * 1e3:7.1f} ms; peak RSS {max(r['rss_mb'] for r in rs):.0f} MB")
        if "edit" in only:
            for kind in ("update", "delete", "append"):
                # Each round edits the version the last one made (a delete after updates).
                rs = [child("edit", str(d), kind) for _ in range(a.rounds)]
                s = min(r["s"] for r in rs)
                alone = ""
                if kind != "append":
                    w = min(child("edit_where", str(d), kind)["s"] for _ in range(a.rounds))
                    alone = f" (its WHERE alone {w * 1e3:.1f} ms: {s / w:.2f}x)"
                first, warm = min(r["first_s"] for r in rs), min(r["warm_s"] for r in rs)
                print(f"{kind:<7} {s * 1e3:8.1f} ms{alone}, wrote {min(r['bytes'] for r in rs):,} bytes;"
                      f" next WHERE {first * 1e3:.1f} ms, again {warm * 1e3:.1f} ms ({first / warm:.2f}x)")
                if kind == "append":
                    print(f"        19 more appends through the same handle: median "
                          f"{min(r['median_s'] for r in rs) * 1e3:.2f} ms ({rs[-1]['versions']} versions in the directory)")
            # The next run measures the built version again, not the edited one.
            beton.open(str(d)).restore(1)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
