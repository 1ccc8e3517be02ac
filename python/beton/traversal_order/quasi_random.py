"""FFCV's ``QuasiRandom`` order: random, but drawing from a few pages at a time, so a loader
reading whole pages (``os_cache=False``) reads each page once per epoch."""

import numpy as np

from beton.traversal_order.base import TraversalOrder


def generate_order_inner(seed, page_to_samples_array, page_sizes, result, buffer_size=6):
    """Fills ``result`` with the samples of every page: pages shuffled, samples within a page
    shuffled, each next sample drawn from one of ``buffer_size`` open pages. FFCV runs the same
    algorithm on numba's generator; beton's uses numpy's (same distribution, other draws)."""
    rng = np.random.default_rng(int(seed))
    for page, size in enumerate(page_sizes):
        rng.shuffle(page_to_samples_array[page, :size])
    page_order = rng.permutation(len(page_sizes))
    consumed = np.zeros_like(page_sizes)
    current, next_page = [], 0
    for s in range(result.shape[0]):
        while next_page < len(page_sizes) and len(current) < buffer_size:
            if page_sizes[page_order[next_page]] > 0:
                current.append(page_order[next_page])
            next_page += 1
        page = current[rng.integers(0, len(current))]
        result[s] = page_to_samples_array[page, consumed[page]]
        consumed[page] += 1
        if consumed[page] >= page_sizes[page]:
            current.remove(page)


class QuasiRandom(TraversalOrder):
    """A page-local random order (FFCV's): each batch's samples come from about ``2 x
    batch_size`` open pages. Not available distributed (as in FFCV)."""

    def __init__(self, loader):
        super().__init__(loader)
        manager = getattr(loader, "memory_manager", None)
        if manager is None:
            from beton.memory_managers import OSCacheManager
            from beton.reader import Reader

            manager = OSCacheManager(Reader(loader.fname))
        self.page_to_samples = manager.page_to_samples
        if not self.page_to_samples:
            raise ValueError("Dataset won't benefit from QuasiRandom order, use regular Random")
        if self.distributed:
            raise NotImplementedError("distributed: QuasiRandom is not available distributed (as in FFCV)")
        self.prepare_data_structures()

    def prepare_data_structures(self):
        """Per page, the wanted samples on it (``page_to_samples_array``, ``page_sizes``)."""
        wanted = set(int(i) for i in self.indices)
        num_pages = int(max(self.page_to_samples)) + 1
        width = max(len(v) for v in self.page_to_samples.values())
        self.page_to_samples_array = np.empty((num_pages, width), dtype=np.int64)
        self.page_sizes = np.zeros(num_pages, dtype=np.int64)
        for page, samples in self.page_to_samples.items():
            for s in sorted(samples):
                if int(s) in wanted:
                    self.page_to_samples_array[page, self.page_sizes[page]] = s
                    self.page_sizes[page] += 1

    def sample_order(self, epoch: int):
        result = np.zeros(len(self.indices), dtype=np.int64)
        generate_order_inner(self.seed * 912300 + epoch, self.page_to_samples_array.copy(), self.page_sizes,
                             result, 2 * self.loader.batch_size)
        return result
