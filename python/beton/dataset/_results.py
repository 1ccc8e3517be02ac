"""What queries give back: ``QueryResult`` (a ``pyarrow.Table`` with a short repr) and
``Explain`` (what a query touches and what a loader of its rows would read)."""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional

from beton._native import IndexSet


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
        The version explained (0 for a ``.beton`` file).
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
