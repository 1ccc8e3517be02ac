"""FFCV's ``Compiler``: compiles Python stages with numba when enabled and installed.

beton runs ``Operation`` code as plain Python unless ``Compiler.set_enabled(True)`` (FFCV's
default is enabled; beton's native stage does the heavy work, and not every user has numba).
``get_iterator`` is numba's ``prange`` with more than one thread, else ``range``, as in FFCV.
"""


def _numba():
    try:
        import numba

        return numba
    except ImportError:
        return None


class Compiler:
    """Global switches for compiling FFCV-style operations (class methods only)."""

    is_enabled = False
    num_threads = 1

    @classmethod
    def set_enabled(cls, b):
        cls.is_enabled = bool(b)

    @classmethod
    def set_num_threads(cls, n):
        if n < 1:
            import os

            n = os.cpu_count() or 1
        cls.num_threads = n
        numba = _numba()
        if numba is not None:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))

    @classmethod
    def compile(cls, code, signature=None):
        numba = _numba()
        if not cls.is_enabled or numba is None:
            return code
        parallel = getattr(code, "is_parallel", False) and cls.num_threads > 1
        return numba.njit(signature, fastmath=True, nogil=True, error_model="numpy", parallel=parallel)(code)

    @classmethod
    def get_iterator(cls):
        numba = _numba()
        if cls.num_threads > 1 and numba is not None:
            return numba.prange
        return range
