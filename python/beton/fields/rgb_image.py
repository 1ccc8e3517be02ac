"""FFCV's RGBImageField (and beton's GreyImageField): images stored raw or as JPEG."""

from typing import Optional

import numpy as np

from beton import _native
from beton.fields.base import Field
from beton.fields.decoders import (CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder,  # noqa: F401
                                   ResizedCropRGBImageDecoder, SimpleRGBImageDecoder)
from beton.fields.registry import image_value, register
from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)


@register("rgb_image", _native.RGBImageField, SimpleRGBImageDecoder, type_id=2, value=image_value)
class RGBImageField(Field):
    """An RGB image per sample: numpy HWC uint8 arrays, PIL images, encoded JPEG/PNG bytes, or
    file paths. ``write_mode`` is ``raw``, ``jpg``, ``smart`` or ``proportion`` (FFCV's).

    beton's own options: ``jpeg_passthrough`` stores a source JPEG that needs no resize, rotation or
    colour change as it is (no re-encoding loss); ``jpeg_restart_interval`` gives the JPEGs written
    a restart marker every that many MCUs (0: none), which the loader's crop decoders use;
    ``verify`` (default True) checks every Huffman code of a passed-through JPEG in one
    entropy-level pass (no pixels decoded), so a corrupt JPEG is refused at write time. With
    ``verify=False`` a passed-through JPEG is stored exactly as given (only its header is read: no
    check of its data, no restart markers added; a corrupt one fails when it is loaded)."""

    metadata_type = np.dtype([("mode", "<u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")])

    def __init__(self, write_mode: str = "raw", max_resolution: Optional[int] = None,
                 smart_threshold: Optional[int] = None, jpeg_quality: int = 90,
                 compress_probability: float = 0.5, jpeg_passthrough: bool = True,
                 jpeg_restart_interval: int = 1, verify: bool = True):
        self.write_mode = write_mode
        self.max_resolution = max_resolution
        self.smart_threshold = smart_threshold
        self.jpeg_quality = int(jpeg_quality)
        self.compress_probability = compress_probability
        self.jpeg_passthrough = jpeg_passthrough
        self.jpeg_restart_interval = int(jpeg_restart_interval)
        self.verify = bool(verify)

    def options(self):
        o = {"write_mode": self.write_mode, "jpeg_quality": self.jpeg_quality,
             "compress_probability": self.compress_probability, "jpeg_passthrough": self.jpeg_passthrough,
             "jpeg_restart_interval": self.jpeg_restart_interval, "verify": self.verify}
        if self.max_resolution is not None:
            o["max_resolution"] = int(self.max_resolution)
        if self.smart_threshold is not None:
            o["smart_threshold"] = int(self.smart_threshold)
        return o

    def _value(self, value):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str) or hasattr(value, "__fspath__"):
            return str(value)
        if not isinstance(value, np.ndarray):  # PIL.Image and friends
            if hasattr(value, "convert"):
                # Transparency goes to the writer as RGBA, which counts it and drops or composites
                # it (alpha_background), as for PNG files; converting to RGB here would hide it.
                transparent = getattr(value, "mode", "") in ("RGBA", "LA", "PA", "La", "RGBa") or (
                    "transparency" in getattr(value, "info", {}))
                value = value.convert("RGBA" if transparent else "RGB")
            value = np.asarray(value)
        if value.dtype != np.uint8:  # as FFCV: a float image in [0, 1] would become black
            raise TypeError(f"an image array is uint8 (as FFCV's RGBImageField), not {value.dtype}: "
                            "scale and convert it first, e.g. (x * 255).round().astype(np.uint8)")
        a = np.ascontiguousarray(value)
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3 or a.shape[2] not in (1, 3, 4):
            raise ValueError(f"an image is HxW or HxWxC (C = 1, 3, 4) uint8, got shape {a.shape}")
        return (a.tobytes(), a.shape[0], a.shape[1], a.shape[2])


@register("grey_image", _native.GreyImageField, SimpleRGBImageDecoder, extension=4, value=image_value)
class GreyImageField(RGBImageField):
    """A greyscale image per sample (beton extension)."""


