"""The Python quickstart: the bundled ImageFolder (155 photos, 6 classes) to a ``.beton`` file,
queried with SQL, split, and read by the Loader with the fused native image pipeline.

Run with beton installed (``pip install beton-*.whl``, or ``maturin develop`` in ``python/``):
``python examples/quickstart.py [OUT_DIR]``. It needs numpy only (pyarrow for ``ds.query``).
"""

import os
import sys
import tempfile

import numpy as np

import beton
from beton import DatasetWriter, Loader
from beton.fields import IntField, RGBImageField
from beton.fields.rgb_image import RandomResizedCropRGBImageDecoder
from beton.loader import OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip

HERE = os.path.dirname(os.path.abspath(__file__))


def main(out_dir: str) -> None:
    path = os.path.join(out_dir, "photos.beton")
    writer = DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", max_resolution=256), "label": IntField()},
                           num_workers=2, progress=False)
    report = writer.from_imagefolder(os.path.join(HERE, "data", "imagefolder"))
    print(f"wrote {report['num_samples']} images in {len(report['classes'])} classes to {path}")

    ds = beton.open(path)
    print(ds)
    wide = ds.where("image.width >= 200")
    print(f"{len(wide)} images at least 200 px wide; classes {ds.classes}")
    try:
        print(ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label"))
    except ImportError:
        print("(pyarrow not installed: ds.query skipped)")
    train, val = wide.split([0.8, 0.2], seed=0)
    ds.save_splits(train=train, val=val)
    # A look at the validation split: a self-contained page (open it in a browser) and a contact
    # sheet; in a notebook, `ds.gallery(...)` (or just `ds`, or `val`) renders in place.
    gallery = ds.gallery(val, by="label", n=4)
    gallery.save(os.path.join(out_dir, "val.html"))
    gallery.save(os.path.join(out_dir, "val.png"))
    print(gallery)

    mean, std = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255
    loader = Loader(path, batch_size=16, order=OrderOption.QUASI_RANDOM, seed=0, num_workers=2,
                    indices=beton.open(path).split("train"),
                    pipelines={"image": [RandomResizedCropRGBImageDecoder((64, 64)), RandomHorizontalFlip(),
                                         NormalizeImage(mean, std, np.float32)],
                               "label": []})
    seen = 0
    for images, labels in loader:
        assert images.shape[1:] == (64, 64, 3) and images.dtype == np.float32
        seen += len(labels)
    print(f"one epoch: {seen} training images in {len(loader)} batches of 16 (64x64, normalised)")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
