"""FFCV's ``Reader``: the header, field descriptors and data table of a file."""

from beton.dataset import Dataset


class Reader:
    def __init__(self, fname, custom_handlers=None):
        self.file_name = str(fname)
        self._ds = Dataset(fname)
        self.num_samples = len(self._ds)
        self.handlers = self._ds.schema
