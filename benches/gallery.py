"""Galleries: beton's `Dataset.gallery` vs the same page written by hand in a notebook (Pillow
thumbnails with its DCT-scaled `draft` decode, base64 JPEGs, pyarrow value counts and numpy
histograms), and the notebook repr of a 1,000,000-row selection.

    python benches/gallery.py FILE.beton [--rounds 5]      # needs Pillow (pip install pillow)

FILE: a .beton with an `image` and a `label` field, e.g. `beton write-imagefolder` of the corpus
that `benches/bench-corpus.sh DIR 10000 10 0` makes. Rounds are interleaved; the ratio is the
median of per-round ratios.
"""

import base64
import io
import os
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import beton
from beton.fields import FloatField, IntField
from beton.writer import DatasetWriter

from bench_args import parse


def by_hand(ds, groups, size):
    """The page a notebook user writes: the same thumbnails and summaries, with Pillow/pyarrow."""
    from PIL import Image

    table = ds.table()
    parts = []
    for name in table.column_names:
        if name == "index":
            continue
        col = table.column(name)
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            values = col.to_numpy()
            if len(np.unique(values)) <= 20:
                parts.append(str(pc.value_counts(col).to_pylist()))
            else:
                parts.append(str(np.histogram(values, bins=20)))
        else:
            parts.append(str(pc.value_counts(col).to_pylist()[:10]))
    for key, _, indices in groups:
        parts.append(f"<h2>{key}</h2>")
        for i in indices:
            raw = ds._native.get(i, False)["image"][0]
            im = Image.open(io.BytesIO(raw))
            im.draft("RGB", (size, size))
            im.thumbnail((size, size))
            out = io.BytesIO()
            im.convert("RGB").save(out, "JPEG", quality=85)
            parts.append(f'<img src="data:image/jpeg;base64,{base64.b64encode(out.getvalue()).decode()}">')
    return "".join(parts)


def main():
    a = parse("FILE", rounds=5, n=8, size=128)
    ds = beton.open(a.file)
    g = ds.gallery(by="label", n=a.n, size=a.size)
    groups = [(gr.key, gr.rows, gr.indices) for gr in g.groups]
    tiles = sum(len(x[2]) for x in groups)
    ratios, ours, theirs = [], [], []
    for _ in range(a.rounds):
        t = time.perf_counter()
        html = ds.gallery(by="label", n=a.n, size=a.size).to_html()
        b = time.perf_counter() - t
        t = time.perf_counter()
        hand = by_hand(ds, groups, a.size)
        h = time.perf_counter() - t
        ours.append(b)
        theirs.append(h)
        ratios.append(h / b)
    print(f"{len(ds):,} rows, {tiles} thumbnails of {a.size} px in {len(groups)} groups, summaries of every column")
    print(f"  beton gallery + HTML: {statistics.median(ours) * 1000:.0f} ms ({len(html):,} bytes)")
    print(f"  by hand (Pillow draft + thumbnail, pyarrow/numpy summaries): {statistics.median(theirs) * 1000:.0f} ms "
          f"({len(hand):,} bytes)")
    print(f"  beton is {statistics.median(ratios):.2f}x faster (median of {a.rounds} per-round ratios, "
          f"{min(ratios):.2f}-{max(ratios):.2f})")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "million.beton")
        n = 1_000_000
        t = pa.table({"label": np.arange(n) % 10, "x": np.arange(n, dtype=np.float64)})
        DatasetWriter(path, {"label": IntField(), "x": FloatField()}, progress=False).from_arrow(t)
        big = beton.open(path)
        sel = big.where("x >= 0")
        times = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            html = sel._repr_html_()
            times.append(time.perf_counter() - t0)
        print(f"  repr of a 1,000,000-row IndexSet (16 tiles): {statistics.median(times) * 1000:.1f} ms, "
              f"{len(html):,} bytes")
        times = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            html = big.gallery(sel, by="label").to_html()
            times.append(time.perf_counter() - t0)
        print(f"  gallery of 1,000,000 rows by label with summaries: {statistics.median(times) * 1000:.1f} ms, "
              f"{len(html):,} bytes")


if __name__ == "__main__":
    main()
