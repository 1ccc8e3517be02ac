"""FFCV's ``ffcv.transforms.ops``: ``ToTensor``, ``ToDevice``, ``ToTorchImage``, ``Convert`` and
``View``, batch-level operations (``Squeeze`` lives in ``common``, as in FFCV)."""

from dataclasses import replace

import numpy as np

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.operation import Operation
from beton.pipeline.state import State  # noqa: F401 (FFCV's module binds it)
from beton.transforms.common import Squeeze  # noqa: F401 (beton's earlier path)


def _is_torch(x):
    return type(x).__module__.startswith("torch")


class _BatchOp(Operation):
    """An operation beton runs directly on the batch (``_batch``); its FFCV-style code does the same."""

    def generate_code(self):
        def code(inp, dst):
            return self._batch(inp)
        code.is_parallel = True
        return code


class _IndexedBatchOp(_BatchOp):
    """A ``_BatchOp`` that needs the batch's sample ids: ``_batch(value, indices)`` gets them
    through ``_indices`` (which raises without), and its FFCV-style code is flagged
    ``with_indices``."""

    _with_indices = True

    def _indices(self, indices):
        if indices is None:
            raise RuntimeError(f"{type(self).__name__} needs the batch's sample indices")
        return indices

    def generate_code(self):
        def code(inp, dst, indices):
            return self._batch(inp, indices)
        code.with_indices = True
        return code


class ToTensor(_BatchOp):
    """Converts a numpy batch to a torch tensor sharing its memory (``torch.from_numpy``)."""

    def __init__(self):
        super().__init__()

    def _batch(self, x, indices=None):
        import torch

        return x if _is_torch(x) else torch.from_numpy(np.ascontiguousarray(x))

    def declare_state_and_memory(self, previous_state):
        import torch

        dtype = torch.from_numpy(np.empty((), dtype=previous_state.dtype)).dtype
        return replace(previous_state, jit_mode=False, dtype=dtype), None


class ToDevice(_BatchOp):
    """Moves a tensor to ``device``.

    Parameters
    ----------
    device : torch.device or str
        Device to move to.
    non_blocking : bool
        Asynchronous if copying from CPU to GPU.
    """

    def __init__(self, device, non_blocking=True):
        super().__init__()
        self.device = device
        self.non_blocking = non_blocking

    def _batch(self, x, indices=None):
        return x.to(self.device, non_blocking=self.non_blocking)

    def declare_state_and_memory(self, previous_state):
        return (replace(previous_state, device=self.device),
                AllocationQuery(previous_state.shape, dtype=previous_state.dtype, device=self.device))


class ToTorchImage(_BatchOp):
    """NHWC to NCHW: a permuted view (channels-last memory) or, with ``channels_last=False``, a
    contiguous NCHW copy.

    Parameters
    ----------
    channels_last : bool
        Keep the memory channels-last (``torch.channels_last``).
    convert_back_int16 : bool
        Reinterpret an int16 batch as float16 (FFCV's NormalizeImage trick).
    """

    def __init__(self, channels_last=True, convert_back_int16=True):
        super().__init__()
        self.channels_last = channels_last
        self.convert_int16 = convert_back_int16

    def _batch(self, x, indices=None):
        import torch

        if self.convert_int16 and x.dtype == torch.int16:
            x = x.view(dtype=torch.float16)
        x = x.permute(0, 3, 1, 2)
        return x if self.channels_last else x.contiguous(memory_format=torch.contiguous_format)

    def declare_state_and_memory(self, previous_state):
        H, W, C = previous_state.shape
        dtype = previous_state.dtype
        if self.convert_int16 and str(dtype) == "torch.int16":
            import torch

            dtype = torch.float16
        alloc = None if self.channels_last else AllocationQuery((C, H, W), dtype=dtype)
        return replace(previous_state, shape=(C, H, W), dtype=dtype), alloc


class _ToDtype(_BatchOp):
    """An operation whose output is of ``target_dtype``, its shape unchanged."""

    def __init__(self, target_dtype):
        """The operation for ``target_dtype`` (``Convert``'s and ``View``'s argument).

        Parameters
        ----------
        target_dtype : numpy.dtype or torch.dtype
            Target data type.
        """
        super().__init__()
        self.target_dtype = target_dtype

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, dtype=self.target_dtype), None


class Convert(_ToDtype):
    """Converts to ``target_dtype`` (torch tensors with ``.type``, numpy arrays with ``astype``)."""

    def _batch(self, x, indices=None):
        return x.type(self.target_dtype) if _is_torch(x) else x.astype(self.target_dtype)


class View(_ToDtype):
    """Reinterprets the batch's memory as ``target_dtype`` (``ndarray.view`` / ``Tensor.view``)."""

    def _batch(self, x, indices=None):
        return x.view(self.target_dtype)

    def declare_state_and_memory(self, previous_state):
        state, alloc = super().declare_state_and_memory(previous_state)
        return replace(state, jit_mode=False), alloc
