"""Loader.filter with a condition that indexes the sample (value[0]), and recompiling a
pipeline across epochs (a decoder's output size changed between epochs)."""
import os

import numpy as np

from ffcv.fields import IntField, RGBImageField
from ffcv.fields.basics import IntDecoder
from ffcv.fields.rgb_image import CenterCropRGBImageDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter


def run(tmp):
    path = os.path.join(tmp, "filter.beton")
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, size=(40, 24, 32, 3), dtype=np.uint8)
    DatasetWriter(path, {"image": RGBImageField(write_mode="raw"), "label": IntField()},
                  num_workers=1).from_indexed_dataset([(images[i], i % 5) for i in range(40)])
    out = {}
    base = Loader(path, batch_size=6, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                  pipelines={"image": None, "label": [IntDecoder()]})
    kept = base.filter("label", lambda value: value[0] in (1, 3))
    out["filter/len"] = np.array(len(kept))
    for b, (label,) in enumerate(kept):
        out[f"filter/{b}"] = np.array(label)
    decoder = CenterCropRGBImageDecoder((16, 16), 1.0)
    loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL, recompile=True,
                    pipelines={"image": [decoder], "label": [IntDecoder()]})
    for epoch, size in enumerate([(16, 16), (8, 12), (20, 10)]):
        decoder.output_size = size
        shapes = [np.array(image).shape for image, _ in loader]
        out[f"recompile/{epoch}"] = np.array(shapes)
    return out
