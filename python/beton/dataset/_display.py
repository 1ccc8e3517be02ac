"""How a dataset shows itself: its repr, a notebook's card, and ``gallery`` (thumbnails of
rows, grouped, with per-column summaries)."""

from __future__ import annotations

import threading
from typing import List, Optional

from beton._writing import _progress_bar
from beton.dataset._open import _DatasetBase
from beton.dataset._results import QueryResult
from beton.gallery import Gallery


class _Display(_DatasetBase):
    """``Dataset``'s repr, notebook card and galleries."""

    def _facts(self) -> List[tuple]:
        """``(name, value)`` lines of the repr: rows and version, fields, splits, classes."""
        kind = "dataset directory" if self._is_directory else ".beton file"
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
            classes = self._native.classes
        except (ValueError, OSError):
            classes = None
        if classes is not None:
            shown = ", ".join(classes[:10]) + (", ..." if len(classes) > 10 else "")
            facts.append((f"classes ({len(classes)})", shown))
        return facts

    def __repr__(self) -> str:
        kind = "dataset directory" if self._is_directory else ".beton file"
        lines = [f"Dataset('{self.path}': {len(self):,} rows, version {self.version}, {kind})"]
        lines += [f"  {name}: {value}" for name, value in self._facts()[1:]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: path, rows, version, fields, splits, classes and a strip of
        thumbnails (8, spread over the rows)."""
        return self._native.card_html([("path", str(self.path))] + self._facts(), 8)

    def gallery(self, where=None, by: Optional[str] = None, n: int = 8, columns: Optional[List[str]] = None,
                size: int = 128, image: Optional[str] = None, summaries: bool = True, max_groups: int = 50,
                title: Optional[str] = None, progress: bool = False, diff=None):
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
            A ``near_duplicates`` result or a ``nearest`` table shows one line per group or
            query vector (``by`` defaults to ``group`` / ``query``), captioned with distances.
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
        diff : tuple, optional
            ``(a, b)``: versions, tags or branch names (as ``diff`` takes them). Shows the rows
            that differ from ``a`` to ``b``, grouped as ``changed``, ``added`` and ``deleted``:
            a changed row's thumbnail in ``a`` beside its thumbnail in ``b`` above a table of
            its captions in both, the cells that differ highlighted (the frames outlined when
            the image changed); added rows as ``b`` has them, deleted rows as ``a`` had them.
            Captions default to the changed columns, then up to four scalar fields. ``where``
            narrows the rows (SQL in each version; an ``IndexSet`` or row numbers are rows of
            ``b``, and leave deleted rows out); ``by`` may only be ``"change"``. A merge
            preview is ``(this branch, other branch)``.

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
        >>> ds.gallery(diff=("main", "relabel"))  # doctest: +SKIP
        """
        if diff is not None:
            return self._diff_gallery(diff, where, by, n, columns, size, image, summaries, title, progress)
        if isinstance(where, QueryResult):
            where = where.table
        names = set(getattr(where, "column_names", None) or ())
        # A nearest or near_duplicates result: one line per query vector or group, each row's
        # distance under its thumbnail.
        for key in ("group", "query"):
            if {key, "index", "distance"} <= names and by is None:
                by = key
                columns = ["distance"] if columns is None else columns
        options = {"by": by, "n": n, "columns": columns, "size": size, "image": image, "summaries": summaries,
                   "max_groups": max_groups, "title": title}
        return _with_progress(lambda report: self._native.gallery(where, options, report), progress)

    def _diff_gallery(self, diff, where, by, n, columns, size, image, summaries, title, progress):
        """``gallery(diff=(a, b))``: the rows that differ from ``a`` to ``b``."""
        try:
            a, b = diff
        except (TypeError, ValueError):
            raise TypeError(f"diff: expected (a, b), two versions, tags or branch names; got {diff!r}") from None
        native = self._require_directory("gallery(diff=...)")
        options = {"by": by, "n": n, "columns": columns, "size": size, "image": image, "summaries": summaries,
                   "title": title}
        return _with_progress(lambda report: native.diff_gallery(a, b, where, options, report), progress)


def _with_progress(build, progress: bool):
    """A ``Gallery`` from ``build(report)``, with a tqdm bar of the thumbnails made when
    ``progress`` (``report`` is None otherwise)."""
    bars: list = []  # made on the first call, when the number of thumbnails is known
    # The threads making thumbnails call ``report`` concurrently: making the bar (importing
    # tqdm, writing to stderr) lets another in, which made a second bar. One at a time, and
    # the count only moves forward (calls may arrive out of order).
    lock = threading.Lock()

    def report(done, total):
        with lock:
            if not bars:
                bars.append(_progress_bar(total, True, unit="thumbnails"))
            if bars[0] is not None and done > bars[0].n:
                bars[0].update(done - bars[0].n)

    try:
        native = build(report if progress else None)
    finally:
        if bars and bars[0] is not None:
            bars[0].close()
    return Gallery(native)
