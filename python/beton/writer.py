"""FFCV's ``DatasetWriter``: writes a ``.beton`` file from an indexed dataset, an iterable, an
ImageFolder or an Arrow table. Encoding runs in Rust threads; only fetching samples from Python
holds the GIL (an Arrow table is read by Rust directly, no Python per row). The file appears
atomically when complete."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Dict, Iterable, Optional, Sequence

from beton import _native
from beton.fields.base import Field, native_fields


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="samples")


def _progress(total: int, enabled: bool):
    """A tqdm bar (or None) and the native writer's progress callback that moves it."""
    bar = _progress_bar(total, enabled)

    def progress(done, total):
        if bar is not None:
            bar.update(done - bar.n)
        return True

    return bar, progress


def _arrow_chunk_size(fields: Dict[str, Field], table) -> int:
    """Rows the native writer encodes per parallel step for ``table``. Each step costs the
    writer a hand-off to its threads and a progress call (tens of microseconds); the default
    256 suits images, whose encoding dwarfs that, but makes the hand-offs most of the time of a
    table of numbers. Without image fields a step takes about 8 MiB of Arrow data (the writer
    holds about two steps of encoded rows), between 256 and 65536 rows."""
    from beton.fields import RGBImageField

    if any(isinstance(f, RGBImageField) for f in fields.values()) or table.num_rows == 0:
        return 256
    row_bytes = max(1, table.nbytes // table.num_rows)
    return max(256, min(65536, (8 << 20) // row_bytes))


def _arrow_column(field: Field, name: str, column: str, col):
    """``col`` (a ``pyarrow.ChunkedArray``) in a type the native writer reads for ``field``:
    dictionaries decoded, extension types as their storage, list elements cast to an array
    field's dtype, and any column of a JSON field that is not already JSON text serialised
    with ``json.dumps`` (Python per row: Arrow has no JSON writer here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from beton.fields import ArrayField, JSONField, NDArrayField

    where = f"field {name!r} (column {column!r})"
    if isinstance(col.type, pa.BaseExtensionType):  # pa.json_() included: JSON text
        col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    t = col.type
    is_string_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16
    is_string = pa.types.is_string(t) or pa.types.is_large_string(t) or is_string_view(t)
    if isinstance(field, JSONField) and not is_string:
        return pa.chunked_array([pa.array([None if v is None else json.dumps(v) for v in col.to_pylist()],
                                          type=pa.large_string())])
    if isinstance(field, (NDArrayField, ArrayField)) and (
            pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        dtype = field.dtype.newbyteorder("<") if field.dtype.itemsize > 1 else field.dtype
        element = pa.uint8() if dtype.kind == "b" else pa.from_numpy_dtype(dtype)
        if t.value_type != element and (pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)
                                        or pa.types.is_boolean(t.value_type)):
            target = (pa.list_(element, t.list_size) if pa.types.is_fixed_size_list(t)
                      else pa.large_list(element) if pa.types.is_large_list(t) else pa.list_(element))
            try:
                col = pc.cast(col, target)
            except pa.ArrowNotImplementedError:
                pass  # the native writer names the types it takes
            except pa.ArrowInvalid as e:
                raise ValueError(f"{where}: casting {t} to {target}: {e}") from None
    return col


class DatasetWriter:
    """``DatasetWriter(path, {'image': RGBImageField(), 'label': IntField()}, num_workers=...)``."""

    def __init__(self, fname, fields: Dict[str, Field], page_size: int = 8 << 20, num_workers: int = -1,
                 seed: int = 0, progress: bool = True, skip_bad: bool = False):
        """``skip_bad=True`` leaves out samples whose images cannot be read or decoded instead of
        failing the write; the report's ``skipped`` lists ``(index, why)`` (``why`` names the file).

        ``fname`` an existing directory, or a path ending in ``/``, writes a dataset directory:
        its version 1 when new (``beton.import_file``), else a new version appending the rows
        (``Dataset.append``); the report then has ``version``."""
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

        bar, progress = _progress(n, self.progress)
        try:
            with self._destination() as (path, publish):
                return publish(_native.write(path, native_fields(self.fields), n, sample,
                                             page_size=self.page_size, num_workers=self.num_workers,
                                             seed=self.seed, progress=progress, skip_bad=self.skip_bad))
        finally:
            if bar is not None:
                bar.close()

    @contextlib.contextmanager
    def _destination(self):
        """Where the native writer writes, and what publishes its report: the file itself, or,
        for a dataset directory, a temporary file in it that becomes a version."""
        if not (os.path.isdir(self.fname) or self.fname.endswith(os.sep)):
            yield self.fname, lambda report: report
            return
        from beton.dataset import Dataset, import_file

        directory = self.fname.rstrip(os.sep) or os.sep
        tmp_dir = os.path.join(directory, "_tmp")
        os.makedirs(tmp_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=tmp_dir) as tmp:
            path = os.path.join(tmp, "write.beton")

            def publish(report):
                if _native.Version.is_dataset_dir(directory):
                    ds = Dataset(directory).append(path, message="DatasetWriter")
                else:
                    ds = import_file(directory, path)
                report = dict(report)
                report["path"], report["version"] = directory, ds.version
                return report

            yield path, publish

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
        ``columns[field]``). The table crosses into Rust once and no Python runs per row.

        Columns by field: int from any integer type; float from float or integer types; bool
        from boolean; text from strings; json from strings holding JSON text (other columns
        are serialised with ``json.dumps`` first, in Python); bytes from binary; ndarray,
        torch_tensor and array from binary (the array's bytes) or lists of numbers (cast to
        the field's dtype); images from strings (file paths) or binary (encoded JPEG/PNG).
        A column of another type raises ``TypeError``; a null, or an integer beyond int64,
        ``ValueError`` naming the field, the column and the row."""
        import pyarrow as pa

        if not isinstance(table, pa.Table):
            table = pa.table(table)
        columns = dict(columns or {})
        arrays, names = [], []
        for name, field in self.fields.items():
            col = columns.get(name, name)
            if col not in table.column_names:
                raise KeyError(f"field {name!r}: no column {col!r}; the columns are {table.column_names}")
            arrays.append(_arrow_column(field, name, col, table.column(col)))
            names.append(col)
        # Column k feeds field k (a column may feed several fields).
        data = pa.Table.from_arrays(arrays, names=names)
        bar, progress = _progress(data.num_rows, self.progress)
        try:
            with self._destination() as (path, publish):
                return publish(_native.write_arrow(
                    path, native_fields(self.fields), data, page_size=self.page_size,
                    num_workers=self.num_workers, seed=self.seed, chunk_size=_arrow_chunk_size(self.fields, data),
                    progress=progress, skip_bad=self.skip_bad))
        finally:
            if bar is not None:
                bar.close()
