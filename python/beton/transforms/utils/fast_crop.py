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
    """Resizes ``source[start_row:end_row, start_col:end_col]`` into ``destination`` (HxWxC).

    Shrinking a uint8 image (both sides), the pixels are OpenCV's ``INTER_AREA`` exactly: its
    integer path when both factors are integers, else its float32 sums in its order."""
    crop = np.asarray(source[start_row:end_row, start_col:end_col])
    h, w = destination.shape[:2]
    shrinking = crop.shape[0] >= h and crop.shape[1] >= w  # OpenCV averages areas only then
    if shrinking and destination.dtype == np.uint8:
        destination[...] = _area_uint8(crop, h, w).reshape(destination.shape)
        return
    crop = crop.astype(np.float64)
    if shrinking:
        rows, cols = _axis_weights(crop.shape[0], h), _axis_weights(crop.shape[1], w)
    else:
        rows, cols = _enlarge_weights(crop.shape[0], h), _enlarge_weights(crop.shape[1], w)
    out = np.einsum("hs,swc,vw->hvc", rows, crop, cols)
    if np.issubdtype(destination.dtype, np.integer):
        info = np.iinfo(destination.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    destination[...] = out


def _area_uint8(crop, h, w):
    """OpenCV's ``INTER_AREA`` shrink of a uint8 HxWxC ``crop`` to ``h`` x ``w`` (OpenCV 4's
    ``resizeAreaFast_`` and ``resizeArea_``, imgproc/src/resize.cpp)."""
    crop = crop if crop.ndim == 3 else crop[:, :, None]
    n_rows, n_cols = crop.shape[:2]
    if n_rows % h == 0 and n_cols % w == 0:  # integer factors: sums of whole blocks
        ky, kx = n_rows // h, n_cols // w
        sums = crop.astype(np.int64).reshape(h, ky, w, kx, -1).sum(axis=(1, 3))
        if (ky, kx) == (2, 2):  # its halving: (a + b + c + d + 2) >> 2, ties rounded up
            return ((sums + 2) >> 2).astype(np.uint8)
        return np.clip(np.rint(sums.astype(np.float32) * np.float32(1 / (ky * kx))), 0, 255).astype(np.uint8)
    # float32 sums, each output's terms added in source order (first along rows, then columns),
    # as OpenCV adds them: the same float rounding, so the same pixels at ties.
    out = _area_pass(crop.astype(np.float32), w, axis=1)
    out = _area_pass(out, h, axis=0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _area_pass(x, n_dst, axis):
    """One axis of the float32 INTER_AREA: output ``d`` is the sum over its source cells ``s`` (in
    increasing ``s``) of ``x[s] * weight``; padded taps have weight 0 and index 0 (adding 0.0
    changes no float)."""
    weights = _axis_weights(x.shape[axis], n_dst).astype(np.float32)
    taps = int((weights != 0).sum(axis=1).max())
    index, weight = np.zeros((n_dst, taps), np.int64), np.zeros((n_dst, taps), np.float32)
    for d in range(n_dst):
        nz = np.flatnonzero(weights[d])
        index[d, :len(nz)], weight[d, :len(nz)] = nz, weights[d, nz]
    shape = [1] * x.ndim
    shape[axis] = n_dst
    out = np.zeros(x.shape[:axis] + (n_dst,) + x.shape[axis + 1:], np.float32)
    for k in range(taps):
        out += np.take(x, index[:, k], axis=axis) * weight[:, k].reshape(shape)
    return out


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
