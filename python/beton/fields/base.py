"""The base of field types: what the native writer needs to know and how values convert."""

import inspect
from typing import Any, Dict, Optional

import numpy as np

from beton import _native
from beton.fields.registry import KINDS

# FFCV's type of a field descriptor's 1024-byte argument blob.
ARG_TYPE = np.dtype([("", "<u1", 1024)])

_ONE_ARGUMENT = object()


class Field:
    """A field type, with FFCV's protocol: ``metadata_type`` (the numpy dtype of its slot in a
    data-table row), ``from_binary`` / ``to_binary`` (its descriptor's 1024-byte argument
    blob), ``encode(destination, field, malloc)`` (writes one value into a row slot and its
    payload into the heap) and ``get_decoder_class()``.

    beton's field classes answer each as FFCV's do. A subclass of ``Field`` itself is a custom
    field, as in FFCV: the writer calls its ``encode`` with a one-row array of its
    ``metadata_type`` and a ``malloc(size) -> (pointer, buffer)`` for heap data; the file
    stores it with type id 255, which FFCV reads with the class in ``custom_handlers`` and
    beton with it in ``custom_fields`` (Loader) or ``custom`` (``beton.open``).

    ``native()`` is the field type for the native writer (a ``beton._native.Field``).

    beton's field types are registered (``beton.fields.registry``): what the native layer,
    FFCV's descriptors and the loader know of each is its registry entry (``_registered()``),
    keyed by its ``type_name``, which the registration sets.
    """

    type_name = ""

    @classmethod
    def _registered(cls):
        """The registry entry of this field's type, or None for a custom field."""
        return KINDS.get(cls.type_name)

    def options(self) -> Optional[Dict[str, Any]]:
        return None

    def native(self):
        """This field type as a ``beton._native.Field`` (a ``CustomField`` for a custom
        field: its ``metadata_type``'s size and alignment, and ``to_binary()``).

        Raises
        ------
        TypeError
            For a custom field without a usable ``metadata_type`` or ``to_binary``.
        """
        kind = self._registered()
        if kind is not None:
            return kind.native(**(self.options() or {}))
        name = type(self).__name__
        try:
            dtype = np.dtype(self.metadata_type)
        except Exception as e:
            raise TypeError(f"custom field {name}: metadata_type is not a numpy dtype ({e})") from None
        try:
            blob = np.asarray(self.to_binary()).tobytes()
        except Exception as e:
            raise TypeError(f"custom field {name}: to_binary() failed ({type(e).__name__}: {e})") from None
        if len(blob) != ARG_TYPE.itemsize:
            raise TypeError(f"custom field {name}: to_binary() gave {len(blob)} bytes, FFCV's ARG_TYPE "
                            f"is {ARG_TYPE.itemsize}")
        return _native.CustomField(dtype.itemsize, dtype.alignment, blob)

    # ---- FFCV's protocol -------------------------------------------------------------------

    @property
    def metadata_type(self) -> np.dtype:
        """The numpy dtype of the field's slot in a data-table row (FFCV's)."""
        raise NotImplementedError(f"{type(self).__name__} has no metadata_type")

    @classmethod
    def from_binary(cls, binary) -> "Field":
        """The field of a descriptor's argument blob (FFCV's ``from_binary``)."""
        registered = cls._registered()
        if registered is None:
            raise NotImplementedError(f"{cls.__name__}.from_binary")
        blob = np.asarray(binary).tobytes()
        kind, details = _native.field_of_descriptor(registered.type_id, blob)
        if kind != cls.type_name:
            raise ValueError(f"{cls.__name__}.from_binary: the blob describes a {kind} field")
        return cls._of_details(details)

    @classmethod
    def _of_details(cls, details) -> "Field":
        """The field of a stored field's ``details`` (``(dtype, shape)`` of an array field, as
        the native layer gives them; else None)."""
        return cls()

    @classmethod
    def _of_arguments(cls, arguments) -> "Field":
        """The field of an FFCV descriptor's argument blob, as FFCV's ``Reader`` makes it
        (``beton.types.get_handlers``)."""
        return cls()

    def to_binary(self):
        """The descriptor's 1024-byte argument blob, as FFCV's ``ARG_TYPE`` scalar."""
        if self._registered() is None:
            raise NotImplementedError(f"{type(self).__name__}.to_binary")
        return np.frombuffer(self.native().arguments(), dtype=ARG_TYPE)[0].copy()

    def encode(self, destination, field=_ONE_ARGUMENT, malloc=None):
        """FFCV's ``encode(destination, field, malloc)``: writes value ``field`` into
        ``destination`` (a one-row array of ``metadata_type``, FFCV's slice of the data table)
        and its payload into a buffer from ``malloc(size) -> (pointer, buffer)``, as FFCV's
        field of the same name does.

        Called with one argument (``encode(value)``, beton's form, which a subclass may
        override to convert its values before ``super().encode``), returns what the native
        writer takes for ``value``.
        """
        if field is _ONE_ARGUMENT:
            return self._value(destination)
        if self._registered() is None:
            raise NotImplementedError(f"{type(self).__name__}.encode")
        slot, payload = self.native().encode_one(self._value(field), float(np.random.rand()))
        slot = bytearray(slot)
        if payload is not None:
            at, data = payload
            ptr, buffer = malloc(len(data))
            buffer[:] = np.frombuffer(data, dtype=np.uint8)
            slot[at:at + 8] = int(ptr).to_bytes(8, "little")
        row = np.frombuffer(bytes(slot), dtype=destination.dtype)
        destination[...] = row.reshape(np.shape(destination)) if np.ndim(destination) else row[0]

    def get_decoder_class(self):
        """The decoder FFCV's Loader uses for the field by default."""
        kind = self._registered()
        if kind is None:
            raise NotImplementedError(f"{type(self).__name__}.get_decoder_class")
        return kind.decoder

    def _value(self, value: Any) -> Any:
        return value


