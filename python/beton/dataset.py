"""``beton.open(path)``: a ``.beton`` file or a dataset directory as a database (values, Arrow
table, SQL, query plans, splits, class names); a dataset directory is versioned and editable
(docs/FORMAT.md §13)."""

from __future__ import annotations

import functools
import html
import json
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, TypeVar, cast

import numpy as np

from beton import _doc, _native
from beton._native import IndexSet

# The docstring sections every edit of a dataset directory shares, filled in by ``_edit``.
_EDIT_DOC = {
    "{message}": "message : str, optional\n    The version's message.",
    "{returns}": "Returns\n-------\nDataset\n    This object, showing the new version.",
    "{read_only}": "TypeError\n    For a ``.beton`` file.",
}


_Method = TypeVar("_Method", bound=Callable[..., Any])

# beton's field types that FFCV 1.0.2 has no class for (it reads them only through a stub).
_NOT_FFCV = ("text", "bool", "array", "grey_image")


from beton._warnings import FFCVCompatibilityWarning, NullsFilledWarning  # noqa: E402 (re-exported)
from beton._writing import _progress, _progress_bar, _rgb, _warn_filled  # noqa: E402


def _edit(method: _Method) -> _Method:
    """Marks ``method`` as an edit of a dataset directory: what it commits is a new version,
    which the Dataset shows once the edit returns. Its docstring's ``{message}``, ``{returns}``
    and ``{read_only}`` lines get the sections every edit shares, indented as the line is."""

    @functools.wraps(method)
    def edit(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        self._refresh()
        return out

    return cast(_Method, _doc.fill(_EDIT_DOC)(edit))


class _Stream:
    """An object exposing the Arrow C stream interface over one capsule."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self._capsule


def _value(kind: str, raw: Any) -> Any:
    if raw is None:  # NULL: the row has no value for the field
        return None
    if kind in ("ndarray", "torch_tensor", "array"):
        data, typestr, shape = raw
        return np.frombuffer(data, dtype=np.dtype(typestr)).reshape(shape)
    if kind in ("rgb_image", "grey_image"):
        data, height, width, channels = raw
        return np.frombuffer(data, dtype=np.uint8).reshape(height, width, channels)
    if kind == "json":
        return json.loads(raw)
    return raw


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


_PLAIN_KINDS = ("int", "float", "bool", "text")


def _field_of(kind: str, details):
    """The beton Field class instance that encodes values of a stored field's kind."""
    from beton import fields as F

    if kind in ("ndarray", "torch_tensor"):
        typestr, shape = details
        return F.NDArrayField(np.dtype(typestr), tuple(shape))
    if kind == "array":
        return F.ArrayField(np.dtype(details[0]))
    classes = {"bytes": F.BytesField, "json": F.JSONField, "rgb_image": F.RGBImageField,
               "grey_image": F.GreyImageField}
    if kind not in classes:
        raise TypeError(f"a {kind} field's values cannot be set from Python")
    return classes[kind]()


def _is_dataset_url(path) -> bool:
    """A URL that may be a dataset directory: not one ending in ``.beton`` (a file; asking the
    store for its ``_versions/`` would cost every open a listing)."""
    text = str(path)
    return "://" in text and not text.rstrip("/").endswith(".beton")


def _field_metadata(kind: str, details) -> Dict[bytes, bytes]:
    """The Arrow field metadata ``take`` gives a column of a field of ``kind``."""
    return {b"beton.kind": kind.encode(), b"beton.details": json.dumps(details).encode()}


def _field_of_arrow(field) -> Optional[Any]:
    """The beton Field a ``pyarrow.Field`` from ``take`` was read from (its metadata), or None."""
    from beton import fields as F

    meta = field.metadata or {}
    if b"beton.kind" not in meta:
        return None
    kind = meta[b"beton.kind"].decode()
    plain = {"int": F.IntField, "float": F.FloatField, "bool": F.BoolField, "text": F.TextField}
    if kind in plain:
        return plain[kind]()
    return _field_of(kind, json.loads(meta.get(b"beton.details", b"null")))


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
    from beton.fields.base import value_encoder

    dtype = getattr(field, "dtype", None)
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


def _short(value, width: int = 24) -> str:
    """One table cell: a value's repr, cut to ``width`` characters."""
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 3] + "..."


def _preview(table, rows: int = 5) -> str:
    """The first ``rows`` rows of a ``pyarrow.Table`` as aligned text (never the whole table)."""
    names = table.column_names
    if not names:
        return ""
    head = table.slice(0, rows).to_pylist()
    cells = [names] + [[_short(r[n]) for n in names] for r in head]
    widths = [max(len(row[c]) for row in cells) for c in range(len(names))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if table.num_rows > rows:
        more = table.num_rows - rows
        lines.append(f"... {more:,} more row{'' if more == 1 else 's'}")
    return "\n".join(lines)


class QueryResult:
    """The answer of ``Dataset.query``: a ``pyarrow.Table`` with a short, readable repr.

    Every ``pyarrow.Table`` attribute is available on it (``column``, ``num_rows``,
    ``to_pydict``, ``to_pandas``, ...); ``.table`` is the table itself, and it exposes the Arrow
    C stream interface (``pyarrow.table(r)``, ``polars.from_arrow(r.table)``).

    Parameters
    ----------
    table : pyarrow.Table
        The rows.
    sql : str
        The query that gave them.

    Examples
    --------
    >>> r = ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label")  # doctest: +SKIP
    >>> r  # doctest: +SKIP
    QueryResult: 6 rows x 2 columns (label: int64, n: int64)
    label  n
    0      21
    ...
    >>> r.column("n").to_pylist()  # doctest: +SKIP
    """

    def __init__(self, table, sql: str, source=None):
        self.table = table
        self.sql = sql
        self._source = source

    def __getattr__(self, name):
        if name in ("table", "_source"):  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.table, name)

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, key):
        return self.table[key]

    def __eq__(self, other) -> bool:
        return self.table == (other.table if isinstance(other, QueryResult) else other)

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)

    def to_polars(self):
        """The rows as a ``polars.DataFrame``.

        Returns
        -------
        polars.DataFrame

        Examples
        --------
        >>> ds.query("SELECT label FROM samples").to_polars()  # doctest: +SKIP
        """
        import polars as pl

        return pl.from_arrow(self.table)

    def _repr_html_(self) -> str:
        """A notebook's view: the first rows as a table, and thumbnails of the first rows when
        the result has an ``index`` column."""
        source = self.__dict__.get("_source")
        if source is None:
            return f"<pre>{html.escape(repr(self))}</pre>"
        return source.result_html(self.table)

    def __repr__(self) -> str:
        t = self.table
        schema = ", ".join(f"{f.name}: {f.type}" for f in t.schema)
        head = f"QueryResult: {t.num_rows:,} rows x {t.num_columns} columns ({schema})"
        preview = _preview(t)
        return head + ("\n" + preview if preview else "")

    __str__ = __repr__


