"""What the writers share (``DatasetWriter``, and the edits and exports of ``beton.dataset``
that write files): progress bars, the ``alpha_background`` option, and the warning that NULLs
were written as fillers."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Optional

from beton._warnings import NullsFilledWarning


def _interactive() -> bool:
    """Whether a progress bar has someone to show it to: stderr is a terminal, or this is a
    notebook's kernel (tqdm.auto draws a widget there). A script whose stderr goes to a log
    file or a pipe (a batch job, CI) gets no bar: tqdm would write a line per refresh into it.
    ``BETON_PROGRESS=1`` forces bars on, ``0`` off, as the CLI's bars (indicatif) do for a
    terminal."""
    forced = os.environ.get("BETON_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):  # a replaced or closed stderr
        pass
    shell = sys.modules.get("IPython")
    try:
        ip = shell.get_ipython() if shell is not None else None  # type: ignore[attr-defined]
    except Exception:
        ip = None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _progress_bar(total: Optional[int], enabled: bool, unit: str = "samples"):
    """A ``tqdm.auto`` bar of ``total`` samples, or None when disabled, when nobody would see it
    (``_interactive``), or when tqdm is not installed (the ``progress`` extra)."""
    if not enabled or not _interactive():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit=unit)


@contextlib.contextmanager
def _progress(total: Optional[int], enabled: bool):
    """The native progress callback ``progress(done, total)``, moving a tqdm bar (when enabled
    and tqdm is installed) that is closed when the block ends. A ``total`` of None is learnt
    from the first report (``beton.concat`` counts rows it has yet to open)."""
    bar = _progress_bar(total, enabled)

    def progress(done, total=None):
        if bar is not None:
            if total is not None and bar.total != total:
                bar.total = total
                bar.refresh()
            bar.update(done - bar.n)
        return True

    try:
        yield progress
    finally:
        if bar is not None:
            bar.close()


def _rgb(name: str, value) -> Optional[tuple]:
    """``value`` as an ``(r, g, b)`` tuple of ints 0 to 255, or None."""
    if value is None:
        return None
    try:
        rgb = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        rgb = ()
    if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
        raise ValueError(f"{name} is {value!r}: three ints 0 to 255, (r, g, b), e.g. (255, 255, 255)")
    return rgb


def _warn_filled(path, filled, stacklevel: int = 3) -> None:
    """Warns (``NullsFilledWarning``) of the NULLs a copy into ``path`` wrote as fillers:
    ``[(field, filler, rows)]``."""
    for field, filler, rows in filled:
        shown = ", ".join(str(r) for r in rows[:8]) + (", ..." if len(rows) > 8 else "")
        warnings.warn(f"{os.fspath(path)}: field {field!r} is NULL in {len(rows)} row(s), written as {filler} "
                      f"(a .beton file holds a value in every row): rows {shown}",
                      NullsFilledWarning, stacklevel=stacklevel)
