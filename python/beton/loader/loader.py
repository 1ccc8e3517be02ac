"""FFCV's ``Loader``: batches of a ``.beton`` file, built by native threads into reused slots.

Each iteration over the loader is one epoch and yields, per batch, a tuple with one entry per
decoded field (in the file's field order): numpy arrays that view the loader's memory without a
copy (a batch you keep is never overwritten), passed through the pipeline's batch-level stages
(``ToTensor``, ``ToDevice``, a ``torch.nn.Module``, any callable).
"""

from __future__ import annotations

import enum
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from beton import _native
from beton._native import IndexSet


def _native_image_pipeline(field, ops):
    """Splits an image field's pipeline into the native part (the decoder, the image operations
    right after it, and NormalizeImage) and the Python stages left. NormalizeImage is folded in
    wherever it is, as long as only ToTensor / ToDevice / ToTorchImage come before it: it then
    writes CHW (``ToTorchImage(channels_last=False)``, which is dropped) or HWC that
    ``ToTorchImage`` views as NCHW channels-last."""
    from beton.transforms.ops import ToDevice, ToTensor, ToTorchImage

    decoder, rest = ops[0], list(ops[1:])
    native_ops = []
    while rest and getattr(rest[0], "_beton_image_op", False):
        native_ops.append(rest.pop(0)._native())
    normalize = None
    for k, op in enumerate(rest):
        if getattr(op, "_beton_normalize", False):
            before = rest[:k]
            if not all(isinstance(b, (ToTensor, ToDevice, ToTorchImage)) for b in before):
                raise ValueError(f"pipeline of {field!r}: NormalizeImage must follow the decoder's image "
                                 "operations, with only ToTensor / ToDevice / ToTorchImage in between")
            chw = any(isinstance(b, ToTorchImage) and not b.channels_last for b in before)
            normalize = op._native("chw" if chw else "hwc")
            rest = [b for b in before if not (chw and isinstance(b, ToTorchImage))] + rest[k + 1:]
            break
    for op in rest:
        if getattr(op, "_beton_image_op", False):
            raise ValueError(f"pipeline of {field!r}: {type(op).__name__} must come right after the decoder")
    return (decoder._native(), native_ops, normalize), rest


def _cuda_index(device):
    """The CUDA device index ``device`` names (``0`` for ``'cuda'``), or ``None`` when it is not a
    CUDA device (``'cpu'``, ``torch.device('cpu')``). A bare int is a CUDA index, as in torch."""
    if isinstance(device, bool):
        return None
    if isinstance(device, int):
        return device
    text = str(device)
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    return None


def _check_devices(field, ops):
    """Raises at Loader creation, not at the first batch, when a ``ToDevice`` in the pipeline of
    ``field`` names a CUDA device this process cannot use (no torch, no CUDA, too few devices)."""
    from beton.transforms.ops import ToDevice

    for op in ops:
        if not isinstance(op, ToDevice):
            continue
        index = _cuda_index(op.device)
        if index is None:
            continue
        where = f"ToDevice({op.device!r}) in the pipeline of field {field!r}"
        try:
            import torch
        except ImportError as e:
            raise RuntimeError(f"{where}: no CUDA device is available (torch is not installed: {e})") from None
        if not torch.cuda.is_available():
            raise RuntimeError(f"{where}: no CUDA device is available (torch.cuda.is_available() is False)")
        count = torch.cuda.device_count()
        if index >= count:
            raise RuntimeError(f"{where}: CUDA device {index} requested, {count} present")


def _stage(op):
    """A pipeline entry after the decoder as a batch-level callable."""
    from beton.pipeline.operation import BatchStage, Operation

    if isinstance(op, Operation):
        return BatchStage(op)
    if not callable(op):
        raise TypeError(f"pipeline stage {op!r} is neither callable nor an Operation")
    return op


class OrderOption(enum.Enum):
    SEQUENTIAL = "sequential"
    RANDOM = "random"
    QUASI_RANDOM = "quasi_random"


def _distributed_rank_world(distributed):
    if distributed is True:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("distributed=True needs torch.distributed initialised (init_process_group)")
        return dist.get_rank(), dist.get_world_size()
    if distributed:
        rank, world = distributed
        return int(rank), int(world)
    return 0, 1


