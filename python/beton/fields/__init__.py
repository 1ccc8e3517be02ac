"""Field types, with FFCV's names and arguments, plus beton's extension fields."""

from beton.fields.base import Field
from beton.fields.basics import BoolField, FloatField, IntField
from beton.fields.bytes import BytesField, TextField
from beton.fields.json import JSONField
from beton.fields.ndarray import ArrayField, NDArrayField, TorchTensorField
from beton.fields.rgb_image import GreyImageField, RGBImageField

__all__ = [
    "Field", "IntField", "FloatField", "BoolField", "BytesField", "TextField", "JSONField",
    "NDArrayField", "TorchTensorField", "ArrayField", "RGBImageField", "GreyImageField",
]
