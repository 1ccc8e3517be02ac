"""FFCV's ``AllocationQuery``: the per-sample output an operation asks for."""

from dataclasses import dataclass
from typing import Any, Optional, Tuple


@dataclass
class AllocationQuery:
    shape: Tuple[int, ...]
    dtype: Any
    device: Optional[Any] = None
