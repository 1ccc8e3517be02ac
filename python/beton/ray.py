"""Ray Data: a beton dataset as a Ray ``Dataset``, and a Ray ``Dataset`` written as a beton dataset.

Past one machine beton runs on existing engines; this module is Ray Data's door::

    import beton.ray

    ds = beton.ray.read_beton("photos/", where="label < 3", columns=["image", "label"])
    ds = ds.map_batches(embed)                       # Ray's own operators
    ds.write_beton("embedded/")                      # one version of a dataset directory

**Reading** (``read_beton``) plans on the driver: it opens the dataset (a ``.beton`` file, a
dataset directory at one version, or a URL), runs ``where`` once to get the rows, and cuts them
into read tasks along data-file boundaries, so that a task reads one slice of one data file.
Each task's row count is exact and its size comes from the data table (``IMAGE.nbytes``, ...),
before anything is read. A task opens the same version and returns ``Dataset.take`` tables:
one column per field, images as ``{mode, width, height, data}`` structs of their stored bytes
(decode them in ``map_batches``, e.g. with PIL or ``simplejpeg``). Column selection is pushed
down (``ds.select_columns([...])`` reads only those fields), and so are filters beton's SQL
evaluates exactly as Ray would (``ds.filter(expr=col("label") < 3)``: comparisons of number,
bool and text fields with literals, ``is_in``, ``&``, ``|``, ``~``; with Ray 2.60+): they run
once on the driver, like ``where``, and only the matching rows are read. Other filters stay
Ray's.

**Writing** (``write_beton``, ``Dataset.write_beton``, or ``BetonDatasink``): each write task
writes its blocks as one ``.beton`` data file (``DatasetWriter.from_arrow``, in the dataset's
``_tmp/``); when every task is done the driver commits them all as **one** version
(``_native.Dataset.commit_files``): version 1 of a new dataset, or an append to an existing one
(its schema checked, a concurrent writer's commit merged as for any append). A failed write
commits nothing and removes its files. Fields come from the table's types (``take``'s columns
carry their exact field types), or from ``fields=``: encoded JPEG/PNG bytes are just bytes
until a field says they are an image (``{"image": RGBImageField()}``).

The destination is a dataset directory every Ray worker sees (one machine, or a shared file
system), or a URL (``s3://bucket/ds/``, ...): there each task uploads its data file into the
dataset's ``data/`` itself and the driver commits them with one conditional put
(docs/REMOTE.md), so a cluster needs no shared disk. A failed write to object storage leaves
its uploaded files in the store, referenced by no version, until ``Dataset.cleanup`` removes
them (once older than its grace period).
"""

from __future__ import annotations

import glob
import os
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional

import numpy as np

try:
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError:  # pragma: no cover - the message is the point
    raise ImportError("beton.ray needs Ray Data: pip install 'beton[ray]' (or 'ray[data]')") from None

import beton
from beton import _native
from beton.dataset._values import _field_of_arrow
from beton.fields import (ArrayField, BoolField, BytesField, Field, FloatField, IntField, NDArrayField, RGBImageField,
                          TextField)

__all__ = ["read_beton", "write_beton", "BetonDatasource", "BetonDatasink", "fields_of_schema"]

# Rows of one block a read task yields are capped to about this many bytes (Ray's default
# target block size), so a task over a large slice streams several blocks.
_BLOCK_BYTES = 128 << 20
# A read task reads at least about this much (when there is that much): Ray's default
# parallelism (200) over a table of 2 M small rows made 10,000-row tasks whose scheduling cost
# more than their reads (0.46 M rows/s against 2.3 M with 4 tasks).
_TASK_BYTES = 32 << 20


try:  # the column Ray's readers add to blocks of no columns, and hides
    from ray.data._internal.arrow_block import _BATCH_SIZE_PRESERVING_STUB_COL_NAME as _STUB
except ImportError:  # pragma: no cover - older Ray
    _STUB = "__bsp_stub"


def _is_url(uri: str) -> bool:
    return "://" in uri


def _location(uri) -> str:
    """``uri`` as every worker can open it: URLs as they are, local paths made absolute."""
    uri = os.fspath(uri)
    return uri if _is_url(uri) else os.path.abspath(uri)


