"""FFCV's image transforms. In a pipeline right after an image decoder they run natively, fused
into the decode on the worker threads, with per-sample randomness from (seed, epoch, index)."""

import numpy as np


class _NativeImageOp:
    _beton_image_op = True

    def _native(self):
        raise NotImplementedError

    def __call__(self, x):
        raise TypeError(f"{type(self).__name__} runs natively: place it right after an image decoder")


class RandomHorizontalFlip(_NativeImageOp):
    def __init__(self, flip_prob: float = 0.5):
        self.flip_prob = float(flip_prob)

    def _native(self):
        return ("horizontal_flip", self.flip_prob, 0.0, (0, 0, 0))


class RandomVerticalFlip(_NativeImageOp):
    def __init__(self, flip_prob: float = 0.5):
        self.flip_prob = float(flip_prob)

    def _native(self):
        return ("vertical_flip", self.flip_prob, 0.0, (0, 0, 0))


class RandomTranslate(_NativeImageOp):
    def __init__(self, padding: int, fill=(0, 0, 0)):
        self.padding, self.fill = int(padding), tuple(int(c) for c in fill)

    def _native(self):
        return ("translate", float(self.padding), 0.0, self.fill)


class Cutout(_NativeImageOp):
    def __init__(self, crop_size: int, fill=(0, 0, 0)):
        self.crop_size, self.fill = int(crop_size), tuple(int(c) for c in fill)

    def _native(self):
        return ("cutout", float(self.crop_size), 0.0, self.fill)


class RandomBrightness(_NativeImageOp):
    def __init__(self, magnitude: float, p: float = 0.5):
        self.magnitude, self.p = float(magnitude), float(p)

    def _native(self):
        return ("brightness", self.magnitude, self.p, (0, 0, 0))


class RandomContrast(RandomBrightness):
    def _native(self):
        return ("contrast", self.magnitude, self.p, (0, 0, 0))


class RandomSaturation(RandomBrightness):
    def _native(self):
        return ("saturation", self.magnitude, self.p, (0, 0, 0))


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

    def _native(self, layout):
        return (self.mean, self.std, self.type.name, layout)
