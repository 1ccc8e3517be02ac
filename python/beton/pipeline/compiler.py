"""FFCV's ``Compiler``: beton does not compile Python stages; ``get_iterator`` is numba's
``prange`` when numba is installed and compilation is on, else ``range``."""


class Compiler:
    is_enabled = False

    @classmethod
    def set_enabled(cls, value: bool) -> None:
        cls.is_enabled = bool(value)

    @classmethod
    def set_num_threads(cls, n: int) -> None:
        pass

    @classmethod
    def compile(cls, code, signature=None):
        if cls.is_enabled:
            try:
                import numba

                return numba.njit(signature, fastmath=True, nogil=True) if signature else numba.njit(code)
            except ImportError:
                pass
        return code

    @classmethod
    def get_iterator(cls):
        if cls.is_enabled:
            try:
                from numba import prange

                return prange
            except ImportError:
                pass
        return range
