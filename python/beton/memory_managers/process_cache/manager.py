"""FFCV's ``ProcessCacheManager``."""

import numpy as np

from beton.memory_managers.base import MemoryManager
from beton.memory_managers.base import MemoryContext  # noqa: F401 (FFCV's module binds it)
from beton.memory_managers.process_cache.context import ProcessCacheContext
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)


class ProcessCacheManager(MemoryManager):
    """Reads whole pages into process memory per epoch (no reliance on the OS cache)."""

    def schedule_epoch(self, batches):
        return ProcessCacheContext(self, batches)

    @property
    def state_type(self):
        return ("uint8[:, ::1]", "uint64[::1]", "uint64[::1]", "uint32[::1]")

    def compile_reader(self):
        """``read(address, state)``: the payload allocated at ``address``, from its page's slot."""
        page_size_log2 = np.uint64(np.log2(self.reader.page_size))

        def read(address, mem_state):
            size = mem_state[2][np.searchsorted(mem_state[1], address)]
            page = address >> page_size_log2
            offset = address - (page << page_size_log2)
            return mem_state[0][mem_state[3][page], offset:offset + size]

        return read
