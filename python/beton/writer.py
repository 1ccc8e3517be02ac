"""FFCV's ``DatasetWriter``: writes a ``.beton`` file from an indexed dataset, an iterable, an
ImageFolder or an Arrow table. Encoding runs in Rust threads; only fetching samples from Python
holds the GIL (an Arrow table is read by Rust directly, no Python per row); a beton dataset is
copied natively, its stored bytes as they are. The file appears atomically when complete. With
tqdm installed (``pip install beton[progress]``) the writers show a progress bar."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np

from beton import _doc, _native
from beton._writing import _interactive, _progress, _progress_bar, _rgb, _warn_filled  # noqa: F401 (tests read two)
from beton.dataset import Dataset, import_file
from beton.dataset._open import is_handle
from beton.fields.base import Field, native_fields, value_encoder
# Names FFCV's ffcv.writer binds (user code imports them from here).
from beton.types import get_metadata_type  # noqa: F401
from beton.utils import chunks, is_power_of_2  # noqa: F401

# FFCV's page size limits: 2 MiB (the usual huge page) and 4 GiB (the largest a uint32 holds).
MIN_PAGE_SIZE = 1 << 21
MAX_PAGE_SIZE = 1 << 32


# The Returns section of the methods that write a file.
_returns_report = _doc.fill({"{returns_report}": (
    "Returns\n-------\ndict\n    The report: ``path``, ``num_samples``, ``num_pages``, ``page_size``, ``file_len``,\n"
    "    ``skipped``.")})


def _arrow_chunk_size(fields: Dict[str, Field], table) -> int:
    """Rows the native writer encodes per parallel step for ``table``. Each step costs the
    writer a hand-off to its threads and a progress call (tens of microseconds); the default
    256 suits images, whose encoding dwarfs that, but makes the hand-offs most of the time of a
    table of numbers. Without image fields a step takes about 8 MiB of Arrow data (the writer
    holds about two steps of encoded rows), between 256 and 65536 rows."""
    from beton.fields import RGBImageField

    if any(isinstance(f, RGBImageField) for f in fields.values()) or table.num_rows == 0:
        return 256
    row_bytes = max(1, table.nbytes // table.num_rows)
    return max(256, min(65536, (8 << 20) // row_bytes))


def _arrow_column(field: Field, name: str, column: str, col):
    """``col`` (a ``pyarrow.ChunkedArray``) in a type the native writer reads for ``field``:
    dictionaries decoded, extension types as their storage, list elements cast to an array
    field's dtype, and any column of a JSON field that is not already JSON text serialised
    with ``json.dumps`` (Python per row: Arrow has no JSON writer here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from beton.fields import ArrayField, JSONField, NDArrayField

    where = f"field {name!r} (column {column!r})"
    if isinstance(col.type, pa.BaseExtensionType):  # pa.json_() included: JSON text
        col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    t = col.type
    is_string_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16
    is_string = pa.types.is_string(t) or pa.types.is_large_string(t) or is_string_view(t)
    if isinstance(field, JSONField) and not is_string:
        return pa.chunked_array([pa.array([None if v is None else json.dumps(v) for v in col.to_pylist()],
                                          type=pa.large_string())])
    if isinstance(field, (NDArrayField, ArrayField)) and (
            pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        dtype = field.dtype.newbyteorder("<") if field.dtype.itemsize > 1 else field.dtype
        if dtype.kind == "b":
            # The native writer takes a bool array's bytes (0 or 1 each), as binary.
            if not pa.types.is_boolean(t.value_type):
                raise TypeError(f"{where}: a bool array field takes lists of bools, not {t}")
            return pa.chunked_array([pa.array(
                [None if v is None else np.asarray(v, dtype=np.uint8).tobytes() for v in col.to_pylist()],
                type=pa.large_binary())])
        element = pa.from_numpy_dtype(dtype)
        if t.value_type != element and (pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)
                                        or pa.types.is_boolean(t.value_type)):
            target = (pa.list_(element, t.list_size) if pa.types.is_fixed_size_list(t)
                      else pa.large_list(element) if pa.types.is_large_list(t) else pa.list_(element))
            try:
                col = pc.cast(col, target)
            except pa.ArrowNotImplementedError:
                pass  # the native writer names the types it takes
            except pa.ArrowInvalid as e:
                raise ValueError(f"{where}: casting {t} to {target}: {e}") from None
    return col


def _field_matches(field: Field, kind: str, details) -> bool:
    """True when ``field`` (a writer's) has the type of a stored field ``(kind, details)``, so
    that the stored values can be copied into it as they are."""
    if field.type_name != kind:
        return False
    if details is None:  # no element: every field of the kind stores what the stored one does
        return True
    options = field.options() or {}  # an array field's element: its dtype and shape (an ArrayField's is [])
    return (options.get("dtype"), list(options.get("shape", []))) == (details[0], list(details[1]))


def _native_of(dataset):
    """The native ``Dataset`` or ``Version`` behind a beton dataset, else None."""
    if isinstance(dataset, Dataset):
        return dataset._native
    if is_handle(dataset):
        return dataset
    return None


class DatasetWriter:
    """FFCV's ``DatasetWriter``: writes samples into a ``.beton`` file, FFCV 1.0.2's format.

    Parameters
    ----------
    fname : str or os.PathLike
        The file to write (it appears atomically when complete). An existing directory, or a
        path ending in ``/``, writes a dataset directory: its version 1 when new
        (``beton.import_file``), else a new version appending the rows (``Dataset.append``);
        the report then has ``version``. A URL (``s3://bucket/f.beton``; ``s3://bucket/ds/``
        for a dataset directory) is written locally, then uploaded (docs/REMOTE.md).
    fields : dict of str to Field
        ``{name: field}`` in file order: ``RGBImageField()``, ``IntField()``, ``FloatField()``,
        ``NDArrayField(dtype, shape)``, ``JSONField()``, ``BytesField()``, ``TextField()``, ...
    page_size : int, optional
        A power of two in [2 MiB, 4 GiB), used as given (FFCV's layout). ``None`` (the
        default; FFCV's is 8 MiB) chooses it from the payload, so that a small file is not
        padded to whole 8 MiB pages: a file of under 64 MiB of payload takes the largest
        power of two from 4 KiB to 8 MiB whose file is within 3 % of the smallest any gives
        (two images take about their bytes), a larger one FFCV's 8 MiB. FFCV 1.0.2 loads
        both (docs/FORMAT.md §5); the report's ``page_size`` says which was used.
    num_workers : int, default -1
        Encoding threads (-1 or 0: every core). The output does not depend on it. Samples are
        fetched from Python (``dataset[i]``, an iterable's items, a field's ``encode``) on the
        thread that called the writer, one at a time and in write order, never concurrently,
        whatever ``num_workers``: a dataset may keep global state (``np.random.seed(i)`` then
        ``np.random.randn(...)``, FFCV's idiom) or use a reader that is not thread-safe. The
        threads encode (JPEG, resizing, copying) the samples already fetched meanwhile.
    seed : int, default 0
        Seeds per-sample random choices (``write_mode='proportion'``) and ``shuffle_indices``.
    progress : bool, default True
        Show a tqdm progress bar when tqdm is installed (``pip install beton[progress]``) and
        stderr is a terminal or a notebook shows it (never into a log file; ``BETON_PROGRESS=1``
        forces it on, ``0`` off).
    skip_bad : bool, default False
        Leave out samples whose images cannot be read or decoded instead of failing the
        write; the report's ``skipped`` lists ``(index, why)`` (``why`` names the file).
    alpha_background : tuple of 3 int, optional
        What images with transparency (PNGs with alpha or ``tRNS``, RGBA arrays) are flattened
        onto. ``None`` (the default) drops alpha and keeps the colour channels, as FFCV does,
        which shows colours hidden under transparent pixels (often black squares in clip art);
        ``(r, g, b)`` composites each pixel onto that colour, straight alpha rounded to
        nearest: ``out = round((a * c + (255 - a) * bg) / 255)`` per channel. The report's
        ``alpha_flattened`` counts the images that had a pixel with alpha below 255 and
        ``alpha_flattening`` says how they were flattened; with alpha dropped the write also
        warns (``UserWarning``). PIL images with transparency (RGBA, LA, PA, a ``transparency``
        entry) go to the writer as RGBA arrays, so they are counted and flattened the same way.

    Examples
    --------
    >>> from beton import DatasetWriter
    >>> from beton.fields import IntField, RGBImageField
    >>> w = DatasetWriter("photos.beton", {"image": RGBImageField(write_mode="jpg"), "label": IntField()})
    >>> w.from_imagefolder("photos/", with_path=True)  # doctest: +SKIP
    {'path': 'photos.beton', 'num_samples': 155, ..., 'classes': ['bird', 'cat', ...]}
    """

    def __init__(self, fname, fields: Dict[str, Field], page_size: Optional[int] = None, num_workers: int = -1,
                 seed: int = 0, progress: bool = True, skip_bad: bool = False,
                 alpha_background: Optional[Sequence[int]] = None):
        self.fname = str(fname)
        self.skip_bad = bool(skip_bad)
        self.alpha_background = _rgb("alpha_background", alpha_background)
        self.fields = dict(fields)
        self.page_size = None if page_size is None else int(page_size)
        self.num_workers = 0 if num_workers is None or num_workers < 0 else int(num_workers)
        self.seed = int(seed)
        self.progress = progress
        # Whether a file written where it stays gets its columnar copy (beton.ray's write tasks,
        # whose files move into a dataset directory, say no).
        self._columnar_copy = True

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}: {type(f).__name__}" for k, f in self.fields.items())
        return f"DatasetWriter({self.fname!r}, {{{fields}}})"

    def _write(self, n: int, get, finish=None, chunk_size: int = 256) -> Dict[str, Any]:
        names = list(self.fields)
        fields = [self.fields[k] for k in names]
        # beton's conversion of each field's values, or a custom field's FFCV encode.
        encoders = [value_encoder(k, self.fields[k]) for k in names]

        def sample(i):
            values = get(i)
            if isinstance(values, dict):
                values = [values[k] for k in names]
            if len(values) != len(fields):
                raise ValueError(f"sample {i} has {len(values)} values for {len(fields)} fields {names}")
            encoded = []
            for name, encode, v in zip(names, encoders, values):
                try:
                    encoded.append(encode(v))
                except (TypeError, ValueError) as e:  # the native writer adds the sample
                    raise type(e)(f"field {name!r}: {e}") from None
            return encoded

        with _progress(n, self.progress) as progress, self._destination() as (path, publish, stays):
            report = _native.write(path, native_fields(self.fields), n, sample,
                                   page_size=self.page_size, num_workers=self.num_workers,
                                   seed=self.seed, chunk_size=chunk_size, progress=progress,
                                   skip_bad=self.skip_bad, columnar_copy=stays and finish is None,
                                   alpha_background=self.alpha_background)
            if finish is not None:
                finish(path)  # rewrites part of the file: its copy is made after
                if stays:
                    _native.make_columnar_copy(path)
            return publish(report)

    @contextlib.contextmanager
    def _destination(self):
        """Where the native writer writes, and what publishes its report: the file itself, or,
        for a dataset directory, a temporary file in it that becomes a version. A URL is written
        locally first: a ``.beton`` file is then uploaded, a dataset directory (a URL ending in
        ``/``, or one that is a dataset already) gets a version through the store."""
        is_url = "://" in self.fname
        is_dir = (self.fname.endswith("/") or _native.Dataset.is_dataset_dir(self.fname)) if is_url else (
            os.path.isdir(self.fname) or self.fname.endswith(os.sep))
        if is_url and not is_dir:
            with tempfile.TemporaryDirectory(prefix="beton-upload-") as tmp:
                path = os.path.join(tmp, "write.beton")

                def upload(report):
                    _native.upload_file(path, self.fname)
                    return dict(report, path=self.fname)

                yield path, upload, False
            return
        if not is_dir:
            # The file stays: it gets its columnar copy (unless the caller moves it on).
            yield self.fname, lambda report: report, self._columnar_copy
            return
        directory = self.fname.rstrip("/" if is_url else os.sep) or os.sep
        tmp_dir = None if is_url else os.path.join(directory, "_tmp")
        if tmp_dir is not None:
            os.makedirs(tmp_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=tmp_dir) as tmp:
            path = os.path.join(tmp, "write.beton")

            def publish(report):
                if _native.Dataset.is_dataset_dir(directory):
                    ds = Dataset(directory).append(path, message="DatasetWriter")
                else:
                    ds = import_file(directory, path)
                report = dict(report)
                report["path"], report["version"] = directory, ds.version
                return report

            yield path, publish, False

    @_returns_report
    def from_indexed_dataset(self, dataset, indices: Optional[Sequence[int]] = None, chunksize: int = 100,
                             shuffle_indices: bool = False, copy_stored: bool = True):
        """Writes ``dataset[i]`` for ``i`` in ``indices``, in that order.

        A beton ``Dataset`` (a ``.beton`` file or a dataset version, from ``beton.open``) whose
        fields include the writer's, with the same types, is copied natively: every value as
        it is stored, JPEGs byte for byte, never decoded or re-encoded (the writer's image
        options do not apply then; ``copy_stored=False`` re-encodes with them). Its class names
        go with it. Any other dataset (a torch ``Dataset``, a list) is read in Python, one
        sample at a time.

        Parameters
        ----------
        dataset : Dataset or indexable
            ``dataset[i]`` is a tuple (in field order) or a dict of field values.
        indices : IndexSet or sequence of int, optional
            The samples to write (default: all), e.g. ``ds.where("label < 3")``.
        chunksize : int, default 100
            Samples fetched and encoded per parallel step (FFCV's chunk of work per worker).
        shuffle_indices : bool, default False
            Write the samples in a seeded random order (the writer's ``seed``).
        copy_stored : bool, default True
            Copy a beton dataset's stored bytes (see above).

        {returns_report}

        Raises
        ------
        KeyError
            When a beton dataset lacks a field of the writer (the message lists its fields).
        ValueError
            For a sample whose values do not fit their fields, or an index past the end.

        Examples
        --------
        >>> ds = beton.open("photos.beton")  # doctest: +SKIP
        >>> w = DatasetWriter("small.beton", {"image": RGBImageField(), "label": IntField()})
        >>> w.from_indexed_dataset(ds, indices=ds.where("label < 3"))  # doctest: +SKIP
        {'path': 'small.beton', 'num_samples': 77, ...}
        """
        n = len(dataset)
        if indices is None:
            idx = list(range(n))
        else:
            idx = [int(i) + n if int(i) < 0 else int(i) for i in indices]
        if shuffle_indices:
            import random

            random.Random(self.seed).shuffle(idx)
        native = _native_of(dataset) if copy_stored else None
        if native is not None:
            stored = {name: (kind, details) for name, kind, details in native.fields()}
            missing = [k for k in self.fields if k not in stored]
            if missing:
                raise KeyError(f"from_indexed_dataset: the dataset has no field {missing[0]!r} of the writer; "
                               f"its fields are {list(stored)}")
            if all(_field_matches(f, *stored[k]) for k, f in self.fields.items()):
                return self._copy(native, idx)
        if int(chunksize) < 1:
            raise ValueError(f"chunksize is {chunksize}: samples per step, at least 1")
        return self._write(len(idx), lambda i: dataset[idx[i]], chunk_size=int(chunksize))

    def from_webdataset(self, shards: Sequence[str], pipeline):
        """FFCV's ``from_webdataset``: writes the samples of WebDataset shards, in shard order.

        Parameters
        ----------
        shards : list of str
            The shards (tar files or URLs ``webdataset`` opens).
        pipeline : callable
            Takes a ``webdataset.WebDataset`` over one shard and returns an iterable of
            samples, each a tuple in the writer's field order (as in FFCV).

        Returns
        -------
        dict
            The write's report.

        Raises
        ------
        ImportError
            Without the ``webdataset`` package.

        Examples
        --------
        >>> w = DatasetWriter("wds.beton", {"image": RGBImageField(), "label": IntField()})  # doctest: +SKIP
        >>> w.from_webdataset(["shard-0.tar"], lambda d: d.to_tuple("jpg", "cls").map_tuple(
        ...     lambda jpg: jpg, lambda c: int(c)))  # doctest: +SKIP
        """
        try:
            import webdataset  # noqa: F401
        except ImportError as e:
            raise ImportError("from_webdataset needs the webdataset package (pip install webdataset)") from e
        samples = [sample for shard in shards for sample in from_shard(shard, pipeline)]
        return self.from_iterable(samples)

    def _copy(self, native, rows) -> Dict[str, Any]:
        """Copies rows ``rows`` of a native dataset (values as stored) to the destination."""
        with _progress(len(rows), self.progress) as progress, self._destination() as (path, publish, _):
            report = native.copy_to(path, fields=list(self.fields), rows=rows, page_size=self.page_size,
                                    num_workers=self.num_workers)
            progress(len(rows), len(rows))  # the native copy reports no steps: the bar ends full
            _warn_filled(self.fname, report.get("filled", []), stacklevel=4)
            return publish(report)

    @_returns_report
    def from_iterable(self, iterable: Iterable, length: Optional[int] = None):
        """Writes the samples an iterable yields.

        Parameters
        ----------
        iterable : iterable
            Samples: tuples (in field order) or dicts of field values. One without a length
            is materialised first.
        length : int, optional
            The samples to write (default: its length).

        {returns_report}

        Raises
        ------
        ValueError
            For a sample with the wrong number of values, or values that do not fit.

        Examples
        --------
        >>> w = DatasetWriter("nums.beton", {"x": IntField(), "y": FloatField()})  # doctest: +SKIP
        >>> w.from_iterable(((i, i / 2) for i in range(10)))["num_samples"]  # doctest: +SKIP
        10
        """
        items: Any = iterable if hasattr(iterable, "__getitem__") and hasattr(iterable, "__len__") else list(iterable)
        return self._write(len(items) if length is None else length, lambda i: items[i])

    def from_imagefolder(self, root, image_field: str = "image", label_field: str = "label",
                         with_path: bool = False, path_field: str = "path"):
        """Writes an ImageFolder (``root/CLASS/IMAGE``), as ``beton write-imagefolder`` does.

        In torchvision's order (classes sorted, labels their positions, images found
        recursively): each image file into ``image_field`` (read and encoded by Rust threads),
        its label into ``label_field``, and with ``with_path`` its path relative to ``root``
        into ``path_field`` (a text field, added to ``self.fields`` when the writer lacks it).
        The class names are stored in the file (``beton.open(f).classes``; FFCV still loads
        it).

        The CLI's options map to the writer: ``--mode``, ``--max-resolution``, ``--quality``,
        ``--smart-threshold``, ``--proportion``, ``--no-passthrough`` and
        ``--restart-interval`` to the image field (``RGBImageField(write_mode=...,
        max_resolution=..., jpeg_quality=..., smart_threshold=..., compress_probability=...,
        jpeg_passthrough=..., jpeg_restart_interval=...)``); ``--workers``, ``--page-size``,
        ``--seed`` and ``--skip-bad`` to ``DatasetWriter(num_workers=..., page_size=...,
        seed=..., skip_bad=...)``; ``--with-path`` to ``with_path=True``.

        Parameters
        ----------
        root : str or os.PathLike
            The folder: one sub-folder per class.
        image_field : str, default 'image'
            The writer's image field (``RGBImageField`` or ``GreyImageField``).
        label_field : str, default 'label'
            The writer's label field (``IntField``).
        with_path : bool, default False
            Also write each image's path relative to ``root``.
        path_field : str, default 'path'
            The field the paths go into (a ``TextField``).

        Returns
        -------
        dict
            The report: ``path``, ``num_samples``, ``num_pages``, ``page_size``, ``file_len``,
            ``skipped``, and ``classes``.

        Raises
        ------
        ValueError
            For a writer whose fields are not those this writes (naming them), a folder with
            no classes or images, an image format beton does not read (naming the file), or a
            path that is not UTF-8.
        TypeError
            For an image, label or path field of the wrong type.

        Examples
        --------
        >>> w = DatasetWriter("photos.beton", {"image": RGBImageField(write_mode="jpg", max_resolution=256),
        ...                                    "label": IntField()})
        >>> report = w.from_imagefolder("photos/", with_path=True)  # doctest: +SKIP
        >>> list(w.fields), report["classes"][:2]  # doctest: +SKIP
        (['image', 'label', 'path'], ['bird', 'cat'])
        """
        from beton.fields import IntField, TextField

        if with_path:
            existing = self.fields.get(path_field)
            if existing is None:
                self.fields[path_field] = TextField()
            elif existing.type_name != "text":
                raise TypeError(f"from_imagefolder(with_path=True): field {path_field!r} is a "
                                f"{type(existing).__name__}; the image paths are text (TextField)")
        wanted = [image_field, label_field] + ([path_field] if with_path else [])
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"from_imagefolder: image_field, label_field and path_field must differ, got {wanted}")
        if set(self.fields) != set(wanted):
            missing = [k for k in wanted if k not in self.fields]
            extra = [k for k in self.fields if k not in wanted]
            why = "; ".join(filter(None, [f"it lacks {missing}" if missing else "",
                                          f"it has {extra} too" if extra else ""]))
            raise ValueError(f"from_imagefolder writes fields {wanted}; this writer has {list(self.fields)}: {why} "
                             f"(pass image_field=, label_field=, with_path=)")
        if self.fields[image_field].type_name not in ("rgb_image", "grey_image"):
            raise TypeError(f"from_imagefolder: field {image_field!r} gets the images: it must be an "
                            f"RGBImageField or GreyImageField, not {type(self.fields[image_field]).__name__}")
        if self.fields[label_field].type_name != IntField.type_name:
            raise TypeError(f"from_imagefolder: field {label_field!r} gets the labels: it must be an IntField, "
                            f"not {type(self.fields[label_field]).__name__}")
        classes, samples = _native.scan_imagefolder(str(root))
        rel = []
        if with_path:
            for p, _ in samples:
                r = os.path.relpath(str(p), str(root))
                try:
                    r.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"from_imagefolder(with_path=True): {p!s} is not valid UTF-8 "
                                     f"(the path field is text)") from None
                rel.append(r)

        def sample(i):
            path, label = samples[i]
            values = {image_field: str(path), label_field: label}
            if with_path:
                values[path_field] = rel[i]
            return values

        report = self._write(len(samples), sample, finish=lambda path: _save_classes(path, classes))
        report["classes"] = classes
        return report

    @_returns_report
    def from_arrow(self, table, columns: Optional[Dict[str, str]] = None):
        """Writes the rows of an Arrow table, no Python per row.

        Each field takes the column of its name (or ``columns[field]``); the table crosses into
        Rust once. Columns by field: int from any integer type; float from float or integer
        types; bool from boolean; text from strings; json from strings holding JSON text (other
        columns are serialised with ``json.dumps`` first, in Python); bytes from binary;
        ndarray, torch_tensor and array from binary (the array's bytes) or lists of numbers
        (cast to the field's dtype); images from strings (file paths) or binary (encoded
        JPEG/PNG).

        Parameters
        ----------
        table : pyarrow.Table, polars.DataFrame, pandas.DataFrame or dict
            Anything ``pyarrow.table()`` accepts.
        columns : dict of str to str, optional
            ``{field: column}`` where they differ.

        {returns_report}

        Raises
        ------
        KeyError
            For a field with no column (the message lists the columns).
        TypeError
            For a column of a type the field cannot take.
        ValueError
            For a null, or an integer beyond int64, naming the field, the column and the row.

        Examples
        --------
        >>> import pyarrow as pa
        >>> w = DatasetWriter("t.beton", {"label": IntField(), "caption": TextField()})  # doctest: +SKIP
        >>> w.from_arrow(pa.table({"label": [1, 2], "caption": ["a", "b"]}))["num_samples"]  # doctest: +SKIP
        2
        """
        import pyarrow as pa

        if not isinstance(table, pa.Table):
            table = pa.table(table)
        columns = dict(columns or {})
        arrays, names = [], []
        for name, field in self.fields.items():
            col = columns.get(name, name)
            if col not in table.column_names:
                raise KeyError(f"field {name!r}: no column {col!r}; the columns are {table.column_names}")
            arrays.append(_arrow_column(field, name, col, table.column(col)))
            names.append(col)
        # Column k feeds field k (a column may feed several fields).
        data = pa.Table.from_arrays(arrays, names=names)
        with _progress(data.num_rows, self.progress) as progress, self._destination() as (path, publish, stays):
            return publish(_native.write_arrow(
                path, native_fields(self.fields), data, page_size=self.page_size,
                num_workers=self.num_workers, seed=self.seed, chunk_size=_arrow_chunk_size(self.fields, data),
                progress=progress, skip_bad=self.skip_bad, columnar_copy=stays,
                alpha_background=self.alpha_background))


