"""Values between Python and a dataset: a stored value as Python reads it, Python values as an
edit stores them (SQL literals, one-column Arrow tables, encoded payloads that must fit their
field as they are), row ids, and a field's type carried in Arrow metadata."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use (beton/_numpy.py)
    from beton._numpy import np

from beton._native import IndexSet


class _Stream:
    """An object exposing the Arrow C stream interface over one capsule."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self._capsule


_KINDS = None


def _kinds():
    """The field kinds' registry, ``beton.fields``'s: imported on first use (it imports numpy and
    FFCV's field classes, which opening and querying a dataset do not need)."""
    global _KINDS
    if _KINDS is None:
        from beton.fields.registry import KINDS

        _KINDS = KINDS
    return _KINDS


def _value(kind: str, raw: Any) -> Any:
    """A stored value as ``ds[i]`` gives it: as the kind's registry entry reads it (a custom
    field's as it is); None for NULL (the row has no value for the field)."""
    registered = _kinds().get(kind)
    return raw if raw is None or registered is None else registered.value(raw)


def _sql_literal(value) -> str:
    """A Python value as a SQL literal (strings are SQL expressions, as in Lance's ``update``)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    raise TypeError(f"update: {value!r} is not a number, a bool or a SQL expression (str)")


def _one_column(name: str, values, what: str = "values"):
    """``values`` (numpy, pyarrow, polars, a list, or one value for all) as a one-column
    ``pyarrow.Table``; values Arrow cannot hold (an int past 64 bits) raise naming ``name``."""
    import pyarrow as pa

    if hasattr(values, "to_arrow") and not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_arrow()  # polars Series
    if isinstance(values, (bool, int, float, str, bytes, np.generic)):
        values = [values]
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        try:
            values = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
            for k, v in enumerate(values if isinstance(values, (list, tuple)) else []):
                if isinstance(v, int) and not -(2**63) <= v < 2**63:
                    raise ValueError(f"{what} for {name!r}: value {k} ({v}) is past int64, the widest int "
                                     f"a field holds") from None
            raise ValueError(f"{what} for {name!r}: {e}") from None
    return pa.table({name: values})


def _row_ids(ids, what: str, n: int) -> np.ndarray:
    """``ids`` (an IndexSet, numpy array or sequence of ints) as an int64 array, in the order
    given; an id that is not an int, negative or not below ``n`` raises naming ``what`` and the
    id (instead of numpy's or Arrow's conversion errors)."""
    if isinstance(ids, IndexSet):
        arr = np.asarray(ids)
    else:
        items = ids if isinstance(ids, np.ndarray) else list(ids.tolist() if hasattr(ids, "tolist") else ids)
        arr = np.asarray(items).reshape(-1) if len(items) else np.zeros(0, np.int64)
        if arr.dtype.kind not in "iu":
            for v in arr.tolist():
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TypeError(f"{what}: {v!r} is not a row number (an int)")
    if len(arr):
        low, high = arr < 0, arr >= n
        if low.any():
            raise IndexError(f"{what}: row {arr[low.argmax()]} is negative (rows count from 0)")
        if high.any():
            raise IndexError(f"{what}: row {arr[high.argmax()]} is out of range for a dataset of {n} rows")
    return arr.astype(np.int64)


def _arrow_kind(kind: Optional[str]) -> bool:
    """Whether an edit sets values of fields of ``kind`` from an Arrow column (numbers, bools,
    text), not encoded by the field's class (``Kind.arrow``)."""
    registered = _kinds().get(kind or "")
    return registered is not None and registered.arrow


def _field_of(kind: str, details):
    """The beton Field class instance that encodes values of a stored field's kind (its
    registry entry's ``field_of``); a TypeError for a custom field's."""
    kinds = _kinds()
    if kind not in kinds:
        raise TypeError(f"a {kind} field's values cannot be set from Python")
    return kinds[kind].field_of(details)


def _field_metadata(kind: str, details) -> Dict[bytes, bytes]:
    """The Arrow field metadata ``take`` gives a column of a field of ``kind``."""
    return {b"beton.kind": kind.encode(), b"beton.details": json.dumps(details).encode()}


def _field_of_arrow(field) -> Optional[Any]:
    """The beton Field a ``pyarrow.Field`` from ``take`` was read from (its metadata), or None."""
    meta = field.metadata or {}
    if b"beton.kind" not in meta:
        return None
    return _field_of(meta[b"beton.kind"].decode(), json.loads(meta.get(b"beton.details", b"null")))


def _fits_dtype(value, dtype) -> None:
    """Raises ValueError unless array ``value`` goes into elements of ``dtype`` as it is: ints
    within the dtype's range (no float, no bool), floats from numbers (finite ones staying
    finite), bools from bools; what an edit must not do is numpy's silent casts (300 into int8
    is 44, 2.9 is 2)."""
    a = np.asarray(value)
    if a.size == 0 or a.dtype == dtype:
        return
    src, dst = a.dtype.kind, dtype.kind
    if dst in "iu":
        if src not in "iu":
            raise ValueError(f"{a.dtype} values do not fit {dtype} elements (convert explicitly, e.g. "
                             f"np.round(x).astype(np.{dtype.name}))")
        info = np.iinfo(dtype)
        low, high = int(a.min()), int(a.max())
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise ValueError(f"{bad} is past {dtype}'s range ({info.min} to {info.max})")
    elif dst == "f":
        if src not in "iuf":
            raise ValueError(f"{a.dtype} values do not fit {dtype} elements")
        with np.errstate(over="ignore"):
            cast = a.astype(dtype)
        if src == "f" and (np.isinf(cast) & np.isfinite(a)).any():
            raise ValueError(f"a value is past {dtype}'s range")
    elif dst == "b" and src != "b":
        raise ValueError(f"{a.dtype} values do not fit bool elements")


def _encode_all(field, name: str, values) -> list:
    """``values`` as ``field`` encodes them for the writer; a bad one is named by position.
    Array fields take only values their dtype holds as they are (``_fits_dtype``)."""
    dtype = getattr(field, "dtype", None)
    from beton.fields.base import value_encoder

    encode = value_encoder(name, field)
    out = []
    for i, v in enumerate(values):
        try:
            if isinstance(dtype, np.dtype):
                _fits_dtype(v, dtype)
            out.append(encode(v))
        except (TypeError, ValueError) as e:
            raise ValueError(f"value {i} for '{name}': {e}") from None
    return out


def _custom_struct(column, dtype: np.dtype):
    """A custom field's data-table column (its row slots' bytes) as a struct of its
    ``metadata_type``'s fields, when each is a plain number; else the column as it is."""
    import pyarrow as pa

    if dtype.names is None or any(dtype[n].shape or dtype[n].kind not in "biuf" for n in dtype.names):
        return column
    array = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if array.null_count or len(array) == 0:
        return column
    size = dtype.itemsize
    data = np.frombuffer(array.buffers()[1], dtype=np.uint8)[array.offset * size:(array.offset + len(array)) * size]
    records = data.view(dtype)  # the fixed-size binary column's buffer, viewed
    return pa.StructArray.from_arrays([pa.array(records[n]) for n in dtype.names], names=list(dtype.names))