class Explain:
    """What a query touches and what a loader of its rows would read (``beton explain``).

    ``str(e)`` (and ``print(e)``) is the CLI's text; the fields are there to inspect.

    Attributes
    ----------
    sql : str
        The query explained.
    path : str
        The ``.beton`` file or dataset directory.
    version : int
        The version explained (1 for a ``.beton`` file).
    columns : list of str
        The data table's columns the query names.
    heap_columns : list of str
        Of those, the ones whose values are read from payload pages (text, for example).
    scan : dict
        The data-table bytes reading those columns reads: ``columnar`` (bytes of the columnar
        copy, for the columns in ``columnar_columns``) and ``row_major`` (whole data tables
        gathered from, where there is no copy); heap bytes of text are not counted.
    rows_matched, num_rows : int
        Rows the query matches, and rows of the dataset.
    page_size : int
        Bytes per page.
    matched, total : dict
        ``{"allocations", "pages", "bytes"}`` a loader of the matched rows reads, and of every
        row.
    data_files : list of dict
        Per data file of a version (``id``, ``data_file``, ``rows_matched``, ``matched``,
        ``total``); empty for a ``.beton`` file.
    ids : IndexSet
        The matched rows.
    remote : dict or None
        For a file on object storage: ``{"requests", "bytes"}`` fetched so far by this handle,
        and ``{"requests_needed", "bytes_needed"}`` that reading the matched rows' payloads
        would fetch now (blocks already in the local cache cost none); ``None`` for a local
        file.

    Examples
    --------
    >>> e = beton.open("photos.beton").explain("label < 3")  # doctest: +SKIP
    >>> print(e)  # doctest: +SKIP
    file:          photos.beton
    columns:       label
    heap columns:  none
    rows matched:  77 of 155 (49.7%)
    ...
    >>> e.matched["pages"], e.total["pages"]  # doctest: +SKIP
    (1, 1)
    """

    def __init__(self, plan: Dict[str, Any]):
        self._text = plan["text"]
        self.sql: str = plan["sql"]
        self.path = str(plan["path"])
        self.version: int = plan["version"]
        self.columns: List[str] = plan["columns"]
        self.heap_columns: List[str] = plan["heap_columns"]
        self.scan: Dict[str, Any] = plan["scan"]
        self.rows_matched: int = plan["rows_matched"]
        self.num_rows: int = plan["num_rows"]
        self.page_size: int = plan["page_size"]
        self.matched: Dict[str, int] = plan["matched"]
        self.total: Dict[str, int] = plan["total"]
        self.data_files: List[Dict[str, Any]] = plan["data_files"]
        self.ids: IndexSet = plan["ids"]
        self.remote: Optional[Dict[str, int]] = plan.get("remote")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Explain({self.sql!r})\n{self._text.rstrip()}"


