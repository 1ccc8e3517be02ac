"""Writes `old.tar.gz`: a dataset directory with many kinds of edit, and `expected.json.gz`: what
the build that wrote it read back from it. Run with a build of the format you want to keep
reading (it was run with a release build of 6ec5143, before issue 38's one dataset model):

    PYTHONPATH=/path/to/old/build python tests/data/old-dataset/make.py tests/data/old-dataset

`python/tests/test_old_dataset.py` opens the directory with today's build and checks every
version and tag reads as `expected.json.gz` says."""

import gzip
import json
import os
import sys
import tarfile
import tempfile

import numpy as np

import beton
from beton.fields import BytesField, FloatField, IntField, JSONField, NDArrayField, RGBImageField

def rows(first, n):
    for i in range(first, first + n):
        img = np.full((4, 6, 3), i % 256, dtype=np.uint8)
        img[0, 0] = (255, 0, i % 256)
        yield (img, i % 5, i / 4.0, bytes([i % 256]) * (1 + i % 3), {"i": i, "s": f"v{i % 3}"},
               np.arange(3, dtype=np.float32) * i)


def write(path, first, n):
    fields = {"image": RGBImageField(write_mode="raw"), "label": IntField(), "score": FloatField(),
              "blob": BytesField(), "meta": JSONField(), "vec": NDArrayField(np.dtype("float32"), (3,))}
    data = list(rows(first, n))
    beton.DatasetWriter(path, fields, num_workers=1, progress=False).from_indexed_dataset(data)


def read(ds):
    import pyarrow as pa

    table = ds.table()
    cols = {}
    for name in table.column_names:
        column = table.column(name)
        values = column.to_pylist()
        if pa.types.is_fixed_size_list(column.type):
            # A vector column (issue 40): the byte size the build that wrote the expectations
            # showed there; the vectors themselves are checked through the samples below.
            width = column.type.list_size * column.type.value_type.bit_width // 8
            values = [None if v is None else width for v in values]
        cols[name] = [None if v is None else (v if isinstance(v, (int, float, str, bool)) else repr(v))
                      for v in values]
    samples = [ds[i] for i in range(len(ds))]
    return {"len": len(ds), "version": ds.version, "columns": cols,
            "classes": ds.classes,
            "splits": {k: list(map(int, v)) for k, v in ds.splits().items()},
            "samples": [{k: _plain(v) for k, v in s.items()} for s in samples]}


def _plain(v):
    """A value as JSON holds it: numbers, text and bools as they are, arrays and dicts as text."""
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    return repr(np.asarray(v).tolist()) if isinstance(v, np.ndarray) else repr(v)


def main(out):
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a.beton"), os.path.join(tmp, "b.beton")
        write(a, 0, 24)
        write(b, 100, 10)
        d = os.path.join(tmp, "old")
        ds = beton.import_file(d, a)                                     # 1
        ds = ds.set_classes(["c0", "c1", "c2", "c3", "c4"], message="classes")  # 2
        ds.tag("imported")
        ds = ds.append(b, message="append")                              # 3
        ds = ds.update({"label": "label + 10"}, where="score > 3")        # 4
        ds = ds.delete("label = 2")                                      # 5
        ds = ds.add_column("double", "score * 2")                         # 6
        ds.save_splits(train=ds.where("label < 12"))                    # 7
        ds = beton.open(d)
        ds = ds.drop_column("blob")                                      # 8
        ds = ds.update({"meta": "'{\"edited\": true}'"}, where="label = 11")  # 9
        ds.tag("final")
        expected = {}
        for v in [1, 2, 3, 4, 5, 6, 7, 8, 9]:
            expected[str(v)] = read(beton.open(d, version=v))
        for t in ["imported", "final"]:
            expected[t] = read(beton.open(d, version=t))
        with tarfile.open(os.path.join(out, "old.tar.gz"), "w:gz") as tar:
            tar.add(d, arcname="old")
        with gzip.open(os.path.join(out, "expected.json.gz"), "wt") as f:
            json.dump(expected, f, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
