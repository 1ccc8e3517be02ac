"""FFCV's image transforms. In a pipeline right after an image decoder they run natively, fused
into the decode on the worker threads, with per-sample randomness from (seed, epoch, index)."""

import numpy as np

from beton import _native


class _NativeImageOp:
    """An operation that runs natively: ``_native()`` is its ``beton._native.ImageOp``, made
    (and its arguments checked) when the Python object is."""

    _beton_image_op = True

    def _native(self):
        raise NotImplementedError


class _Flip(_NativeImageOp):
    """A flip with probability ``flip_prob``; ``_op`` is the native operation's class."""

    _op: type

    def __init__(self, flip_prob: float = 0.5):
        self.flip_prob = float(flip_prob)
        self._native()  # checks the arguments now

    def _native(self):
        return self._op(self.flip_prob)


class RandomHorizontalFlip(_Flip):
    _op = _native.RandomHorizontalFlip


class RandomVerticalFlip(_Flip):
    _op = _native.RandomVerticalFlip


class _Filled(_NativeImageOp):
    """An operation of a size in pixels (the attribute named ``_size``) and a ``fill`` colour;
    ``_op`` is the native operation's class."""

    _op: type
    _size: str

    def _set(self, size, fill):
        setattr(self, self._size, int(size))
        self.fill = tuple(int(c) for c in fill)
        self._native()  # checks the arguments now

    def _native(self):
        return self._op(getattr(self, self._size), list(self.fill))


class RandomTranslate(_Filled):
    _op, _size = _native.RandomTranslate, "padding"

    def __init__(self, padding: int, fill=(0, 0, 0)):
        self._set(padding, fill)


class Cutout(_Filled):
    _op, _size = _native.Cutout, "crop_size"

    def __init__(self, crop_size: int, fill=(0, 0, 0)):
        self._set(crop_size, fill)


class RandomBrightness(_NativeImageOp):
    def __init__(self, magnitude: float, p: float = 0.5):
        self.magnitude, self.p = float(magnitude), float(p)
        self._native()

    def _native(self):
        return _native.RandomBrightness(self.magnitude, self.p)


class RandomContrast(RandomBrightness):
    def _native(self):
        return _native.RandomContrast(self.magnitude, self.p)


class RandomSaturation(RandomBrightness):
    def _native(self):
        return _native.RandomSaturation(self.magnitude, self.p)


class NormalizeImage:
    """``(x - mean) / std`` per channel (mean and std in pixel units, 0-255) to ``type``
    (np.float16 or np.float32), done natively on the worker threads."""

    _beton_normalize = True

    def __init__(self, mean, std, type=np.float32):  # noqa: A002 (FFCV's argument name)
        self.mean = [float(v) for v in np.asarray(mean).ravel()]
        self.std = [float(v) for v in np.asarray(std).ravel()]
        self.type = np.dtype(type)
        if len(self.mean) != 3 or len(self.std) != 3 or self.type not in (np.float16, np.float32):
            raise ValueError("NormalizeImage takes 3 means, 3 stds and np.float16 or np.float32")

    def _native(self, channels_first: bool = True):
        return _native.NormalizeImage(self.mean, self.std, half=self.type == np.float16,
                                      channels_first=channels_first)
