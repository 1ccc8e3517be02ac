"""FFCV's module path ffcv.transforms.cutout."""

from beton.transforms.image import Cutout  # noqa: F401
