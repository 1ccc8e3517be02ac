"""beton's field types, one entry each, keyed by the kind the native layer reports for a field
(``Field.type_name``; the kind of a ``fields()`` entry, ``_native.pyi``'s ``_FieldInfo``):
``int``, ``float``, ``bool``, ``text``, ``bytes``, ``json``, ``ndarray``, ``torch_tensor``,
``array``, ``rgb_image``, ``grey_image``.

Each field class registers itself (``@register(kind, ...)`` above its class statement), and
every part of the Python layer that depends on a field's kind reads its entry here: the field
classes (their native field type, FFCV's type id, their default decoder), ``beton.types``
(FFCV's table of type ids, beton's extension kinds), ``beton.dataset`` (a stored value as
Python reads it, how an edit takes values, the field class of a stored field, which kinds FFCV
lacks) and the loader (a field's default decoder). A new field type is its class and the
``@register`` entry on it (and, for a native type, its class in the native module).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, TypeVar

import numpy as np

# FFCV's type id of a custom field: beton's extension types use it, their descriptor's
# arguments saying which (a ``BETONEXT`` blob, docs/FORMAT.md section 8).
CUSTOM_TYPE_ID = 255


def as_is(raw: Any) -> Any:
    """A stored value that Python reads as the native layer gives it (numbers, bools, text,
    bytes)."""
    return raw


def array_value(raw: Any) -> np.ndarray:
    """An array field's value, ``(data, typestr, shape)``, as a numpy array viewing ``data``."""
    data, typestr, shape = raw
    return np.frombuffer(data, dtype=np.dtype(typestr)).reshape(shape)


def image_value(raw: Any) -> np.ndarray:
    """A decoded image, ``(data, height, width, channels)``, as an HWC uint8 array."""
    data, height, width, channels = raw
    return np.frombuffer(data, dtype=np.uint8).reshape(height, width, channels)


def json_value(raw: Any) -> Any:
    """A JSON field's text, parsed."""
    return json.loads(raw)


@dataclass(frozen=True)
class Kind:
    """One field type.

    Attributes
    ----------
    name : str
        The kind, as the native layer reports it (the registry's key, the class's
        ``type_name``).
    field : type
        The ``beton.fields`` class of the kind.
    native : type
        Its native field type (``beton._native.IntField``, ...), made from the field's
        ``options()``.
    decoder : type
        The decoder a loader uses for the field by default (FFCV's ``get_decoder_class()``).
    type_id : int
        FFCV's type id of its field descriptor; ``CUSTOM_TYPE_ID`` for beton's extension types.
    extension : int or None
        For an extension type, its kind number in the descriptor's ``BETONEXT`` blob.
    arrow : bool
        Whether an edit (``update_rows``, ``add_column``) takes its values as an Arrow column
        of a SQL type (numbers, bools, text) rather than encoded by the field class.
    value : callable
        A stored value as the native layer gives it (never None) to what ``ds[i]`` returns.
    read_as : type or None
        The class a stored field of the kind is read back as when it is not ``field`` (FFCV
        reads a ``TorchTensorField`` as an ``NDArrayField``).
    """

    name: str
    field: type
    native: type
    decoder: type
    type_id: int = CUSTOM_TYPE_ID
    extension: Optional[int] = None
    arrow: bool = False
    value: Callable[[Any], Any] = as_is
    read_as: Optional[type] = None

    @property
    def ffcv(self) -> bool:
        """Whether FFCV 1.0.2 has a class for the kind (else it reads it only through a stub)."""
        return self.type_id != CUSTOM_TYPE_ID

    def field_of(self, details) -> Any:
        """The field that stores values as a stored field of this kind with ``details``
        (``(dtype, shape)`` of an array kind, else None) does."""
        return getattr(self.read_as or self.field, "_of_details")(details)


_KINDS: Dict[str, Kind] = {}

KINDS: Mapping[str, Kind] = MappingProxyType(_KINDS)
"""Every registered kind by name (read-only)."""

_Class = TypeVar("_Class", bound=type)


def register(name: str, native: type, decoder: type, *, type_id: int = CUSTOM_TYPE_ID,
             extension: Optional[int] = None, arrow: bool = False, value: Callable[[Any], Any] = as_is,
             read_as: Optional[type] = None) -> Callable[[_Class], _Class]:
    """A class decorator: registers the decorated field class as kind ``name`` (the other
    arguments are ``Kind``'s) and sets its ``type_name``.

    Raises
    ------
    ValueError
        For a kind registered already, one that is neither FFCV's (``type_id``) nor beton's
        extension (``extension``), or one whose type id or extension number another has.
    """
    if name in _KINDS:
        raise ValueError(f"field kind {name!r} is registered already ({_KINDS[name].field.__name__})")
    if (type_id == CUSTOM_TYPE_ID) == (extension is None):
        raise ValueError(f"field kind {name!r}: give FFCV's type id or beton's extension number, one of them")
    taken = [k.name for k in _KINDS.values()
             if (k.type_id, k.extension) == (type_id, extension)]
    if taken:
        raise ValueError(f"field kind {name!r}: kind {taken[0]!r} has its type id and extension number")

    def add(cls: _Class) -> _Class:
        setattr(cls, "type_name", name)
        _KINDS[name] = Kind(name, cls, native, decoder, type_id, extension, arrow, value, read_as)
        return cls

    return add


def of_extension(number: int) -> Optional[Kind]:
    """The kind of beton's extension number ``number`` (a ``BETONEXT`` blob's), or None."""
    return next((k for k in _KINDS.values() if k.extension == number), None)


def is_extension(name: str) -> bool:
    """Whether kind ``name`` is one of beton's extension types, which FFCV 1.0.2 has no class
    for (it reads them only through a stub)."""
    kind = _KINDS.get(name)
    return kind is not None and kind.extension is not None
