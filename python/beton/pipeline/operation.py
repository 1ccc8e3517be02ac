"""FFCV's ``Operation``, and the stages that run operations on beton's batches.

An operation says what it outputs (``declare_state_and_memory``) and gives ``code(inp, dst)``
(``generate_code``) that fills and returns ``dst``; code flagged ``with_indices`` also gets the
batch's sample ids, ``code(inp, dst, indices)``, as FFCV passes them. beton runs operations after
its native stage on whole batches (``BatchStage``); FFCV-style Python decoders, for custom fields,
run through ``beton.loader.decoder_stage.DecoderStage``.
"""

from abc import ABC, abstractmethod
from typing import Callable, Optional, Tuple

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler
from beton.pipeline.state import State


class Operation(ABC):
    """A pipeline stage (FFCV's contract).

    Subclasses implement ``generate_code`` (returns ``code(inp, dst)``, or ``code(inp, dst,
    indices)`` when the function has ``with_indices = True``) and ``declare_state_and_memory``
    (returns the output ``State`` and an ``AllocationQuery`` for ``dst``, or ``None``).
    """

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

    def declare_shared_memory(self, previous_state: State) -> Optional[AllocationQuery]:
        return None

    def generate_code_for_shared_state(self) -> Optional[Callable]:
        return None

    @abstractmethod
    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        raise NotImplementedError


def state_of(value) -> State:
    """The ``State`` describing a batch (a numpy array or a torch tensor)."""
    is_torch = type(value).__module__.startswith("torch")
    return State(jit_mode=not is_torch, device=value.device if is_torch else "cpu",
                 shape=tuple(value.shape[1:]), dtype=value.dtype)


def _allocate(alloc, n):
    shape = (n, *alloc.shape)
    if type(alloc.dtype).__module__ == "torch":
        import torch

        return torch.empty(shape, dtype=alloc.dtype, device=alloc.device)
    return np.empty(shape, dtype=alloc.dtype)


class BatchStage:
    """An ``Operation`` as a batch-level callable, ``stage(batch, indices=None)``.

    ``indices`` are the batch's sample ids (the loader passes them); operations whose code is
    ``with_indices`` (``ImageMixup``, ``Poison``, ``ReplaceLabel``, ...) need them and raise
    without. beton's own operations run through their ``_batch(value, indices)``; other
    operations through their generated code, compiled by ``Compiler``, into an output buffer
    allocated for each batch (what a stage returns stays valid).
    """

    def __init__(self, op: Operation):
        self.op = op
        self.code = None
        self.with_indices = False

    @property
    def needs_indices(self) -> bool:
        """Whether this stage uses the batch's sample ids."""
        if hasattr(self.op, "_batch"):
            return getattr(self.op, "_with_indices", False)
        self._compile()
        return self.with_indices

    def _compile(self):
        if self.code is None:
            code = self.op.generate_code()
            self.with_indices = getattr(code, "with_indices", False)
            self.code = Compiler.compile(code)

    def __call__(self, batch, indices=None):
        op = self.op
        if hasattr(op, "_batch"):
            return op._batch(batch, indices)
        arr = batch if hasattr(batch, "dtype") else np.asarray(batch)
        _, alloc = op.declare_state_and_memory(state_of(arr))
        self._compile()
        # A new output per batch: a batch the caller keeps is never overwritten (the loader's
        # promise; FFCV reuses one buffer per slot).
        dst = None if alloc is None else _allocate(alloc, len(arr))
        if self.with_indices:
            if indices is None:
                raise RuntimeError(f"{type(op).__name__} needs the batch's sample indices: "
                                   "call the stage as stage(batch, indices)")
            out = self.code(arr, dst, np.asarray(indices, dtype=np.uint64))
        else:
            out = self.code(arr, dst)
        return dst if out is None else out
