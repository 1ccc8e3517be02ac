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
                 seed: int = 0, progress: bool = True):
        self.fname = str(fname)
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
                                 progress=progress)
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
