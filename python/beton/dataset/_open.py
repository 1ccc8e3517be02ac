"""What every part of a ``Dataset`` stands on: opening a ``.beton`` file or a dataset
directory's version, the native handle that reads it, its length, path and version.

One native class, ``_native.Dataset``, reads both: a ``.beton`` file (read-only) and a dataset
directory's version. ``is_handle`` and ``is_directory`` are the one place in the Python layer that
asks which: everything else asks them, or ``Dataset._is_directory`` and
``Dataset._require_directory``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Optional

from beton import _native

if TYPE_CHECKING:
    from typing_extensions import Self


def is_handle(obj) -> bool:
    """Whether ``obj`` is a native dataset handle: a ``.beton`` file's or a dataset directory
    version's."""
    return isinstance(obj, _native.Dataset)


def is_directory(handle) -> bool:
    """Whether native handle ``handle`` reads a dataset directory's version (else a ``.beton``
    file): what has versions, and the edits that commit them."""
    return not handle.is_file


def _is_dataset_url(path) -> bool:
    """A URL that may be a dataset directory: not one ending in ``.beton`` (a file; asking the
    store for its ``_versions/`` would cost every open a listing)."""
    text = str(path)
    return "://" in text and not text.rstrip("/").endswith(".beton")


class _DatasetBase:
    """The state of a ``Dataset`` (``beton.dataset.Dataset`` documents it): its native handle
    (``_native``), each field's kind (``_kinds``), and for a ``.beton`` file with custom fields
    given as ``Field`` classes, their record dtypes (``_custom_dtypes``)."""

    _native: Any
    _kinds: Dict[str, str]

    def __init__(self, path, custom: Optional[Dict[str, Any]] = None, version=None, branch: Optional[str] = None):
        where = os.fspath(path)
        if os.path.isdir(where) or (_is_dataset_url(where) and _native.Dataset.is_dataset_dir(where)):
            if custom:
                raise NotImplementedError(f"{path} is a dataset directory: custom (FFCV type-255) field layouts "
                                          "apply to a .beton file only")
            self._native = _native.Dataset(str(path), version, None, branch)
        else:
            if version not in (None, 1):
                raise ValueError(f"{path} is a .beton file: it has version 1 only")
            if branch not in (None, "main"):
                raise ValueError(f"{path} is a .beton file: it has no branches (branch {branch!r}); branches are a "
                                 f"dataset directory's (beton.import_file)")
            layouts, self._custom_dtypes = {}, {}
            if custom:
                # FFCV's Field classes (and numpy) only when custom fields are given.
                from beton.reader import custom_layouts

                layouts, self._custom_dtypes = custom_layouts(path, custom)
            self._native = _native.Dataset(str(path), None, layouts or None)
        self._refresh()

    def _refresh(self):
        self._kinds = {name: kind for name, kind, _ in self._native.fields()}

    @classmethod
    def _of(cls, native) -> Self:
        ds = cls.__new__(cls)
        ds._native = native
        ds._refresh()
        return ds

    def __len__(self) -> int:
        return len(self._native)

    @property
    def path(self):
        """The ``.beton`` file or dataset directory.

        Returns
        -------
        pathlib.Path or str

        Examples
        --------
        >>> beton.open("photos.beton").path  # doctest: +SKIP
        PosixPath('photos.beton')
        """
        return self._native.path

    @property
    def version(self) -> int:
        """This version's number (0 for a ``.beton`` file: a read-only dataset of one data file).

        Returns
        -------
        int

        Examples
        --------
        >>> beton.open("ds", version=2).version  # doctest: +SKIP
        2
        """
        return self._native.version

    @property
    def _is_directory(self) -> bool:
        """Whether this is a dataset directory's version (else a ``.beton`` file)."""
        return is_directory(self._native)

    def _require_directory(self, operation: str, reason: str = "which is read-only"):
        """The native handle of this dataset directory's version, for ``operation``.

        Raises
        ------
        TypeError
            For a ``.beton`` file (``reason`` says why ``operation`` needs a directory), telling
            how to make a dataset directory of it: ``beton.import_file(DIR, FILE)``.
        """
        if not self._is_directory:
            raise TypeError(f"{operation}: {self.path} is a .beton file, {reason}; make a dataset "
                            f"directory with beton.import_file(DIR, {str(self.path)!r})")
        return self._native
