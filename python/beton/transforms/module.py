"""FFCV's ``ffcv.transforms.module``: ``ModuleWrapper``, a ``torch.nn.Module`` as a stage."""

from beton.pipeline.allocation_query import AllocationQuery  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import _BatchOp


class ModuleWrapper(_BatchOp):
    """Applies ``module`` to the batch.

    Parameters
    ----------
    module : torch.nn.Module
        The module (any callable on the batch).
    """

    def __init__(self, module):
        super().__init__()
        self.module = module

    def _batch(self, x, indices=None):
        return self.module(x)

    def declare_state_and_memory(self, previous_state):
        return previous_state, None
