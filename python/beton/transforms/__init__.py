"""FFCV's transforms: image operations and NormalizeImage (native, fused into the image decode),
and batch-level stages that run in Python after the native stage."""

from beton.transforms.image import (Cutout, NormalizeImage, RandomBrightness, RandomContrast,
                                    RandomHorizontalFlip, RandomSaturation, RandomTranslate, RandomVerticalFlip)
from beton.transforms.ops import Convert, Squeeze, ToDevice, ToTensor, ToTorchImage

__all__ = ["ToTensor", "ToDevice", "ToTorchImage", "Squeeze", "Convert", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomTranslate", "Cutout", "RandomBrightness", "RandomContrast",
           "RandomSaturation", "NormalizeImage"]