class BetonDatasource(Datasource):
    """A Ray ``Datasource`` of a beton dataset's rows (see the module's doc).

    Parameters
    ----------
    uri : str or os.PathLike
        A ``.beton`` file, a dataset directory, or a URL (``s3://...``, ...).
    where : str, optional
        A SQL predicate or ``SELECT`` (as ``Dataset.where``); default: every row.
    columns : list of str, optional
        Fields to read (default: all).
    version : int or str, optional
        A dataset directory's version number or tag (default: the latest, fixed when planned).
    custom : dict, optional
        As ``beton.open``'s ``custom``.
    branch : str, optional
        A dataset directory's branch (default ``main``).
    """

    def __init__(self, uri, where: Optional[str] = None, columns: Optional[List[str]] = None, version=None,
                 custom: Optional[Dict[str, tuple]] = None, branch: Optional[str] = None):
        super().__init__()
        self._uri = _location(uri)
        self._custom = custom
        self._branch = branch
        ds = beton.open(self._uri, custom=custom, version=version, branch=branch)
        # A dataset directory is read at one version, whatever commits happen meanwhile.
        self._version = ds.version if ds._is_directory else None
        self._fields = list(ds._kinds)
        if columns is not None:
            unknown = [c for c in columns if c not in ds._kinds]
            if unknown:
                raise KeyError(f"read_beton: no field {unknown[0]!r} in {self._uri}; the fields are {self._fields}")
        self._kinds = dict(ds._kinds)
        self._projection_map = None if columns is None else {c: c for c in columns}
        # The SQL of Ray filters pushed into the read (``filter(expr=...)``), for explain/tests.
        self.pushed_where: List[str] = []
        n = len(ds)
        rows = np.asarray(ds.where(where)).astype(np.int64) if where else np.arange(n, dtype=np.int64)
        self._rows = rows
        # Data-file boundaries in index space: a read task never spans two data files.
        per_file = ds._native.data_file_rows() if self._version is not None else [n]
        self._file_ends = np.cumsum(np.asarray(per_file, dtype=np.int64))
        # Each field's bytes in each chosen row: on first use (a filter pushed down first
        # narrows the rows they are needed for).
        self._row_bytes: Optional[Dict[str, Any]] = None
        # Per tuple of columns: (bytes every row has, prefix sums of the bytes that vary).
        self._prefix: Dict[tuple, Any] = {}

    def _sizes(self) -> Dict[str, Any]:
        if self._row_bytes is None:
            ds = beton.open(self._uri, custom=self._custom, version=self._version, branch=self._branch)
            self._row_bytes = self._row_sizes(ds, self._rows)
        return self._row_bytes

    def _row_sizes(self, ds, rows: np.ndarray) -> Dict[str, Any]:
        """Each field's in-memory bytes in each chosen row, from the data table: an array for
        fields with payload sizes, a number for the others (their Arrow width, the same in every
        row; no array of millions of equal values)."""
        columns = set(ds.columns())
        sized = [f"{name}.nbytes" for name in self._fields if f"{name}.nbytes" in columns]
        table = ds.table(sized) if sized else None
        sizes: Dict[str, Any] = {}
        for name, kind in ds._kinds.items():
            if table is not None and f"{name}.nbytes" in columns:
                col = table.column(f"{name}.nbytes").to_numpy()
                # A payload's bytes plus its offset (and an image's mode, width and height).
                sizes[name] = col[rows].astype(np.int64) + (13 if kind.endswith("image") else 8)
            else:
                sizes[name] = 32 if kind == "text" else 8
        return sizes

    def _bytes(self, columns: List[str], start: int, end: int) -> int:
        """The bytes of ``columns`` in chosen rows ``start..end`` (positions in the chosen rows):
        prefix sums made once per set of columns (Ray plans more than once)."""
        key = tuple(columns)
        if key not in self._prefix:
            sizes = self._sizes()
            fixed = sum(sizes[c] for c in columns if isinstance(sizes[c], int))
            varying = [sizes[c] for c in columns if not isinstance(sizes[c], int)]
            sums = None
            if varying:
                sums = np.zeros(len(self._rows) + 1, dtype=np.int64)
                np.cumsum(sum(varying[1:], varying[0]), out=sums[1:])
            self._prefix[key] = (fixed, sums)
        fixed, sums = self._prefix[key]
        return int(fixed * (end - start) + (0 if sums is None else sums[end] - sums[start]))

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def apply_predicate(self, predicate_expr) -> "BetonDatasource":
        """Ray's predicate pushdown (``ds.filter(expr=...)`` right after the read): a predicate
        beton's SQL evaluates exactly as Ray would (see ``_predicate_sql``) narrows the rows read,
        run once on the driver; any other is left to Ray's ``Filter`` (returning ``self``)."""
        import copy

        sql = _predicate_sql(predicate_expr, self._kinds)
        if sql is None:
            return self
        ds = beton.open(self._uri, custom=self._custom, version=self._version, branch=self._branch)
        chosen = np.asarray(ds.where(sql)).astype(np.int64)
        if len(self._rows) != len(ds):
            # Both ascending: the rows chosen by both.
            at = np.searchsorted(self._rows, chosen)
            chosen = chosen[(at < len(self._rows)) & (self._rows[np.minimum(at, len(self._rows) - 1)] == chosen)]
        clone = copy.copy(self)
        previous = getattr(self, "_predicate_expr", None)
        clone._predicate_expr = predicate_expr if previous is None else previous & predicate_expr
        clone._rows = chosen
        clone._row_bytes, clone._prefix = None, {}
        clone.pushed_where = [*self.pushed_where, sql]
        return clone

    def _columns(self) -> List[str]:
        chosen = self._projection_map  # set by Ray's apply_projection (select_columns)
        return self._fields if chosen is None else [c for c in self._fields if c in chosen]

    def get_name(self) -> str:
        return "Beton"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return self._bytes(self._columns(), 0, len(self._rows))

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context=None) -> List[ReadTask]:
        columns = self._columns()
        # The chosen rows of each data file (rows are ascending).
        cuts = np.searchsorted(self._rows, self._file_ends)
        slices = [(int(a), int(b)) for a, b in zip(np.concatenate([[0], cuts[:-1]]), cuts) if b > a]
        tasks = []
        uri, version, custom = self._uri, self._version, self._custom
        tasks_by_size = -(-self._bytes(columns, 0, len(self._rows)) // _TASK_BYTES)
        pieces = _shares([end - start for start, end in slices], min(parallelism, max(len(slices), tasks_by_size)))
        for (start, end), k in zip(slices, pieces):
            # k pieces as numpy.array_split cuts them: the first (n % k) one row longer.
            q, r = divmod(end - start, k)
            bounds = [start + j * q + min(j, r) for j in range(k + 1)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                if b <= a:
                    continue
                rows = _compact(self._rows[a:b])
                size = self._bytes(columns, a, b)
                per_block = max(1, int(len(rows) * _BLOCK_BYTES // max(1, size)))
                metadata = BlockMetadata(num_rows=len(rows), size_bytes=size, input_files=None, exec_stats=None)
                limit = {} if per_task_row_limit is None else {"per_task_row_limit": per_task_row_limit}
                tasks.append(ReadTask(_reader(uri, version, custom, rows, columns, per_block), metadata, **limit))
        return tasks


# Ray's comparisons as SQL, and each with its sides swapped.
_COMPARISONS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "=", "ne": "<>"}
_SWAPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "<>": "<>"}
# Integers a float compares with exactly (beyond, an int64 column's values and the literal would
# be compared as doubles by one engine and not the other).
_EXACT = 2**53


def _predicate_sql(expr, kinds: Dict[str, str]) -> Optional[str]:
    """A Ray Data expression as a beton SQL predicate that selects exactly the rows Ray's own
    ``Filter`` (PyArrow) keeps, or ``None`` where that is not certain: comparisons of an int,
    float, bool or text field with a literal, ``is_in``/``not_in`` of int or text literals, and
    ``&``, ``|``, ``~`` of those. Columns are never null. Floats differ in one way: beton orders
    NaN above every number (as PostgreSQL), where PyArrow's ``>`` and ``>=`` are false for NaN,
    so those two get ``AND x <= 1e309`` (NaN is above infinity); ``=``, ``<>``, ``<`` and ``<=``
    already agree, and -0.0 equals 0.0 in both."""
    import numbers

    try:
        from ray.data.expressions import BinaryExpr, ColumnExpr, LiteralExpr, Operation, UnaryExpr
    except ImportError:  # a Ray without expressions pushes nothing down
        return None

    def ident(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def literal(value, kind: Optional[str]) -> Optional[str]:
        if isinstance(value, (bool, np.bool_)):
            return ("TRUE" if value else "FALSE") if kind == "bool" else None
        if kind == "text":
            return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else None
        if kind not in ("int", "float"):
            return None
        if isinstance(value, numbers.Integral):
            value = int(value)
            return str(value) if -2**63 <= value < 2**63 and (kind == "int" or abs(value) <= _EXACT) else None
        if isinstance(value, numbers.Real):
            value = float(value)
            return repr(value) if np.isfinite(value) and (kind == "float" or abs(value) < _EXACT) else None
        return None

    def comparison(op: str, column: str, value) -> Optional[str]:
        kind = kinds.get(column)
        text = literal(value, kind)
        if text is None or (kind == "bool" and op not in ("=", "<>")):
            return None
        sql = f"{ident(column)} {op} {text}"
        return f"({sql} AND {ident(column)} <= 1e309)" if kind == "float" and op in (">", ">=") else sql

    def visit(e) -> Optional[str]:
        if isinstance(e, ColumnExpr):
            return ident(e.name) if kinds.get(e.name) == "bool" else None
        if isinstance(e, UnaryExpr):
            inner = visit(e.operand) if e.op == Operation.NOT else None
            return None if inner is None else f"NOT ({inner})"
        if not isinstance(e, BinaryExpr):
            return None
        if e.op in (Operation.AND, Operation.OR):
            left, right = visit(e.left), visit(e.right)
            if left is None or right is None:
                return None
            return f"({left}) {'AND' if e.op == Operation.AND else 'OR'} ({right})"
        if e.op in (Operation.IN, Operation.NOT_IN):
            if not (isinstance(e.left, ColumnExpr) and isinstance(e.right, LiteralExpr)):
                return None
            kind = kinds.get(e.left.name)
            items = e.right.value if isinstance(e.right.value, (list, tuple)) else [e.right.value]
            plain = all(isinstance(v, str) if kind == "text" else
                        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in items)
            texts = [literal(v, kind) for v in items] if kind in ("int", "text") and plain else [None]
            known = [t for t in texts if t is not None]
            if not items or len(known) != len(texts):
                return None
            sql = f"{ident(e.left.name)} IN ({', '.join(known)})"
            return sql if e.op == Operation.IN else f"NOT ({sql})"
        op = _COMPARISONS.get(str(getattr(e.op, "value", "")))
        if op is None:
            return None
        if isinstance(e.left, ColumnExpr) and isinstance(e.right, LiteralExpr):
            return comparison(op, e.left.name, e.right.value)
        if isinstance(e.left, LiteralExpr) and isinstance(e.right, ColumnExpr):
            return comparison(_SWAPPED[op], e.right.name, e.left.value)
        return None

    return visit(expr)


def _shares(sizes: List[int], parallelism: int) -> List[int]:
    """Read tasks per data file: ``parallelism`` in all (or one a file, when there are more files),
    split in proportion to the files' rows (largest remainders), none more than its rows."""
    total = sum(sizes)
    want = max(parallelism, len(sizes), 1)
    exact = [want * n / total for n in sizes] if total else [0.0] * len(sizes)
    counts = [min(n, max(1, int(e))) for n, e in zip(sizes, exact)]
    by_remainder = sorted(range(len(sizes)), key=lambda i: int(exact[i]) - exact[i])
    spare = want - sum(counts)
    for i in by_remainder:
        if spare <= 0:
            break
        if counts[i] < sizes[i]:
            counts[i] += 1
            spare -= 1
    return counts


def _compact(rows: np.ndarray):
    """A task's rows as small as they pickle: a ``range`` when consecutive, else 32-bit when
    they fit (the rows travel with every read task)."""
    if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
        return range(int(rows[0]), int(rows[-1]) + 1)
    return rows.astype(np.uint32) if len(rows) and int(rows[-1]) < 2**32 else rows


def _reader(uri: str, version, custom, rows, columns: List[str], per_block: int):
    """A read task's function: ``take`` of ``rows``, ``per_block`` rows a block."""

    def read() -> Iterator[Any]:
        if not columns:
            # No field wanted (``count()`` projects to none): rows without reading any. A table
            # of no columns loses its row count when pickled, so it carries Ray's stub column.
            import pyarrow as pa

            for start in range(0, len(rows), per_block):
                yield pa.table({_STUB: pa.nulls(len(rows[start:start + per_block]))})
            return
        ds = beton.open(uri, custom=custom, version=version)
        for start in range(0, len(rows), per_block):
            chunk = rows[start:start + per_block]
            yield ds.take(np.arange(chunk.start, chunk.stop) if isinstance(chunk, range) else chunk, columns)

    return read


def read_beton(uri, *, where: Optional[str] = None, columns: Optional[List[str]] = None, version=None,
               custom: Optional[Dict[str, tuple]] = None, override_num_blocks: Optional[int] = None,
               concurrency: Optional[int] = None, ray_remote_args: Optional[Dict[str, Any]] = None,
               branch: Optional[str] = None):
    """A beton dataset's rows as a Ray ``Dataset``.

    Parameters
    ----------
    uri : str or os.PathLike
        A ``.beton`` file, a dataset directory, or a URL (``s3://bucket/f.beton``, ...).
    where : str, optional
        A SQL predicate or ``SELECT`` choosing the rows (``Dataset.where``); run once, on the
        driver.
    columns : list of str, optional
        The fields to read (default: all).
    version : int or str, optional
        A dataset directory's version number or tag (default: the latest when called).
    custom : dict, optional
        As ``beton.open``'s ``custom``.
    branch : str, optional
        A dataset directory's branch (default ``main``; docs/VERSIONS.md).
    override_num_blocks, concurrency, ray_remote_args
        As ``ray.data.read_datasource``'s.

    Returns
    -------
    ray.data.Dataset
        One column per field; images as ``{mode, width, height, data}`` structs of their stored
        bytes. ``count()`` is exact without reading a payload.

    Raises
    ------
    KeyError
        For a column that is not a field.
    ValueError
        For bad SQL (with its line and column) or a version the dataset does not have.

    Examples
    --------
    >>> ds = beton.ray.read_beton("photos/", where="label < 3", columns=["image", "label"])  # doctest: +SKIP
    >>> ds.count()  # doctest: +SKIP
    77
    """
    source = BetonDatasource(uri, where=where, columns=columns, version=version, custom=custom, branch=branch)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks, concurrency=concurrency,
                                    ray_remote_args=ray_remote_args)


def fields_of_schema(schema, fields: Optional[Dict[str, Field]] = None) -> Dict[str, Field]:
    """The beton fields a table of ``schema`` is written with: ``fields[name]`` where given, the
    field a ``take`` column says it came from, else one by Arrow type (integers ``IntField``,
    floats ``FloatField``, booleans ``BoolField``, strings ``TextField``, binary
    ``BytesField``, ``take``'s image structs ``RGBImageField``, fixed-size lists and Ray tensors
    ``NDArrayField``, lists ``ArrayField``).

    Parameters
    ----------
    schema : pyarrow.Schema
        The table's schema.
    fields : dict of str to Field, optional
        Fields for some columns, which win over the inferred ones.

    Returns
    -------
    dict of str to Field
        One field per column, in the schema's order.

    Raises
    ------
    TypeError
        For a column of a type no field takes, naming it.
    KeyError
        For a ``fields`` name the schema lacks.

    Examples
    --------
    >>> import pyarrow as pa
    >>> fields_of_schema(pa.schema([("label", pa.int32()), ("jpeg", pa.binary())]),
    ...                  {"jpeg": RGBImageField()})  # doctest: +SKIP
    {'label': IntField(), 'jpeg': RGBImageField()}
    """
    import pyarrow as pa

    fields = dict(fields or {})
    names = list(schema.names)
    unknown = [n for n in fields if n not in names]
    if unknown:
        raise KeyError(f"write_beton: fields={list(fields)} names {unknown[0]!r}, which is not a column; "
                       f"the columns are {names}")
    out: Dict[str, Field] = {}
    for f in schema:
        if f.name in fields:
            out[f.name] = fields[f.name]
            continue
        known = _field_of_arrow(f)
        if known is not None:
            out[f.name] = known
            continue
        t = f.type
        element = getattr(t, "value_type", None) or getattr(t, "scalar_type", None)
        if isinstance(t, pa.BaseExtensionType) and hasattr(t, "shape") and element is not None:
            # Ray's tensor extension types (numpy arrays in rows): shape and element type.
            if t.shape is None or any(d is None for d in t.shape):
                raise TypeError(f"write_beton: column {f.name!r} holds tensors of varying shapes; "
                                f"pass fields={{{f.name!r}: ArrayField(dtype)}} to store them flattened")
            out[f.name] = NDArrayField(np.dtype(element.to_pandas_dtype()), tuple(t.shape))
        elif pa.types.is_integer(t):
            out[f.name] = IntField()
        elif pa.types.is_floating(t):
            out[f.name] = FloatField()
        elif pa.types.is_boolean(t):
            out[f.name] = BoolField()
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
            out[f.name] = TextField()
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or str(t) == "binary_view":
            out[f.name] = BytesField()
        elif pa.types.is_struct(t) and {t.field(i).name for i in range(t.num_fields)} >= {"mode", "width", "height",
                                                                                            "data"}:
            out[f.name] = RGBImageField()
        elif pa.types.is_fixed_size_list(t) and _numeric(t.value_type):
            out[f.name] = NDArrayField(np.dtype(t.value_type.to_pandas_dtype()), (t.list_size,))
        elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and _numeric(t.value_type):
            out[f.name] = ArrayField(np.dtype(t.value_type.to_pandas_dtype()))
        else:
            raise TypeError(f"write_beton: no beton field takes column {f.name!r} of type {t}; pass "
                            f"fields={{{f.name!r}: ...}} (e.g. JSONField()) or drop it")
    return out


def _numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


class BetonDatasink(Datasink):
    """A Ray ``Datasink`` writing one version of a dataset directory (see the module's doc).

    Parameters
    ----------
    path : str or os.PathLike
        The dataset directory or URL: made when missing (version 1), appended to otherwise.
    fields : dict of str to Field, optional
        Fields for some or all columns (the rest by type, ``fields_of_schema``).
    message : str, optional
        The version's message.
    page_size : int, optional
        As ``DatasetWriter``'s: ``None`` (the default) chooses each data file's from its
        payload, so a small block is not padded to 8 MiB pages.
    num_workers : int, default 1
        Encoding threads per write task (Ray runs the tasks in parallel already).
    """

    def __init__(self, path, fields: Optional[Dict[str, Field]] = None, message: str = "",
                 page_size: Optional[int] = None, num_workers: int = 1):
        path = os.fspath(path)
        if not _is_url(path) and os.path.isfile(path):
            raise ValueError(f"write_beton: {path} is a file; write_beton writes a dataset directory")
        if _is_url(path) and path.rstrip("/").endswith(".beton"):
            raise ValueError(f"write_beton: {path} names a .beton file; write_beton writes a dataset directory")
        self.path = path.rstrip("/") if _is_url(path) else os.path.abspath(path)
        self.fields = dict(fields) if fields else None
        self.message = message or "ray write_beton"
        self.page_size = None if page_size is None else int(page_size)
        self.num_workers = int(num_workers)
        self._write_id = uuid.uuid4().hex
        self.version: Optional[int] = None

    def get_name(self) -> str:
        return "Beton"

    def _tmp(self) -> str:
        return os.path.join(self.path, "_tmp")

    def on_write_start(self, schema=None) -> None:
        if not _is_url(self.path):
            os.makedirs(self._tmp(), exist_ok=True)
        if schema is not None:
            # Checked once on the driver, so that a column no field takes fails before any task.
            self.fields = fields_of_schema(schema, self.fields)

    def write(self, blocks: Iterable[Any], ctx) -> Optional[tuple]:
        import pyarrow as pa

        from beton.writer import DatasetWriter

        tables = [t for t in (BlockAccessor.for_block(b).to_arrow() for b in blocks) if t.num_rows]
        if not tables:
            return None
        table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
        fields = fields_of_schema(table.schema, self.fields)
        def writer(out: str) -> None:
            w = DatasetWriter(out, fields, page_size=self.page_size, num_workers=self.num_workers, progress=False)
            w._columnar_copy = False  # the file moves into the dataset (or the store) right after
            w.from_arrow(table)
        if not _is_url(self.path):
            out = os.path.join(self._tmp(), f"ray-{self._write_id}-{ctx.task_idx:06d}.beton")
            writer(out)
            return (ctx.task_idx, out)
        # Object storage: written locally, then uploaded straight into the dataset's data/ by
        # this task (under a new name, referenced by nothing until the driver commits it).
        import tempfile

        with tempfile.TemporaryDirectory(prefix="beton-ray-") as tmp:
            out = os.path.join(tmp, "part.beton")
            writer(out)
            url = f"{self.path}/data/{uuid.uuid4().hex}.beton"
            _native.upload_file(out, url)
        return (ctx.task_idx, url)

    def on_write_complete(self, write_result) -> None:
        returns = getattr(write_result, "write_returns", write_result)
        # In task order, so that the version's rows are in the Ray dataset's block order.
        files = [f for _, f in sorted(r for r in returns if r)]
        try:
            if not files:
                raise ValueError(f"write_beton: the Ray dataset has no rows; nothing was written to {self.path}")
            self.version = _native.Dataset.commit_files(self.path, files, self.message).version
        finally:
            self._remove_files()

    def on_write_failed(self, error: Exception) -> None:
        self._remove_files()

    def _remove_files(self) -> None:
        # (Uploaded files of a failed write stay in the store, referenced by no version, until
        # `cleanup` past its grace period.)
        if _is_url(self.path):
            return
        for f in glob.glob(os.path.join(self._tmp(), f"ray-{self._write_id}-*")):
            try:
                os.remove(f)
            except OSError:
                pass


def write_beton(ds, path, fields: Optional[Dict[str, Field]] = None, message: str = "", *,
                page_size: Optional[int] = None, num_workers: int = 1, concurrency: Optional[int] = None,
                ray_remote_args: Optional[Dict[str, Any]] = None) -> "beton.Dataset":
    """Writes a Ray ``Dataset`` as one version of the dataset directory ``path``.

    Each write task writes one data file; the driver commits them all as one version when every
    task is done (version 1 of a new dataset, else an append). Also ``ds.write_beton(path, ...)``
    once ``beton.ray`` is imported.

    Parameters
    ----------
    ds : ray.data.Dataset
    path : str or os.PathLike
        A dataset directory every worker can reach, or a URL (``s3://bucket/ds``).
    fields : dict of str to Field, optional
        Fields for some or all columns; the rest by Arrow type (``fields_of_schema``). Encoded
        images are binary columns: name them (``{"image": RGBImageField()}``).
    message : str, optional
        The version's message.
    page_size, num_workers
        As ``BetonDatasink``'s.
    concurrency, ray_remote_args
        As ``ray.data.Dataset.write_datasink``'s.

    Returns
    -------
    beton.Dataset
        The version written.

    Raises
    ------
    ValueError
        For a file as ``path``, an empty dataset, or rows a field cannot take.
    TypeError
        For a column no field takes (pass ``fields=``).

    Examples
    --------
    >>> beton.ray.write_beton(ray.data.from_items([{"x": 1}, {"x": 2}]), "xs/").version  # doctest: +SKIP
    1
    """
    sink = BetonDatasink(path, fields=fields, message=message, page_size=page_size, num_workers=num_workers)
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args)
    return beton.open(sink.path, version=sink.version)


# `ds.write_beton(path)` on any Ray Dataset, as Ray's own `write_parquet`.
if not hasattr(ray.data.Dataset, "write_beton"):
    ray.data.Dataset.write_beton = write_beton  # type: ignore[attr-defined]
