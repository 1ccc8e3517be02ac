"""FFCV's RGBImageField (and beton's GreyImageField): images stored raw or as JPEG."""

from typing import Optional

import numpy as np

from beton.fields.base import Field


class RGBImageField(Field):
    """An RGB image per sample: numpy HWC uint8 arrays, PIL images, encoded JPEG/PNG bytes, or
    file paths. ``write_mode`` is ``raw``, ``jpg``, ``smart`` or ``proportion`` (FFCV's)."""

    type_name = "rgb_image"

    metadata_type = np.dtype([("mode", "<u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")])

    def get_decoder_class(self):
        return SimpleRGBImageDecoder

    def __init__(self, write_mode: str = "raw", max_resolution: Optional[int] = None,
                 smart_threshold: Optional[int] = None, jpeg_quality: int = 90,
                 compress_probability: float = 0.5, jpeg_passthrough: bool = True,
                 jpeg_restart_interval: int = 1):
        self.write_mode = write_mode
        self.max_resolution = max_resolution
        self.smart_threshold = smart_threshold
        self.jpeg_quality = int(jpeg_quality)
        self.compress_probability = compress_probability
        self.jpeg_passthrough = jpeg_passthrough
        self.jpeg_restart_interval = int(jpeg_restart_interval)

    def options(self):
        o = {"write_mode": self.write_mode, "jpeg_quality": self.jpeg_quality,
             "compress_probability": self.compress_probability, "jpeg_passthrough": self.jpeg_passthrough,
             "jpeg_restart_interval": self.jpeg_restart_interval}
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


class GreyImageField(RGBImageField):
    """A greyscale image per sample (beton extension)."""

    type_name = "grey_image"


from beton.fields.decoders import (CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder,  # noqa: E402,F401
                                   ResizedCropRGBImageDecoder, SimpleRGBImageDecoder)
