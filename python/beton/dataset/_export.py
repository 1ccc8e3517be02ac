"""Export: a dataset directory's version as one standalone ``.beton`` file that FFCV loads."""

from __future__ import annotations

import os
import warnings
from typing import List, Optional

from beton._warnings import FFCVCompatibilityWarning
from beton._writing import _progress, _warn_filled
from beton.dataset._open import _DatasetBase


class _Exporting(_DatasetBase):
    """``Dataset.export``."""

    def export(self, path, where=None, num_workers: int = 0, progress: bool = True,
               columns: Optional[List[str]] = None) -> int:
        """Writes this version's rows as one standalone ``.beton`` file that FFCV 1.0.2 loads.

        Values are copied as stored (images never re-encoded); named splits (restricted to the
        rows written) and classes go with them. A NULL is written as its type's filler (a
        ``.beton`` file holds a value in every row), with a ``NullsFilledWarning`` naming the
        rows. FFCV has no text, bool or variable-length array
        field type (beton's ``TextField``, ``BoolField``, ``ArrayField``): FFCV reads a file with
        one only when given a stub for it (``custom_handlers``), so exporting one warns
        (``FFCVCompatibilityWarning``); ``columns=`` leaves such fields out.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (atomically).
        where : str or IndexSet, optional
            A SQL predicate or the indices to write (default: all).
        num_workers : int, optional
            Threads (0: every core).
        progress : bool, default True
            Show a tqdm progress bar of the rows written when tqdm is installed
            (``pip install beton[progress]``).
        columns : list of str, optional
            The fields to write, in this order (default: every field).

        Returns
        -------
        int
            The rows written.

        Raises
        ------
        TypeError
            For a ``.beton`` file (copy it, or ``DatasetWriter.from_indexed_dataset``).
        KeyError
            For a name in ``columns`` that is not a field (the message lists the fields).

        Examples
        --------
        >>> ds.export("clean.beton", where="quality > 0.5")  # doctest: +SKIP
        140
        >>> ds.export("for_ffcv.beton", columns=["image", "label"])  # doctest: +SKIP
        155
        """
        rows = self._native.select(where) if isinstance(where, str) else where
        native = self._require_directory("export", "one standalone file already (copy it)")

        kinds = {name: kind for name, kind, _ in native.fields()}
        chosen = list(kinds) if columns is None else [str(c) for c in columns]
        from beton.fields.registry import is_extension

        foreign = [f"{n} ({kinds[n]})" for n in chosen if n in kinds and is_extension(kinds[n])]
        if foreign:
            warnings.warn(f"export to {os.fspath(path)}: FFCV 1.0.2 has no field type for {', '.join(foreign)}; "
                          "it reads the file only with a stub Field for each (custom_handlers). "
                          "Leave them out with columns=[...] for a file FFCV reads as it is",
                          FFCVCompatibilityWarning, stacklevel=2)
        with _progress(len(self) if rows is None else len(rows), progress) as report:
            n, filled = native.export(str(path), rows, num_workers, report,
                                            None if columns is None else chosen)
        _warn_filled(path, filled)
        return n
