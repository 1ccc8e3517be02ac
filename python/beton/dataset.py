"""``beton.open(path)``: a ``.beton`` file as a database (values, Arrow table, SQL, splits)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from beton import _native
from beton._native import IndexSet


class _Stream:
    """An object exposing the Arrow C stream interface over one capsule."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self._capsule


def _value(kind: str, raw: Any) -> Any:
    if kind in ("ndarray", "torch_tensor", "array"):
        data, typestr, shape = raw
        return np.frombuffer(data, dtype=np.dtype(typestr)).reshape(shape)
    if kind in ("rgb_image", "grey_image"):
        data, height, width, channels = raw
        return np.frombuffer(data, dtype=np.uint8).reshape(height, width, channels)
    if kind == "json":
        return json.loads(raw)
    return raw


class Dataset:
    """An open, validated ``.beton`` file (``beton.open``)."""

    def __init__(self, path, custom: Optional[Dict[str, tuple]] = None):
        self._native = _native.Dataset(str(path), custom)
        self._kinds = {name: kind for name, kind, _ in self._native.fields()}

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def path(self):
        return self._native.path

    @property
    def schema(self) -> Dict[str, Any]:
        """``{field: type}``; arrays as ``(type, dtype, shape)``."""
        return {
            name: (kind if details is None else (kind, details[0], tuple(details[1])))
            for name, kind, details in self._native.fields()
        }

    def __getitem__(self, index: int) -> Dict[str, Any]:
        """Sample ``index`` as a dict: ints, floats, bytes, str, parsed JSON, numpy arrays,
        images as HWC uint8 arrays."""
        raw = self._native.get(index)
        return {name: _value(self._kinds[name], v) for name, v in raw.items()}

    def columns(self) -> List[str]:
        """The data table's column names (``image.width``, ``label``, ...)."""
        return self._native.column_names()

    def table(self, columns: Optional[List[str]] = None):
        """The data table as a ``pyarrow.Table`` (through the Arrow C stream interface: the
        numeric columns are the Rust Arrow buffers, not copies)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(_Stream(self._native.table_stream(columns))).read_all()

    def __arrow_c_stream__(self, requested_schema=None):
        return self._native.table_stream(None)

    def to_polars(self, columns: Optional[List[str]] = None):
        """The data table as a ``polars.DataFrame``."""
        import polars as pl

        return pl.from_arrow(self.table(columns))

    def query(self, sql: str):
        """Runs ``SELECT ... FROM samples ...``; returns a ``pyarrow.Table``."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(_Stream(self._native.query_stream(sql))).read_all()

    def where(self, predicate: str) -> IndexSet:
        """The rows a predicate (``label < 5 AND image.width >= 224``) or ``SELECT`` matches."""
        return self._native.select(predicate)

    # Named splits, stored in the file.
    def splits(self) -> Dict[str, IndexSet]:
        return self._native.splits()

    def split(self, name: str) -> IndexSet:
        return self._native.split(name)

    def save_splits(self, **sets: IndexSet) -> None:
        """``ds.save_splits(train=a, val=b)``: adds or replaces them in one crash-safe update."""
        self._native.save_splits(dict(sets))

    def remove_splits(self, *names: str) -> None:
        self._native.remove_splits(list(names))


def open(path, custom: Optional[Dict[str, tuple]] = None) -> Dataset:  # noqa: A001 (mirrors io.open)
    """Opens and validates a ``.beton`` file."""
    return Dataset(path, custom)
