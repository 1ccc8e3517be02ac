"""Near-duplicates (``Dataset.near_duplicates``, ``beton.near_duplicates``): their result types
and the rules that pick which row of a group to keep. The search itself is in Rust
(``beton_query::near_pairs``, ``image_pairs``, ``groups``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use (beton/_numpy.py)
    from beton._numpy import np

from beton._native import IndexSet
from beton.dataset._results import QueryResult, _preview

#: pHash bits two images may differ by and still be near-duplicates, by default: a photo
#: re-encoded at quality 75 or resized to half stays within 4 of itself on the bundled photos,
#: different photos are 18 or more apart (tests/test_duplicates.py measures both).
IMAGE_THRESHOLD = 8


def _row_ids(native, index):
    import pyarrow as pa
    from beton.dataset._values import _Stream

    if "row_id" in native.column_names():
        ids = pa.RecordBatchReader.from_stream(_Stream(native.table_stream(["row_id"]))).read_all()
        return ids.column("row_id").combine_chunks().take(pa.array(index, pa.uint64()))
    return pa.array(index, pa.uint64())


def _is_image(native, name: str) -> bool:
    return any(n == name and kind.endswith("_image") for n, kind, _ in native.fields())


def _first_image(native) -> Optional[str]:
    return next((n for n, kind, _ in native.fields() if kind.endswith("_image")), None)


def search_args(native, by: str, threshold, metric: str):
    """The threshold a search by ``by`` uses (the image default), checked."""
    image = _is_image(native, by)
    if threshold is None:
        if not image:
            raise ValueError(f"near_duplicates by the vector column {by!r} needs threshold= (a distance by "
                             f"metric={metric!r}; look at ds.nearest({by!r}, ...)'s distances to choose one)")
        threshold = IMAGE_THRESHOLD
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)):
        raise TypeError(f"near_duplicates: threshold must be a number, not {type(threshold).__name__}")
    if metric not in ("l2", "cosine"):
        raise ValueError(f"near_duplicates: metric {metric!r} is not one of ['cosine', 'l2'] (a distance)")
    return float(threshold)


class NearDuplicates(QueryResult):
    """Groups of near-duplicate rows (``Dataset.near_duplicates``): a ``pyarrow.Table`` of
    ``group``, ``index``, ``row_id`` and ``distance`` (each row's to its nearest other member
    of the group), groups numbered in order of their first row.

    ``extras(keep=...)`` is every row but one per group, so ``ds.delete(groups.extras())`` is
    the dedup commit (and ``ds.restore`` its undo); ``ds.gallery(groups)`` shows one line per
    group.

    Examples
    --------
    >>> groups = ds.near_duplicates(by="image")  # doctest: +SKIP
    >>> groups  # doctest: +SKIP
    NearDuplicates: 3 groups, 7 rows (by 'image', within 8 pHash bits)
    >>> ds.delete(groups.extras(), message="dedup")  # doctest: +SKIP
    """

    def __init__(self, table, dataset, by: str, threshold: float, metric: Optional[str]):
        super().__init__(table, f"near_duplicates(by={by!r})", dataset._native)
        self._dataset = dataset
        self.by = by
        self.threshold = threshold
        self.metric = metric

    @property
    def num_groups(self) -> int:
        """How many groups."""
        groups = self.table.column("group").to_numpy()
        return int(groups.max()) + 1 if len(groups) else 0

    def __repr__(self) -> str:
        within = (f"within {self.threshold:g} pHash bits" if self.metric is None
                  else f"within {self.threshold:g} by {self.metric}")
        head = f"NearDuplicates: {self.num_groups} groups, {len(self)} rows (by {self.by!r}, {within})"
        preview = _preview(self.table)
        return head + ("\n" + preview if preview else "")

    __str__ = __repr__

    def extras(self, keep: str = "first") -> IndexSet:
        """Every row of the groups but the one ``keep`` picks in each: the rows a dedup deletes.

        Parameters
        ----------
        keep : str, default "first"
            ``"first"`` / ``"last"``: the lowest / highest index; ``"largest"``: the image with
            the most pixels (of ``by``, or the first image field when ``by`` is a vector
            column); ``"max:COLUMN"`` / ``"min:COLUMN"``: the largest / smallest value of a
            column (``"max:score"``; NULL never wins). Ties go to the lowest index.

        Returns
        -------
        IndexSet
            Ready for ``ds.delete(...)``.

        Raises
        ------
        ValueError
            For an unknown rule, or ``"largest"`` on a dataset without an image field.
        """
        index = self.table.column("index").to_numpy().astype(np.int64)
        group = self.table.column("group").to_numpy().astype(np.int64)
        if len(index) == 0:
            return IndexSet([])
        if keep == "first":
            score = -index.astype(np.float64)
        elif keep == "last":
            score = index.astype(np.float64)
        elif keep == "largest":
            image = self.by if self.metric is None else _first_image(self._dataset._native)
            if image is None:
                raise ValueError("extras(keep='largest') needs an image field; the dataset has none")
            t = self._dataset.table([f"{image}.width", f"{image}.height"])
            w = t.column(0).combine_chunks().take(index).to_numpy(zero_copy_only=False).astype(np.float64)
            h = t.column(1).combine_chunks().take(index).to_numpy(zero_copy_only=False).astype(np.float64)
            score = w * h
        elif keep.startswith(("max:", "min:")):
            column = keep[4:]
            values = self._dataset.table([column]).column(0).combine_chunks().take(index)
            score = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
            if keep.startswith("min:"):
                score = -score
            score = np.where(np.isnan(score), -np.inf, score)
        else:
            raise ValueError(f"extras: keep={keep!r} is not one of 'first', 'last', 'largest', 'max:COLUMN', "
                             f"'min:COLUMN'")
        # Per group, the best score; ties to the lowest index (rows are in index order per group).
        order = np.lexsort((index, -score, group))
        first = np.ones(len(order), bool)
        first[1:] = group[order][1:] != group[order][:-1]
        kept = set(index[order][first].tolist())
        return IndexSet(sorted(int(i) for i in index if int(i) not in kept))


class CrossDuplicates(QueryResult):
    """Near-duplicate pairs across two datasets (``beton.near_duplicates(a, b, ...)``): a
    ``pyarrow.Table`` of ``index`` and ``row_id`` (in the first), ``other_index`` and
    ``other_row_id`` (in the second) and ``distance``, in order.

    ``extras()`` is the first dataset's rows that duplicate a row of the second, so
    ``train.delete(beton.near_duplicates(train, test, by="image").extras())`` removes the
    leak from train; ``other_rows()`` is the second's.
    """

    def __init__(self, table, by: str, threshold: float, metric: Optional[str]):
        super().__init__(table, f"near_duplicates(by={by!r})", None)
        self.by = by
        self.threshold = threshold
        self.metric = metric

    def __repr__(self) -> str:
        within = (f"within {self.threshold:g} pHash bits" if self.metric is None
                  else f"within {self.threshold:g} by {self.metric}")
        head = (f"CrossDuplicates: {len(self)} pairs, {len(self.extras())} rows of the first dataset, "
                f"{len(self.other_rows())} of the second (by {self.by!r}, {within})")
        preview = _preview(self.table)
        return head + ("\n" + preview if preview else "")

    __str__ = __repr__

    def extras(self) -> IndexSet:
        """The first dataset's rows in a pair (sorted, once each)."""
        return IndexSet(sorted(set(self.table.column("index").to_pylist())))

    def other_rows(self) -> IndexSet:
        """The second dataset's rows in a pair (sorted, once each)."""
        return IndexSet(sorted(set(self.table.column("other_index").to_pylist())))


def cross(a, b, by: str, threshold=None, metric: str = "l2", where: Optional[str] = None,
          other_where: Optional[str] = None) -> CrossDuplicates:
    """``beton.near_duplicates(a, b, ...)``: see its docstring."""
    import pyarrow as pa

    threshold = search_args(a._native, by, threshold, metric)
    index, other, distance = a._native.near_pairs_with(b._native, by, threshold, metric, where, other_where)
    table = pa.table({"index": pa.array(index, pa.uint64()), "row_id": _row_ids(a._native, index),
                      "other_index": pa.array(other, pa.uint64()), "other_row_id": _row_ids(b._native, other),
                      "distance": pa.array(distance, pa.float64())})
    return CrossDuplicates(table, by, threshold, None if _is_image(a._native, by) else metric)
