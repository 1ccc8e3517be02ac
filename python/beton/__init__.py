"""beton: an embedded dataset database with query-driven subsetting, and a training data loader.

FFCV-compatible ``.beton`` files: ``beton.writer.DatasetWriter`` writes them, ``beton.loader.Loader``
trains from them (FFCV users switch by changing ``ffcv`` to ``beton`` in imports), and
``beton.open(path)`` opens one as a database: ``ds.table()`` (pyarrow), ``ds.to_polars()``,
``ds.query(sql)``, ``ds.where(predicate)`` (an ``IndexSet`` to train on), named splits.
"""

from beton._native import CorruptFileError, IndexSet, __version__
from beton.dataset import Dataset, open

__all__ = ["open", "Dataset", "IndexSet", "CorruptFileError", "__version__"]
