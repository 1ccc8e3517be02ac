"""FFCV's ``MemoryManager`` and ``MemoryContext`` base classes."""

from abc import ABC, ABCMeta, abstractmethod
from collections import defaultdict
from contextlib import AbstractContextManager
from typing import Callable

import numpy as np

from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.reader import Reader  # noqa: F401 (FFCV's module binds it)


class MemoryContext(AbstractContextManager, metaclass=ABCMeta):
    """The memory of one epoch: entered before the first batch; ``state`` is what the reader
    function takes."""

    @property
    @abstractmethod
    def state(self):
        raise NotImplementedError()

    @abstractmethod
    def __enter__(self):
        return super().__enter__()

    def start_batch(self, batch: int):
        pass

    @abstractmethod
    def __exit__(self, __exc_type, __exc_value, __traceback):
        return super().__exit__(__exc_type, __exc_value, __traceback)


class MemoryManager(ABC):
    """Maps of a file's allocations: ``ptrs`` / ``sizes`` (sorted by pointer), ``ptr_to_size``,
    ``sample_to_pages`` and ``page_to_samples``.

    Parameters
    ----------
    reader : beton.reader.Reader
        The file.
    """

    def __init__(self, reader):
        self.reader = reader
        table = reader.alloc_table
        order = np.argsort(table["ptr"], kind="stable")
        self.ptrs, self.sizes = table["ptr"][order], table["size"][order]
        self.ptr_to_size = dict(zip(self.ptrs, self.sizes))
        pages = table["ptr"] >> np.uint64(int(np.log2(reader.page_size)))
        self.sample_to_pages, self.page_to_samples = defaultdict(set), defaultdict(set)
        for sid, pid in zip(table["sample_id"], pages):
            self.sample_to_pages[sid].add(pid)
            self.page_to_samples[pid].add(sid)
        super().__init__()

    @abstractmethod
    def schedule_epoch(self, batches) -> MemoryContext:
        raise NotImplementedError()

    @abstractmethod
    def compile_reader(self, address, size) -> Callable:
        """FFCV's abstract signature; its managers (and beton's) implement ``compile_reader(self)``,
        returning ``read(address, state)``."""
        raise NotImplementedError()

    @property
    @abstractmethod
    def state_type(self):
        raise NotImplementedError()
