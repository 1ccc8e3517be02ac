"""Appending JPEGs to a dataset, beton vs pylance (Lance), interleaved rounds (issue 42, item 4).

Both start from the same ImageFolder (beton: a dataset directory with the JPEGs passed through
into an FFCV data file; Lance: `id`, `label` and the JPEG bytes). Each round copies both pristine
datasets, then appends the second ImageFolder (read from disk and written) with:
- beton, `verify=True` (the default): every JPEG checked at the entropy level (a corrupt one is
  refused) and given a restart marker per MCU, in parallel;
- beton, `verify=False`: the bytes stored as given (header read only), as Lance stores them;
- pylance: `write_dataset(mode="append")` of the bytes.
Prints per engine the median seconds, the median of the per-round ratios to pylance (min-max),
the bytes each append wrote, and the peak RSS of the process.

    python benches/append_images.py BASE_CORPUS APPEND_CORPUS [--rounds 3] [--dir target/tmp/append-images]

Corpora: `benches/bench-corpus.sh /tmp/c1k 1000 10 0` and `... /tmp/c10k 10000 10 1`. Needs
pyarrow and pylance; beton from a release build.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics

import pyarrow as pa

from versions_compare import du, timed  # the same folder: run as a script
from versions_images import imagefolder, lance_batches


def beton_create(path, corpus):
    from beton.fields import IntField, RGBImageField
    from beton.writer import DatasetWriter

    DatasetWriter(path + os.sep, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                  progress=False).from_imagefolder(corpus)


def beton_append(path, corpus, verify):
    import beton

    beton.open(path).append(corpus, write_mode="jpg", verify=verify, progress=False)


def lance_create(path, corpus):
    import lance

    files = imagefolder(corpus)
    schema = next(lance_batches(files[:1], 0)).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, lance_batches(files, 0)), path)


def lance_append(path, corpus):
    import lance

    ds = lance.dataset(path)
    files = imagefolder(corpus)
    first = ds.count_rows() + 10_000_000
    schema = next(lance_batches(files[:1], 0)).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, lance_batches(files, first)), path, mode="append")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("append")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join("target", "tmp", "append-images"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    n = len(imagefolder(a.append))
    engines = {
        "beton (verify=True)": ("beton", lambda p: beton_append(p, a.append, True)),
        "beton (verify=False)": ("beton", lambda p: beton_append(p, a.append, False)),
        "pylance": ("lance", lambda p: lance_append(p, a.append)),
    }
    pristine = {}
    for kind, create in [("beton", beton_create), ("lance", lance_create)]:
        path = os.path.join(a.dir, f"{kind}-pristine")
        shutil.rmtree(path, ignore_errors=True)
        create(path, a.base)
        pristine[kind] = path
    seconds = {k: [] for k in engines}
    written = {}
    for r in range(a.rounds):
        for name, (kind, append) in engines.items():
            path = os.path.join(a.dir, f"{kind}-round")
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(pristine[kind], path)
            before = du(path)
            seconds[name].append(timed(lambda: append(path)))
            written[name] = du(path) - before
    print(f"append {n:,} JPEGs ({sum(os.path.getsize(p) for p, _ in imagefolder(a.append)) / 1e6:.0f} MB) "
          f"to a dataset of {len(imagefolder(a.base)):,}; {a.rounds} interleaved rounds, {os.cpu_count()} cores")
    print("| engine | s (median) | ÷ pylance (median, min-max) | MB written |")
    print("|---|---:|---:|---:|")
    for name in engines:
        ratios = [x / y for x, y in zip(seconds[name], seconds["pylance"])]
        print(f"| {name} | {statistics.median(seconds[name]):.2f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {written[name] / 1e6:.1f} |")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
