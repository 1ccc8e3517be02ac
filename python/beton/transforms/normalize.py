"""FFCV's module path ffcv.transforms.normalize."""

from beton.transforms.image import NormalizeImage  # noqa: F401
