"""FFCV's transforms: image operations and NormalizeImage (native, fused into the image decode),
and batch-level operations that run after the native stage (``ToTensor``, ``ImageMixup``, ...)."""

from beton.pipeline.operation import Operation
from beton.transforms.common import Squeeze
from beton.transforms.image import (Cutout, NormalizeImage, RandomBrightness, RandomContrast,
                                    RandomHorizontalFlip, RandomSaturation, RandomTranslate, RandomVerticalFlip,
                                    _NativeImageOp)
from beton.transforms.mixup import ImageMixup, LabelMixup, MixupToOneHot
from beton.transforms.module import ModuleWrapper
from beton.transforms.ops import Convert, ToDevice, ToTensor, ToTorchImage, View
from beton.transforms.poisoning import Poison
from beton.transforms.random_resized_crop import RandomResizedCrop
from beton.transforms.replace_label import ReplaceLabel

# FFCV's image transforms are Operations; beton's run natively but are Operations too.
Operation.register(_NativeImageOp)
Operation.register(NormalizeImage)

__all__ = ["ToTensor", "ToDevice", "ToTorchImage", "NormalizeImage", "Convert", "Squeeze", "View",
           "RandomResizedCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomTranslate", "Cutout",
           "ImageMixup", "LabelMixup", "MixupToOneHot", "Poison", "ReplaceLabel", "ModuleWrapper",
           "RandomBrightness", "RandomContrast", "RandomSaturation"]
