"""FFCV's module path ffcv.transforms.flip."""

from beton.transforms.image import RandomHorizontalFlip, RandomVerticalFlip  # noqa: F401
