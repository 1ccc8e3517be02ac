"""FFCV's ``Sequential`` order: the indices as given (split across ranks when distributed)."""

from beton.traversal_order.base import TraversalOrder


class Sequential(TraversalOrder):
    """The loader's indices in their order, every epoch; distributed, ``DistributedSampler``'s
    split (``shuffle=False``)."""

    def sample_order(self, epoch: int):
        return self._shard(self.indices) if self.distributed else self.indices
