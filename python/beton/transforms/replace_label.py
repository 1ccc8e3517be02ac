"""FFCV's ``ffcv.transforms.replace_label``: ``ReplaceLabel``, relabels given samples."""

from dataclasses import replace

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.compiler import Compiler  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import _IndexedBatchOp


class ReplaceLabel(_IndexedBatchOp):
    """Sets the label of the samples ``indices`` to ``new_label`` (in place), e.g. for data
    poisoning experiments. Needs the batch's sample ids.

    Parameters
    ----------
    indices : sequence of int
        The sample ids to relabel.
    new_label : int
        The new label.
    """

    def __init__(self, indices, new_label: int):
        super().__init__()
        self.indices = np.sort(indices)
        self.new_label = new_label

    def _batch(self, labels, indices=None):
        hit = np.isin(np.asarray(self._indices(indices), dtype=np.int64), self.indices.astype(np.int64))
        labels[hit] = self.new_label
        return labels

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, jit_mode=True), None
