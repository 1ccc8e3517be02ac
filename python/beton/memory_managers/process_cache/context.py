"""FFCV's ``ProcessCacheContext``: the pages an epoch needs, read into process memory."""

import numpy as np

from beton.memory_managers.base import MemoryContext
from beton.memory_managers.base import MemoryManager  # noqa: F401 (FFCV's module binds it)


class ProcessCacheContext(MemoryContext):
    """Reads every page the scheduled ``batches`` touch into one array (a slot per page) on entry.

    Parameters
    ----------
    manager : ProcessCacheManager
        The manager.
    batches : sequence of sequence of int
        The epoch's batches of sample ids.
    """

    def __init__(self, manager, batches):
        self.manager = manager
        self.fname = manager.reader.file_name
        self.batches = batches
        self.page_size = manager.reader.page_size
        self.memory = None

    @property
    def state(self):
        return (self.memory, self.manager.ptrs, self.manager.sizes, self.page_to_slot)

    def __enter__(self):
        pages = sorted({int(p) for batch in self.batches for s in batch
                        for p in self.manager.sample_to_pages.get(np.uint64(s), ())})
        self.memory = np.zeros((len(pages), self.page_size), dtype="<u1")
        self.page_to_slot = np.zeros((pages[-1] + 1) if pages else 0, dtype=np.uint32)
        with open(self.fname, "rb") as f:
            for slot, page in enumerate(pages):
                f.seek(page * self.page_size)
                data = f.read(self.page_size)
                self.memory[slot, :len(data)] = np.frombuffer(data, dtype="<u1")
                self.page_to_slot[page] = slot
        return self

    def __exit__(self, *args):
        self.memory = None
