"""FFCV's ``AllocationQuery``: the per-sample output buffer an operation asks for."""

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np


@dataclass(frozen=True)
class AllocationQuery:
    """A buffer of ``shape`` (per sample) and ``dtype`` (numpy or torch) on ``device``.

    Parameters
    ----------
    shape : tuple of int
        Shape of one sample's output.
    dtype : numpy.dtype or torch.dtype
        Element type; a torch dtype allocates torch tensors.
    device : torch.device, optional
        Where torch buffers live (CPU when ``None``).
    """

    shape: Tuple[int, ...]
    dtype: Any
    device: Optional[Any] = None


Allocation = Union[AllocationQuery, Sequence[AllocationQuery]]


def allocate_query(memory_allocation: AllocationQuery, batch_size: int, batches_ahead: int):
    """FFCV's buffer for one query: ``batches_ahead`` slots of ``batch_size`` samples (a numpy
    array, or a list of torch tensors for a torch dtype)."""
    shape = (batches_ahead, batch_size, *memory_allocation.shape)
    if type(memory_allocation.dtype).__module__ == "torch":
        import torch

        return [torch.empty(*shape[1:], dtype=memory_allocation.dtype, device=memory_allocation.device)
                for _ in range(shape[0])]
    return np.empty(shape, dtype=memory_allocation.dtype)