def _save_classes(path: str, classes) -> None:
    """Stores ImageFolder class names in the file just written (its split region)."""
    try:
        _native.Dataset(path).save_classes(list(classes))
    except ValueError as e:
        raise ValueError(f"{path}: storing the {len(classes)} class names: {e}") from None


# ---- FFCV's module-level helpers (ffcv/writer.py) --------------------------------------------------
# FFCV's DatasetWriter runs these in its worker processes. beton's writer encodes in Rust threads
# and does not use them; they are here, with FFCV's code, for programs that import them (a
# custom writer loop over FFCV-protocol fields: ``encode(destination, value, malloc)``).

def from_shard(shard, pipeline):
    """FFCV's ``from_shard``: the samples of one WebDataset shard, ``pipeline`` applied to a
    ``webdataset.WebDataset`` over it (not shuffled). ``from_webdataset`` reads shards with it.

    Parameters
    ----------
    shard : str
        The shard (a tar file or a URL ``webdataset`` opens).
    pipeline : callable
        Takes the ``WebDataset`` and returns an iterable of samples (tuples in field order).

    Returns
    -------
    iterable
        What ``pipeline`` returns.

    Raises
    ------
    ImportError
        When ``webdataset`` is not installed (``pip install webdataset``).

    Examples
    --------
    >>> samples = from_shard("shard-0.tar", lambda d: d.to_tuple("jpg", "cls"))  # doctest: +SKIP
    """
    try:
        from webdataset import WebDataset
    except ImportError as e:
        raise ImportError("from_shard needs the webdataset package (pip install webdataset)") from e
    return pipeline(WebDataset(shard, shardshuffle=False))