# ---- FFCV's module-level helpers (ffcv/fields/rgb_image.py) --------------------------------------

# FFCV's ``mode`` byte of an image's metadata row.
IMAGE_MODES = {"jpg": 0, "raw": 1}


def encode_jpeg(numpy_image, quality):
    """FFCV's ``encode_jpeg``: an HxWx3 uint8 RGB image as JPEG bytes (a 1-D uint8 array) at
    ``quality`` (1 to 100).

    beton's writer encodes it (libjpeg-turbo, 4:2:0, FFCV's settings, no restart markers), into
    a one-sample file in a temporary directory: the bytes are FFCV's (OpenCV's ``imencode``)
    exactly. That costs a file write (about 20 ms) per call: this helper is for code that
    imports it; ``RGBImageField(write_mode='jpg')`` encodes in the writer's threads.

    Raises
    ------
    ValueError
        For an image that is not HxWx3 uint8 (FFCV's OpenCV call raises ``cv2.error``).

    Examples
    --------
    >>> encode_jpeg(np.zeros((8, 8, 3), np.uint8), 90)[:2].tobytes()
    b'\\xff\\xd8'
    """
    import os
    import tempfile

    image = np.ascontiguousarray(numpy_image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"encode_jpeg takes an HxWx3 uint8 RGB image, not {image.dtype} {image.shape}")
    sample = (image.tobytes(), image.shape[0], image.shape[1], 3)
    field = _native.RGBImageField(write_mode="jpg", jpeg_quality=int(quality), jpeg_restart_interval=0)
    with tempfile.TemporaryDirectory(prefix="beton-jpeg-") as tmp:
        path = os.path.join(tmp, "one.beton")
        _native.write(path, {"image": field}, 1, lambda i: [sample], page_size=1 << 21, num_workers=1,
                      columnar_copy=False)
        data = _native.Dataset(path).get(0, decode_images=False)["image"][0]
    return np.frombuffer(data, np.uint8)


def resizer(image, target_resolution):
    """FFCV's ``resizer``: ``image`` shrunk (never enlarged) so that its longer side is at most
    ``target_resolution`` (``None``: unchanged), each side scaled by the same ratio and rounded
    down, with OpenCV's ``INTER_AREA`` averaging, in numpy (beton needs no OpenCV): uint8 pixels
    are OpenCV's exactly.

    Examples
    --------
    >>> resizer(np.zeros((300, 400, 3), np.uint8), 200).shape
    (150, 200, 3)
    """
    if target_resolution is None:
        return image
    original_size = np.array([image.shape[1], image.shape[0]])
    ratio = target_resolution / original_size.max()
    if ratio >= 1:
        return image
    width, height = (ratio * original_size).astype(int)
    from beton.transforms.utils.fast_crop import resize_crop

    source = image if image.ndim == 3 else image[:, :, None]
    out = np.empty((height, width, source.shape[2]), image.dtype)
    resize_crop(source, 0, source.shape[0], 0, source.shape[1], out)
    return out if image.ndim == 3 else out[:, :, 0]


def get_random_crop(height, width, scale, ratio):
    """FFCV's ``get_random_crop``: torchvision's RandomResizedCrop box ``(i, j, h, w)`` (top,
    left, height, width) of an image ``height`` x ``width``, drawn from numpy's global generator
    exactly as FFCV draws it (after ``np.random.seed(s)``, the same boxes as FFCV).

    Examples
    --------
    >>> np.random.seed(0); get_random_crop(120, 160, (0.08, 1.0), (3 / 4, 4 / 3))
    (12, 26, 100, 113)
    """
    from beton.transforms.utils.fast_crop import get_random_crop as draw

    return draw(height, width, scale, ratio)


def get_center_crop(height, width, _, ratio):
    """FFCV's ``get_center_crop``: the centred square ``(i, j, h, w)`` of side ``ratio`` x the
    shorter side (the third argument, FFCV's unused ``scale``, is ignored).

    Examples
    --------
    >>> get_center_crop(120, 160, None, 224 / 256)
    (7, 27, 105, 105)
    """
    from beton.transforms.utils.fast_crop import get_center_crop as box

    return box(height, width, ratio)
