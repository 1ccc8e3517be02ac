"""Issue 39 item 4: how long the Python ``Loader`` takes to start over N rows, and its peak RSS.

For each order (RANDOM, QUASI_RANDOM, and both distributed as rank 0 of 2), a fresh process
imports torch (the RSS counts it, as a training script's would), then measures

- **construct**: ``Loader(path, batch_size, order=..., seed=0, ...)``;
- **first batch**: ``next(iter(loader))``, the epoch's start included;
- **peak RSS**: the process's ``ru_maxrss`` after the first batch (torch's share printed apart,
  from a process that only imports torch), and the RSS then split into anonymous memory and
  mapped file pages. The latter are the OS's page cache, shared and dropped under pressure: a
  random order maps the whole file over an epoch.
- with ``--then N``, the time to the N batches after the first, and the peak RSS after them
  (FFCV's RANDOM hands out its first 8,192 samples before its shuffle is whole: the batches
  past them wait for it).

The dataset is built once and reused (``--path``): fields ``label`` (int) and ``score`` (float),
in one ``.beton`` file, or with ``--files F`` a dataset directory of F data files concatenated as
one version (``beton.concat`` of F ``.beton`` files of N / F rows each).

    python benches/scale_loader.py --rows 100000000 --path /tmp/scale100m.beton
    python benches/scale_loader.py --rows 100000000 --files 2000 --path /tmp/scale100m-2000

Keep the data out of the repository (/tmp): 100 M rows are 1.6 GB. beton from the release build
(``cd python && maturin develop --release``). Prints one line per order and, with ``--json``, the
numbers as JSON (for ``benches/scale.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ORDERS = {
    "RANDOM": ("RANDOM", None),
    "QUASI_RANDOM": ("QUASI_RANDOM", None),
    "RANDOM rank 0/2": ("RANDOM", (0, 2)),
    "QUASI_RANDOM rank 0/2": ("QUASI_RANDOM", (0, 2)),
}

# What the measuring process runs: argv = path, order, distributed (json), batch size, torch,
# batches after the first to time.
CHILD = r"""
import json, resource, sys, time
def rss():  # now, MB: anonymous memory, and mapped file pages (the OS's page cache, shared)
    f = dict(l.split(":") for l in open("/proc/self/status") if l.startswith(("RssAnon", "RssFile")))
    return {k: int(v.split()[0]) / 1024 for k, v in f.items()}
path, order, distributed, batch_size, with_torch, then = sys.argv[1:7]
if with_torch == "1":
    import torch  # noqa: F401 (its RSS counts, as in a training script)
from beton.loader import Loader, OrderOption
distributed = json.loads(distributed)
t0 = time.perf_counter()
loader = Loader(path, batch_size=int(batch_size), order=OrderOption[order], seed=0,
                distributed=tuple(distributed) if distributed else False)
t1 = time.perf_counter()
it = iter(loader)
label, score = next(it)
t2 = time.perf_counter()
assert len(label) == int(batch_size)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
first = rss()
for _ in range(int(then)):
    next(it)
t3 = time.perf_counter()
print(json.dumps({"construct_s": t1 - t0, "first_batch_s": t2 - t1, "then_s": t3 - t2, "batches": len(loader),
                  "peak_rss_mb": peak, "anon_mb": first["RssAnon"], "file_mb": first["RssFile"],
                  "peak_rss_then_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "anon_then_mb": rss()["RssAnon"]}))
"""

BASELINE = r"""
import json, resource, sys
if sys.argv[1] == "1":
    import torch  # noqa: F401
import beton  # noqa: F401
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(path: str, rows: int, files: int) -> float:
    """Writes the dataset (label = row, score = row / 2); returns the seconds it took."""
    import numpy as np
    import pyarrow as pa

    import beton
    from beton.fields import FloatField, IntField
    from beton.writer import DatasetWriter

    fields = {"label": IntField(), "score": FloatField()}

    def write(out, start, stop):
        label = np.arange(start, stop, dtype=np.int64)
        DatasetWriter(out, fields, progress=False).from_arrow(
            pa.table({"label": label, "score": label.astype(np.float64) * 0.5}))

    t0 = time.perf_counter()
    if files <= 1:
        write(path, 0, rows)
    else:
        tmp = path.rstrip("/") + ".sources"
        os.makedirs(tmp, exist_ok=True)
        bounds = [rows * k // files for k in range(files + 1)]
        sources = []
        for k in range(files):
            sources.append(os.path.join(tmp, f"{k:05d}.beton"))
            write(sources[-1], bounds[k], bounds[k + 1])
        beton.concat(sources, path, progress=False)
        for s in sources:  # concat hard-links them: the dataset keeps its own links
            os.remove(s)
        os.rmdir(tmp)
    return time.perf_counter() - t0


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--files", type=int, default=1, help="data files of a dataset directory (1: one .beton)")
    ap.add_argument("--path", default="/tmp/scale100m.beton")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--orders", default=",".join(ORDERS), help="comma-separated, of: " + ", ".join(ORDERS))
    ap.add_argument("--rounds", type=int, default=1, help="runs per order; the median is printed")
    ap.add_argument("--no-torch", action="store_true", help="do not import torch in the measuring process")
    ap.add_argument("--then", type=int, default=0,
                    help="also time this many batches after the first (and the peak RSS after them)")
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args()

    if not os.path.exists(args.path):
        secs = build(args.path, args.rows, args.files)
        print(f"built {args.path}: {args.rows:,} rows in {max(args.files, 1)} data file(s), {secs:.1f} s")
    torch = "0" if args.no_torch else "1"
    base = run(BASELINE, torch)
    print(f"{args.path}: batch {args.batch_size}; an idle process with {'beton' if args.no_torch else 'torch + beton'} "
          f"imported peaks at {base['peak_rss_mb']:.0f} MB")
    results = {"path": args.path, "rows": args.rows, "files": args.files, "batch_size": args.batch_size,
               "idle_rss_mb": base["peak_rss_mb"], "orders": {}}
    then = f" {'then ' + str(args.then):>12} {'RSS then':>10} {'anon then':>10}" if args.then else ""
    print(f"{'order':<24} {'construct':>10} {'first batch':>12} {'total':>8} {'peak RSS':>10} {'anon':>8} "
          f"{'file':>8}{then}")
    for name in args.orders.split(","):
        order, distributed = ORDERS[name]
        runs = [run(CHILD, args.path, order, json.dumps(distributed), str(args.batch_size), torch, str(args.then))
                for _ in range(args.rounds)]
        runs.sort(key=lambda r: r["construct_s"] + r["first_batch_s"])
        r = runs[len(runs) // 2]
        results["orders"][name] = r
        total = r["construct_s"] + r["first_batch_s"]
        more = (f" {r['then_s']:>11.3f}s {r['peak_rss_then_mb']:>8.0f}MB {r['anon_then_mb']:>8.0f}MB"
                if args.then else "")
        print(f"{name:<24} {r['construct_s']:>9.3f}s {r['first_batch_s']:>11.3f}s {total:>7.3f}s "
              f"{r['peak_rss_mb']:>8.0f}MB {r['anon_mb']:>6.0f}MB {r['file_mb']:>6.0f}MB{more}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
