"""FFCV's ``ffcv.utils``: small helpers FFCV's users import."""

from threading import Lock

import numpy as np


def chunks(lst, n):
    """Successive slices of ``n`` items of ``lst``."""
    for i in range(0, len(lst), n):
        yield lst[i:i + n]


def is_power_of_2(n):
    return (n & (n - 1) == 0) and n != 0


def align_to_page(ptr, page_size):
    """``ptr`` rounded up to a multiple of ``page_size``."""
    if ptr % page_size != 0:
        ptr = ptr + page_size - ptr % page_size
    return ptr


def decode_null_terminated_string(bytes: np.ndarray):  # noqa: A002 (FFCV's argument name)
    """ASCII text up to the first NUL."""
    return bytes.tobytes().decode("ascii").split("\x00")[0]


s_print_lock = Lock()


def s_print(*a, **b):
    """Thread-safe ``print``."""
    with s_print_lock:
        print(*a, **b)