def count_samples_in_shard(shard, pipeline):
    """FFCV's ``count_samples_in_shard``: the samples ``from_shard`` yields, counted by iterating
    (a WebDataset may have no ``__len__``).

    Parameters
    ----------
    shard, pipeline
        As for ``from_shard``.

    Returns
    -------
    int

    Examples
    --------
    >>> count_samples_in_shard("shard-0.tar", lambda d: d.to_tuple("jpg", "cls"))  # doctest: +SKIP
    1000
    """
    return sum(1 for _ in from_shard(shard, pipeline))


def handle_sample(sample, dest_ix, field_names, metadata, allocator, fields):
    """FFCV's ``handle_sample``: writes ``sample`` (values in field order) as row ``dest_ix`` of
    ``metadata`` (a structured array with one column per name of ``field_names``), each value
    through ``field.encode(destination, value, allocator.malloc)``. A ``MemoryError`` (the
    sample does not fit the allocator's page) retries the whole sample once, on a fresh page,
    and is raised the second time.

    Parameters
    ----------
    sample : sequence
        The values, in the order of ``fields``.
    dest_ix : int
        The row written.
    field_names : sequence of str
        The columns of ``metadata``, in the order of ``fields``.
    metadata : numpy structured array
        The rows.
    allocator : object
        FFCV's ``MemoryAllocator`` or the like: ``set_current_sample(i)`` and
        ``malloc(size) -> (pointer, uint8 buffer)``.
    fields : dict of str to Field
        Fields with FFCV's ``encode(destination, value, malloc)``.

    Examples
    --------
    >>> handle_sample((3, 0.5), 0, metadata.dtype.names, metadata, allocator, fields)  # doctest: +SKIP
    """
    for attempt in range(2):
        try:
            allocator.set_current_sample(dest_ix)
            for field_name, field, field_value in zip(field_names, fields.values(), sample):
                destination = metadata[field_name][dest_ix: dest_ix + 1]
                field.encode(destination, field_value, allocator.malloc)
            break
        except MemoryError:
            if attempt == 1:
                raise


