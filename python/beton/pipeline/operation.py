"""FFCV's ``Operation``: a custom stage. beton runs it on whole batches after the native stage:
``declare_state_and_memory`` says what it outputs, ``generate_code`` gives ``code(inp, dst)``
which fills (and returns) ``dst``. It runs as plain Python, or through numba when
``Compiler.set_enabled(True)`` and numba is installed."""

from abc import ABC, abstractmethod
from typing import Callable, Optional, Tuple

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler
from beton.pipeline.state import State


class Operation(ABC):
    def __init__(self):
        self.metadata = None
        self.memory_read = None

    def accept_field(self, field):
        self.field = field

    def accept_globals(self, metadata, memory_read):
        self.metadata = metadata
        self.memory_read = memory_read

    @abstractmethod
    def generate_code(self) -> Callable:
        raise NotImplementedError

    @abstractmethod
    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        raise NotImplementedError


class BatchStage:
    """An ``Operation`` as a batch-level callable: its output buffer is allocated once per
    batch shape and reused (the caller owns what it returns until the next batch)."""

    def __init__(self, op: Operation):
        self.op = op
        self.code = None
        self.dst = None

    def __call__(self, batch):
        arr = np.asarray(batch) if not hasattr(batch, "dtype") else batch
        state = State(jit_mode=Compiler.is_enabled, shape=tuple(arr.shape[1:]), dtype=arr.dtype)
        _, alloc = self.op.declare_state_and_memory(state)
        if self.code is None:
            self.code = Compiler.compile(self.op.generate_code())
        dst = None
        if alloc is not None:
            shape = (len(arr),) + tuple(alloc.shape)
            if self.dst is None or self.dst.shape != shape or self.dst.dtype != np.dtype(alloc.dtype):
                self.dst = np.empty(shape, dtype=alloc.dtype)
            dst = self.dst
        out = self.code(arr, dst)
        return dst if out is None else out