class Dataset:
    """An open, validated ``.beton`` file, or one version of a dataset directory.

    Made by ``beton.open``. Reads (``ds[i]``, ``table``, ``query``, ``where``, ``explain``,
    splits, ``classes``) work on both; a directory's edits (``update``, ``delete``,
    ``add_column``, ``append``, ...) each commit a new version atomically, which the object then
    shows. Older versions stay readable (``beton.open(dir, version=n)``) until ``cleanup``.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.beton`` file or a dataset directory.
    custom : dict, optional
        ``{field: (size, align)}``: the row layout of a foreign custom (type 255) field.
    version : int or str, optional
        A directory's version number or tag (default: the latest). A ``.beton`` file has
        version 1 only.

    Raises
    ------
    OSError
        For a path that cannot be read; for a URL, ``MissingFileError`` (404),
        ``AccessDeniedError`` (401/403, no credentials; never retried) or ``BetonIOError``
        naming it and what failed (a dataset directory's listing, a ``HEAD``): a store that never
        answered fails in ``BETON_REMOTE_OPEN_RETRY_SECONDS`` (default 5 s; docs/REMOTE.md).
    beton.CorruptFileError
        For a file whose bytes break the format (the message names the offset).
    ValueError
        For a version a ``.beton`` file does not have.

    Examples
    --------
    >>> import beton
    >>> ds = beton.open("photos.beton")  # doctest: +SKIP
    >>> ds  # doctest: +SKIP
    Dataset('photos.beton': 155 rows, version 1)
      fields: image rgb_image, label int, path text
      splits: train (124 rows), val (31 rows)
      classes (6): bird, cat, ...
    >>> ds[0]["label"], len(ds.where("label < 3"))  # doctest: +SKIP
    (0, 77)
    """

    def __init__(self, path, custom: Optional[Dict[str, Any]] = None, version=None):
        import os

        where = os.fspath(path)
        if os.path.isdir(where) or (_is_dataset_url(where) and _native.Version.is_dataset_dir(where)):
            if custom:
                raise NotImplementedError(f"{path} is a dataset directory: custom (FFCV type-255) field layouts "
                                          "apply to a .beton file only")
            self._native = _native.Version(str(path), version)
        else:
            if version not in (None, 1):
                raise ValueError(f"{path} is a .beton file: it has version 1 only")
            from beton.reader import custom_layouts

            layouts, self._custom_dtypes = custom_layouts(path, custom)
            self._native = _native.Dataset(str(path), layouts or None)  # type: ignore[assignment]
        self._refresh()

    def _refresh(self):
        self._kinds = {name: kind for name, kind, _ in self._native.fields()}

    @classmethod
    def _of(cls, native) -> "Dataset":
        ds = cls.__new__(cls)
        ds._native = native
        ds._refresh()
        return ds

    def __len__(self) -> int:
        return len(self._native)

    def _facts(self) -> List[tuple]:
        """``(name, value)`` lines of the repr: rows and version, fields, splits, classes."""
        kind = "dataset directory" if isinstance(self._native, _native.Version) else ".beton file"
        facts = [("rows", f"{len(self):,} ({kind}, version {self.version})")]
        fields = [f"{name} {kind if details is None else f'{kind}[{details[0]}, {tuple(details[1])}]'}"
                  for name, kind, details in self._native.fields()]
        facts.append(("fields", ", ".join(fields) if fields else "none"))
        try:
            splits = self._native.splits()
            facts.append(("splits", ", ".join(f"{n} ({len(s):,} rows)" for n, s in splits.items())
                          if splits else "none"))
        except (ValueError, OSError) as e:  # a damaged split region must not break repr
            facts.append(("splits", f"unreadable ({e})"))
        try:
            classes = self.classes
        except (ValueError, OSError):
            classes = None
        if classes is not None:
            shown = ", ".join(classes[:10]) + (", ..." if len(classes) > 10 else "")
            facts.append((f"classes ({len(classes)})", shown))
        return facts

    def __repr__(self) -> str:
        kind = "dataset directory" if isinstance(self._native, _native.Version) else ".beton file"
        lines = [f"Dataset('{self.path}': {len(self):,} rows, version {self.version}, {kind})"]
        lines += [f"  {name}: {value}" for name, value in self._facts()[1:]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: path, rows, version, fields, splits, classes and a strip of
        thumbnails (8, spread over the rows)."""
        return self._native.card_html([("path", str(self.path))] + self._facts(), 8)

    def gallery(self, where=None, by: Optional[str] = None, n: int = 8, columns: Optional[List[str]] = None,
                size: int = 128, image: Optional[str] = None, summaries: bool = True, max_groups: int = 50,
                title: Optional[str] = None, progress: bool = False):
        """Thumbnails of the rows ``where`` selects, grouped by a column, with per-column
        summaries: shown in a notebook, saved as a page or a contact sheet (``.save``).

        Large selections are never drawn whole: each group shows ``n`` rows spread over it (the
        first ``n`` of an ordered ``SELECT``), at most ``max_groups`` groups are drawn, and the
        summaries are computed on columns, so a million rows take well under a second.

        Parameters
        ----------
        where : str, IndexSet, QueryResult or list of int, optional
            The rows: a predicate (``"label = 3"``), ``"SELECT index, ... FROM samples ORDER BY
            ... LIMIT k"`` (its order; its columns become captions), an ``IndexSet``, a query's
            result with an ``index`` column, or row numbers in order. Default: every row.
        by : str, optional
            Group by this column (``"label"``, ``"image.width"``, ...).
        n : int, default 8
            Rows shown per group.
        columns : list of str, optional
            Caption columns (default: the query's columns, or up to three number/text fields).
        size : int, default 128
            Longest side of a thumbnail, in pixels.
        image : str, optional
            The image field shown (default: the first).
        summaries : bool, default True
            Summarise every column over the selection (counts, histograms, image sizes).
        max_groups : int, default 50
            Most groups drawn (the others are counted).
        title : str, optional
            The page's title (default: the file's name).
        progress : bool, default False
            Show a tqdm bar of the thumbnails made (when tqdm is installed).

        Returns
        -------
        beton.gallery.Gallery

        Raises
        ------
        beton.QueryError
            For bad SQL (with its position).
        beton.NotFoundError
            For a column the table does not have (listing those it has).
        beton.InvalidArgumentError
            For an image field that is not one, ``n`` or ``size`` 0, a row past the end.

        Examples
        --------
        >>> ds = beton.open("photos.beton")  # doctest: +SKIP
        >>> ds.gallery("label IN (1, 3)", by="label", n=4)  # doctest: +SKIP
        >>> ds.gallery("SELECT index, image.width FROM samples ORDER BY image.width LIMIT 8")  # doctest: +SKIP
        >>> ds.gallery(ds.split("val"), by="label").save("val.html")  # doctest: +SKIP
        """
        from beton.gallery import Gallery

        if isinstance(where, QueryResult):
            where = where.table
        bars: list = []  # made on the first call, when the number of thumbnails is known

        def report(done, total):
            if not bars:
                bars.append(_progress_bar(total, True, unit="thumbnails"))
            if bars[0] is not None:
                bars[0].update(done - bars[0].n)

        try:
            options = {"by": by, "n": n, "columns": columns, "size": size, "image": image, "summaries": summaries,
                       "max_groups": max_groups, "title": title}
            native = self._native.gallery(where, options, report if progress else None)
        finally:
            if bars and bars[0] is not None:
                bars[0].close()
        return Gallery(native)

    @property
    def path(self):
        """The ``.beton`` file or dataset directory.

        Returns
        -------
        pathlib.Path or str

        Examples
        --------
        >>> beton.open("photos.beton").path  # doctest: +SKIP
        PosixPath('photos.beton')
        """
        return self._native.path

    @property
    def schema(self) -> Dict[str, Any]:
        """The fields and their types: ``{field: type}``; arrays as ``(type, dtype, shape)``.

        Returns
        -------
        dict

        Examples
        --------
        >>> beton.open("photos.beton").schema  # doctest: +SKIP
        {'image': 'rgb_image', 'label': 'int', 'path': 'text'}
        """
        return {
            name: (kind if details is None else (kind, details[0], tuple(details[1])))
            for name, kind, details in self._native.fields()
        }

    @property
    def classes(self) -> Optional[List[str]]:
        """The class names stored with the data (an ImageFolder's folders): label ``k`` is
        ``classes[k]``.

        Written by ``DatasetWriter.from_imagefolder`` and ``beton write-imagefolder`` into the
        file's split region (FFCV never reads it, docs/FORMAT.md §12). A dataset directory keeps
        them in each version's manifest: appending an ImageFolder adds its new classes at the
        end, ``set_classes`` and ``rename_class`` edit them, every other edit keeps them, an
        older version keeps its own, and ``export`` writes them into the file.

        Returns
        -------
        list of str or None
            None when the data has none (FFCV's files, files not written from an ImageFolder).

        Raises
        ------
        beton.CorruptFileError
            For a stored entry that is not a list of names.

        Examples
        --------
        >>> ds = beton.open("photos.beton")  # doctest: +SKIP
        >>> ds.classes[ds[0]["label"]]  # doctest: +SKIP
        'bird'
        """
        return self._native.classes

    def __getitem__(self, index: int) -> Dict[str, Any]:
        """Sample ``index`` as a dict of its fields' values.

        Parameters
        ----------
        index : int
            A row (negative counts from the end).

        Returns
        -------
        dict
            ints, floats, bools, bytes, str, parsed JSON, numpy arrays; images decoded as HWC
            uint8 arrays.

        Raises
        ------
        IndexError
            For a row past the end.

        Examples
        --------
        >>> sample = beton.open("photos.beton")[0]  # doctest: +SKIP
        >>> sample["image"].shape, sample["label"]  # doctest: +SKIP
        ((95, 96, 3), 0)
        """
        raw = self._native.get(index)
        out = {name: _value(self._kinds[name], v) for name, v in raw.items()}
        for name, dtype in getattr(self, "_custom_dtypes", {}).items():
            if out.get(name) is not None:  # a custom field read with its Field: its metadata record
                out[name] = np.frombuffer(out[name], dtype=dtype)[0]
        return out

    def columns(self) -> List[str]:
        """The data table's column names.

        Returns
        -------
        list of str
            ``index`` (and ``row_id`` for a version), then each field's columns
            (``image.width``, ``label``, ...).

        Examples
        --------
        >>> beton.open("photos.beton").columns()  # doctest: +SKIP
        ['index', 'image.mode', 'image.width', 'image.height', 'label', 'path']
        """
        return self._native.column_names()

    def table(self, columns: Optional[List[str]] = None):
        """The data table as a ``pyarrow.Table``.

        Through the Arrow C stream interface: the numeric columns are the Rust Arrow buffers,
        not copies.

        Parameters
        ----------
        columns : list of str, optional
            The columns to read (default: all).

        Returns
        -------
        pyarrow.Table

        Raises
        ------
        KeyError
            For a column the table does not have (the message lists those it has).

        Examples
        --------
        >>> beton.open("photos.beton").table(["label"]).num_rows  # doctest: +SKIP
        155
        """
        import pyarrow as pa

        table = pa.RecordBatchReader.from_stream(_Stream(self._native.table_stream(columns))).read_all()
        for name, dtype in getattr(self, "_custom_dtypes", {}).items():
            if name in table.column_names:
                k = table.column_names.index(name)
                table = table.set_column(k, name, _custom_struct(table.column(k), dtype))
        return table

    def take(self, indices, columns: Optional[List[str]] = None):
        """The field values of some rows as a ``pyarrow.Table``, in the order given.

        Unlike ``table()`` (the data table: sizes, labels, ...), this reads the payloads:
        bytes, text, JSON, arrays as their bytes, and images as structs ``{mode, width, height,
        data}`` holding the stored bytes (JPEG as written, or raw pixels), never decoded.
        ``DatasetWriter.from_arrow`` takes such a table back byte for byte. A remote dataset
        fetches the rows' payloads in one batch of range requests.

        Parameters
        ----------
        indices : sequence of int, numpy array or IndexSet
            Rows (0 to ``len(ds) - 1``; repeats allowed).
        columns : list of str, optional
            Fields to read (default: all, in schema order).

        Returns
        -------
        pyarrow.Table
            One column per field, named after it.

        Raises
        ------
        IndexError
            For a negative row or one past the end (naming it).
        TypeError
            For an index that is not an int (``1.5``, ``True``).
        KeyError
            For a field the dataset does not have.

        Examples
        --------
        >>> t = beton.open("photos.beton").take([0, 5], ["image", "label"])  # doctest: +SKIP
        >>> t.column("image")[0]["data"].as_py()[:2]  # doctest: +SKIP
        b'\\xff\\xd8'
        """
        import pyarrow as pa

        rows = _row_ids(indices, "take: indices", len(self)).tolist()
        if columns is not None:
            known = list(self._kinds)
            missing = [c for c in columns if c not in self._kinds]
            if missing:
                raise KeyError(f"take: no field {missing[0]!r}; the fields are {known}")
        table = pa.RecordBatchReader.from_stream(_Stream(self._native.take_stream(rows, columns))).read_all()
        # Each column says its field type, so that a writer (DatasetWriter.from_arrow through
        # beton.ray.write_beton) gives it back the same field: JSON and text, or an ndarray's
        # shape, are not told apart by Arrow types alone.
        kinds = {name: (kind, details) for name, kind, details in self._native.fields()}
        schema = pa.schema([f.with_metadata(_field_metadata(*kinds[f.name])) for f in table.schema])
        if not len(schema):  # no columns, still a row per index (what Ray's count() reads)
            return pa.table({"_": pa.nulls(len(rows))}).select([])
        return pa.Table.from_arrays(table.columns, schema=schema)

    def __arrow_c_stream__(self, requested_schema=None):
        return self._native.table_stream(None)

    def to_polars(self, columns: Optional[List[str]] = None):
        """The data table as a ``polars.DataFrame``.

        Parameters
        ----------
        columns : list of str, optional
            The columns to read (default: all).

        Returns
        -------
        polars.DataFrame

        Examples
        --------
        >>> beton.open("photos.beton").to_polars(["label"]).height  # doctest: +SKIP
        155
        """
        import polars as pl

        return pl.from_arrow(self.table(columns))

    def query(self, sql: str) -> QueryResult:
        """Runs ``SELECT ... FROM samples ...`` on the data table.

        Parameters
        ----------
        sql : str
            A ``SELECT`` over ``samples`` (columns as in ``columns()``).

        Returns
        -------
        QueryResult
            A ``pyarrow.Table`` (``.table``; its attributes are the result's) with a short repr.

        Raises
        ------
        ValueError
            For SQL that does not parse, names a column the table does not have, or that beton
            does not support (the message gives the line and column).

        Examples
        --------
        >>> ds = beton.open("photos.beton")  # doctest: +SKIP
        >>> ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label")  # doctest: +SKIP
        QueryResult: 6 rows x 2 columns (label: int64, n: int64)
        label  n
        0      21
        ...
        """
        import pyarrow as pa

        table = pa.RecordBatchReader.from_stream(_Stream(self._native.query_stream(sql))).read_all()
        return QueryResult(table, sql, self._native)

    def where(self, predicate: str) -> IndexSet:
        """The rows a predicate or ``SELECT`` matches.

        Parameters
        ----------
        predicate : str
            ``label < 5 AND image.width >= 224``, ``in_split('val')``, or a ``SELECT``.

        Returns
        -------
        IndexSet
            The matching rows (indices), to train on (``Loader(..., indices=...)``).

        Raises
        ------
        ValueError
            For bad SQL or an unknown column (with its line and column).

        Examples
        --------
        >>> beton.open("photos.beton").where("label < 3")  # doctest: +SKIP
        IndexSet(77 ids: [0, 1, 2, 3, 4, 5, ...], fingerprint 0x...)
        """
        return self._native.select(predicate)

    def explain(self, sql: str) -> Explain:
        """What a query touches and what a loader of its rows would read (``beton explain``).

        Parameters
        ----------
        sql : str
            A bare predicate or a ``SELECT``.

        Returns
        -------
        Explain
            ``print(e)`` shows the CLI's text; ``e.columns``, ``e.heap_columns``,
            ``e.rows_matched``, ``e.matched``, ``e.total``, ``e.data_files`` and ``e.ids`` to
            inspect.

        Raises
        ------
        ValueError
            For bad SQL or an unknown column (with its line and column).

        Examples
        --------
        >>> e = beton.open("photos.beton").explain("label < 3")  # doctest: +SKIP
        >>> e.rows_matched, e.matched["pages"], e.total["pages"]  # doctest: +SKIP
        (77, 1, 1)
        """
        return Explain(self._native.explain(sql))

    # Named splits, stored in the file.
    def splits(self) -> Dict[str, IndexSet]:
        """The named splits, by name.

        Returns
        -------
        dict of str to IndexSet

        Raises
        ------
        beton.CorruptFileError
            When both copies of the stored splits are damaged.

        Examples
        --------
        >>> beton.open("photos.beton").splits()  # doctest: +SKIP
        {'train': IndexSet(124 ids: ...), 'val': IndexSet(31 ids: ...)}
        """
        return self._native.splits()

    def split(self, name: str) -> IndexSet:
        """Named split ``name``.

        Parameters
        ----------
        name : str

        Returns
        -------
        IndexSet

        Raises
        ------
        KeyError
            For a split the data does not have (the message lists those it has).

        Examples
        --------
        >>> val = beton.open("photos.beton").split("val")  # doctest: +SKIP
        """
        return self._native.split(name)

    def save_splits(self, **sets: IndexSet) -> None:
        """Adds or replaces named splits, all in one crash-safe update.

        In a ``.beton`` file they go into its split region (FFCV still loads it); in a dataset
        directory, into a new version.

        Parameters
        ----------
        **sets : IndexSet
            ``name=set``; names are 1 to 64 ASCII letters, digits or ``_ - . : =`` (not starting
            with ``:``, reserved for beton's entries).

        Raises
        ------
        ValueError
            For a bad name, rows past the end, or splits that do not fit the file's room.

        Examples
        --------
        >>> ds = beton.open("photos.beton")  # doctest: +SKIP
        >>> train, val = IndexSet.all(len(ds)).split([0.8, 0.2])  # doctest: +SKIP
        >>> ds.save_splits(train=train, val=val)  # doctest: +SKIP
        """
        self._native.save_splits(dict(sets))

    def remove_splits(self, *names: str) -> None:
        """Removes named splits, in one crash-safe update.

        Parameters
        ----------
        *names : str

        Raises
        ------
        KeyError
            For a split that does not exist (nothing is removed then).

        Examples
        --------
        >>> beton.open("photos.beton").remove_splits("val")  # doctest: +SKIP
        """
        self._native.remove_splits(list(names))

    # Versions and edits (dataset directories).
    def _editable(self, what: str):
        if not isinstance(self._native, _native.Version):
            raise TypeError(f"{what}: {self.path} is a .beton file, which is read-only; make a dataset "
                            f"directory with beton.import_file(DIR, {str(self.path)!r})")
        return self._native

    @property
    def version(self) -> int:
        """This version's number (1 for a ``.beton`` file).

        Returns
        -------
        int

        Examples
        --------
        >>> beton.open("ds", version=2).version  # doctest: +SKIP
        2
        """
        return getattr(self._native, "version", 1)

    def versions(self) -> List[Dict[str, Any]]:
        """Every version's log entry, oldest first (``beton log``).

        Returns
        -------
        list of dict
            ``version``, ``parent``, ``timestamp_ms``, ``operation``, ``details``,
            ``message``, ``num_rows``, ``data_files``, ``deleted_rows``; a ``.beton`` file has
            one entry.

        Examples
        --------
        >>> [v["operation"] for v in beton.open("ds").versions()]  # doctest: +SKIP
        ['import', 'delete', 'update']
        """
        if not isinstance(self._native, _native.Version):
            return [{"version": 1, "parent": None, "operation": "file", "num_rows": len(self)}]
        return self._native.versions()

    def tags(self) -> Dict[str, int]:
        """The tags of a dataset directory: ``{tag: version}``.

        Returns
        -------
        dict of str to int

        Raises
        ------
        TypeError
            For a ``.beton`` file.

        Examples
        --------
        >>> beton.open("ds").tags()  # doctest: +SKIP
        {'clean': 3}
        """
        return self._editable("tags").tags()

    def tag(self, name: str) -> None:
        """Names this version; tagged versions survive ``cleanup``.

        Parameters
        ----------
        name : str

        Raises
        ------
        ValueError
            For a tag that already names a version.
        TypeError
            For a ``.beton`` file.

        Examples
        --------
        >>> ds.tag("clean"); beton.open("ds", version="clean")  # doctest: +SKIP
        """
        self._editable("tag").tag(name)

    def delete_tag(self, name: str) -> int:
        """Deletes a tag, so that ``cleanup`` may remove the version it kept.

        Parameters
        ----------
        name : str

        Returns
        -------
        int
            The version the tag named.

        Raises
        ------
        ValueError
            For a tag that does not exist (the message lists the tags).
        TypeError
            For a ``.beton`` file.

        Examples
        --------
        >>> ds.delete_tag("clean")  # doctest: +SKIP
        3
        """
        return self._editable("delete_tag").delete_tag(name)

    def checkout(self, version) -> "Dataset":
        """Another version of this dataset, read-only history.

        Parameters
        ----------
        version : int or str
            A number or a tag.

        Returns
        -------
        Dataset

        Raises
        ------
        ValueError
            For a version or tag the dataset does not have.

        Examples
        --------
        >>> old = ds.checkout(1)  # doctest: +SKIP
        """
        return Dataset(self._editable("checkout").path, version=version)

    @_edit
    def restore(self, version) -> "Dataset":
        """Makes an older version the latest again, as a new version.

        Parameters
        ----------
        version : int or str
            A number or a tag.

        {returns}

        Raises
        ------
        KeyError
            For an unknown tag.
        {read_only}

        Examples
        --------
        >>> ds.restore(1).version  # doctest: +SKIP
        5
        """
        native = self._editable("restore")
        if not isinstance(version, int):
            tags = native.tags()
            if version not in tags:
                raise KeyError(f"restore: no tag {version!r}; the tags are {sorted(tags)}")
            version = tags[version]
        native.restore(version)
        return self

    @_edit
    def update(self, set: Dict[str, Any], where: Optional[str] = None, message: str = "") -> "Dataset":  # noqa: A002
        """Sets fields on the rows a predicate picks, as a new version.

        Numbers and bools are values, strings SQL expressions (``"'text'"`` for a text value),
        as Lance's update. The new values go to column files; the data files are not rewritten.

        A value or expression must fit the field as it is, or nothing is committed: an int
        field takes integers (not ``1.5``, nor a float expression such as ``"score"``, nor
        ``True``), a float field numbers, a bool field bools (not 0 or 1), a text field strings.
        Convert explicitly in SQL: ``{"label": "CAST(round(score) AS BIGINT)"}`` rounds,
        ``"CAST(score AS BIGINT)"`` truncates toward zero, ``"score > 0.5"`` makes a bool.

        Parameters
        ----------
        set : dict
            ``{field: value or SQL expression}``.
        where : str, optional
            A predicate (default: every row).
        {message}

        {returns}

        Raises
        ------
        TypeError
            For a value that is not a number, a bool or a str; for a ``.beton`` file.
        ValueError
            For bad SQL, or a value or expression whose type does not fit the field (naming
            the field, the type and the first row).

        Examples
        --------
        >>> ds.update({"label": 3, "score": "score * 2"}, where="label = 7")  # doctest: +SKIP
        >>> ds.update({"label": "CAST(round(score * 10) AS BIGINT)"})  # doctest: +SKIP
        """
        pairs = [(k, _sql_literal(v)) for k, v in dict(set).items()]
        self._editable("update").update(pairs, where, message)
        return self

    @_edit
    def update_rows(self, ids, values: Dict[str, Any], message: str = "") -> "Dataset":
        """Sets field values of some rows, as a new version.

        Parameters
        ----------
        ids : IndexSet or sequence of int
            Indices of this version, each at most once; value ``k`` goes to ``ids[k]``.
        values : dict
            ``{field: one value per id, or one for all}``; images, arrays, bytes and JSON as
            ``DatasetWriter`` takes them. Ints, floats, bools and text must fit the field as
            they are, as in ``update`` (``[2.9]`` is refused for an int field, nothing is
            committed), and an array's elements its dtype (not 300 for int8, nor floats for
            ints).
        {message}

        {returns}

        Raises
        ------
        ValueError
            For a value the field cannot take (naming the field, the type and its row), or an
            id given twice.
        IndexError
            For a negative id or one past the end (naming it).
        TypeError
            For an id that is not an int, a field Python cannot set, or a ``.beton`` file.

        Examples
        --------
        >>> ds.update_rows([3, 4], {"label": [1, 2]})  # doctest: +SKIP
        """
        native = self._editable("update_rows")
        positions = _row_ids(ids, "update_rows: ids", len(self))
        # The native call takes ascending rows, value k for the k-th of them.
        order = np.argsort(positions, kind="stable")
        ordered = positions[order]
        repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(repeated):
            raise ValueError(f"update_rows: ids: row {ordered[repeated[0]]} is given twice")
        shuffled = bool(len(order)) and bool((order != np.arange(len(order))).any())
        rows = IndexSet(ordered.tolist())
        details = {name: d for name, _, d in native.fields()}
        cols, objects, fields = {}, {}, {}
        for name, v in values.items():
            kind = self._kinds.get(name)
            if kind is None or kind in _PLAIN_KINDS:
                col = _one_column(name, v, "update_rows: values")
                cols[name] = col.take(order) if shuffled and col.num_rows == len(order) else col
            else:
                # Images, bytes, JSON, arrays: encoded as the field's class encodes them.
                field = _field_of(kind, details[name])
                encoded = _encode_all(field, name, v)
                objects[name] = [encoded[i] for i in order] if shuffled and len(encoded) == len(order) else encoded
                fields[name] = field.native()
        native.update_rows(rows, cols, objects=objects, fields=fields, message=message)
        return self

    @_edit
    def delete(self, where, message: str = "") -> "Dataset":
        """Deletes rows, as a new version (deletion files; data files untouched).

        Parameters
        ----------
        where : str or IndexSet or sequence of int
            A SQL predicate, or the indices to delete.
        {message}

        {returns}

        Raises
        ------
        ValueError
            For bad SQL.
        IndexError
            For a negative index or one past the end (naming it).
        TypeError
            For an index that is not an int; for a ``.beton`` file.

        Examples
        --------
        >>> ds.delete("image.width < 64")  # doctest: +SKIP
        """
        native = self._editable("delete")
        if isinstance(where, str):
            native.delete(sql=where, message=message)
        else:
            rows = _row_ids(where, "delete: where", len(self))
            native.delete(rows=where if isinstance(where, IndexSet) else IndexSet(rows.tolist()), message=message)
        return self

    @_edit
    def add_column(self, name: str, values, message: str = "", field=None) -> "Dataset":
        """Adds a field, as a new version.

        Images are encoded once, into the column file; the data files are never rewritten.

        Parameters
        ----------
        name : str
        values : str or array-like
            A SQL expression over each row (str), or one value per row (numpy, pyarrow,
            polars, a list; int, float, bool or text).
        {message}
        field : beton.fields.Field, optional
            With it (``RGBImageField()``, ``NDArrayField(dtype, shape)``, ``JSONField()``, ...),
            ``values`` are Python values as that field takes them in ``DatasetWriter``, except
            that they must fit as they are: an ``IntField`` takes ints (not ``1.5``), an array
            field's elements its dtype's values (not 300 for int8, nor floats for ints).

        {returns}

        Raises
        ------
        ValueError
            For a field that exists or a name SQL would read as another column (``index``,
            ``row_id``, ``image.width``, any of them in another case), values of the wrong count
            or of a type the field does not take as it is (naming the field and the row).
        {read_only}

        Examples
        --------
        >>> ds.add_column("big", "image.width >= 224")  # doctest: +SKIP
        >>> ds.add_column("score", np.zeros(len(ds)))  # doctest: +SKIP
        """
        native = self._editable("add_column")
        if isinstance(values, str):
            native.add_column(name, sql=values, message=message)
        elif field is not None and field.type_name in _PLAIN_KINDS:
            # As Arrow values of the field's type: they must fit it as they are (not int(1.5)).
            native.add_column(name, values=_one_column(name, values, "add_column: values"), field=field.native(),
                              message=message)
        elif field is not None:
            native.add_column(name, objects=_encode_all(field, name, values), field=field.native(), message=message)
        else:
            native.add_column(name, values=_one_column(name, values), message=message)
        return self

    @_edit
    def drop_column(self, name: str, message: str = "") -> "Dataset":
        """Removes a field from the schema, as a new version.

        Parameters
        ----------
        name : str
        {message}

        {returns}

        Raises
        ------
        ValueError
            For a field the schema does not have.
        {read_only}

        Examples
        --------
        >>> ds.drop_column("score")  # doctest: +SKIP
        """
        self._editable("drop_column").drop_column(name, message)
        return self

    @_edit
    def append(self, source, message: str = "", image_field: str = "image", label_field: str = "label",
               progress: bool = True, path_field: str = "path", alpha_background=None,
               **writer_options) -> "Dataset":
        """Adds rows, as a new version.

        An ImageFolder's labels follow the dataset's class names: each image gets the label
        of its class *by name* (``ds.classes[label]`` is its folder's name), and a class the
        dataset lacks is added at the end of ``classes`` in the same version. When the dataset
        has a text field ``path_field``, each image's path relative to the folder goes into it
        (as ``from_imagefolder(with_path=True)`` writes it). A dataset without class names
        takes the appended data's. A ``.beton`` file whose labels number other class names
        than the dataset's is refused (append its ImageFolder instead).

        Parameters
        ----------
        source : str or os.PathLike
            A ``.beton`` file (hard-linked, never re-encoded), or an ImageFolder directory
            (``ROOT/CLASS/IMAGE``).
        {message}
        image_field, label_field : str, optional
            The fields an ImageFolder's images and labels go into.
        progress : bool, default True
            Show a tqdm progress bar of an ImageFolder's images as they are written, when tqdm
            is installed (``pip install beton[progress]``); a ``.beton`` file is linked at once.
        path_field : str, default 'path'
            The text field an ImageFolder's image paths go into, when the dataset has it.
        alpha_background : tuple of 3 int, optional
            What an ImageFolder's images with transparency are flattened onto, as
            ``DatasetWriter(alpha_background=)``: ``None`` drops alpha as FFCV does (with a
            ``UserWarning`` when an image had transparency), ``(r, g, b)`` composites.
        **writer_options
            ``RGBImageField`` options for an ImageFolder's images (``write_mode``,
            ``max_resolution``, ``jpeg_quality``, ...).

        {returns}

        Raises
        ------
        ValueError
            For a file that lacks a field of the schema or has it with another type, a file
            whose labels name other classes, an image field or label field the schema lacks,
            an image that cannot be read (naming it).
        {read_only}

        Examples
        --------
        >>> ds.append("more.beton")  # doctest: +SKIP
        >>> ds.append("more_photos/", write_mode="jpg")  # doctest: +SKIP
        >>> ds.classes[ds[len(ds) - 1]["label"]]  # doctest: +SKIP
        'dog'
        """
        import os

        native = self._editable("append")
        if os.path.isdir(source):
            from beton.fields import RGBImageField

            image = RGBImageField(**writer_options).native()
            with _progress(None, progress) as report:
                native.append_imagefolder(str(source), image_field, label_field, path_field, image,
                                          message=message, progress=report,
                                          alpha_background=_rgb("alpha_background", alpha_background))
        else:
            native.append_file(str(source), message)
        return self

    @_edit
    def set_classes(self, classes: List[str], message: str = "") -> "Dataset":
        """Sets the class names, as a new version: the current names with names added at the end.

        Labels name classes by position, so a current name cannot be dropped or moved (that
        would make labels name other classes); ``rename_class`` renames one. Older versions
        keep their names. A dataset without class names takes any list of distinct names.

        Parameters
        ----------
        classes : list of str
            Distinct, non-empty names; ``classes[k]`` is the name of label ``k``.
        {message}

        {returns}

        Raises
        ------
        ValueError
            For a list that drops, moves or changes a current name, repeats a name or has an
            empty one (naming it).
        beton.ConflictError
            When another writer changed the class names meanwhile (nothing is committed).
        {read_only}

        Examples
        --------
        >>> ds.set_classes(ds.classes + ["dog"], message="dogs to come")  # doctest: +SKIP
        """
        self._editable("set_classes").set_classes(list(classes), message)
        return self

    @_edit
    def rename_class(self, old: str, new: str, message: str = "") -> "Dataset":
        """Renames a class, as a new version: every label that named ``old`` names ``new``.

        Parameters
        ----------
        old, new : str
        {message}

        {returns}

        Raises
        ------
        ValueError
            For a dataset without class names, an ``old`` it lacks, a ``new`` it has.
        beton.ConflictError
            When another writer changed the class names meanwhile (nothing is committed).
        {read_only}

        Examples
        --------
        >>> ds.rename_class("cow", "cattle")  # doctest: +SKIP
        """
        self._editable("rename_class").rename_class(old, new, message)
        return self

    @_edit
    def compact(self, num_workers: int = 0, message: str = "", progress: bool = True) -> "Dataset":
        """Folds data files, deletions and column files into one new data file, as a new version.

        Payloads are copied byte for byte: the same rows, row ids, splits and classes.

        Parameters
        ----------
        num_workers : int, optional
            Threads (0: every core).
        {message}
        progress : bool, default True
            Show a tqdm progress bar of the rows written when tqdm is installed
            (``pip install beton[progress]``).

        {returns}

        Raises
        ------
        {read_only}

        Examples
        --------
        >>> ds.compact().versions()[-1]["data_files"]  # doctest: +SKIP
        1
        """
        native = self._editable("compact")
        with _progress(len(self), progress) as report:
            native.compact(num_workers, message, report)
        return self

    def cleanup(self, keep_versions: int = 1, older_than_seconds: float = 3600.0) -> Dict[str, Any]:
        """Removes old versions and the files no kept version references.

        Edits in other threads and processes may run meanwhile: no version committed before,
        during or after the cleanup loses a file it names (on a local disk the cleanup waits for
        edits in progress to commit; docs/FORMAT.md §13, "Cleanup").

        Parameters
        ----------
        keep_versions : int, optional
            The newest versions to keep (tagged ones are always kept).
        older_than_seconds : float, optional
            Only files older than this are removed (a writer may still be committing). On
            object storage, ages come from the store's last-modified times, and files a failed
            writer uploaded but never committed are removed too.

        Returns
        -------
        dict
            ``{"versions": [...], "files": [...], "bytes": n}`` removed.

        Raises
        ------
        ValueError
            For ``keep_versions`` 0.

        Examples
        --------
        >>> ds.cleanup(keep_versions=2, older_than_seconds=0)  # doctest: +SKIP
        {'versions': [1], 'files': [...], 'bytes': 12345}
        """
        versions, files, nbytes = self._editable("cleanup").cleanup(keep_versions, older_than_seconds)
        return {"versions": versions, "files": files, "bytes": nbytes}

    def export(self, path, where=None, num_workers: int = 0, progress: bool = True,
               columns: Optional[List[str]] = None) -> int:
        """Writes this version's rows as one standalone ``.beton`` file that FFCV 1.0.2 loads.

        Values are copied as stored (images never re-encoded); named splits (restricted to the
        rows written) and classes go with them. A NULL is written as its type's filler (a
        ``.beton`` file holds a value in every row), with a ``NullsFilledWarning`` naming the
        rows. FFCV has no text, bool or variable-length array
        field type (beton's ``TextField``, ``BoolField``, ``ArrayField``): FFCV reads a file with
        one only when given a stub for it (``custom_handlers``), so exporting one warns
        (``FFCVCompatibilityWarning``); ``columns=`` leaves such fields out.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (atomically).
        where : str or IndexSet, optional
            A SQL predicate or the indices to write (default: all).
        num_workers : int, optional
            Threads (0: every core).
        progress : bool, default True
            Show a tqdm progress bar of the rows written when tqdm is installed
            (``pip install beton[progress]``).
        columns : list of str, optional
            The fields to write, in this order (default: every field).

        Returns
        -------
        int
            The rows written.

        Raises
        ------
        TypeError
            For a ``.beton`` file (copy it, or ``DatasetWriter.from_indexed_dataset``).
        KeyError
            For a name in ``columns`` that is not a field (the message lists the fields).

        Examples
        --------
        >>> ds.export("clean.beton", where="quality > 0.5")  # doctest: +SKIP
        140
        >>> ds.export("for_ffcv.beton", columns=["image", "label"])  # doctest: +SKIP
        155
        """
        rows = self.where(where) if isinstance(where, str) else where
        if not isinstance(self._native, _native.Version):
            raise TypeError("export: use beton.import_file first, or copy the .beton file")

        kinds = {name: kind for name, kind, _ in self._native.fields()}
        chosen = list(kinds) if columns is None else [str(c) for c in columns]
        foreign = [f"{n} ({kinds[n]})" for n in chosen if kinds.get(n) in _NOT_FFCV]
        if foreign:
            warnings.warn(f"export to {os.fspath(path)}: FFCV 1.0.2 has no field type for {', '.join(foreign)}; "
                          "it reads the file only with a stub Field for each (custom_handlers). "
                          "Leave them out with columns=[...] for a file FFCV reads as it is",
                          FFCVCompatibilityWarning, stacklevel=2)
        with _progress(len(self) if rows is None else len(rows), progress) as report:
            n, filled = self._native.export(str(path), rows, num_workers, report,
                                            None if columns is None else chosen)
        _warn_filled(path, filled)
        return n

    def to_parquet(self, path, columns: Optional[List[str]] = None) -> None:
        """Writes the data table as a Parquet file.

        Parameters
        ----------
        path : str or os.PathLike
        columns : list of str, optional
            The columns to write (default: all).

        Examples
        --------
        >>> beton.open("photos.beton").to_parquet("photos.parquet", ["label", "path"])  # doctest: +SKIP
        """
        import pyarrow.parquet as pq

        pq.write_table(self.table(columns), str(path))

    def diff(self, a=None, b=None) -> Dict[str, Any]:
        """What changed from version ``a`` to ``b``.

        Parameters
        ----------
        a, b : int or str, optional
            Numbers or tags (default: this version's parent to this version).

        Returns
        -------
        dict
            ``from``, ``to``, ``added`` and ``deleted`` row ids, ``added_columns``,
            ``dropped_columns``, and ``changed``: for each column of both, the row ids whose
            value differs.

        Raises
        ------
        ValueError
            For a version the dataset does not have.

        Examples
        --------
        >>> ds.diff(1, 3)["deleted"]  # doctest: +SKIP
        [4, 9, 17]
        """
        return self._editable("diff").diff(a, b)


def open(path, custom: Optional[Dict[str, Any]] = None, version=None) -> Dataset:  # noqa: A001
    """Opens and validates a ``.beton`` file or a version of a dataset directory.

    The returned ``Dataset`` answers SQL (``query``, ``where``, ``explain``), gives the data
    table (``table``, ``to_polars``), samples (``ds[i]``), named splits and class names; a
    dataset directory's version is editable (``update``, ``delete``, ``append``, ...).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.beton`` file (FFCV's or beton's) or a dataset directory; or the URL of a ``.beton``
        file on object storage: ``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``
        (payloads fetched when read, into a bounded local cache: docs/REMOTE.md).
    custom : dict, optional
        ``{field: Field class}`` for a custom (type 255) field written by a user's FFCV-style
        ``Field`` (as FFCV's ``custom_handlers``): its samples read as records of its
        ``metadata_type``; or ``{field: (size, align)}``, its row layout, read as bytes.
    version : int or str, optional
        A directory's version number or tag (default: the latest).

    Returns
    -------
    Dataset

    Raises
    ------
    OSError
        For a path that cannot be read; for a URL, ``MissingFileError`` (404),
        ``AccessDeniedError`` (401/403, no credentials; never retried) or ``BetonIOError``
        naming it and what failed (a dataset directory's listing, a ``HEAD``): a store that never
        answered fails in ``BETON_REMOTE_OPEN_RETRY_SECONDS`` (default 5 s; docs/REMOTE.md).
    beton.CorruptFileError
        For a file that breaks the format (the message names the byte offset).
    ValueError
        For a version that does not exist, or a custom field without a layout.

    Examples
    --------
    >>> import beton
    >>> ds = beton.open("photos.beton")  # doctest: +SKIP
    >>> ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label")  # doctest: +SKIP
    >>> val = ds.where("in_split('val') AND image.width >= 200")  # doctest: +SKIP
    >>> print(ds.explain("label < 3"))  # doctest: +SKIP
    >>> old = beton.open("ds_dir", version=1)  # doctest: +SKIP
    """
    return Dataset(path, custom, version=version)


def import_file(dir, file) -> Dataset:  # noqa: A002
    """Makes a dataset directory whose version 1 is a ``.beton`` file.

    The file is hard-linked (never re-encoded); its named splits and class names move into the
    manifest.

    Parameters
    ----------
    dir : str or os.PathLike
        The directory to make (it must not be a dataset already).
    file : str or os.PathLike
        The ``.beton`` file.

    Returns
    -------
    Dataset
        Version 1.

    Raises
    ------
    ValueError
        For a directory that is a dataset already, or a file with custom fields.

    Examples
    --------
    >>> ds = beton.import_file("ds", "photos.beton")  # doctest: +SKIP
    >>> ds.version, ds.classes == beton.open("photos.beton").classes  # doctest: +SKIP
    (1, True)
    """
    return Dataset._of(_native.Version.import_file(str(dir), str(file)))


def concat(sources, out, message: str = "", progress: bool = True) -> Dataset:
    """A new dataset directory holding the rows of ``sources`` in order.

    Parameters
    ----------
    sources : list
        ``.beton`` files (hard-linked) or datasets / dataset directories (their latest
        versions, exported once). Each one's fields must include the first's.
    out : str or os.PathLike
        The new dataset directory.
    message : str, optional
    progress : bool, default True
        Show a tqdm progress bar of the sources' rows when tqdm is installed
        (``pip install beton[progress]``): a dataset directory's as they are exported, a
        ``.beton`` file's at once (it is linked).

    Returns
    -------
    Dataset
        Its latest version.

    Raises
    ------
    ValueError
        For no sources, or a source that lacks a field of the first.

    Examples
    --------
    >>> both = beton.concat(["a.beton", "b.beton"], "both")  # doctest: +SKIP
    """
    if not sources:
        raise ValueError("concat needs at least one source")
    paths = [str(s.path if isinstance(s, Dataset) else s) for s in sources]
    with _progress(None, progress) as report:
        return Dataset._of(_native.Version.concat(str(out), paths, message, report))
