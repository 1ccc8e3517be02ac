"""Exact nearest neighbours: ``ds.nearest`` against numpy's blocked brute force on the same
vectors, the same cores, one process, rounds interleaved.

numpy's reference is the usual one: per block of rows, ``‖q‖² - 2 Q·Xᵀ + ‖x‖²`` by one
matrix product (BLAS) for all the query vectors and ``argpartition`` for each query's k best of
the block, then the best k of those. beton's is ``ds.nearest(column, queries, k)``: the vector
column read in place from the columnar copy, float32 scores with an error bound for all the
query vectors in one pass, and the candidates ranked by the exact float64 ``l2_distance``.

Also near-duplicates (``ds.near_duplicates(by="emb")`` against numpy's blocked pairwise search
at the same threshold, 100 k x 64) and the perceptual hash of the bundled photos against a full
decode of each.

Usage: ``python benches/vectors.py [--rows 1000000] [--dim 128] [--queries 1,16] [--rounds 3]
[--dup-rows 100000] [--only nearest|dups|phash] [--dir /tmp/beton-vectors]`` (writes its files
once per size; never commit them).
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np


def numpy_nearest(matrix, norms, queries, k, block=65536):
    """Blocked brute force: per block of rows, ``‖q‖² - 2 Q·Xᵀ + ‖x‖²`` for all the query
    vectors in one matrix product (BLAS; laid out query-major, so that ``argpartition`` runs
    along contiguous rows: 4x faster than along columns), each query's k best of the block,
    then the best k of those."""
    qn = (queries.astype(np.float32) ** 2).sum(axis=1)
    best_d, best_i = [], []
    for start in range(0, len(matrix), block):
        x = matrix[start:start + block]
        d = qn[:, None] - 2 * (queries @ x.T) + norms[None, start:start + block]
        kk = min(k, d.shape[1])
        part = np.argpartition(d, kk - 1, axis=1)[:, :kk]
        best_d.append(np.take_along_axis(d, part, axis=1))
        best_i.append(part + start)
    d, i = np.concatenate(best_d, axis=1), np.concatenate(best_i, axis=1)
    return [i[j, np.lexsort((i[j], d[j]))[:k]] for j in range(len(queries))]


def numpy_pairs(matrix, threshold, block=256):
    """numpy's blocked pairwise search: per block of rows, the squared distances to every later
    row by one matrix product, and the pairs within the threshold (blocks of 256 rows: the
    fastest of 256, 1024 and 4096 on 100 k x 64, 32 s against 51 s)."""
    norms = (matrix.astype(np.float32) ** 2).sum(axis=1)
    found = []
    for start in range(0, len(matrix), block):
        x = matrix[start:start + block]
        d = norms[start:start + block, None] + norms[None, start:] - 2 * (x @ matrix[start:].T)
        i, j = np.nonzero(d <= threshold * threshold)
        keep = j > i
        found.append(np.stack([i[keep] + start, j[keep] + start], axis=1))
    return np.concatenate(found)


def bench_dups(a, beton, NDArrayField, DatasetWriter):
    """Near-duplicates over ``--dup-rows`` x 64 float32 with 1% planted copies (noise 1e-3):
    ``ds.near_duplicates`` against ``numpy_pairs`` at the same threshold."""
    rng = np.random.default_rng(1)
    n, d = a.dup_rows, 64
    matrix = rng.standard_normal((n, d)).astype(np.float32)
    src = rng.integers(0, n, n // 100)
    dst = rng.integers(0, n, n // 100)
    matrix[dst] = matrix[src] + rng.standard_normal((len(dst), d)).astype(np.float32) * 1e-3
    path = Path(a.dir) / f"dups-{n}-{d}.beton"
    if not path.exists():
        DatasetWriter(str(path), {"emb": NDArrayField(np.dtype("float32"), (d,))}, progress=False) \
            .from_indexed_dataset([(row,) for row in matrix])
    ds = beton.open(path)
    ds.vectors("emb", rows=[0])
    threshold = 0.05
    ratios = []
    for r in range(a.rounds):
        runs = {}
        for who in (("numpy", "beton") if r % 2 == 0 else ("beton", "numpy")):
            time.sleep(0.3)  # OpenBLAS's spinning threads, as above
            t = time.perf_counter()
            if who == "numpy":
                want = numpy_pairs(matrix, threshold)
            else:
                got = ds.near_duplicates(by="emb", threshold=threshold)
            runs[who] = time.perf_counter() - t
        ratios.append(runs["numpy"] / runs["beton"])
        print(f"near-duplicates, round {r}: numpy {runs['numpy']:.2f} s ({len(want)} pairs), beton "
              f"{runs['beton']:.2f} s ({got.num_groups} groups, {len(got)} rows)")
    print(f"near-duplicates over {n:,} x {d} float32 within {threshold}: beton at {np.median(ratios):.2f}x numpy's "
          f"speed (rounds {min(ratios):.2f}-{max(ratios):.2f}); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


def bench_phash(a, beton):
    """The perceptual hash of every bundled photo (``near_duplicates(by="image")``, which hashes
    each from its 1/8-scale grey decode) against decoding every photo in full (``ds[i]``)."""
    from beton.fields import IntField, RGBImageField
    from beton.writer import DatasetWriter

    root = Path(__file__).resolve().parent.parent / "examples" / "data" / "imagefolder"
    path = Path(a.dir) / "photos-jpg.beton"
    if not path.exists():
        DatasetWriter(str(path), {"image": RGBImageField(write_mode="jpg"), "label": IntField()}, progress=False) \
            .from_imagefolder(str(root))
    ds = beton.open(path)
    ratios = []
    for r in range(a.rounds):
        t = time.perf_counter()
        ds.near_duplicates(by="image")
        hashed = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(len(ds)):
            ds[i]["image"]
        decoded = time.perf_counter() - t
        ratios.append(decoded / hashed)
        print(f"pHash, round {r}: {len(ds)} photos hashed in {hashed * 1e3:.0f} ms (2 threads), decoded in full in "
              f"{decoded * 1e3:.0f} ms (1 thread)")
    print(f"pHash of {len(ds)} photos: {np.median(ratios):.1f}x faster than a full decode of each "
          f"(rounds {min(ratios):.1f}-{max(ratios):.1f}; per thread: {np.median(ratios) / 2:.1f}x)")


def bench_index(a, beton, NDArrayField, DatasetWriter):
    """The IVF index (``ds.create_index``) over ``--rows`` x ``--dim`` float32: its build time,
    then recall@10 against exact search and the speed of one query at a time against exact's,
    for several ``nprobe``; on clustered vectors (2,000 overlapping Gaussian clusters, as
    embeddings are) and on plain Gaussian noise (no structure at all: IVF's worst case)."""
    rng = np.random.default_rng(7)
    n, d = a.rows, a.dim
    for kind in ("clustered", "gaussian"):
        if kind == "clustered":
            centers = rng.standard_normal((2000, d)).astype(np.float32)
            # Clusters that overlap (a point's spread is as large as the distance between two
            # centers), not well-separated blobs, which any index finds in one list.
            matrix = centers[rng.integers(0, 2000, n)] + rng.standard_normal((n, d)).astype(np.float32)
            queries = centers[rng.integers(0, 2000, 50)] + rng.standard_normal((50, d)).astype(np.float32)
        else:
            matrix = rng.standard_normal((n, d)).astype(np.float32)
            queries = rng.standard_normal((50, d)).astype(np.float32)
        path = Path(a.dir) / f"ivf-{kind}2-{n}-{d}.beton"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            DatasetWriter(str(path), {"emb": NDArrayField(np.dtype("float32"), (d,))}, progress=False) \
                .from_indexed_dataset([(row,) for row in matrix])
        ds = beton.open(path)
        ds.drop_index("emb")
        t = time.perf_counter()
        info = ds.create_index("emb")
        build = time.perf_counter() - t
        print(f"{kind}: index of {n:,} x {d} built in {build:.1f} s ({info['lists']} lists; tuned nprobe "
              f"{info['nprobe']}, recall@10 {info['recall']:.3f} on a sample of its own rows)")
        try:
            import faiss
            quantizer = faiss.IndexFlatL2(d)
            ivf = faiss.IndexIVFFlat(quantizer, d, info["lists"])
            t = time.perf_counter()
            ivf.train(matrix[np.random.default_rng(0).choice(n, min(n, info["lists"] * 64), replace=False)])
            ivf.add(matrix)
            faiss_build = time.perf_counter() - t
            ivf.nprobe = info["nprobe"]
        except ImportError:
            ivf = None
        exact, exact_t = [], []
        for q in queries:
            t = time.perf_counter()
            exact.append(ds.nearest("emb", q, k=10, exact=True).column("index").to_pylist())
            exact_t.append(time.perf_counter() - t)
        for nprobe in (None, 2, 4, 8, 16, 32, 64, 128):
            got, got_t = [], []
            for q in queries:
                t = time.perf_counter()
                r = ds.nearest("emb", q, k=10, nprobe=nprobe)
                got_t.append(time.perf_counter() - t)
                got.append(r.column("index").to_pylist())
                assert r.schema.metadata[b"beton.search"] == b"ivf"
            recall = np.mean([len(set(g) & set(e)) / 10 for g, e in zip(got, exact)])
            shown = f"{info['nprobe']} (tuned)" if nprobe is None else nprobe
            if nprobe is None and ivf is not None:
                f_got, f_t = [], []
                for q in queries:
                    t = time.perf_counter()
                    f_got.append(ivf.search(q[None, :], 10)[1][0].tolist())
                    f_t.append(time.perf_counter() - t)
                f_recall = np.mean([len(set(g) & set(e)) / 10 for g, e in zip(f_got, exact)])
                print(f"{kind}: faiss IndexIVFFlat, {info['lists']} lists, nprobe {info['nprobe']}: built in "
                      f"{faiss_build:.1f} s, recall@10 {f_recall:.3f}, one query {np.median(f_t) * 1e3:.2f} ms")
            print(f"{kind}, nprobe {shown}: recall@10 {recall:.3f}, one query {np.median(got_t) * 1e3:.2f} ms against "
                  f"exact's {np.median(exact_t) * 1e3:.1f} ms: {np.median(exact_t) / np.median(got_t):.1f}x exact's "
                  f"speed")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", default="1,16")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default="/tmp/beton-vectors")
    p.add_argument("--dup-rows", type=int, default=100_000)
    p.add_argument("--only", choices=["nearest", "dups", "phash", "index"], help="one part of the bench")
    a = p.parse_args()
    import beton
    from beton.fields import NDArrayField
    from beton.writer import DatasetWriter
    sys.path.insert(0, str(Path(__file__).parent))
    from machine import machine  # benches/machine.py
    print(machine())
    if a.only in (None, "dups"):
        bench_dups(a, beton, NDArrayField, DatasetWriter)
    if a.only in (None, "phash"):
        bench_phash(a, beton)
    if a.only in (None, "index"):
        bench_index(a, beton, NDArrayField, DatasetWriter)
    if a.only not in (None, "nearest"):
        return
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((a.rows, a.dim)).astype(np.float32)
    path = Path(a.dir) / f"v-{a.rows}-{a.dim}.beton"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        DatasetWriter(str(path), {"emb": NDArrayField(np.dtype("float32"), (a.dim,))}, progress=False) \
            .from_indexed_dataset([(row,) for row in matrix])
        print(f"wrote {path} in {time.perf_counter() - t:.1f} s")
    ds = beton.open(path)
    ds.nearest("emb", matrix[0], k=a.k, exact=True)  # the columnar copy, made once, then read in place
    norms = (matrix.astype(np.float32) ** 2).sum(axis=1)
    try:
        import faiss  # optional: pip install faiss-cpu
        flat = faiss.IndexFlatL2(a.dim)
        flat.add(matrix)
    except ImportError:
        flat = None
        print("faiss is not installed: its IndexFlatL2 is left out (pip install faiss-cpu)")
    for m in [int(x) for x in a.queries.split(",")]:
        queries = rng.standard_normal((m, a.dim)).astype(np.float32)
        ratios, faiss_ratios = [], []
        for r in range(a.rounds):
            runs = {}
            sides = ("numpy", "beton", "faiss") if flat is not None else ("numpy", "beton")
            for who in (sides if r % 2 == 0 else tuple(reversed(sides))):
                # OpenBLAS's threads spin for ~0.1 s after a call, taking the cores from
                # whatever runs next: let them sleep first, so neither side pays for the other.
                time.sleep(0.3)
                t = time.perf_counter()
                if who == "numpy":
                    want = numpy_nearest(matrix, norms, queries, a.k)
                elif who == "faiss":
                    flat.search(queries, a.k)
                else:
                    got = ds.nearest("emb", queries, k=a.k, exact=True).to_pydict()
                runs[who] = time.perf_counter() - t
            got_rows = [[i for i, q in zip(got["index"], got["query"]) if q == j] for j in range(m)]
            same = sum(g == list(w) for g, w in zip(got_rows, want))
            ratios.append(runs["numpy"] / runs["beton"])
            faiss_said = ""
            if "faiss" in runs:
                faiss_ratios.append(runs["faiss"] / runs["beton"])
                faiss_said = f", faiss IndexFlatL2 {runs['faiss'] * 1e3:.1f} ms"
            print(f"{m} queries, round {r}: numpy {runs['numpy'] * 1e3:.1f} ms, beton {runs['beton'] * 1e3:.1f} ms"
                  f"{faiss_said} (beton {ratios[-1]:.2f}x numpy's speed; {same}/{m} queries give numpy's rows)")
        print(f"{m} queries over {a.rows:,} x {a.dim} float32: beton at {np.median(ratios):.2f}x numpy's speed "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; threads {os.cpu_count()}")
        if faiss_ratios:
            print(f"{m} queries: beton at {np.median(faiss_ratios):.2f}x faiss IndexFlatL2's speed "
                  f"(rounds {min(faiss_ratios):.2f}-{max(faiss_ratios):.2f})")


if __name__ == "__main__":
    main()
