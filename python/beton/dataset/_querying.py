"""SQL over a dataset's data table (``query``, ``where``, ``explain``) and its named splits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use (beton/_numpy.py)
    from beton._numpy import np

from beton._native import IndexSet
from beton.dataset._open import _DatasetBase
from beton.dataset._results import Explain, QueryResult
from beton.dataset._values import _Stream


class _Querying(_DatasetBase):
    """``Dataset``'s SQL and named splits."""

    def query(self, sql: str, params: Optional[Dict[str, Any]] = None) -> QueryResult:
        """Runs ``SELECT ... FROM samples ...`` on the data table.

        Parameters
        ----------
        sql : str
            A ``SELECT`` over ``samples`` (columns as in ``columns()``).
        params : dict, optional
            Values for the query's parameters: ``$name`` in ``sql`` stands for ``params["name"]``
            as the literal it is (``None``, a bool, an int, a float or a str; numpy scalars too),
            so values are never quoted into the text. Every ``$name`` needs a value, and every
            value a ``$name`` (a misspelt name is an error, not ignored).

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
        >>> ds.query("SELECT index FROM samples WHERE label = $l ORDER BY score DESC LIMIT $k",
        ...          params={"l": 3, "k": 5})  # doctest: +SKIP
        """
        import pyarrow as pa

        stream = self._native.query_stream(sql, params)
        table = pa.RecordBatchReader.from_stream(_Stream(stream)).read_all()
        return QueryResult(table, sql, self._native)

    def where(self, predicate: str, params: Optional[Dict[str, Any]] = None) -> IndexSet:
        """The rows a predicate or ``SELECT`` matches.

        Parameters
        ----------
        predicate : str
            ``label < 5 AND image.width >= 224``, ``in_split('val')``, or a ``SELECT``.
        params : dict, optional
            Values for its ``$name`` parameters, as in ``query``: ``ds.where("score > $min",
            params={"min": 0.5})``.

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
        return self._native.select(predicate, params)

    def nearest(self, column: str, vectors, k: int = 10, where: Optional[str] = None, metric: str = "l2",
                nprobe: Optional[int] = None, exact: bool = False):
        """The ``k`` rows whose vectors are nearest each query vector: exact search, or through
        the column's IVF index (``create_index``) when it has one for this metric.

        Parameters
        ----------
        column : str
            A vector column (a 1-D ``NDArrayField`` of numbers; ``ds.vectors`` reads it).
        vectors : array-like
            One query vector (length ``d``) or several (``(m, d)``).
        k : int, default 10
            Rows per query vector (fewer when fewer rows have a vector).
        where : str, optional
            A predicate the rows must match (``"label = 3"``, ``"in_split('train')"``).
        metric : {"l2", "cosine", "dot"}
            ``l2``: Euclidean distance (``l2_distance``), nearest first; ``cosine``: one minus
            the cosine similarity (``cosine_distance``; rows with a zero vector are left out);
            ``dot``: the inner product (``inner_product``), largest first.
        nprobe : int, optional
            With an index: the lists each query reads (default: the number ``create_index``
            tuned to its ``target_recall``; more lists, better recall, slower). Rows appended
            since the index was built are always read.
        exact : bool, default False
            Search every row even when an index exists.

        Returns
        -------
        pyarrow.Table
            ``query`` (the query vector's position), ``index``, ``row_id`` (the index for a
            ``.beton`` file) and ``distance``, each query's rows best first, ties broken by index.
            Through an index, the rows are those of the lists read (with their exact distances);
            the table's ``schema.metadata[b"beton.search"]`` says ``ivf`` or ``exact``.

        Raises
        ------
        ValueError
            For an unknown metric, ``k`` below 1, a column that is not a vector column, or query
            vectors of another length than the column's (naming both lengths).

        Examples
        --------
        >>> ds.nearest("emb", ds.vectors("emb", rows=[7]), k=5)  # doctest: +SKIP
        """
        import pyarrow as pa

        if metric not in ("cosine", "dot", "l2"):
            raise ValueError(f"nearest: metric {metric!r} is not one of ['cosine', 'dot', 'l2']")
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"nearest: k must be an int of at least 1, not {k!r}")
        queries = np.asarray(vectors)
        if queries.ndim == 1:
            queries = queries[None, :]
        if queries.ndim != 2 or queries.dtype.kind not in "iuf":
            raise ValueError(f"nearest: vectors must be one vector or an (m, d) array of numbers, not {queries.shape} "
                             f"{queries.dtype}")
        # One pass over the column for all the query vectors (beton_query::nearest: the SQL
        # functions' distances, each row block read once, in parallel).
        query, index, distance, indexed = self._native.nearest(column, queries.astype(np.float64).tolist(), int(k),
                                                               metric, where, nprobe, bool(exact))
        from beton.dataset._duplicates import _row_ids

        index = np.asarray(index, np.uint64)
        return pa.table({"query": pa.array(query, pa.int64()), "index": pa.array(index),
                         "row_id": _row_ids(self._native, index),
                         "distance": pa.array(distance, pa.float64())},
                        metadata={"beton.search": "ivf" if indexed else "exact"})

    def create_index(self, column: str, kind: str = "ivf", metric: str = "l2", lists: Optional[int] = None,
                     seed: int = 0, rebuild: bool = False, target_recall: float = 0.95) -> Dict[str, Any]:
        """Builds an approximate-search index of a vector column, which ``nearest`` then uses.

        IVF: k-means splits the rows into ``lists`` lists; a search reads the rows of the
        ``nprobe`` lists nearest the query and ranks them exactly. The index is a file of its own
        (``DIR/_indexes/COLUMN.ivf``; ``FILE.COLUMN.ivf`` beside a ``.beton`` file). It serves
        later versions that only append rows (those are read exactly until ``create_index``
        extends it, which assigns them to their lists without a new k-means); any other edit
        of the indexed rows leaves it unused (searches go exact) until it is built again.

        Parameters
        ----------
        column : str
            A vector column.
        kind : {"ivf"}
            The index.
        metric : {"l2", "cosine", "dot"}
            The distance it serves (``nearest`` with another metric searches exactly).
        lists : int, optional
            Number of lists (default ``√n``: 1,000 for a million rows).
        seed : int, default 0
            The k-means sample and start (same seed, same index).
        rebuild : bool, default False
            Build from scratch even where the existing index could be extended.
        target_recall : float, default 0.95
            ``nearest``'s default ``nprobe`` is tuned to it: twice the fewest lists (1, 2, 4,
            ...) at which 100 of the index's own rows, searched through it, find at least this
            share of their 10 nearest other rows on average (doubled because new queries find
            less than the index's own rows). Data with no cluster structure needs many lists
            for it (up to all of them: exact search's speed), and ``recall`` says what it got.

        Returns
        -------
        dict
            ``path``, ``lists``, ``rows`` (indexed), ``covered``, ``metric``, ``extended``
            (appended rows added to an existing index), ``nprobe`` (``nearest``'s default) and
            ``recall`` (the recall@10 measured there).

        Examples
        --------
        >>> ds.create_index("emb", metric="cosine")  # doctest: +SKIP
        >>> ds.nearest("emb", q, k=10, metric="cosine")  # doctest: +SKIP
        """
        if kind != "ivf":
            raise ValueError(f"create_index: kind {kind!r} is not one of ['ivf']")
        if metric not in ("cosine", "dot", "l2"):
            raise ValueError(f"create_index: metric {metric!r} is not one of ['cosine', 'dot', 'l2']")
        if lists is not None and (isinstance(lists, bool) or not isinstance(lists, (int, np.integer)) or lists < 1):
            raise ValueError(f"create_index: lists must be an int of at least 1, not {lists!r}")
        if not 0 < float(target_recall) <= 1:
            raise ValueError(f"create_index: target_recall must be in (0, 1], not {target_recall!r}")
        return self._native.create_index(column, metric, None if lists is None else int(lists), int(seed),
                                         bool(rebuild), float(target_recall))

    def index_info(self, column: str) -> Optional[Dict[str, Any]]:
        """The column's index, if it has one.

        Parameters
        ----------
        column : str
            A vector column.

        Returns
        -------
        dict or None
            ``path``, ``lists``, ``rows`` (indexed), ``covered`` (rows ``0..covered`` at build
            or last extension), ``metric``, ``serves`` (whether it serves this version: False
            after an update or delete of indexed rows, when ``nearest`` searches exactly),
            ``nprobe`` (``nearest``'s default) and ``recall`` (measured there at build).

        Examples
        --------
        >>> ds.index_info("emb")["serves"]  # doctest: +SKIP
        True
        """
        return self._native.index_info(column)

    def drop_index(self, column: str) -> bool:
        """Removes the column's index (``nearest`` then searches exactly).

        Parameters
        ----------
        column : str
            A vector column.

        Returns
        -------
        bool
            Whether there was one.

        Examples
        --------
        >>> ds.drop_index("emb")  # doctest: +SKIP
        True
        """
        return self._native.drop_index(column)

    def near_duplicates(self, by: str, threshold=None, metric: str = "l2", where: Optional[str] = None):
        """Groups of rows that are near-duplicates of each other: by a vector column (exact,
        all pairs) or by an image field's perceptual hash.

        Parameters
        ----------
        by : str
            A vector column (``"emb"``) or an image field (``"image"``: the 64-bit DCT hash of
            each stored image, from its 1/8-scale decode).
        threshold : float or int, optional
            Most distance between two rows of a group: by ``metric`` for vectors (required), a
            number of pHash bits for images (default 8; 0 asks for exact duplicates, the same
            decoded pixels).
        metric : {"l2", "cosine"}
            The vectors' distance (``l2_distance``, ``cosine_distance``).
        where : str, optional
            Search only the rows this predicate selects.

        Returns
        -------
        NearDuplicates
            ``group``, ``index``, ``row_id``, ``distance`` (each row's to its nearest other
            member): a row joins a group when it is within ``threshold`` of any member.
            ``.extras(keep="first")`` is every row but one per group, for ``ds.delete``;
            ``ds.gallery(groups)`` shows them.

        Raises
        ------
        ValueError
            For a vector search without a threshold, an unknown metric, a column that is
            neither a vector column nor an image field.
        beton.InvalidArgumentError
            For an image that does not decode (naming its sample).

        Examples
        --------
        >>> groups = ds.near_duplicates(by="image")  # doctest: +SKIP
        >>> ds.delete(groups.extras(keep="largest"), message="dedup")  # doctest: +SKIP
        >>> ds.near_duplicates(by="emb", threshold=0.05, metric="cosine")  # doctest: +SKIP
        """
        import pyarrow as pa

        from beton.dataset._duplicates import NearDuplicates, _is_image, _row_ids, search_args

        threshold = search_args(self._native, by, threshold, metric)
        group, index, distance = self._native.near_duplicates(by, threshold, metric, where)
        table = pa.table({"group": pa.array(group, pa.int64()), "index": pa.array(index, pa.uint64()),
                          "row_id": _row_ids(self._native, index), "distance": pa.array(distance, pa.float64())})
        return NearDuplicates(table, self, by, threshold, None if _is_image(self._native, by) else metric)

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
            As :meth:`where` raises it: bad SQL, an unknown column.

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
            One of the names ``splits()`` lists (``train``, ``val``, ...).

        Returns
        -------
        IndexSet

        Raises
        ------
        KeyError
            For an unknown name; its message lists the splits there are.

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
