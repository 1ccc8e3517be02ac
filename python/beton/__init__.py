"""beton: an embedded dataset database with query-driven subsetting, and a training data loader.

FFCV-compatible ``.beton`` files: ``beton.writer.DatasetWriter`` writes them, ``beton.loader.Loader``
trains from them (FFCV users switch by changing ``ffcv`` to ``beton`` in imports), and
``beton.open(path)`` opens one as a database: ``ds.table()`` (pyarrow), ``ds.to_polars()``,
``ds.query(sql)``, ``ds.where(predicate)`` (an ``IndexSet`` to train on), named splits; a dataset
directory (``beton.import_file``) is versioned and editable: ``update``, ``delete``, ``add_column``,
``append``, ``restore``, ``compact``, ``export``, ``diff``.
"""

from beton._native import (AccessDeniedError, BetonError, BetonIOError, ConflictError, CorruptFileError, GpuError,
                           IndexSet, InvalidArgumentError, MergeConflictError, MissingFileError, NotFoundError,
                           QueryError, SampleError, __version__)
from beton.dataset import (Dataset, FFCVCompatibilityWarning, NullsFilledWarning, concat, import_file,
                           near_duplicates, open)
from beton.loader import Loader
from beton.loader.code import InvalidDecoderError
from beton.writer import DatasetWriter

__all__ = ["Loader", "DatasetWriter", "open", "import_file", "concat", "near_duplicates", "Dataset", "IndexSet", "BetonError", "CorruptFileError", "QueryError", "SampleError",
           "InvalidArgumentError", "InvalidDecoderError", "NotFoundError", "BetonIOError", "MissingFileError", "AccessDeniedError", "ConflictError", "MergeConflictError", "GpuError",
           "FFCVCompatibilityWarning", "NullsFilledWarning", "__version__"]
