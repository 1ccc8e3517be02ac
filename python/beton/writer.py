"""FFCV's ``DatasetWriter``: writes a ``.beton`` file from an indexed dataset, an iterable, an
ImageFolder or an Arrow table. Encoding runs in Rust threads; only fetching samples from Python
holds the GIL. The file appears atomically when complete."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence

from beton import _native
from beton.fields.base import Field


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="samples")


class DatasetWriter:
    """``DatasetWriter(path, {'image': RGBImageField(), 'label': IntField()}, num_workers=...)``."""

    def __init__(self, fname, fields: Dict[str, Field], page_size: int = 8 << 20, num_workers: int = -1,
                 seed: int = 0, progress: bool = True, skip_bad: bool = False):
        """``skip_bad=True`` leaves out samples whose images cannot be read or decoded instead of
        failing the write; the report's ``skipped`` lists ``(index, why)`` (``why`` names the file)."""
        self.fname = str(fname)
        self.skip_bad = bool(skip_bad)
        self.fields = dict(fields)
        self.page_size = int(page_size)
        self.num_workers = 0 if num_workers is None or num_workers < 0 else int(num_workers)
        self.seed = int(seed)
        self.progress = progress

    def _write(self, n: int, get) -> Dict[str, Any]:
        names = list(self.fields)
        fields = [self.fields[k] for k in names]

        def sample(i):
            values = get(i)
            if isinstance(values, dict):
                values = [values[k] for k in names]
            if len(values) != len(fields):
                raise ValueError(f"sample {i} has {len(values)} values for {len(fields)} fields {names}")
            return [f.encode(v) for f, v in zip(fields, values)]

        bar = _progress_bar(n, self.progress)

        def progress(done, total):
            if bar is not None:
                bar.update(done - bar.n)
            return True

        try:
            return _native.write(self.fname, [f.spec(k) for k, f in self.fields.items()], n, sample,
                                 page_size=self.page_size, num_workers=self.num_workers, seed=self.seed,
                                 progress=progress, skip_bad=self.skip_bad)
        finally:
            if bar is not None:
                bar.close()

    def from_indexed_dataset(self, dataset, indices: Optional[Sequence[int]] = None, chunksize: int = 100,
                             shuffle_indices: bool = False):
        """Writes ``dataset[i]`` (a tuple or dict of field values) for ``i`` in ``indices``
        (default: all), in that order; ``shuffle_indices`` shuffles them (seeded)."""
        idx = list(range(len(dataset))) if indices is None else [int(i) for i in indices]
        if shuffle_indices:
            import random

            random.Random(self.seed).shuffle(idx)
        return self._write(len(idx), lambda i: dataset[idx[i]])

    def from_iterable(self, iterable: Iterable, length: Optional[int] = None):
        """Writes the samples an iterable yields (materialised first when it has no length)."""
        items = iterable if hasattr(iterable, "__getitem__") and hasattr(iterable, "__len__") else list(iterable)
        return self._write(len(items) if length is None else length, lambda i: items[i])

    def from_imagefolder(self, root, image_field: str = "image", label_field: str = "label"):
        """Writes an ImageFolder (``root/CLASS/IMAGE``) in torchvision's order (classes sorted,
        labels their positions): the image file into ``image_field`` (read and encoded by Rust
        threads), the label into ``label_field``. Other fields get ``None`` and must not exist.
        Returns the report, with ``classes``."""
        if set(self.fields) != {image_field, label_field}:
            raise ValueError(f"from_imagefolder writes fields {image_field!r} and {label_field!r}; "
                             f"this writer has {sorted(self.fields)}")
        classes, samples = _native.scan_imagefolder(str(root))
        order = [image_field, label_field]
        report = self._write(len(samples), lambda i: {order[0]: str(samples[i][0]), order[1]: samples[i][1]})
        report["classes"] = classes
        return report

    def from_arrow(self, table, columns: Optional[Dict[str, str]] = None):
        """Writes the rows of an Arrow table (pyarrow, polars or pandas: anything
        ``pyarrow.table()`` accepts). Each field takes the column of its name (or
        ``columns[field]``); image fields take a column of paths or of encoded image bytes."""
        import pyarrow as pa

        if not isinstance(table, pa.Table):
            table = pa.table(table)
        columns = dict(columns or {})
        cols = {}
        for name in self.fields:
            col = columns.get(name, name)
            if col not in table.column_names:
                raise KeyError(f"field {name!r}: no column {col!r}; the columns are {table.column_names}")
            cols[name] = table.column(col).to_pylist()
        return self._write(table.num_rows, lambda i: {k: v[i] for k, v in cols.items()})
