"""FFCV's ``ffcv.transforms.common``: ``Squeeze``."""

from dataclasses import replace

from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)


class Squeeze(Operation):
    """Removes the given dimensions of size 1 (all of them when none is given); a torch tensor is
    squeezed in place, as in FFCV, a numpy array as a view.

    Parameters
    ----------
    *dims : int
        Dimensions to squeeze.
    """

    def __init__(self, *dims):
        super().__init__()
        self.dims = dims

    def _batch(self, x, indices=None):
        if not hasattr(x, "squeeze_"):
            return x.squeeze(axis=self.dims or None)
        return x.squeeze_(*self.dims) if self.dims else x.squeeze_()

    def generate_code(self):
        def squeeze(inp, _):
            return self._batch(inp)
        return squeeze

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, shape=[x for x in previous_state.shape if not x == 1]), None
