"""The Python-to-Rust boundary is typed: every decoder, image operation and field type is a
native class, made (and its arguments checked) when the Python object is, so a bad argument
fails where it is written, naming the class and the argument, not at the first batch."""

import pytest

from beton import _native
from beton.fields import RGBImageField
from beton.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
from beton.loader import Loader
from beton.transforms import Cutout, NormalizeImage, RandomBrightness, RandomHorizontalFlip, RandomTranslate


@pytest.mark.parametrize("make,words", [
    (lambda: RandomHorizontalFlip(1.5), ["RandomHorizontalFlip", "flip_prob"]),
    (lambda: RandomBrightness(-1.0), ["RandomBrightness", "magnitude"]),
    (lambda: RandomTranslate(-2), ["RandomTranslate", "padding"]),
    (lambda: Cutout(8, fill=(0, 300, 0)), ["Cutout", "fill"]),
    (lambda: RandomResizedCropRGBImageDecoder((0, 64)), ["RandomResizedCropRGBImageDecoder", "output_size"]),
    (lambda: RandomResizedCropRGBImageDecoder((64, 64), scale=(0.5, 0.1)), ["scale"]),
    (lambda: RandomResizedCropRGBImageDecoder((64, 64), interpolation="nearest"), ["interpolation"]),
    (lambda: CenterCropRGBImageDecoder((64, 64), ratio=0), ["CenterCropRGBImageDecoder", "ratio"]),
    (lambda: _native.NormalizeImage([1, 2, 3], [1, 0, 1]), ["NormalizeImage", "std"]),
    (lambda: RGBImageField(write_mode="png").native(), ["RGBImageField", "write_mode"]),
    (lambda: RGBImageField(write_mode="jpg", jpeg_quality=0).native(), ["jpeg_quality"]),
    (lambda: _native.NDArrayField("<f4", [2, -1]), ["NDArrayField", "shape"]),
])
def test_bad_arguments_fail_where_they_are_written(make, words):
    with pytest.raises(Exception) as e:
        make()
    assert isinstance(e.value, (ValueError, TypeError)), e.value
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_python_objects_hold_native_ones():
    assert isinstance(RandomHorizontalFlip(0.25)._native(), _native.ImageOp)
    assert isinstance(RandomResizedCropRGBImageDecoder((32, 32))._native(), _native.Decoder)
    assert isinstance(IntDecoder()._native(), _native.IntDecoder)
    field = RGBImageField(write_mode="smart", smart_threshold=1000).native()
    assert isinstance(field, _native.Field) and field.type_name == "rgb_image"
    pipeline = _native.ImagePipeline(_native.SimpleRGBImageDecoder(), [_native.RandomHorizontalFlip(0.5)],
                                     NormalizeImage([0, 0, 0], [1, 1, 1])._native(True))
    assert "ImagePipeline" in repr(pipeline)
    with pytest.raises(TypeError, match="image decoder"):
        _native.ImagePipeline(_native.IntDecoder())


def test_a_decoder_of_the_wrong_type_is_refused_naming_the_field(small):
    with pytest.raises(ValueError, match="IntDecoder cannot decode a FloatField field") as e:
        next(iter(Loader(small, batch_size=4, pipelines={"score": [IntDecoder()]})))
    assert "'score'" in str(e.value)
    with pytest.raises(TypeError, match="Decoder nor an ImagePipeline"):
        _native.Loader(_native.Dataset(str(small)), 4, pipelines={"label": "int"})
