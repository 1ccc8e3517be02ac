"""FFCV users switch by changing imports: FFCV's module paths exist with FFCV's names."""

import importlib

import pytest

PATHS = {
    "beton.writer": ["DatasetWriter"],
    "beton.reader": ["Reader"],
    "beton.loader": ["Loader", "OrderOption"],
    "beton.fields": ["IntField", "FloatField", "RGBImageField", "BytesField", "JSONField", "NDArrayField",
                     "TorchTensorField"],
    "beton.fields.basics": ["IntField", "FloatField"],
    "beton.fields.rgb_image": ["RGBImageField"],
    "beton.fields.ndarray": ["NDArrayField", "TorchTensorField"],
    "beton.fields.bytes": ["BytesField"],
    "beton.fields.decoders": ["IntDecoder", "FloatDecoder", "NDArrayDecoder", "BytesDecoder",
                              "SimpleRGBImageDecoder", "RandomResizedCropRGBImageDecoder",
                              "CenterCropRGBImageDecoder"],
    "beton.transforms": ["ToTensor", "ToDevice", "ToTorchImage", "Squeeze", "Convert", "NormalizeImage",
                         "RandomHorizontalFlip", "RandomVerticalFlip", "Cutout", "RandomTranslate",
                         "RandomBrightness", "RandomContrast", "RandomSaturation"],
    "beton.transforms.ops": ["ToTensor", "ToDevice", "ToTorchImage", "Convert"],
    "beton.transforms.common": ["Squeeze"],
    "beton.transforms.flip": ["RandomHorizontalFlip"],
    "beton.pipeline.operation": ["Operation"],
    "beton.pipeline.state": ["State"],
    "beton.pipeline.allocation_query": ["AllocationQuery"],
    "beton.pipeline.compiler": ["Compiler"],
    "beton.pipeline": ["PipelineSpec"],
}


@pytest.mark.parametrize("module", sorted(PATHS))
def test_ffcv_module_paths(module):
    m = importlib.import_module(module)
    for name in PATHS[module]:
        assert hasattr(m, name), f"{module}.{name}"
