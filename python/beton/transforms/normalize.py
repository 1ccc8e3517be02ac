"""FFCV's module path ffcv.transforms.normalize."""

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.image import NormalizeImage  # noqa: F401 (FFCV's module binds it)


def ch_dtype_from_numpy(dtype):
    """FFCV's ``ch_dtype_from_numpy``: the torch dtype torch gives an array of numpy ``dtype``
    (FFCV's code, so FFCV's answers and errors: ``TypeError`` for a type torch lacks,
    ``ValueError`` for a byte order other than the machine's). Needs torch.

    Examples
    --------
    >>> ch_dtype_from_numpy(np.float16)  # doctest: +SKIP
    torch.float16
    """
    import torch

    return torch.from_numpy(np.zeros((), dtype=dtype)).dtype
