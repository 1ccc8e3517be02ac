"""FFCV's batch-level transforms that run in Python after the native stage."""

from beton.transforms.ops import Convert, Squeeze, ToDevice, ToTensor, ToTorchImage

__all__ = ["ToTensor", "ToDevice", "ToTorchImage", "Squeeze", "Convert"]
