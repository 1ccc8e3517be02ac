"""``beton.open(path)``: a ``.beton`` file or a dataset directory as a database (values, Arrow
table, SQL, query plans, splits, class names); a dataset directory is versioned and editable
(docs/FORMAT.md §13).

``Dataset`` is one class, made of the parts of this package: opening and the native handle
(``_open``), reading values and tables (``_reading``), its repr and galleries (``_display``),
SQL and splits (``_querying``, answering with ``_results``), versions and edits
(``_versions``), and ``export`` (``_export``); ``_values`` converts values between Python and
the dataset. ``open``, ``import_file`` and ``concat`` make one.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from beton import _doc, _native
from beton._native import IndexSet
from beton._warnings import FFCVCompatibilityWarning, NullsFilledWarning
from beton._writing import _progress
from beton.dataset._display import _Display
from beton.dataset._export import _Exporting
from beton.dataset._querying import _Querying
from beton.dataset._reading import _Reading
from beton.dataset._results import Explain, QueryResult
from beton.dataset._versions import _Versions

__all__ = ["Dataset", "open", "import_file", "concat", "near_duplicates", "QueryResult", "Explain", "IndexSet",
           "FFCVCompatibilityWarning", "NullsFilledWarning"]

# The public classes defined in this package's parts are beton.dataset's (their documented
# name, and the one pickles of a QueryResult keep).
QueryResult.__module__ = Explain.__module__ = __name__


# The errors of opening, in the docstrings of Dataset and open.
_open_errors = _doc.fill({"{open_errors}": (
    "OSError\n"
    "    For a path that cannot be read; for a URL, ``MissingFileError`` (404),\n"
    "    ``AccessDeniedError`` (401/403, no credentials; never retried) or ``BetonIOError``\n"
    "    naming it and what failed (a dataset directory's listing, a ``HEAD``): a store that never\n"
    "    answered fails in ``BETON_REMOTE_OPEN_RETRY_SECONDS`` (default 5 s; docs/REMOTE.md).\n"
    "beton.CorruptFileError\n"
    "    For a file whose bytes break the format (the message names the byte offset).")})


@_open_errors
class Dataset(_Display, _Reading, _Querying, _Versions, _Exporting):
    """An open, validated ``.beton`` file, or one version of a dataset directory.

    Made by ``beton.open``. Reads (``ds[i]``, ``table``, ``query``, ``where``, ``explain``,
    splits, ``classes``) work on both; a directory's edits (``update``, ``delete``,
    ``add_column``, ``append``, ...) each commit a new version atomically, which the object then
    shows. Older versions stay readable (``beton.open(dir, version=n)``) until ``cleanup``.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.beton`` file or a dataset directory.
    custom : dict, optional
        ``{field: (size, align)}``: the row layout of a foreign custom (type 255) field.
    version : int or str, optional
        A directory's version number or tag (default: the latest). A ``.beton`` file has
        version 1 only.
    branch : str, optional
        A directory's branch (default ``main``; docs/VERSIONS.md).

    Raises
    ------
    {open_errors}
    ValueError
        For a version a ``.beton`` file does not have.

    Examples
    --------
    >>> import beton
    >>> ds = beton.open("photos.beton")  # doctest: +SKIP
    >>> ds  # doctest: +SKIP
    Dataset('photos.beton': 155 rows, version 1)
      fields: image rgb_image, label int, path text
      splits: train (124 rows), val (31 rows)
      classes (6): bird, cat, ...
    >>> ds[0]["label"], len(ds.where("label < 3"))  # doctest: +SKIP
    (0, 77)
    """


@_open_errors
def open(path, custom: Optional[Dict[str, Any]] = None, version=None,  # noqa: A001
         branch: Optional[str] = None) -> Dataset:
    """Opens and validates a ``.beton`` file or a version of a dataset directory.

    The returned ``Dataset`` answers SQL (``query``, ``where``, ``explain``), gives the data
    table (``table``, ``to_polars``), samples (``ds[i]``), named splits and class names; a
    dataset directory's version is editable (``update``, ``delete``, ``append``, ...).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.beton`` file (FFCV's or beton's) or a dataset directory; or the URL of a ``.beton``
        file on object storage: ``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``
        (payloads fetched when read, into a bounded local cache: docs/REMOTE.md).
    custom : dict, optional
        ``{field: Field class}`` for a custom (type 255) field written by a user's FFCV-style
        ``Field`` (as FFCV's ``custom_handlers``): its samples read as records of its
        ``metadata_type``; or ``{field: (size, align)}``, its row layout, read as bytes.
    version : int or str, optional
        A directory's version number or tag (default: the latest).
    branch : str, optional
        A directory's branch (default ``main``): its latest version, or its ``version``; edits
        through the Dataset commit to that branch (docs/VERSIONS.md).

    Returns
    -------
    Dataset

    Raises
    ------
    {open_errors}
    ValueError
        For a version or branch that does not exist, or a custom field without a layout.

    Examples
    --------
    >>> import beton
    >>> ds = beton.open("photos.beton")  # doctest: +SKIP
    >>> ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label")  # doctest: +SKIP
    >>> val = ds.where("in_split('val') AND image.width >= 200")  # doctest: +SKIP
    >>> print(ds.explain("label < 3"))  # doctest: +SKIP
    >>> old = beton.open("ds_dir", version=1)  # doctest: +SKIP
    >>> fix = beton.open("ds_dir", branch="relabel")  # doctest: +SKIP
    """
    return Dataset(path, custom, version=version, branch=branch)


def import_file(dir, file) -> Dataset:  # noqa: A002
    """Makes a dataset directory whose version 1 is a ``.beton`` file.

    The file is hard-linked (never re-encoded); its named splits and class names move into the
    manifest.

    Parameters
    ----------
    dir : str or os.PathLike
        The directory to make (it must not be a dataset already).
    file : str or os.PathLike
        The ``.beton`` file.

    Returns
    -------
    Dataset
        Version 1.

    Raises
    ------
    ValueError
        For a directory that is a dataset already, or a file with custom fields.

    Examples
    --------
    >>> ds = beton.import_file("ds", "photos.beton")  # doctest: +SKIP
    >>> ds.version, ds.classes == beton.open("photos.beton").classes  # doctest: +SKIP
    (1, True)
    """
    return Dataset._of(_native.Dataset.import_file(str(dir), str(file)))


def concat(sources, out, message: str = "", progress: bool = True) -> Dataset:
    """A new dataset directory holding the rows of ``sources`` in order, as one version
    (version 1) however many sources: one commit, nothing committed when it fails or is
    cancelled.

    Parameters
    ----------
    sources : list
        ``.beton`` files (hard-linked) or datasets / dataset directories (their latest
        versions, exported once). Each one's fields must include the first's.
    out : str or os.PathLike
        The new dataset directory.
    message : str, optional
    progress : bool, default True
        Show a tqdm progress bar of the sources' rows when tqdm is installed
        (``pip install beton[progress]``): a dataset directory's as they are exported, a
        ``.beton`` file's at once (it is linked).

    Returns
    -------
    Dataset
        Its version 1.

    Raises
    ------
    ValueError
        For no sources, or a source that lacks a field of the first.

    Examples
    --------
    >>> both = beton.concat(["a.beton", "b.beton"], "both")  # doctest: +SKIP
    """
    if not sources:
        raise ValueError("concat needs at least one source")
    paths = [str(s.path if isinstance(s, Dataset) else s) for s in sources]
    with _progress(None, progress) as report:
        return Dataset._of(_native.Dataset.concat(str(out), paths, message, report))


def near_duplicates(a: Dataset, b: Dataset, by: str, threshold=None, metric: str = "l2", where: Optional[str] = None,
                    other_where: Optional[str] = None):
    """Near-duplicates across two datasets: leakage between splits or datasets.

    Parameters
    ----------
    a, b : Dataset
        The datasets (``b`` may be another version of ``a``, or a split's rows via the
        ``where``s); both need the column ``by``.
    by : str
        A vector column (of one length in both) or an image field (perceptual hash).
    threshold : float or int, optional
        As ``Dataset.near_duplicates`` (required for vectors; 8 pHash bits for images, 0: the
        same pixels).
    metric : {"l2", "cosine"}
        The vectors' distance.
    where, other_where : str, optional
        Predicates choosing the rows of ``a`` and of ``b`` searched.

    Returns
    -------
    CrossDuplicates
        ``index``, ``row_id`` (in ``a``), ``other_index``, ``other_row_id`` (in ``b``),
        ``distance``: every pair within the threshold. ``.extras()`` is ``a``'s rows in a pair,
        ``.other_rows()`` ``b``'s.

    Raises
    ------
    ValueError
        As ``Dataset.near_duplicates``; vectors of two lengths.

    Examples
    --------
    >>> train, test = beton.open("train.beton"), beton.open("test.beton")  # doctest: +SKIP
    >>> leaks = beton.near_duplicates(train, test, by="image")  # doctest: +SKIP
    >>> train_dir.delete(leaks.extras(), message="drop test images from train")  # doctest: +SKIP
    """
    from beton.dataset._duplicates import cross

    return cross(a, b, by, threshold, metric, where, other_where)
