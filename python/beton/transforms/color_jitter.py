"""FFCV's module path ``ffcv.transforms.color_jitter`` (beton's ``colorjitter`` is the same)."""

from beton.transforms.image import RandomBrightness, RandomContrast, RandomSaturation  # noqa: F401
