"""Edits of a versioned JPEG dataset, beton vs pylance (Lance), side by side in one run.

Both hold the same ImageFolder: beton a dataset directory (JPEG bytes passed through into an FFCV
data file, labels), Lance a dataset of `id`, `label` and the JPEG bytes. Each engine then:
relabels 1% of the rows, deletes 1%, adds a float column (a SQL expression), appends a second
ImageFolder (10,000 images: read from disk and written); for each: seconds and bytes written
(the growth of the dataset's directory), and the bytes as a fraction of the dataset's size.
Engines interleaved, best of ROUNDS (each round starts from a fresh copy of the datasets).

    python benches/versions_images.py CORPUS APPEND_CORPUS [--rounds 1] [--dir target/tmp/versions-images]

CORPUS, APPEND_CORPUS: ImageFolders (`benches/bench-corpus.sh /tmp/c100k 100000 10 0` and
`... /tmp/c10k 10000 10 1`). Needs pyarrow and pylance; beton from the release build.
"""

from __future__ import annotations

import argparse
import os
import shutil

import pyarrow as pa

from versions_compare import Edits, du, timed  # the same folder: run as a script


def imagefolder(root):
    """(path, label) of every image, classes in sorted order (as ImageFolder and beton do)."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    out = []
    for label, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            out.append((os.path.join(root, c, f), label))
    return out


def lance_batches(files, first_id, chunk=2048):
    schema = pa.schema([("id", pa.int64()), ("label", pa.int64()), ("image", pa.large_binary())])
    for k in range(0, len(files), chunk):
        part = files[k:k + chunk]
        images = []
        for path, _ in part:
            with open(path, "rb") as f:
                images.append(f.read())
        ids = list(range(first_id + k, first_id + k + len(part)))
        yield pa.record_batch([pa.array(ids, pa.int64()), pa.array([l for _, l in part], pa.int64()),
                               pa.array(images, pa.large_binary())], schema=schema)


class Beton(Edits):
    name = "beton"
    key = "row_id"

    def create(self, path, corpus):
        import beton
        from beton.fields import IntField, RGBImageField
        from beton.writer import DatasetWriter

        DatasetWriter(path + os.sep, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                      progress=False).from_imagefolder(corpus)
        return beton.open(path)

    def open(self, path):
        import beton

        self.ds = beton.open(path)

    def add_column(self):
        self.ds.add_column("q", "label * 0.5")

    def append(self, corpus):
        self.ds.append(corpus, write_mode="jpg")

    def count(self):
        return len(self.ds)


class Lance(Edits):
    name = "pylance"
    label = "7"

    def create(self, path, corpus):
        import lance

        files = imagefolder(corpus)
        schema = next(lance_batches(files[:1], 0)).schema
        reader = pa.RecordBatchReader.from_batches(schema, lance_batches(files, 0))
        return lance.write_dataset(reader, path)

    def open(self, path):
        import lance

        self.ds = lance.dataset(path)

    def add_column(self):
        self.ds.add_columns({"q": "CAST(label AS DOUBLE) * 0.5"})

    def append(self, corpus):
        import lance

        files = imagefolder(corpus)
        first = self.ds.count_rows() + 10_000_000  # ids past any existing one
        schema = next(lance_batches(files[:1], 0)).schema
        reader = pa.RecordBatchReader.from_batches(schema, lance_batches(files, first))
        self.ds = lance.write_dataset(reader, self.ds.uri, mode="append")

    def count(self):
        return self.ds.count_rows()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("append_corpus")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--dir", default=os.path.join("target", "tmp", "versions-images"))
    args = ap.parse_args()
    n, n_more = len(imagefolder(args.corpus)), len(imagefolder(args.append_corpus))
    os.makedirs(args.dir, exist_ok=True)
    engines = [Beton(), Lance()]
    pristine, created = {}, {}
    for e in engines:
        path = os.path.join(args.dir, f"{e.name}-pristine")
        shutil.rmtree(path, ignore_errors=True)
        created[e.name] = timed(lambda: e.create(path, args.corpus))
        pristine[e.name] = path
    best: dict = {}
    written: dict = {}
    steps = [("relabel 1%", "relabel"), ("delete 1%", "delete"), ("add a float column", "add_column"),
             (f"append {n_more:,} images", "append")]
    for r in range(args.rounds):
        for e in engines:
            path = os.path.join(args.dir, f"{e.name}-{r}")
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(pristine[e.name], path)
            e.open(path)
            for step, method in steps:
                f = getattr(e, method)
                before = du(path)
                s = timed(lambda: f(args.append_corpus) if method == "append" else f())
                key = (step, e.name)
                best[key] = min(best.get(key, s), s)
                written[key] = du(path) - before
            assert e.count() == n - n // 100 + n_more, (e.name, e.count())
            shutil.rmtree(path, ignore_errors=True)
    size = {e.name: du(pristine[e.name]) for e in engines}
    print(f"{n:,} JPEGs ({size['beton'] / 1e9:.2f} GB as beton, {size['pylance'] / 1e9:.2f} GB as Lance); "
          f"best of {args.rounds} round(s), engines interleaved")
    print(f"create: beton {created['beton']:.1f} s, pylance {created['pylance']:.1f} s")
    print(f"{'edit':<24} {'beton s':>9} {'pylance s':>10} {'ratio':>7} {'beton MB':>9} {'pylance MB':>11} "
          f"{'beton/dataset':>14}")
    for step, _ in steps:
        bt, lt = best[(step, "beton")], best[(step, "pylance")]
        wb, wl = written[(step, "beton")], written[(step, "pylance")]
        print(f"{step:<24} {bt:9.3f} {lt:10.3f} {bt / lt:6.2f}x {wb / 1e6:9.2f} {wl / 1e6:11.2f} "
              f"{wb / size['beton']:14.5f}")
    for e in engines:
        shutil.rmtree(pristine[e.name], ignore_errors=True)


if __name__ == "__main__":
    main()
