"""FFCV's ``State``: what an operation knows about its input (the previous stage's output)."""

from dataclasses import dataclass
from typing import Any, Optional, Tuple


def _is_cpu(device) -> bool:
    return device is None or str(device) == "cpu"


@dataclass
class State:
    """The state of a pipeline between two operations.

    Parameters
    ----------
    jit_mode : bool
        Whether the stage works on numpy arrays (and may be compiled with numba).
    device : torch.device or str
        Where the data lives.
    shape : tuple of int
        The shape of one sample (without the batch dimension).
    dtype : numpy.dtype or torch.dtype
        The element type.
    """

    jit_mode: bool
    device: Any
    shape: Optional[Tuple[int, ...]]
    dtype: Any

    def __post_init__(self):
        if self.jit_mode and not _is_cpu(self.device):
            raise ValueError(f"State: jit_mode needs the CPU, the device is {self.device}")
        if self.jit_mode and type(self.dtype).__module__ == "torch":
            raise ValueError(f"State: jit_mode works on numpy arrays, the dtype is {self.dtype}")
