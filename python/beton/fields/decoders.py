"""FFCV's decoders. The scalar, array and bytes decoders select the native decoder of their field
type; the image decoders run natively too, with the crop-aware, DCT-scaled JPEG decode, fused with
the native image transforms that follow them in a pipeline."""

from typing import Tuple

from beton import _native


class _Decoder:
    """A decoder: the first stage of a field's pipeline. ``_native()`` is its native object
    (``beton._native.Decoder``), which the Loader hands to the native engine."""

    _beton_decoder = True

    def __repr__(self):
        return f"{type(self).__name__}()"

    def _native(self):
        return getattr(_native, type(self).__name__)()


class _ScalarDecoder(_Decoder):
    """A decoder of one number per sample. Batches are ``(batch_size, 1)``, FFCV's shape
    (``value[0]`` of a sample, ``torch.cat(..., dim=1)`` and FFCV's shape checks work);
    ``flat=True`` (beton's) gives ``(batch_size,)`` instead, what a loss such as
    ``cross_entropy`` takes for labels (FFCV code adds ``Squeeze()`` for that)."""

    def __init__(self, flat: bool = False):
        self.flat = bool(flat)

    def __repr__(self):
        return f"{type(self).__name__}(flat=True)" if self.flat else f"{type(self).__name__}()"


class IntDecoder(_ScalarDecoder):
    """FFCV's ``IntDecoder``: an int64 per sample (for ``IntField``), batches of shape
    ``(batch_size, 1)`` as in FFCV; ``IntDecoder(flat=True)``: ``(batch_size,)``."""


class FloatDecoder(_ScalarDecoder):
    """FFCV's ``FloatDecoder``: a float64 per sample (for ``FloatField``), batches of shape
    ``(batch_size, 1)`` as in FFCV; ``FloatDecoder(flat=True)``: ``(batch_size,)``."""


class NDArrayDecoder(_Decoder):
    """FFCV's ``NDArrayDecoder``: the field's dtype and shape (``NDArrayField``,
    ``TorchTensorField``)."""


class BytesDecoder(_Decoder):
    """FFCV's ``BytesDecoder``: each sample's bytes, zero-padded to the longest (``BytesField``,
    ``JSONField``)."""


class BoolDecoder(_ScalarDecoder):
    """beton's ``BoolDecoder``: a bool per sample (for ``BoolField``), batches of shape
    ``(batch_size, 1)`` like FFCV's scalar decoders; ``BoolDecoder(flat=True)``:
    ``(batch_size,)``."""


class _ImageDecoder(_Decoder):
    _beton_image_decoder = True


class SimpleRGBImageDecoder(_ImageDecoder):
    """Every image whole at its stored size (all images must be the same size)."""


class RandomResizedCropRGBImageDecoder(SimpleRGBImageDecoder):
    """torchvision's RandomResizedCrop, decoding only the crop, at the smallest DCT scale that
    keeps it at least ``output_size``. ``interpolation`` (beton's): ``'bicubic'`` (Catmull-Rom,
    default), ``'bilinear'`` or ``'area'`` (FFCV's OpenCV INTER_AREA; faster, softer)."""

    def __init__(self, output_size: Tuple[int, int], scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                 interpolation: str = "bicubic"):
        self.output_size = (int(output_size[0]), int(output_size[1]))
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.interpolation = str(interpolation)
        self._native()  # checks the arguments now, not at the Loader

    def _native(self):
        return _native.RandomResizedCropRGBImageDecoder(self.output_size, self.scale, self.ratio, self.interpolation)


class CenterCropRGBImageDecoder(SimpleRGBImageDecoder):
    """A centred square of ``ratio`` × the shorter side, resized to ``output_size``
    (``interpolation`` as for :class:`RandomResizedCropRGBImageDecoder`)."""

    def __init__(self, output_size: Tuple[int, int], ratio: float = 224 / 256,
                 interpolation: str = "bicubic"):
        self.output_size = (int(output_size[0]), int(output_size[1]))
        self.ratio = float(ratio)
        self.interpolation = str(interpolation)
        self._native()

    def _native(self):
        return _native.CenterCropRGBImageDecoder(self.output_size, self.ratio, self.interpolation)


__all__ = ["IntDecoder", "FloatDecoder", "NDArrayDecoder", "BytesDecoder", "BoolDecoder", "SimpleRGBImageDecoder",
           "RandomResizedCropRGBImageDecoder", "CenterCropRGBImageDecoder"]


# FFCV's abstract decoder bases, as virtual bases of beton's decoders (isinstance works as in FFCV).
from abc import ABC  # noqa: E402

from beton.pipeline.operation import Operation  # noqa: E402


class BasicDecoder(ABC):
    """FFCV's base of the scalar decoders (``IntDecoder``, ``FloatDecoder``)."""


class ResizedCropRGBImageDecoder(ABC):
    """FFCV's base of the crop-and-resize image decoders (``RandomResizedCropRGBImageDecoder``,
    ``CenterCropRGBImageDecoder``)."""

    def __init__(self, output_size):
        self.output_size = output_size


BasicDecoder.register(IntDecoder)
BasicDecoder.register(FloatDecoder)
ResizedCropRGBImageDecoder.register(RandomResizedCropRGBImageDecoder)
ResizedCropRGBImageDecoder.register(CenterCropRGBImageDecoder)
Operation.register(_Decoder)
