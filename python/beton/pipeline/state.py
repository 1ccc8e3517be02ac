"""FFCV's ``State``: what an operation knows about its input."""

from dataclasses import dataclass
from typing import Any, Optional, Tuple


@dataclass
class State:
    jit_mode: bool = False
    device: Any = None
    shape: Tuple[int, ...] = ()
    dtype: Any = None
    method: Optional[Any] = None