def is_custom(field: Field) -> bool:
    """Whether ``field`` is a custom field (FFCV's protocol, type id 255): not one of beton's
    field types."""
    return getattr(field, "type_name", "") not in KINDS


def _ffcv_arity(method) -> bool:
    """Whether ``method`` takes FFCV's ``(destination, field, malloc)``."""
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(method).parameters.values())


# Pointers a custom field's ``malloc`` hands out while its ``encode`` runs: the writer finds
# each in the row slot (an 8-byte little-endian word, where FFCV's fields store theirs) and
# puts the payload's file offset there.
_PROVISIONAL = 0x5EED_BE70_0000_0000


def value_encoder(name: str, field: Field):
    """The function the writer applies to each value of field ``name``: beton's conversion
    for beton's field types (or a subclass's one-argument ``encode``), FFCV's
    ``encode(destination, field, malloc)`` for a custom field, whose slot and payloads it
    returns as ``(slot bytes, [(pointer offset, payload bytes)])``.

    Raises
    ------
    TypeError
        For a subclass of one of beton's field types whose ``encode`` takes FFCV's three
        arguments (its slot would not be checked as that type's): subclass ``Field`` instead.
    """
    cls = type(field)
    if not is_custom(field):
        if cls.encode is Field.encode:
            return field._value
        if _ffcv_arity(field.encode):
            raise TypeError(f"field {name!r}: {cls.__name__} overrides encode(destination, field, malloc) of "
                            f"beton's {cls.type_name} field type; subclass beton.fields.Field for a custom field "
                            "type (type id 255), or override encode(value) to convert values")
        return field.encode
    dtype = np.dtype(field.metadata_type)

    def encode(value):
        destination = np.zeros(1, dtype=dtype)
        buffers = []

        def malloc(size):
            size = int(size)
            if size < 0:
                raise ValueError(f"malloc({size}): a size is 0 or more")
            buffer = np.zeros(size, dtype=np.uint8)
            buffers.append(buffer)
            return _PROVISIONAL + len(buffers) - 1, buffer

        field.encode(destination, value, malloc)
        slot = destination.tobytes()
        payloads = []
        for k, buffer in enumerate(buffers):
            word = (_PROVISIONAL + k).to_bytes(8, "little")
            at = slot.find(word)
            if at < 0 or slot.find(word, at + 1) >= 0:
                where = "is not in" if at < 0 else "is more than once in"
                raise ValueError(f"the pointer malloc returned {where} the {dtype} row it wrote; beton "
                                 "places payloads by that pointer, stored as one 8-byte integer (as FFCV's "
                                 "fields store theirs, e.g. destination['ptr'] = ptr)")
            payloads.append((at, buffer.tobytes()))
        return slot, payloads

    return encode


def exact_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as a C-contiguous little-endian array of ``dtype``, refusing a conversion that
    changes values: an integer out of the dtype's range (300 into uint8 would wrap to 44), a
    float with a fraction or NaN into integers, a bool from anything but bools. Floats into a
    narrower float round as floats do (an inf that was finite is refused).

    Raises
    ------
    ValueError
        Naming the first value that does not fit, its position and the dtype.
    """
    dtype = np.dtype(dtype)
    target = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
    src = value if isinstance(value, np.ndarray) else np.asarray(value)
    if src.dtype == target or src.dtype == dtype:
        return np.asarray(src, dtype=target, order="C")  # a 0-d array stays 0-d
    if src.dtype.kind not in "biuf":
        if src.dtype == object and src.size:
            src = np.asarray(src.tolist())  # a list of Python numbers
        if src.dtype.kind not in "biuf":
            raise ValueError(f"values of dtype {src.dtype} do not convert to {dtype} without loss")
    with np.errstate(all="ignore"):
        out = np.asarray(src, dtype=target, order="C")
        if target.kind == "b":
            bad = ~((src == 0) | (src == 1)) if src.dtype.kind != "b" else np.zeros(src.shape, bool)
        elif target.kind in "iu":
            back = out.astype(src.dtype) if src.dtype.kind != "b" else out.astype(bool)
            bad = back != src
            if src.dtype.kind == "f":
                bad |= ~np.isfinite(src)
        else:  # float target: a finite value stays finite (1e300 into float32 would be inf)
            bad = np.isfinite(src) & ~np.isfinite(out)
    if np.any(bad):
        pos = tuple(int(k) for k in np.argwhere(bad)[0])
        where = f" at {pos}" if pos else ""
        raise ValueError(f"value {src[pos]!r}{where} does not fit {dtype} "
                         f"(it would be stored as {out[pos]!r}); convert it explicitly first")
    return out


def native_fields(fields: Dict[str, "Field"]) -> Dict[str, Any]:
    """``{name: field.native()}`` in the same order: what the native writers take."""
    return {name: field.native() for name, field in fields.items()}


# Names FFCV's ffcv.fields.base binds (user code imports them from here).
from beton.pipeline.operation import Operation  # noqa: E402,F401
