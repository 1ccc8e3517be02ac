"""Image pipelines from Python: FFCV's raw constant-colour check through the image decoders,
NormalizeImage, native flips, and the ImageFolder main path."""

import numpy as np
import pytest

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import (CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder,
                                   SimpleRGBImageDecoder)
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter


@pytest.fixture(scope="module")
def constant(tmp_path_factory):
    """Raw images of sizes 40x60 to 200x90, sample i all of colour (i, 2i, 3i) mod 256."""
    path = tmp_path_factory.mktemp("img") / "constant.beton"

    class Images:
        def __len__(self):
            return 64

        def __getitem__(self, i):
            h, w = 40 + (i * 7) % 160, 60 + (i * 13) % 30
            return np.broadcast_to(np.array([i, 2 * i, 3 * i], np.uint8), (h, w, 3)).copy(), i

    DatasetWriter(path, {"image": RGBImageField(), "label": IntField()}, progress=False).from_indexed_dataset(Images())
    return path


@pytest.mark.parametrize("decoder", [RandomResizedCropRGBImageDecoder((32, 48)), CenterCropRGBImageDecoder((32, 32)),
                                     RandomResizedCropRGBImageDecoder((32, 48), interpolation="area"),
                                     CenterCropRGBImageDecoder((96, 96), interpolation="bilinear")])
def test_constant_raw_images_come_out_exact(constant, decoder):
    loader = Loader(constant, batch_size=16, num_workers=2, order=OrderOption.RANDOM, seed=3,
                    pipelines={"image": [decoder, RandomHorizontalFlip()]})
    n = 0
    for images, labels in loader:
        want = np.stack([np.array([i, 2 * i, 3 * i], np.uint8) for i in np.ravel(labels)])
        assert (images == want[:, None, None, :]).all()
        n += len(labels)
    assert n == 64


def test_unknown_interpolation_is_an_error_naming_it(constant):
    with pytest.raises(ValueError, match="'lanczos'"):
        Loader(constant, batch_size=16, pipelines={"image": [RandomResizedCropRGBImageDecoder((8, 8), interpolation="lanczos")]})


def test_constant_raw_images_come_out_exact_through_the_simple_decoder(tmp_path):
    """FFCV's check for SimpleRGBImageDecoder: same-size raw images of one colour each decode
    to exactly that colour."""
    path = tmp_path / "same-size.beton"

    class Images:
        def __len__(self):
            return 50

        def __getitem__(self, i):
            return np.broadcast_to(np.array([i, 255 - i, 3 * i], np.uint8), (24, 40, 3)).copy(), i

    DatasetWriter(path, {"image": RGBImageField(), "label": IntField()}, progress=False).from_indexed_dataset(Images())
    loader = Loader(path, batch_size=16, num_workers=2, order=OrderOption.RANDOM, seed=5, drop_last=False,
                    pipelines={"image": [SimpleRGBImageDecoder()]})
    n = 0
    for images, labels in loader:
        assert images.shape == (len(labels), 24, 40, 3) and images.dtype == np.uint8
        want = np.stack([np.array([i, 255 - i, 3 * i], np.uint8) for i in np.ravel(labels)])
        assert (images == want[:, None, None, :]).all()
        n += len(labels)
    assert n == 50


def test_normalize_image_f16_equals_numpy(constant):
    mean, std = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255
    loader = Loader(constant, batch_size=8, pipelines={
        "image": [CenterCropRGBImageDecoder((16, 16)), NormalizeImage(mean, std, np.float16)]})
    images, labels = next(iter(loader))
    assert images.dtype == np.float16 and images.shape == (8, 16, 16, 3)
    pixels = np.stack([[i, 2 * i, 3 * i] for i in np.ravel(labels)]).astype(np.float32) % 256
    want = ((pixels - mean) / std).astype(np.float16)
    np.testing.assert_array_equal(images[:, 5, 7, :], want)


def test_simple_decoder_needs_one_size_and_names_the_sample(constant):
    with pytest.raises(ValueError, match="sample"):
        list(Loader(constant, batch_size=8, pipelines={"image": [SimpleRGBImageDecoder()]}))


def test_same_seed_same_crops_whatever_the_workers(tmp_path):
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
    path = tmp_path / "f.beton"
    DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", max_resolution=128), "label": IntField()},
                  progress=False).from_imagefolder(root)

    def epoch(workers):
        loader = Loader(path, batch_size=32, num_workers=workers, seed=9, order=OrderOption.QUASI_RANDOM,
                        pipelines={"image": [RandomResizedCropRGBImageDecoder((64, 64)), RandomHorizontalFlip()]})
        return [img.copy() for img, _ in loader]

    one, two = epoch(1), epoch(2)
    assert len(one) == 4 and all((a == b).all() for a, b in zip(one, two))


def test_two_views_of_one_image_field(constant):
    from beton.pipeline import PipelineSpec

    loader = Loader(constant, batch_size=16, seed=1, pipelines={
        "image": [RandomResizedCropRGBImageDecoder((24, 24))],
        "second": PipelineSpec("image", RandomResizedCropRGBImageDecoder((32, 32)), [RandomHorizontalFlip()])})
    assert loader.fields == ["image", "label", "second"]
    first, labels, second = next(iter(loader))
    assert first.shape == (16, 24, 24, 3) and second.shape == (16, 32, 32, 3)
    assert (second[:, 0, 0, 0] == np.asarray(labels).ravel().astype(np.uint8)).all()
