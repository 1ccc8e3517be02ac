"""Image fields: raw images of one size and JPEGs of one size through SimpleRGBImageDecoder
(raw ones exactly; JPEG pixels within the two codecs' rounding), images of several sizes
through SimpleRGBImageDecoder (FFCV: a TypeError) and through CenterCropRGBImageDecoder."""
import os

import numpy as np

from ffcv.fields import IntField, RGBImageField
from ffcv.fields.basics import IntDecoder
from ffcv.fields.rgb_image import CenterCropRGBImageDecoder, SimpleRGBImageDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter

# Keys compared within a tolerance: JPEG decoders differ in rounding (libjpeg-turbo's IDCT
# and upsampling options), so pixels agree within a few levels, not exactly.
TOLERANCE = {"jpg_same/": 3.0}


def smooth_images(n, h, w, seed):
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.uniform(0.02, 0.2, size=3)
        img = np.stack([128 + 100 * np.sin(a * x + b * y), 128 + 100 * np.cos(b * x - c * y),
                        128 + 100 * np.sin(c * (x + y))], axis=-1)
        out.append(img.astype(np.uint8))
    return out


def run(tmp):
    out = {}
    for mode in ("raw", "jpg"):
        path = os.path.join(tmp, f"same_{mode}.beton")
        images = smooth_images(20, 32, 48, 1)
        DatasetWriter(path, {"image": RGBImageField(write_mode=mode, jpeg_quality=95), "label": IntField()},
                      num_workers=2).from_indexed_dataset([(images[i], i) for i in range(20)])
        loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                        pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
        for b, (image, label) in enumerate(loader):
            out[f"{mode}_same/{b}/image"], out[f"{mode}_same/{b}/label"] = np.array(image), np.array(label)

    path = os.path.join(tmp, "sizes.beton")
    images = [smooth_images(1, 20 + 4 * (i % 3), 30 + 2 * (i % 4), i)[0] for i in range(12)]
    DatasetWriter(path, {"image": RGBImageField(write_mode="raw"), "label": IntField()},
                  num_workers=1).from_indexed_dataset([(images[i], i) for i in range(12)])
    try:
        loader = Loader(path, batch_size=4, num_workers=1, order=OrderOption.SEQUENTIAL,
                        pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
        list(loader)
        out["sizes/simple_type_error"] = np.array(0)
    except TypeError:
        out["sizes/simple_type_error"] = np.array(1)
    loader = Loader(path, batch_size=4, num_workers=1, order=OrderOption.SEQUENTIAL,
                    pipelines={"image": [CenterCropRGBImageDecoder((10, 10), 1.0)], "label": [IntDecoder()]})
    for b, (image, label) in enumerate(loader):
        out[f"sizes/{b}/shape"], out[f"sizes/{b}/label"] = np.array(np.array(image).shape), np.array(label)
    return out
