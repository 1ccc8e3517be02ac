"""FFCV's module path ffcv.transforms.common."""

from beton.transforms.ops import Squeeze  # noqa: F401
