"""beton: an embedded dataset database with query-driven subsetting, and a training data loader.

FFCV-compatible ``.beton`` files: ``beton.writer.DatasetWriter`` writes them, ``beton.loader.Loader``
trains from them (FFCV users switch by changing ``ffcv`` to ``beton`` in imports), and
``beton.open(path)`` opens one as a database: ``ds.table()`` (pyarrow), ``ds.to_polars()``,
``ds.query(sql)``, ``ds.where(predicate)`` (an ``IndexSet`` to train on), named splits; a dataset
directory (``beton.import_file``) is versioned and editable: ``update``, ``delete``, ``add_column``,
``append``, ``restore``, ``compact``, ``export``, ``diff``.
"""

from typing import TYPE_CHECKING

from beton._native import (AccessDeniedError, BetonError, BetonIOError, ConflictError, CorruptFileError, GpuError,
                           IndexSet, InvalidArgumentError, MergeConflictError, MissingFileError, NotFoundError,
                           QueryError, SampleError, __version__)
from beton.dataset import (Dataset, FFCVCompatibilityWarning, NullsFilledWarning, concat, import_file,
                           near_duplicates, open)

# FFCV's API (``Loader``, ``DatasetWriter``, ``beton.fields``, ``beton.transforms``, ...) needs
# numpy; it is imported on first use, so that ``import beton`` and the database API do not import
# numpy (beton/_numpy.py says why). ``from beton import Loader`` and ``beton.fields.IntField``
# work as they always did.
_LAZY = {"Loader": "beton.loader", "DatasetWriter": "beton.writer", "InvalidDecoderError": "beton.loader.code"}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ below
    from beton.loader import Loader
    from beton.loader.code import InvalidDecoderError
    from beton.writer import DatasetWriter


def __getattr__(name):
    import importlib.util

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"beton.{name}") is not None:
        value = importlib.import_module(f"beton.{name}")
    else:
        raise AttributeError(f"module 'beton' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = ["Loader", "DatasetWriter", "open", "import_file", "concat", "near_duplicates", "Dataset", "IndexSet", "BetonError", "CorruptFileError", "QueryError", "SampleError",
           "InvalidArgumentError", "InvalidDecoderError", "NotFoundError", "BetonIOError", "MissingFileError", "AccessDeniedError", "ConflictError", "MergeConflictError", "GpuError",
           "FFCVCompatibilityWarning", "NullsFilledWarning", "__version__"]