def worker_job_webdataset(input_queue, metadata_sm, metadata_type, fields, allocator, done_number,
                          allocations_queue, pipeline):
    """FFCV's ``worker_job_webdataset``: takes ``(shard, offset)`` items off ``input_queue`` until
    ``None``, writes shard sample ``i`` as row ``offset + i`` (``handle_sample``) into the
    metadata in ``metadata_sm.buf``, adds the samples done to ``done_number`` (a
    ``multiprocessing.Value``), then puts ``allocator.allocations`` on ``allocations_queue``.

    Parameters
    ----------
    input_queue : queue
        ``(shard, offset)`` items, then ``None``.
    metadata_sm : shared memory
        Its ``buf`` holds the rows (``metadata_type``).
    metadata_type : numpy dtype
        The row type, one column per field.
    fields : dict of str to Field
        As for ``handle_sample``.
    allocator : object
        As for ``handle_sample``, and a context manager (FFCV's writes its pages on exit).
    done_number : multiprocessing.Value
        The samples written so far, for a progress bar.
    allocations_queue : queue
        Gets the allocator's ``allocations``.
    pipeline : callable
        As for ``from_shard``.

    Examples
    --------
    >>> worker_job_webdataset(todo, shm, metadata_type, fields, allocator, done, allocations, pipeline)  # doctest: +SKIP
    """
    def write_shard(todo, write):
        shard, offset = todo
        done = 0
        for i, sample in enumerate(from_shard(shard, pipeline)):
            done += 1
            write(sample, offset + i)
        return done

    _worker_job(input_queue, metadata_sm, metadata_type, fields, allocator, done_number, allocations_queue,
                write_shard)


