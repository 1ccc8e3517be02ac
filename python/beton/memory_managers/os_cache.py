"""FFCV's ``OSCacheManager``: the file memory-mapped, cached by the OS (beton's ``os_cache=True``)."""

import numpy as np

from beton.memory_managers.base import MemoryContext, MemoryManager
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)


class OSCacheContext(MemoryContext):
    """The memory map, opened once and kept across epochs."""

    def __init__(self, manager):
        self.manager = manager
        self.mmap = None

    @property
    def state(self):
        return (self.mmap, self.manager.ptrs, self.manager.sizes)

    def __enter__(self):
        if self.mmap is None:
            self.mmap = np.memmap(self.manager.reader.file_name, "uint8", mode="r")
        return self

    def __exit__(self, __exc_type, __exc_value, __traceback):
        return None


class OSCacheManager(MemoryManager):
    """Reads payloads straight from a memory map of the file."""

    def __init__(self, reader):
        super().__init__(reader)
        self.context = OSCacheContext(self)

    def schedule_epoch(self, schedule):
        return self.context

    @property
    def state_type(self):
        return ("uint8[::1]", "uint64[::1]", "uint64[::1]")

    def compile_reader(self):
        """``read(address, state)``: the payload allocated at ``address``."""

        def read(address, mem_state):
            size = mem_state[2][np.searchsorted(mem_state[1], address)]
            return mem_state[0][address:address + size]

        return read
