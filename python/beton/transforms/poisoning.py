"""FFCV's ``ffcv.transforms.poisoning``: ``Poison``, blends a mask into given samples' images."""

from dataclasses import replace

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import _IndexedBatchOp


class Poison(_IndexedBatchOp):
    """Blends ``mask`` with opacity ``alpha`` into the images of samples ``indices``, in place:
    ``clip(image * (1 - alpha) + mask * alpha, *clamp)`` (float32, stored back truncated, as FFCV).
    Needs the batch's sample ids.

    Parameters
    ----------
    mask : numpy.ndarray
        HxWx3 mask.
    alpha : numpy.ndarray
        HxW opacity.
    indices : sequence of int
        The sample ids to poison.
    clamp : tuple of int
        Bounds of the result (default ``(0, 255)``).
    """

    def __init__(self, mask: np.ndarray, alpha: np.ndarray, indices, clamp=(0, 255)):
        super().__init__()
        self.mask = mask
        self.indices = np.sort(indices)
        self.clamp = clamp
        self.alpha = alpha

    def _batch(self, images, indices=None):
        indices = self._indices(indices)
        alpha = np.repeat(np.asarray(self.alpha)[:, :, None], 3, axis=2)
        mask = np.asarray(self.mask).astype("float") * alpha
        hit = np.flatnonzero(np.isin(np.asarray(indices, dtype=np.int64), self.indices.astype(np.int64)))
        for i in hit:
            temp = images[i].astype(np.float32)
            temp *= 1 - alpha
            temp += mask
            np.clip(temp, self.clamp[0], self.clamp[1], out=temp)
            images[i] = temp
        return images

    def declare_state_and_memory(self, previous_state):
        return (replace(previous_state, jit_mode=True),
                AllocationQuery(shape=previous_state.shape, dtype=np.dtype("float32")))
