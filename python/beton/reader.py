"""FFCV's ``Reader``: a ``.beton`` file's header, field descriptors, data table (``metadata``, a
numpy structured array) and allocation table, read with numpy exactly as FFCV reads them."""

import numpy as np

from beton.types import (ALLOC_TABLE_TYPE, CURRENT_VERSION, FieldDescType, HeaderType, get_handlers,
                         get_metadata_type)
from beton.utils import decode_null_terminated_string


def custom_layouts(path, custom):
    """The row layouts of a file's custom (type 255) fields from ``custom``: ``{name: (size,
    align)}`` for the native reader, and ``{name: numpy dtype}`` of those given as a ``Field``
    (FFCV's class, or an instance) whose samples read as records of its ``metadata_type``.

    A class whose ``metadata_type`` is a property (FFCV's style) is made with its
    ``from_binary(arguments)``, the file's descriptor blob for that field, as FFCV's
    ``Reader`` does.

    Raises
    ------
    TypeError
        For a value that is neither ``(size, align)`` nor a ``Field`` with a ``metadata_type``.
    """
    layouts, dtypes = {}, {}
    blobs = None
    for name, spec in (custom or {}).items():
        if isinstance(spec, tuple) and len(spec) == 2:
            layouts[name] = (int(spec[0]), int(spec[1]))
            continue
        if isinstance(spec, type) and not isinstance(getattr(spec, "metadata_type", None), np.dtype):
            # An FFCV-style class (metadata_type a property): its instance from the file's
            # argument blob, as FFCV's Reader makes it.
            if blobs is None:
                blobs = _argument_blobs(path)
            if name not in blobs:
                raise KeyError(f"custom field {name!r}: {path} has no field of that name")
            spec = spec.from_binary(blobs[name])
        dtype = getattr(spec, "metadata_type", None)
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"custom field {name!r}: {spec!r} has no metadata_type (an FFCV Field subclass has)") \
                from None
        layouts[name] = (dtype.itemsize, dtype.alignment)
        dtypes[name] = dtype
    return layouts, dtypes


def _argument_blobs(path):
    """``{field name: its descriptor's argument blob}`` of a local ``.beton`` file."""
    header = np.fromfile(str(path), dtype=HeaderType, count=1)
    if len(header) != 1:
        raise ValueError(f"{path}: shorter than the {HeaderType.itemsize}-byte header")
    descs = np.fromfile(str(path), dtype=FieldDescType, count=int(header[0]["num_fields"]),
                        offset=HeaderType.itemsize)
    return {decode_null_terminated_string(d["name"]): d["arguments"] for d in descs}


class Reader:
    """The structure of a ``.beton`` file.

    Parameters
    ----------
    fname : str or path
        The file.
    custom_handlers : dict
        Field name -> ``Field`` class (with ``from_binary`` and ``metadata_type``) for custom
        (type 255) fields; beton's own extension fields need none.

    Attributes
    ----------
    file_name, num_samples, page_size, num_fields, header, field_descriptors, field_names,
    handlers (name -> field object), metadata_type, metadata, alloc_table : as FFCV's.
    """

    def __init__(self, fname, custom_handlers={}):  # noqa: B006 (FFCV's default; never mutated)
        self._fname = str(fname)
        self._custom_handlers = dict(custom_handlers or {})
        self.read_header()
        self.read_field_descriptors()
        self.read_metadata()
        self.read_allocation_table()

    @property
    def file_name(self):
        return self._fname

    def read_header(self):
        header = np.fromfile(self._fname, dtype=HeaderType, count=1)
        if len(header) != 1:
            raise ValueError(f"{self._fname}: shorter than the {HeaderType.itemsize}-byte header")
        header = header[0]
        if header["version"] != CURRENT_VERSION:
            raise ValueError(f"{self._fname}: file format version {header['version']}, expected {CURRENT_VERSION}")
        self.num_samples = header["num_samples"]
        self.page_size = header["page_size"]
        self.num_fields = header["num_fields"]
        self.header = header

    def read_field_descriptors(self):
        descs = np.fromfile(self._fname, dtype=FieldDescType, count=int(self.num_fields), offset=HeaderType.itemsize)
        descs.setflags(write=False)
        self.field_descriptors = descs
        self.field_names = [decode_null_terminated_string(n) for n in descs["name"]]
        self.handlers = dict(zip(self.field_names, get_handlers(descs)))
        for name, desc in zip(self.field_names, descs):
            if name in self._custom_handlers:
                self.handlers[name] = self._custom_handlers[name].from_binary(desc["arguments"])
        for name, handler in self.handlers.items():
            if handler is None:
                raise ValueError(f"Must specify a custom_field entry for custom field {name}")
        self.metadata_type = get_metadata_type(list(self.handlers.values()))

    def read_metadata(self):
        offset = HeaderType.itemsize + self.field_descriptors.nbytes
        self.metadata = np.fromfile(self._fname, dtype=self.metadata_type, count=int(self.num_samples), offset=offset)
        self.metadata.setflags(write=False)

    def read_allocation_table(self):
        ptr = int(self.header["alloc_table_ptr"])
        if ptr == 0:
            raise ValueError(f"{self._fname}: alloc_table_ptr is 0: the write was interrupted")
        table = np.fromfile(self._fname, dtype=ALLOC_TABLE_TYPE, offset=ptr)
        table.setflags(write=False)
        self.alloc_table = table