class Loader:
    """``Loader(fname, batch_size, num_workers=-1, os_cache=True, order=OrderOption.SEQUENTIAL,
    distributed=False, seed=None, indices=None, pipelines={}, drop_last=True, batches_ahead=3)``.

    ``distributed`` is ``True`` (rank and world size from torch.distributed) or ``(rank,
    world_size)``. ``indices`` is an ``IndexSet`` (``ds.where(...)``, a split) or a sequence of
    row ids. ``pipelines`` maps a field to its list of operations (a decoder first, then
    transforms and callables) or to ``None`` to skip the field.
    """

    def __init__(self, fname, batch_size: int, num_workers: int = -1, os_cache: bool = True,
                 order: OrderOption = OrderOption.SEQUENTIAL, distributed=False, seed: Optional[int] = None,
                 indices=None, pipelines: Optional[Dict[str, Any]] = None, custom_fields=None,
                 drop_last: bool = True, batches_ahead: int = 3, recompile: bool = False, version=None):
        from beton.dataset import Dataset

        self.dataset = fname if isinstance(fname, Dataset) else Dataset(fname, version=version)
        pipelines = dict(pipelines or {})
        kinds = {name: kind for name, kind, _ in self.dataset._native.fields()}
        self.fields: List[str] = []
        self.stages: Dict[str, list] = {}
        from beton.pipeline import PipelineSpec

        image_pipelines, views = [], []
        for name, spec in pipelines.items():
            if not isinstance(spec, PipelineSpec):
                if name not in kinds:
                    raise KeyError(f"pipeline for {name!r}: no such field; the fields are {list(kinds)}")
                continue
            if spec.source not in kinds:
                raise KeyError(f"view {name!r}: no field {spec.source!r}; the fields are {list(kinds)}")
            ops = ([spec.decoder] if spec.decoder is not None else []) + spec.transforms
            _check_devices(name, ops)
            if not ops or not getattr(ops[0], "_beton_image_decoder", False):
                raise ValueError(f"view {name!r}: views of a field need an image decoder first")
            native, rest = _native_image_pipeline(name, ops)
            views.append((name, spec.source, native, rest))
        for name, kind in kinds.items():
            if name in pipelines and pipelines[name] is None:
                continue
            ops = list(pipelines.get(name) or [])
            if kind in ("rgb_image", "grey_image", "custom") and not ops:
                continue  # FFCV needs a decoder for these; without a pipeline they are skipped
            _check_devices(name, ops)
            self.fields.append(name)
            if ops and getattr(ops[0], "_beton_image_decoder", False):
                spec, ops = _native_image_pipeline(name, ops)
                image_pipelines.append((name, spec))
            self.stages[name] = [_stage(op) for op in ops if not getattr(op, "_beton_decoder", False)]
        # A sequence of row ids keeps its repeats (FFCV oversamples with them); an IndexSet is a set.
        index_list = None
        if indices is not None and not isinstance(indices, IndexSet):
            index_list = [int(i) for i in np.asarray(indices).reshape(-1).tolist()]
            indices = None
        rank, world = _distributed_rank_world(distributed)
        if isinstance(order, str):
            order = OrderOption(order)
        self.batch_size = batch_size
        self._native = _native.Loader(
            self.dataset._native, batch_size,
            num_workers=0 if num_workers is None or num_workers == -1 else num_workers,
            order=order.value, seed=0 if seed is None else seed, drop_last=drop_last,
            batches_ahead=batches_ahead, os_cache=bool(os_cache), indices=indices,
            index_list=index_list, rank=rank,
            world_size=world, fields=self.fields, image_pipelines=image_pipelines,
            views=[(n, src, native) for n, src, native, _ in views])
        for n, _, _, rest in views:
            self.fields.append(n)
            self.stages[n] = [_stage(op) for op in rest]
        self._epoch = None

    def __len__(self) -> int:
        return len(self._native)

    @property
    def indices(self) -> IndexSet:
        return self._native.indices()

    def __iter__(self):
        self._epoch = self._native.epoch()
        return _EpochIterator(self, self._epoch)

    def state(self) -> str:
        """The state of the current epoch (JSON), to resume after its consumed batches."""
        if self._epoch is None:
            raise RuntimeError("no epoch has started")
        return self._epoch.state()

    def resume(self, state: str) -> None:
        """The next iteration continues the saved epoch after its consumed batches."""
        self._native.resume(state)

    def stats(self) -> Dict[str, Any]:
        """Counters of the current (or last finished) epoch: pages and bytes read, cache hits,
        time the workers were busy and the consumer waited."""
        current = {} if self._epoch is None else self._epoch.stats()
        return current or dict(getattr(self, "_last_stats", {}))


class _EpochIterator:
    def __init__(self, loader: Loader, epoch):
        self.loader = loader
        self.epoch = epoch

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.epoch)

    def __next__(self):
        try:
            batch = next(self.epoch)
        except StopIteration:
            # Keep the finished epoch's counters for Loader.stats() after the loop.
            self.loader._last_stats = self.epoch.stats()
            raise
        out = []
        for name in self.loader.fields:
            value = np.asarray(batch.column(name))
            for stage in self.loader.stages[name]:
                value = stage(value)
            out.append(value)
        return tuple(out)

    def close(self):
        self.epoch.close()

    def __del__(self):
        try:
            self.epoch.close()
        except Exception:
            pass
