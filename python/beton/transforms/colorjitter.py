"""FFCV's module path ffcv.transforms.colorjitter."""

from beton.transforms.image import RandomBrightness, RandomContrast, RandomSaturation  # noqa: F401
