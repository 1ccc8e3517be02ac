"""FFCV's ``ffcv.transforms.random_resized_crop``: ``RandomResizedCrop`` on decoded images (a
batch stage; the decoder ``RandomResizedCropRGBImageDecoder`` is faster and usually preferable)."""

from dataclasses import replace
from typing import Tuple

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import _IndexedBatchOp
from beton.transforms.utils import fast_crop


class RandomResizedCrop(_IndexedBatchOp):
    """Crops a random portion of each image (area fraction in ``scale``, aspect ratio in
    ``ratio``) and resizes it to ``size`` x ``size`` (OpenCV's INTER_AREA, as FFCV).

    FFCV draws crops from numba's unseeded global generator; beton draws them from each sample's
    id (and the stage's ``seed``), so a run is reproducible; the crops follow the same
    distribution (torchvision's).

    Parameters
    ----------
    scale : tuple of float
        Lower and upper bounds for the ratio of random area of the crop.
    ratio : tuple of float
        Lower and upper bounds for random aspect ratio of the crop.
    size : int
        Side length of the output.
    seed : int
        beton's: mixed into every sample's generator (change it per epoch for new crops).
    """

    def __init__(self, scale: Tuple[float, float], ratio: Tuple[float, float], size: int, seed: int = 0):
        super().__init__()
        self.scale = scale
        self.ratio = ratio
        self.size = size
        self.seed = seed

    def _batch(self, images, indices=None):
        indices = self._indices(indices)
        scale, ratio = np.array(self.scale, dtype=float), np.array(self.ratio, dtype=float)
        dst = np.empty((len(images), self.size, self.size, images.shape[-1]), dtype=images.dtype)
        for k in range(len(images)):
            rng = np.random.default_rng([int(self.seed), int(indices[k])])
            i, j, h, w = fast_crop.get_random_crop(images[k].shape[0], images[k].shape[1], scale, ratio, rng)
            fast_crop.resize_crop(images[k], i, i + h, j, j + w, dst[k])
        return dst

    def declare_state_and_memory(self, previous_state):
        return (replace(previous_state, jit_mode=True, shape=(self.size, self.size, 3)),
                AllocationQuery((self.size, self.size, 3), dtype=previous_state.dtype))
