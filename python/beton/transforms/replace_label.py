"""FFCV's ``ffcv.transforms.replace_label``: ``ReplaceLabel``, relabels given samples."""

from dataclasses import replace

import numpy as np

from beton.transforms.ops import _BatchOp


class ReplaceLabel(_BatchOp):
    """Sets the label of the samples ``indices`` to ``new_label`` (in place), e.g. for data
    poisoning experiments. Needs the batch's sample ids.

    Parameters
    ----------
    indices : sequence of int
        The sample ids to relabel.
    new_label : int
        The new label.
    """

    _with_indices = True

    def __init__(self, indices, new_label: int):
        super().__init__()
        self.indices = np.sort(indices)
        self.new_label = new_label

    def _batch(self, labels, indices=None):
        if indices is None:
            raise RuntimeError("ReplaceLabel needs the batch's sample indices")
        hit = np.isin(np.asarray(indices, dtype=np.int64), self.indices.astype(np.int64))
        labels[hit] = self.new_label
        return labels

    def generate_code(self):
        def replace_label(labels, temp_array, indices):
            return self._batch(labels, indices)
        replace_label.with_indices = True
        return replace_label

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, jit_mode=True), None
