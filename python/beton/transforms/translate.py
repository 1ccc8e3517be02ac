"""FFCV's module path ffcv.transforms.translate."""

from beton.transforms.image import RandomTranslate  # noqa: F401
