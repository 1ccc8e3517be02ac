"""FFCV's ``Random`` order: a fresh permutation per epoch, equal to FFCV's for the same seed."""

import numpy as np

from beton.traversal_order.base import TraversalOrder


class Random(TraversalOrder):
    """``np.random.default_rng(seed + epoch).permutation(indices)``, FFCV's exact draw; distributed,
    torch's ``DistributedSampler(shuffle=True, seed=seed)`` (needs torch)."""

    def __init__(self, loader):
        super().__init__(loader)
        if self.distributed:
            from torch.utils.data import DistributedSampler

            rank, world = self._rank_world()
            self.sampler = DistributedSampler(self.indices, num_replicas=world, rank=rank, shuffle=True,
                                              seed=self.seed, drop_last=False)

    def _rank_world(self):
        from beton.traversal_order.base import rank_and_world

        return rank_and_world(self.distributed)

    def sample_order(self, epoch: int):
        if not self.distributed:
            return np.random.default_rng(self.seed + epoch if self.seed is not None else None).permutation(self.indices)
        self.sampler.set_epoch(epoch)
        return self.indices[np.array(list(self.sampler))]
