"""FFCV's ``ffcv.transforms.utils.fast_crop``: random / centre crop boxes and a crop-and-resize
with OpenCV's ``INTER_AREA`` semantics, in numpy (no OpenCV needed)."""

import math

import numpy as np


def _axis_weights(n_src, n_dst):
    """``(n_dst, n_src)`` weights of OpenCV's INTER_AREA along a shrinking axis: overlap areas."""
    w = np.zeros((n_dst, n_src))
    scale = n_src / n_dst
    for d in range(n_dst):
        lo, hi = d * scale, (d + 1) * scale
        for s in range(int(math.floor(lo)), min(n_src, int(math.ceil(hi)))):
            w[d, s] = (min(hi, s + 1) - max(lo, s)) / scale
    return w


def resize_crop(source, start_row, end_row, start_col, end_col, destination):
    """Resizes ``source[start_row:end_row, start_col:end_col]`` into ``destination`` (HxWxC)."""
    crop = np.asarray(source[start_row:end_row, start_col:end_col], dtype=np.float64)
    h, w = destination.shape[:2]
    if crop.shape[0] >= h and crop.shape[1] >= w:  # OpenCV averages areas only when shrinking both ways
        rows, cols = _axis_weights(crop.shape[0], h), _axis_weights(crop.shape[1], w)
    else:
        rows, cols = _enlarge_weights(crop.shape[0], h), _enlarge_weights(crop.shape[1], w)
    out = np.einsum("hs,swc,vw->hvc", rows, crop, cols)
    if np.issubdtype(destination.dtype, np.integer):
        info = np.iinfo(destination.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    destination[...] = out


def _enlarge_weights(n_src, n_dst):
    """OpenCV's INTER_AREA coefficients on an axis of the generic (not both-shrinking) path."""
    w = np.zeros((n_dst, n_src))
    scale, inv = n_src / n_dst, n_dst / n_src
    for d in range(n_dst):
        sx = int(math.floor(d * scale))
        fx = (d + 1) - (sx + 1) * inv
        fx = 0.0 if fx <= 0 else fx - math.floor(fx)
        w[d, min(sx, n_src - 1)] += 1 - fx
        w[d, min(sx + 1, n_src - 1)] += fx
    return w


def get_random_crop(height, width, scale, ratio, rng=None):
    """torchvision's RandomResizedCrop box ``(i, j, h, w)``, as FFCV draws it; ``rng`` (beton's) is
    a ``numpy.random.Generator`` or ``RandomState`` (numpy's global generator when ``None``)."""
    rng = np.random if rng is None else rng
    uniform = rng.uniform
    area = height * width
    log_ratio = np.log(ratio)
    for _ in range(10):
        target_area = area * uniform(scale[0], scale[1])
        aspect_ratio = np.exp(uniform(log_ratio[0], log_ratio[1]))
        w = int(round(np.sqrt(target_area * aspect_ratio)))
        h = int(round(np.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            return int(uniform(0, height - h + 1)), int(uniform(0, width - w + 1)), h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def get_center_crop(height, width, ratio):
    """A centred square of ``ratio`` x the shorter side: ``(i, j, h, w)``."""
    c = int(ratio * min(height, width))
    return (height - c) // 2, (width - c) // 2, c, c
