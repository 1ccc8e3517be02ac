"""A dataset directory's versions and edits: the log and tags, ``checkout`` and ``restore``,
and the edits that each commit a new version (``update``, ``update_rows``, ``delete``,
``add_column``, ``drop_column``, ``append``, ``set_classes``, ``rename_class``, ``compact``),
``cleanup`` of old versions, and ``diff`` between two (docs/FORMAT.md §13)."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, TypeVar, cast

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use (beton/_numpy.py)
    from beton._numpy import np

from beton import _doc
from beton._native import IndexSet
from beton._writing import _progress, _rgb
from beton.dataset._open import _DatasetBase
from beton.dataset._values import _arrow_kind, _encode_all, _field_of, _one_column, _row_ids, _sql_literal

if TYPE_CHECKING:
    from typing_extensions import Self

# The docstring sections every edit of a dataset directory shares, filled in by ``_edit``.
_EDIT_DOC = {
    "{message}": "message : str, optional\n    The version's message.",
    "{returns}": "Returns\n-------\nDataset\n    This object, showing the new version.",
    "{read_only}": "TypeError\n    For a ``.beton`` file.",
}


_Method = TypeVar("_Method", bound=Callable[..., Any])


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


class _Versions(_DatasetBase):
    """``Dataset``'s versions and edits (a dataset directory's; a ``.beton`` file has one
    version and is read-only)."""

    def versions(self, branch: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every version's log entry on this Dataset's branch (or on ``branch``), oldest first
        (``beton log``): a branch's own versions after those of the branch it started from, up
        to its start.

        Parameters
        ----------
        branch : str, optional
            Another branch's log (default: this Dataset's branch).

        Returns
        -------
        list of dict
            ``version``, ``parent``, ``timestamp_ms``, ``operation``, ``details``,
            ``message``, ``num_rows``, ``data_files``, ``deleted_rows``, ``branch``, and
            ``merged`` (``(branch, version)`` of a merge's second parent, else None); a
            ``.beton`` file has one entry.

        Examples
        --------
        >>> [v["operation"] for v in beton.open("ds").versions()]  # doctest: +SKIP
        ['import', 'delete', 'update']
        """
        if not self._is_directory:
            return [{"version": 1, "parent": None, "operation": "file", "num_rows": len(self)}]
        return self._native.versions(branch)

    @property
    def branch_name(self) -> Optional[str]:
        """The branch this Dataset reads and edits: ``main`` or a branch's name (None for a
        ``.beton`` file).

        Examples
        --------
        >>> beton.open("ds", branch="relabel").branch_name  # doctest: +SKIP
        'relabel'
        """
        return self._native.branch_name

    def branch(self, name: str, version: Optional[int] = None) -> Self:
        """Starts branch ``name`` at ``version`` of this Dataset's branch (this version by
        default), and returns a Dataset on it: its edits commit to the branch, this Dataset's
        stay on its own (docs/VERSIONS.md).

        Parameters
        ----------
        name : str
            1 to 64 ASCII letters, digits, ``_ - .`` (not ``main``, not starting with ``.`` or
            ``_``).
        version : int, optional
            The version to start from.

        Returns
        -------
        Dataset
            The new branch's latest version (its start).

        Raises
        ------
        ValueError
            For a bad name, a name in use, or a version this branch does not have.
        TypeError
            For a ``.beton`` file.

        Examples
        --------
        >>> fix = ds.branch("relabel")  # doctest: +SKIP
        >>> fix.update("label = 3", where="row_id IN (4, 9)")  # doctest: +SKIP
        >>> ds.merge("relabel")  # doctest: +SKIP
        """
        return self._of(self._require_directory("branch").branch(name, version))

    def branches(self) -> List[Dict[str, Any]]:
        """The dataset's branches, ``main`` first.

        Returns
        -------
        list of dict
            ``name``, ``head`` (its latest version), ``start`` (``(branch, version)`` it started
            from; None for main), ``created_ms``, ``line`` (its line's id).

        Raises
        ------
        TypeError
            For a ``.beton`` file.

        Examples
        --------
        >>> [b["name"] for b in beton.open("ds").branches()]  # doctest: +SKIP
        ['main', 'relabel']
        """
        return self._require_directory("branches").branches()

    def delete_branch(self, name: str) -> int:
        """Deletes branch ``name``: its name goes; its versions stay readable through its tags
        and the branches started from it, and ``cleanup`` removes the rest.

        Parameters
        ----------
        name : str
            A branch (not ``main``).

        Returns
        -------
        int
            The branch's latest version.

        Raises
        ------
        ValueError
            For ``main`` or a branch that does not exist.

        Examples
        --------
        >>> ds.delete_branch("relabel")  # doctest: +SKIP
        4
        """
        return self._require_directory("delete_branch").delete_branch(name)

    @_edit
    def merge(self, source: str, message: str = "", strategy: str = "fail", resolve=None) -> Dict[str, Any]:
        """Merges the latest version of branch ``source`` into this Dataset's branch, as one new
        version (two parents), which this Dataset then shows: both sides' changes since their
        common ancestor combine row by row and cell by cell; the same cell set to different
        values, an update of a row the other side deleted, a column dropped on one side and
        changed on the other, the same column added with different values are conflicts
        (docs/VERSIONS.md has the rules).

        Parameters
        ----------
        source : str
            The branch to merge in (``main`` too).
        {message}
        strategy : {'fail', 'ours', 'theirs'}
            For conflicts ``resolve`` leaves: ``fail`` commits nothing and raises
            ``MergeConflictError``; ``ours`` keeps this branch's side, ``theirs`` takes
            ``source``'s.
        resolve : table or list of dict, optional
            Conflicts settled one by one: rows of ``row_id``, ``column`` and either ``value``
            (the cell's new value) or ``take`` (``'ours'`` / ``'theirs'``); a pyarrow or polars
            table, or a list of dicts (the ``conflicts`` table of a failed merge, with a
            ``take`` or ``value`` column added, fits).

        Returns
        -------
        dict
            ``version``, ``committed`` (False when ``source`` was merged already: nothing to
            do), ``base`` (``(line, version)`` of the common ancestor), ``theirs``,
            ``rows_added``, ``rows_deleted``, ``cells_set``, ``resolved`` (the conflicts the
            strategy or ``resolve`` settled).

        Raises
        ------
        beton.MergeConflictError
            With ``strategy='fail'`` and conflicts left: ``.conflicts`` is a pyarrow Table of
            ``row_id``, ``column``, ``base``, ``ours``, ``theirs``, ``kind``.
        beton.ConflictError
            When this branch moved meanwhile (merge again).
        {read_only}

        Examples
        --------
        >>> main = beton.open("ds")  # doctest: +SKIP
        >>> try:  # doctest: +SKIP
        ...     main.merge("relabel")
        ... except beton.MergeConflictError as e:
        ...     print(e.conflicts.to_pylist())
        >>> main.merge("relabel", strategy="theirs")  # doctest: +SKIP
        """
        from beton._native import MergeConflictError

        rows = _resolutions(resolve)
        try:
            return self._require_directory("merge").merge(source, message, strategy, rows)
        except MergeConflictError as e:
            e.conflicts = _conflict_table(getattr(e, "conflicts", []))
            raise

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
        return self._require_directory("tags").tags()

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
        self._require_directory("tag").tag(name)

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
        return self._require_directory("delete_tag").delete_tag(name)

    def checkout(self, version) -> Self:
        """Another version of this dataset (of this Dataset's branch), read-only history.

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
        native = self._require_directory("checkout")
        return type(self)(native.path, version=version, branch=native.branch_name)

    @_edit
    def restore(self, version) -> Self:
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
        native = self._require_directory("restore")
        if not isinstance(version, int):
            tags = native.tags()
            if version not in tags:
                raise KeyError(f"restore: no tag {version!r}; the tags are {sorted(tags)}")
            version = tags[version]
        native.restore(version)
        return self

    @_edit
    def update(self, set: Dict[str, Any], where: Optional[str] = None, message: str = "") -> Self:  # noqa: A002
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
        self._require_directory("update").update(pairs, where, message)
        return self

    @_edit
    def update_rows(self, ids, values: Dict[str, Any], message: str = "") -> Self:
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
        native = self._require_directory("update_rows")
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
            if kind is None or _arrow_kind(kind):
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
    def delete(self, where, message: str = "") -> Self:
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
        native = self._require_directory("delete")
        if isinstance(where, str):
            native.delete(sql=where, message=message)
        else:
            rows = _row_ids(where, "delete: where", len(self))
            native.delete(rows=where if isinstance(where, IndexSet) else IndexSet(rows.tolist()), message=message)
        return self

    @_edit
    def add_column(self, name: str, values, message: str = "", field=None) -> Self:
        """Adds a field, as a new version.

        Images are encoded once, into the column file; the data files are never rewritten.

        Parameters
        ----------
        name : str
        values : str or array-like
            A SQL expression over each row (str), or one value per row (numpy, pyarrow,
            polars, a list; int, float, bool or text). A 2-D numpy array (rows × d), an Arrow
            ``FixedSizeList`` column, a polars ``Array`` column or a list of equal-length 1-D
            arrays is a **vector column** (``NDArrayField(dtype, (d,))``, the dtype as given):
            ``ds.vectors(name)`` reads it back, ``ds.table()`` shows it as a
            ``fixed_size_list``.
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
        >>> ds.add_column("emb", embeddings)  # an (n, 64) float32 array: a vector column  # doctest: +SKIP
        """
        native = self._require_directory("add_column")
        if field is None and not isinstance(values, str):
            field, values = _as_vectors(name, values)
        if isinstance(values, str):
            native.add_column(name, sql=values, message=message)
        elif field is not None and _arrow_kind(field.type_name):
            # As Arrow values of the field's type: they must fit it as they are (not int(1.5)).
            native.add_column(name, values=_one_column(name, values, "add_column: values"), field=field.native(),
                              message=message)
        elif field is not None:
            native.add_column(name, objects=_encode_all(field, name, values), field=field.native(), message=message)
        else:
            native.add_column(name, values=_one_column(name, values), message=message)
        return self

    @_edit
    def drop_column(self, name: str, message: str = "") -> Self:
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
        self._require_directory("drop_column").drop_column(name, message)
        return self

    @_edit
    def append(self, source, message: str = "", image_field: str = "image", label_field: str = "label",
               progress: bool = True, path_field: str = "path", alpha_background=None,
               **writer_options) -> Self:
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
            ``max_resolution``, ``jpeg_quality``, ``verify``, ...). A JPEG that fits is stored
            as it is, checked at the entropy level (every Huffman code; a corrupt one is
            refused, naming it) and given restart markers; ``verify=False`` stores its bytes
            exactly as given, unchecked, as Lance and Hugging Face datasets do.

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
        native = self._require_directory("append")
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
    def set_classes(self, classes: List[str], message: str = "") -> Self:
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
        self._require_directory("set_classes").set_classes(list(classes), message)
        return self

    @_edit
    def rename_class(self, old: str, new: str, message: str = "") -> Self:
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
        self._require_directory("rename_class").rename_class(old, new, message)
        return self

    @_edit
    def compact(self, num_workers: int = 0, message: str = "", progress: bool = True) -> Self:
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
        native = self._require_directory("compact")
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
        versions, files, nbytes = self._require_directory("cleanup").cleanup(keep_versions, older_than_seconds)
        return {"versions": versions, "files": files, "bytes": nbytes}

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
        return self._require_directory("diff").diff(a, b)


_CONFLICT_COLUMNS = ("row_id", "column", "base", "ours", "theirs", "kind")


def _conflict_table(rows):
    """A merge's conflicts (tuples from the native layer) as a pyarrow Table."""
    import pyarrow as pa

    columns = list(zip(*rows)) if rows else [[] for _ in _CONFLICT_COLUMNS]
    types = [pa.uint64(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string()]
    return pa.table({n: pa.array(list(c), type=t) for n, c, t in zip(_CONFLICT_COLUMNS, columns, types)})


def _resolutions(resolve):
    """``resolve`` (a pyarrow/polars table or a list of dicts of ``row_id``, ``column`` and
    ``take`` or ``value``) as ``[(row_id, column, take, value)]`` for the native merge."""
    if resolve is None:
        return None
    if hasattr(resolve, "to_pylist"):
        rows = resolve.to_pylist()
    elif hasattr(resolve, "to_dicts"):
        rows = resolve.to_dicts()
    else:
        rows = list(resolve)
    out = []
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or "row_id" not in r or "column" not in r:
            raise ValueError(f"resolve[{k}]: expected row_id, column and take or value, got {r!r}")
        take = r.get("take")
        if take is None:
            if "value" not in r:
                raise ValueError(f"resolve[{k}]: give take ('ours' or 'theirs') or value")
            out.append((r["row_id"], r["column"], "value", r["value"]))
        elif take in ("ours", "theirs"):
            out.append((r["row_id"], r["column"], take, None))
        else:
            raise ValueError(f"resolve[{k}]: take {take!r}: expected 'ours' or 'theirs'")
    return out


def _as_vectors(name: str, values):
    """``(field, rows)`` when ``values`` are vectors: a 2-D numpy array, an Arrow
    ``FixedSizeList`` (or polars ``Array``) column, or a list of equal-length 1-D numpy arrays,
    as an ``NDArrayField(dtype, (d,))`` and one 1-D array a row; ``(None, values)`` for anything
    else. An array of more dimensions raises naming ``NDArrayField``."""
    import pyarrow as pa

    from beton.fields import NDArrayField

    if hasattr(values, "to_arrow") and not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_arrow()  # a polars Series
    matrix = None
    if isinstance(values, np.ndarray):
        if values.ndim > 2:
            raise ValueError(f"add_column: values for {name!r} are a {values.ndim}-D array: a vector column takes "
                             f"a 2-D array (rows x d); for arrays of shape {values.shape[1:]} per row give "
                             f"field=NDArrayField(dtype, shape)")
        matrix = values if values.ndim == 2 else None
    elif isinstance(values, (pa.Array, pa.ChunkedArray)) and pa.types.is_fixed_size_list(values.type):
        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        d = values.type.list_size
        flat = arr.values.slice(arr.offset * d, len(arr) * d)
        if arr.null_count or flat.null_count:
            raise ValueError(f"add_column: values for {name!r} have {arr.null_count} NULL vectors and "
                             f"{flat.null_count} NULL elements; a vector column added this way has a whole "
                             f"vector in every row")
        matrix = flat.to_numpy(zero_copy_only=False).reshape(len(arr), d)
    elif isinstance(values, (list, tuple)) and values and all(isinstance(v, np.ndarray) for v in values):
        shapes = {v.shape for v in values}
        dtypes = {v.dtype for v in values}
        if any(len(sh) != 1 for sh in shapes):
            raise ValueError(f"add_column: values for {name!r} are arrays of shapes {sorted(shapes)[:3]}: a vector "
                             f"column takes 1-D arrays; for others give field=NDArrayField(dtype, shape)")
        if len(shapes) > 1 or len(dtypes) > 1:
            raise ValueError(f"add_column: values for {name!r} are 1-D arrays of lengths "
                             f"{sorted(s[0] for s in shapes)[:5]} and dtypes {sorted(map(str, dtypes))}: a vector "
                             f"column's rows have one length and dtype")
        matrix = np.stack(values)
    if matrix is None:
        return None, values
    if matrix.dtype.kind not in "iuf":
        raise ValueError(f"add_column: values for {name!r} are {matrix.dtype} vectors: a vector column holds "
                         f"ints or floats (float32, float16, int8, uint8, ...)")
    # Stored little-endian, as numpy has it on this machine's byte order or not.
    matrix = np.ascontiguousarray(matrix, dtype=matrix.dtype.newbyteorder("<"))
    return NDArrayField(matrix.dtype, (matrix.shape[1],)), list(matrix)
