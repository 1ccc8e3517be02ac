"""FFCV's ``ffcv.memory_managers.common``: the type of an epoch's schedule."""

from typing import Sequence

BATCHES_TYPE = Sequence[Sequence[int]]
