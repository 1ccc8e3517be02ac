"""``Dataset.gallery(...)``: what a query's images look like, in a notebook (the object renders
itself), in a browser (``.save("page.html")``: one self-contained file) or as a PNG contact sheet
(``.save("sheet.png")``). The work is native (``beton_query::gallery``)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple


class Group(NamedTuple):
    """One value of the grouping column: its key as shown, its number of rows, the indices shown."""

    key: Optional[str]
    rows: int
    indices: List[int]


class Change(NamedTuple):
    """One row of a diff's gallery: its row id, ``"changed"``, ``"added"`` or ``"deleted"``, its
    row number in the older and in the newer version (None where it is not), and the columns
    whose cells differ."""

    row_id: int
    kind: str
    before: Optional[int]
    after: Optional[int]
    changed: List[str]


class Gallery:
    """Thumbnails of a selection of a dataset's rows, grouped by a column, with per-column
    summaries. Made by ``Dataset.gallery``; a notebook shows it (``_repr_html_``).

    Attributes
    ----------
    title : str
        The page's title.
    matched : int
        Rows selected.
    num_rows : int
        Rows of the dataset.
    by : str or None
        The grouping column.
    groups : list of Group
        The groups drawn: ``(key, rows, indices)``.
    hidden_groups : tuple of int
        Groups not drawn (over ``max_groups``) and their rows.
    changes : list of Change
        A diff's gallery (``gallery(diff=(a, b))``): the rows shown, how each changed.
    summaries : list of dict
        Per column: ``column``, ``data_type``, ``rows``, ``nulls`` and ``kind``: ``"counts"``
        (``top``, ``distinct``, ``other``) or ``"histogram"`` (``min``, ``max``, ``mean``, ``bins``).

    Examples
    --------
    >>> g = beton.open("photos.beton").gallery(by="label", n=4)  # doctest: +SKIP
    >>> g  # in a notebook: the thumbnails  # doctest: +SKIP
    >>> g.save("labels.html"); g.save("labels.png")  # doctest: +SKIP
    """

    def __init__(self, native):
        self._native = native

    @property
    def title(self) -> str:
        return self._native.title

    @property
    def matched(self) -> int:
        return self._native.matched

    @property
    def num_rows(self) -> int:
        return self._native.num_rows

    @property
    def by(self) -> Optional[str]:
        return self._native.by

    @property
    def image_field(self) -> Optional[str]:
        return self._native.image_field

    @property
    def groups(self) -> List[Group]:
        return [Group(*g) for g in self._native.groups()]

    @property
    def hidden_groups(self) -> Tuple[int, int]:
        return self._native.hidden_groups

    @property
    def changes(self) -> List[Change]:
        return [Change(*c) for c in self._native.changes()]

    @property
    def summaries(self) -> List[Dict[str, Any]]:
        return self._native.summaries()

    def to_html(self, page: bool = True) -> str:
        """The gallery as HTML.

        Parameters
        ----------
        page : bool, default True
            A whole self-contained page (doctype, inline style, thumbnails inline); False: a
            fragment for a notebook cell.

        Returns
        -------
        str
        """
        return self._native.html(page)

    def to_png(self) -> bytes:
        """The gallery as a PNG contact sheet (thumbnails labelled with their index).

        Returns
        -------
        bytes
        """
        return self._native.png()

    def save(self, path) -> None:
        """Writes the gallery: ``.html``/``.htm`` a self-contained page, ``.png`` a contact sheet.
        Written atomically (a temporary file renamed into place).

        Parameters
        ----------
        path : str or os.PathLike

        Raises
        ------
        ValueError
            For another extension.
        """
        path = os.fspath(path)
        ext = os.path.splitext(path)[1].lower()
        if ext in (".html", ".htm"):
            data = self.to_html(page=True).encode("utf-8")
        elif ext == ".png":
            data = self.to_png()
        else:
            raise ValueError(f"save: {path!r}: write .html (a page) or .png (a contact sheet)")
        tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def _repr_html_(self) -> str:
        return self._native.html(False)

    def __repr__(self) -> str:
        by = f" by {self.by}" if self.by else ""
        groups = len(self.groups) + self.hidden_groups[0]
        tiles = sum(len(g.indices) for g in self.groups)
        return (f"Gallery({self._native.title!r}: {self.matched:,} of {self.num_rows:,} rows{by}, "
                f"{groups} group{'' if groups == 1 else 's'}, {tiles} thumbnails)")
