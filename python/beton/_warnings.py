"""The warnings beton gives where it writes something other than what a user may expect, and
says so: each is a ``UserWarning`` subclass, to filter or turn into an error
(``warnings.simplefilter("error", beton.NullsFilledWarning)``)."""


class FFCVCompatibilityWarning(UserWarning):
    """A ``.beton`` file is being written that FFCV 1.0.2 reads only with a stub ``Field`` for
    some of its fields (beton's text, bool, array and grey image fields have no FFCV class).

    Examples
    --------
    >>> import warnings, beton
    >>> warnings.simplefilter("error", beton.FFCVCompatibilityWarning)  # doctest: +SKIP
    """


class NullsFilledWarning(UserWarning):
    """A ``.beton`` file was written from rows with NULLs: a ``.beton`` file holds a value in
    every row, so each NULL was written as its type's filler (0, NaN, false, '', JSON null, an
    empty payload, zeros, a 1x1 black image); the message names the field, the filler and the
    rows.

    Examples
    --------
    >>> import warnings, beton
    >>> warnings.simplefilter("error", beton.NullsFilledWarning)  # doctest: +SKIP
    """
