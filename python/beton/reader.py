"""FFCV's ``Reader``: a ``.beton`` file's header, field descriptors, data table (``metadata``, a
numpy structured array) and allocation table, read with numpy exactly as FFCV reads them."""

import numpy as np

from beton.types import (ALLOC_TABLE_TYPE, CURRENT_VERSION, FieldDescType, HeaderType, get_handlers,
                         get_metadata_type)
from beton.utils import decode_null_terminated_string


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
