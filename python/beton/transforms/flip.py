"""FFCV's module path ffcv.transforms.flip."""

from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.image import RandomHorizontalFlip, RandomVerticalFlip  # noqa: F401
