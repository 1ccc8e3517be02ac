"""``beton.open(path)``: a ``.beton`` file or a dataset directory as a database (values, Arrow
table, SQL, splits); a dataset directory is versioned and editable (docs/FORMAT.md §13)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from beton import _native
from beton._native import IndexSet


class _Stream:
    """An object exposing the Arrow C stream interface over one capsule."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self._capsule


def _value(kind: str, raw: Any) -> Any:
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


def _one_column(name: str, values):
    """``values`` (numpy, pyarrow, polars, a list) as a one-column ``pyarrow.Table``."""
    import pyarrow as pa

    if hasattr(values, "to_arrow") and not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_arrow()  # polars Series
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(values)
    return pa.table({name: values})


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


def _encode_all(field, name: str, values) -> list:
    """``values`` as ``field`` encodes them for the writer; a bad one is named by position."""
    out = []
    for i, v in enumerate(values):
        try:
            out.append(field.encode(v))
        except (TypeError, ValueError) as e:
            raise ValueError(f"value {i} for '{name}': {e}") from None
    return out


class Dataset:
    """An open, validated ``.beton`` file or one version of a dataset directory (``beton.open``).

    A directory's edits (``update``, ``delete``, ``add_column``, ``append``, ...) each commit a new
    version atomically; the object then shows it. Older versions stay readable
    (``beton.open(dir, version=n)``) until ``cleanup``."""

    def __init__(self, path, custom: Optional[Dict[str, tuple]] = None, version=None):
        import os

        if os.path.isdir(path):
            self._native = _native.Version(str(path), version)
        else:
            if version not in (None, 1):
                raise ValueError(f"{path} is a .beton file: it has version 1 only")
            self._native = _native.Dataset(str(path), custom)
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

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def path(self):
        return self._native.path

    @property
    def schema(self) -> Dict[str, Any]:
        """``{field: type}``; arrays as ``(type, dtype, shape)``."""
        return {
            name: (kind if details is None else (kind, details[0], tuple(details[1])))
            for name, kind, details in self._native.fields()
        }

    def __getitem__(self, index: int) -> Dict[str, Any]:
        """Sample ``index`` as a dict: ints, floats, bytes, str, parsed JSON, numpy arrays,
        images as HWC uint8 arrays."""
        raw = self._native.get(index)
        return {name: _value(self._kinds[name], v) for name, v in raw.items()}

    def columns(self) -> List[str]:
        """The data table's column names (``image.width``, ``label``, ...)."""
        return self._native.column_names()

    def table(self, columns: Optional[List[str]] = None):
        """The data table as a ``pyarrow.Table`` (through the Arrow C stream interface: the
        numeric columns are the Rust Arrow buffers, not copies)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(_Stream(self._native.table_stream(columns))).read_all()

    def __arrow_c_stream__(self, requested_schema=None):
        return self._native.table_stream(None)

    def to_polars(self, columns: Optional[List[str]] = None):
        """The data table as a ``polars.DataFrame``."""
        import polars as pl

        return pl.from_arrow(self.table(columns))

    def query(self, sql: str):
        """Runs ``SELECT ... FROM samples ...``; returns a ``pyarrow.Table``."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(_Stream(self._native.query_stream(sql))).read_all()

    def where(self, predicate: str) -> IndexSet:
        """The rows a predicate (``label < 5 AND image.width >= 224``) or ``SELECT`` matches."""
        return self._native.select(predicate)

    # Named splits, stored in the file.
    def splits(self) -> Dict[str, IndexSet]:
        return self._native.splits()

    def split(self, name: str) -> IndexSet:
        return self._native.split(name)

    def save_splits(self, **sets: IndexSet) -> None:
        """``ds.save_splits(train=a, val=b)``: adds or replaces them in one crash-safe update."""
        self._native.save_splits(dict(sets))

    def remove_splits(self, *names: str) -> None:
        self._native.remove_splits(list(names))

    # Versions and edits (dataset directories).
    def _editable(self, what: str):
        if not isinstance(self._native, _native.Version):
            raise TypeError(f"{what}: {self.path} is a .beton file, which is read-only; make a dataset "
                            f"directory with beton.import_file(DIR, {str(self.path)!r})")
        return self._native

    def _edited(self) -> "Dataset":
        self._refresh()
        return self

    @property
    def version(self) -> int:
        """This version's number (1 for a ``.beton`` file)."""
        return getattr(self._native, "version", 1)

    def versions(self) -> List[Dict[str, Any]]:
        """Every version: ``version``, ``parent``, ``timestamp_ms``, ``operation``, ``details``,
        ``message``, ``num_rows``, ``data_files``, ``deleted_rows``; oldest first."""
        if not isinstance(self._native, _native.Version):
            return [{"version": 1, "parent": None, "operation": "file", "num_rows": len(self)}]
        return self._native.versions()

    def tags(self) -> Dict[str, int]:
        return self._editable("tags").tags()

    def tag(self, name: str) -> None:
        """Names this version (``beton.open(dir, version=name)``); tagged versions survive cleanup."""
        self._editable("tag").tag(name)

    def checkout(self, version) -> "Dataset":
        """Another version (a number or a tag) of this dataset, read-only history."""
        return Dataset(self._editable("checkout").path, version=version)

    def restore(self, version) -> "Dataset":
        """Makes an older version the latest again, as a new version."""
        native = self._editable("restore")
        if not isinstance(version, int):
            tags = native.tags()
            if version not in tags:
                raise KeyError(f"restore: no tag {version!r}; the tags are {sorted(tags)}")
            version = tags[version]
        native.restore(version)
        return self._edited()

    def update(self, set: Dict[str, Any], where: Optional[str] = None, message: str = "") -> "Dataset":  # noqa: A002
        """``ds.update({"label": 3, "score": "score * 2"}, where="label = 7")``: numbers and bools
        are values, strings SQL expressions (``"'text'"`` for a text value), as Lance's update.
        The new values go to column files; the data files are not rewritten."""
        pairs = [(k, _sql_literal(v)) for k, v in dict(set).items()]
        self._editable("update").update(pairs, where, message)
        return self._edited()

    def update_rows(self, ids, values: Dict[str, Any], message: str = "") -> "Dataset":
        """Sets ``values[field]`` (one value per row, or one for all) on rows ``ids`` (an
        IndexSet or a sequence of indices of this version)."""
        rows = ids if isinstance(ids, IndexSet) else IndexSet(sorted(int(i) for i in ids))
        native = self._editable("update_rows")
        details = {name: d for name, _, d in native.fields()}
        cols, objects = [], []
        for name, v in values.items():
            kind = self._kinds.get(name)
            if kind is None or kind in _PLAIN_KINDS:
                cols.append((name, _one_column(name, v)))
            else:
                # Images, bytes, JSON, arrays: encoded as the field's class encodes them.
                field = _field_of(kind, details[name])
                objects.append((name, _encode_all(field, name, v), field.options()))
        native.update_rows(rows, cols, objects=objects, message=message)
        return self._edited()

    def delete(self, where, message: str = "") -> "Dataset":
        """Deletes the rows a SQL predicate (str) or an IndexSet picks."""
        native = self._editable("delete")
        if isinstance(where, str):
            native.delete(sql=where, message=message)
        else:
            native.delete(rows=where if isinstance(where, IndexSet) else IndexSet(sorted(int(i) for i in where)),
                          message=message)
        return self._edited()

    def add_column(self, name: str, values, message: str = "", field=None) -> "Dataset":
        """Adds a field: a SQL expression over each row (str), or one value per row (numpy,
        pyarrow, polars, a list; int, float, bool or text), or, with ``field`` (a field class
        instance: ``RGBImageField()``, ``NDArrayField(dtype, shape)``, ``JSONField()``, ...), one
        Python value per row as that field takes it in ``DatasetWriter``. Images are encoded
        once, into the column file; the data files are never rewritten."""
        native = self._editable("add_column")
        if isinstance(values, str):
            native.add_column(name, sql=values, message=message)
        elif field is not None:
            native.add_column(name, objects=_encode_all(field, name, values), type_name=field.type_name,
                              options=field.options(), message=message)
        else:
            native.add_column(name, values=_one_column(name, values), message=message)
        return self._edited()

    def drop_column(self, name: str, message: str = "") -> "Dataset":
        self._editable("drop_column").drop_column(name, message)
        return self._edited()

    def append(self, source, message: str = "", image_field: str = "image", label_field: str = "label",
               **writer_options) -> "Dataset":
        """Adds rows: a ``.beton`` file (hard-linked, never re-encoded), or an ImageFolder
        directory (written with ``DatasetWriter`` into fields ``image_field`` and
        ``label_field``; ``writer_options`` go to the image field)."""
        import os

        native = self._editable("append")
        if os.path.isdir(source):
            import tempfile

            from beton.fields import IntField, RGBImageField
            from beton.writer import DatasetWriter

            tmp_dir = os.path.join(str(self.path), "_tmp")
            os.makedirs(tmp_dir, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=tmp_dir) as tmp:
                out = os.path.join(tmp, "append.beton")
                DatasetWriter(out, {image_field: RGBImageField(**writer_options), label_field: IntField()},
                              progress=False).from_imagefolder(source, image_field, label_field)
                native.append_file(out, message)
        else:
            native.append_file(str(source), message)
        return self._edited()

    def compact(self, num_workers: int = 0, message: str = "") -> "Dataset":
        """Folds data files, deletions and column files into one new data file (payloads copied
        byte for byte): the same rows, row ids and splits."""
        self._editable("compact").compact(num_workers, message)
        return self._edited()

    def cleanup(self, keep_versions: int = 1, older_than_seconds: float = 3600.0) -> Dict[str, Any]:
        """Removes versions older than the newest ``keep_versions`` (tags are kept) and every file
        no kept version references, if older than ``older_than_seconds``."""
        versions, files, nbytes = self._editable("cleanup").cleanup(keep_versions, older_than_seconds)
        return {"versions": versions, "files": files, "bytes": nbytes}

    def export(self, path, where=None, num_workers: int = 0) -> int:
        """Writes this version's rows (all, those of a SQL predicate, or an IndexSet) as one
        standalone ``.beton`` file that FFCV 1.0.2 loads, splits included. Returns the rows."""
        rows = self.where(where) if isinstance(where, str) else where
        if not isinstance(self._native, _native.Version):
            raise TypeError("export: use beton.import_file first, or copy the .beton file")
        return self._native.export(str(path), rows, num_workers)

    def to_parquet(self, path, columns: Optional[List[str]] = None) -> None:
        """Writes the data table (every column, or ``columns``) as a Parquet file."""
        import pyarrow.parquet as pq

        pq.write_table(self.table(columns), str(path))

    def diff(self, a=None, b=None) -> Dict[str, Any]:
        """What changed from version ``a`` to ``b`` (numbers or tags; default: this version's
        parent to this version): ``added`` and ``deleted`` row ids, ``added_columns``,
        ``dropped_columns``, and ``changed``: for each column of both, the row ids whose value
        differs."""
        return self._editable("diff").diff(a, b)


def open(path, custom: Optional[Dict[str, tuple]] = None, version=None) -> Dataset:  # noqa: A001
    """Opens and validates a ``.beton`` file, or version ``version`` (a number, a tag; default
    the latest) of a dataset directory."""
    return Dataset(path, custom, version=version)


def import_file(dir, file) -> Dataset:  # noqa: A002
    """Makes ``dir`` a dataset directory whose version 1 is the ``.beton`` file ``file``
    (hard-linked, never re-encoded; its named splits move into the manifest)."""
    return Dataset._of(_native.Version.import_file(str(dir), str(file)))


def concat(sources, out, message: str = "") -> Dataset:
    """A new dataset directory ``out`` holding the rows of ``sources`` in order: ``.beton`` files
    (hard-linked) or datasets (their latest versions, exported once)."""
    if not sources:
        raise ValueError("concat needs at least one source")
    paths = [str(s.path if isinstance(s, Dataset) else s) for s in sources]
    return Dataset._of(_native.Version.concat(str(out), paths, message))
