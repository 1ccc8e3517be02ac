"""FFCV's ``Pipeline``: a field's list of operations, parsed into blocks of compiled (numpy) and
Python (torch) stages, with their buffers. beton's loader runs operations through
``beton.pipeline.operation.BatchStage``; ``Pipeline`` is FFCV's inspection API."""

from typing import Any, Dict, Sequence

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery, allocate_query
from beton.pipeline.operation import Operation
from beton.pipeline.state import State

# FFCV's module constant (its Pipeline's message for a pipeline without exactly one collation).
BAD_COLLATION_MESSAGE: str = "Each pipeline needs one and one only Collate operation"


class Pipeline:
    """The operations of one loader output.

    Parameters
    ----------
    operations : sequence of Operation
        A decoder, then transforms.
    """

    def __init__(self, operations: Sequence[Operation]):
        self.original_state = State(jit_mode=True, device="cpu", dtype=np.dtype("u1"), shape=None)
        self.operations = operations
        self.operation_blocks, _ = self.parse_pipeline()
        self.compiled_ops = self.compile_ops()
        self.compiled_code = None

    def parse_pipeline(self, batch_size=16):
        """Blocks ``[(jit_mode, [op ids])]`` of consecutive operations in one mode, and each
        operation's allocation query."""
        allocations: Dict[int, Any] = {}
        blocks, block = [], []
        state = self.original_state
        for op_id, op in enumerate(self.operations):
            previous = state
            state, allocations[op_id] = op.declare_state_and_memory(state)
            if state.jit_mode != previous.jit_mode:
                if block:
                    blocks.append((previous.jit_mode, block))
                block = [op_id]
            else:
                block.append(op_id)
        if block:
            blocks.append((state.jit_mode, block))
        return blocks, allocations

    def compile_ops(self):
        return {op_id: op.generate_code() for op_id, op in enumerate(self.operations)}

    def allocate_query(self, memory_allocation: AllocationQuery, batch_size: int, batches_ahead: int):
        return allocate_query(memory_allocation, batch_size, batches_ahead)

    def allocate_memory(self, batch_size: int, batches_ahead: int):
        """Each operation's buffers (``None`` where it asked for none)."""
        _, allocations = self.parse_pipeline()
        out = {}
        for op_id, query in allocations.items():
            if isinstance(query, AllocationQuery):
                out[op_id] = allocate_query(query, batch_size, batches_ahead)
            elif isinstance(query, Sequence):
                out[op_id] = tuple(allocate_query(q, batch_size, batches_ahead) for q in query)
            else:
                out[op_id] = None
        return out
