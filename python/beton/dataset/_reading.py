"""Reading a dataset: its schema and class names, sample ``ds[i]``, the data table
(``table``, ``to_polars``, ``to_parquet``, the Arrow C stream) and rows' payloads (``take``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use (beton/_numpy.py)
    from beton._numpy import np

from beton.dataset._open import _DatasetBase
from beton.dataset._values import _custom_struct, _field_metadata, _row_ids, _Stream, _value


class _Reading(_DatasetBase):
    """``Dataset``'s reads: schema, class names, samples, the data table, payloads."""

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

    def vectors(self, column: str, rows=None) -> np.ndarray:
        """A vector column (a 1-D ``NDArrayField`` of numbers) as an ``(n, d)`` numpy array.

        The table's ``FixedSizeList`` column, read from the columnar copy in place: no copy per
        row (one copy in all when the dataset has several data files, or when ``rows`` picks
        some).

        Parameters
        ----------
        column : str
            The vector column (``columns()`` names them; ``ds.table().schema`` shows them as
            ``fixed_size_list<...>[d]``).
        rows : IndexSet, sequence of int or numpy array, optional
            The rows to take, in the order given (default: all, in order).

        Returns
        -------
        numpy.ndarray
            ``(len(rows), d)`` of the field's dtype (float32, float16, int8, uint8, ...).

        Raises
        ------
        KeyError
            For a column the table does not have.
        TypeError
            For a column that is not a vector column (a higher-dimensional ``NDArrayField`` is
            read with ``ds[i]`` or ``take``).
        ValueError
            When a row of ``rows`` is NULL in the column (naming it).
        IndexError
            For a row of ``rows`` past the end.

        Examples
        --------
        >>> ds.vectors("emb").shape  # doctest: +SKIP
        (800, 64)
        >>> ds.vectors("emb", rows=ds.where("label = 3"))  # doctest: +SKIP
        """
        import pyarrow as pa

        col = self.table([column]).column(column)
        if not pa.types.is_fixed_size_list(col.type):
            raise TypeError(f"'{column}' is a {col.type} column, not a vector column (a 1-D NDArrayField "
                            f"of numbers); ds[i] and take() read other arrays")
        d = col.type.list_size
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        picked = None if rows is None else _row_ids(rows, "rows", len(arr))
        valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
        if valid is not None:
            bad = np.flatnonzero(~valid if picked is None else ~valid[picked])
            if len(bad):
                at = bad if picked is None else picked[bad]
                raise ValueError(f"vectors({column!r}): row {int(at[0])} is NULL ({len(bad)} rows in all); "
                                 f"take the others: rows=ds.where('{column} IS NOT NULL')")
        # The values buffer of the (sliced) list, as (n, d): zero-copy from Arrow.
        flat = arr.values.slice(arr.offset * d, len(arr) * d)
        out = flat.to_numpy(zero_copy_only=True).reshape(len(arr), d)
        return out if picked is None else out[picked]

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
        """The data table as a ``polars.DataFrame``: ``table(columns)`` handed to polars.

        Parameters
        ----------
        columns : list of str, optional
            As ``table()`` takes them.

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
