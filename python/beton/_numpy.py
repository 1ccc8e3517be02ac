"""numpy, imported when first used.

``import beton`` and the database API (``beton.open``, ``ds.where``, ``ds.query``, edits) do not
import numpy, nor the FFCV API that needs it (``beton.fields``, ``beton.loader``,
``beton.writer``: imported on first use, see ``beton.__getattr__``). ``import beton`` takes
37-55 ms instead of 106-161 ms (2-core VM, 6 interleaved rounds) and 26 MB instead of 40 MB of
RSS, and a process that only queries starts no BLAS threads (OpenBLAS starts one per core when
numpy is imported, and they spin for a while before sleeping).

The modules of ``beton.dataset`` use ``np`` from here as they would the module: the first use of
a name imports numpy and keeps the name, so later uses cost a plain attribute lookup.
"""


class _Numpy:
    """Stands for the numpy module; see the module docs."""

    def __getattr__(self, name):
        import numpy

        value = getattr(numpy, name)
        setattr(self, name, value)
        return value

    def __repr__(self):
        return "<numpy, imported on first use>"


np = _Numpy()