def worker_job_indexed_dataset(input_queue, metadata_sm, metadata_type, fields, allocator, done_number,
                               allocations_queue, dataset):
    """FFCV's ``worker_job_indexed_dataset``: as ``worker_job_webdataset``, with chunks of
    ``(dest_ix, source_ix)`` pairs on ``input_queue``, ``dataset[source_ix]`` written as row
    ``dest_ix``.

    Parameters
    ----------
    input_queue : queue
        Chunks of ``(dest_ix, source_ix)`` pairs, then ``None``.
    metadata_sm, metadata_type, fields, allocator, done_number, allocations_queue
        As for ``worker_job_webdataset``.
    dataset : indexable
        ``dataset[source_ix]`` is a sample (values in field order).

    Examples
    --------
    >>> worker_job_indexed_dataset(todo, shm, metadata_type, fields, allocator, done, allocations, ds)  # doctest: +SKIP
    """
    def write_chunk(chunk, write):
        for dest_ix, source_ix in chunk:
            write(dataset[source_ix], dest_ix)
        return len(chunk)

    _worker_job(input_queue, metadata_sm, metadata_type, fields, allocator, done_number, allocations_queue,
                write_chunk)


def _worker_job(input_queue, metadata_sm, metadata_type, fields, allocator, done_number, allocations_queue, work):
    """What FFCV's two worker jobs share: each item taken off ``input_queue`` until ``None`` is
    handed to ``work(item, write)``, which writes its samples with ``write(sample, dest_ix)``
    (``handle_sample`` into the metadata in ``metadata_sm.buf``) and returns how many it wrote,
    added to ``done_number``; then ``allocator.allocations`` go on ``allocations_queue``."""
    metadata = np.frombuffer(metadata_sm.buf, dtype=metadata_type)
    field_names = metadata_type.names

    def write(sample, dest_ix):
        handle_sample(sample, dest_ix, field_names, metadata, allocator, fields)

    with allocator:
        while True:
            item = input_queue.get()
            if item is None:
                break
            done = work(item, write)
            with done_number.get_lock():
                done_number.value += done
    allocations_queue.put(allocator.allocations)
