"""FFCV's ``ffcv.transforms.mixup``: mixup (https://arxiv.org/abs/1710.09412) on batches.

``ImageMixup`` blends each image with the previous one in the batch, ``LabelMixup`` records the
pair and the weight, ``MixupToOneHot`` turns that record into soft one-hot targets. The weights
are drawn as FFCV 1.0.2 draws them (its numba code seeds numba's generator with the batch's last
sample id and draws Beta(alpha, alpha) with CPython's algorithm): same batch, same weights, so
images and labels of one batch agree and results equal FFCV's.
"""

import math
from dataclasses import replace

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import _BatchOp, _IndexedBatchOp

_SG_MAGICCONST = 1.0 + math.log(4.5)


def _gamma(alpha, random):
    """numba's ``np.random.gamma(alpha, 1.0)`` (CPython's ``gammavariate``)."""
    if alpha > 1.0:
        ainv = math.sqrt(2.0 * alpha - 1.0)
        bbb, ccc = alpha - math.log(4.0), alpha + ainv
        while True:
            u1 = random()
            if not 1e-7 < u1 < 0.9999999:
                continue
            u2 = 1.0 - random()
            v = math.log(u1 / (1.0 - u1)) / ainv
            x = alpha * math.exp(v)
            z = u1 * u1 * u2
            r = bbb + ccc * v - x
            if r + _SG_MAGICCONST - 4.5 * z >= 0.0 or r >= math.log(z):
                return x
    if alpha == 1.0:
        return -math.log(1.0 - random())
    while True:
        u = random()
        b = (math.e + alpha) / math.e
        p = b * u
        x = p ** (1.0 / alpha) if p <= 1.0 else -math.log((b - p) / alpha)
        u1 = random()
        if p > 1.0:
            if u1 <= x ** (alpha - 1.0):
                return x
        elif u1 <= math.exp(-x):
            return x


def mixup_lambdas(seed: int, alpha: float, n=None):
    """The mixup weights FFCV 1.0.2 draws for a batch whose last sample id is ``seed``: one
    (``n=None``) or ``n`` draws of Beta(alpha, alpha)."""
    state = np.random.RandomState(int(seed) & 0xFFFFFFFF)  # numba seeds MT19937 with a uint32

    def random():
        return float(state.random_sample())

    def beta():
        y = _gamma(alpha, random)
        return 0.0 if y == 0.0 else y / (y + _gamma(alpha, random))

    return beta() if n is None else np.array([beta() for _ in range(n)])


class _Mixup(_IndexedBatchOp):
    def __init__(self, alpha: float, same_lambda: bool):
        super().__init__()
        self.alpha = alpha
        self.same_lambda = same_lambda

    def _lambdas(self, n, indices):
        lam = mixup_lambdas(int(self._indices(indices)[-1]), self.alpha, None if self.same_lambda else n)
        return np.full(n, lam) if self.same_lambda else lam


class ImageMixup(_Mixup):
    """Mixup for images (numpy batches, before ``ToTensor``): image ``i`` becomes ``lam_i *
    image_i + (1 - lam_i) * image_{i-1}`` (image ``-1`` is the batch's last).

    Parameters
    ----------
    alpha : float
        Mixup parameter alpha
    same_lambda : bool
        One lambda for the whole batch, or one per image.
    """

    def _batch(self, images, indices=None):
        lam = self._lambdas(len(images), indices)
        lam = lam.reshape((-1,) + (1,) * (images.ndim - 1))
        mixed = lam * images + (1 - lam) * np.roll(images, 1, axis=0)
        return mixed.astype(images.dtype)

    def declare_state_and_memory(self, previous_state):
        return previous_state, AllocationQuery(shape=previous_state.shape, dtype=previous_state.dtype)


class LabelMixup(_Mixup):
    """Mixup for labels, initialised like :class:`ImageMixup`: each row becomes ``(label_i,
    label_{i-1}, lam_i)`` as float32.
    """

    def _batch(self, labels, indices=None):
        labels = np.asarray(labels).reshape(len(labels), -1)[:, 0]
        out = np.empty((len(labels), 3), dtype=np.float32)
        out[:, 0], out[:, 1] = labels, np.roll(labels, 1)
        out[:, 2] = self._lambdas(len(labels), indices)
        return out

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, shape=(3,), dtype=np.float32), AllocationQuery((3,), dtype=np.float32)


class MixupToOneHot(_BatchOp):
    """``LabelMixup``'s rows to soft one-hot targets of ``num_classes`` (after ``ToTensor``).

    Parameters
    ----------
    num_classes : int
        The number of classes.
    """

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes

    def _batch(self, mixed, indices=None):
        if type(mixed).__module__.startswith("torch"):
            import torch

            dst = torch.zeros((mixed.shape[0], self.num_classes), dtype=mixed.dtype, device=mixed.device)
            rows = torch.arange(mixed.shape[0], device=mixed.device)
            dst[rows, mixed[:, 0].long()] = mixed[:, 2]
            dst[rows, mixed[:, 1].long()] = 1 - mixed[:, 2]
            return dst
        dst = np.zeros((len(mixed), self.num_classes), dtype=mixed.dtype)
        rows = np.arange(len(mixed))
        dst[rows, mixed[:, 0].astype(np.int64)] = mixed[:, 2]
        dst[rows, mixed[:, 1].astype(np.int64)] = 1 - mixed[:, 2]
        return dst

    def declare_state_and_memory(self, previous_state):
        return (replace(previous_state, shape=(self.num_classes,)),
                AllocationQuery((self.num_classes,), dtype=previous_state.dtype, device=previous_state.device))
