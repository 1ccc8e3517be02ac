"""FFCV's ``TraversalOrder`` base class."""

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from beton.reader import Reader  # noqa: F401 (FFCV's module binds it)


def rank_and_world(distributed):
    """``(rank, world_size)`` for a loader's ``distributed``: ``True`` asks torch.distributed,
    a pair is taken as is (beton's), anything false is one process."""
    if distributed is True:
        import torch.distributed as dist

        return dist.get_rank(), dist.get_world_size()
    if distributed:
        return int(distributed[0]), int(distributed[1])
    return 0, 1


class TraversalOrder(ABC):
    """The order of one epoch's samples.

    Parameters
    ----------
    loader : Loader
        The loader; its ``indices`` (numpy array of the sample ids, in the given order), ``seed``
        and ``distributed`` are kept as attributes.
    """

    def __init__(self, loader):
        self.loader = loader
        self.indices = np.asarray(loader.indices)
        self.seed = loader.seed
        self.distributed = loader.distributed
        self.sampler = None

    @abstractmethod
    def sample_order(self, epoch: int) -> Sequence[int]:
        raise NotImplementedError

    def _shard(self, order):
        """torch's ``DistributedSampler(drop_last=False)`` split of ``order``: padded by repeating
        from the start to a multiple of the world size, then every world-th from the rank."""
        rank, world = rank_and_world(self.distributed)
        order = np.asarray(order)
        total = -(-len(order) // world) * world
        padded = np.concatenate([order, np.resize(order, total - len(order))]) if total > len(order) else order
        return padded[rank:total:world]
