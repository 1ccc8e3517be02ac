"""FFCV's ``Loader``: batches of a ``.beton`` file, built by native threads into reused slots.

Each iteration over the loader is one epoch and yields, per batch, a tuple with one entry per
decoded field (in the file's field order): numpy arrays that view the loader's memory without a
copy (a batch you keep is never overwritten), passed through the pipeline's batch-level stages
(``ToTensor``, ``ToDevice``, a ``torch.nn.Module``, any callable).
"""

from __future__ import annotations

import enum
import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

import numpy as np

from beton import _native
from beton._native import IndexSet
from beton.fields.decoders import _ScalarDecoder
from beton.fields.registry import KINDS
from beton.loader.decoder_stage import DecoderStage
# Names FFCV's ffcv.loader.loader binds (user code imports them from here).
from beton.fields.base import Field  # noqa: F401
from beton.loader.code import InvalidDecoderError, ffcv_exception_types, snapshot  # noqa: F401 (beton.InvalidDecoderError)
from beton.memory_managers import MemoryManager, OSCacheManager, ProcessCacheManager  # noqa: F401
from beton.pipeline import Compiler, Operation, Pipeline, PipelineSpec  # noqa: F401
from beton.reader import Reader  # noqa: F401
from beton.traversal_order import QuasiRandom, Random, Sequential
from beton.traversal_order.base import TraversalOrder


def _native_image_pipeline(field, ops, source=None):
    """Splits an image field's pipeline into the native part (the decoder, the image operations
    right after it, and NormalizeImage), as a ``beton._native.ImagePipeline``, and the Python
    stages left. NormalizeImage is folded in wherever it is, as long as only ToTensor /
    ToDevice / ToTorchImage come before it: it then writes CHW (``ToTorchImage(channels_last=
    False)``, which is dropped) or HWC that ``ToTorchImage`` views as NCHW channels-last."""
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
            normalize = op._native(channels_first=chw)
            rest = [b for b in before if not (chw and isinstance(b, ToTorchImage))] + rest[k + 1:]
            break
    for op in rest:
        if getattr(op, "_beton_image_op", False):
            raise ValueError(f"pipeline of {field!r}: {type(op).__name__} must come right after the decoder")
    return _native.ImagePipeline(decoder._native(), native_ops, normalize, source), rest


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
    """FFCV's traversal orders: ``SEQUENTIAL`` (the indices as given), ``RANDOM`` (a
    permutation per epoch from ``(seed, epoch)``), ``QUASI_RANDOM`` (page-local shuffling).

    Examples
    --------
    >>> Loader("data.beton", 256, order=OrderOption.QUASI_RANDOM, seed=0)  # doctest: +SKIP
    """

    SEQUENTIAL = 1
    RANDOM = 2
    QUASI_RANDOM = 3

    def _native(self):
        return {1: _native.Order.Sequential, 2: _native.Order.Random, 3: _native.Order.QuasiRandom}[self.value]


# FFCV's module constants. ORDER_TYPE is FFCV's annotation of ``order``; ORDER_MAP the class of each
# OrderOption (beton runs the three natively; the classes are FFCV's, for ``sample_order``);
# FFCV_DEFAULT_CACHE_PROCESS=1 in the environment makes the process cache the default, as in FFCV.
ORDER_TYPE = Union[TraversalOrder, Literal[OrderOption.SEQUENTIAL, OrderOption.RANDOM]]
ORDER_MAP = {OrderOption.RANDOM: Random, OrderOption.SEQUENTIAL: Sequential, OrderOption.QUASI_RANDOM: QuasiRandom}
DEFAULT_PROCESS_CACHE = int(os.environ.get("FFCV_DEFAULT_CACHE_PROCESS", "0"))
DEFAULT_OS_CACHE = not DEFAULT_PROCESS_CACHE

# The pseudo-field holding each batch's sample ids (row ids, uint64): off unless ``pipelines``
# names it, so batches are FFCV's by default. A file's own field of that name wins.
INDEX = "index"


def _is_custom_order(order) -> bool:
    """Whether ``order`` (an ``OrderOption`` already, for the built-in ones) is a user's
    traversal order: a class or object with ``sample_order``."""
    if isinstance(order, OrderOption):
        return False
    if hasattr(order, "sample_order"):
        return True
    raise ValueError(f"Order {order!r} is not a supported order type or a subclass of TraversalOrder")


def _default_decoder(kind: str):
    """FFCV's default decoder of a field kind (``Field.get_decoder_class()``; the kind's entry
    in ``beton.fields.registry``)."""
    return KINDS[kind].decoder()


def _default_to_tensor() -> list:
    """FFCV's default pipeline ends with ``ToTensor()``; without torch beton yields numpy."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return []
    from beton.transforms.ops import ToTensor

    return [ToTensor()]


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
    """FFCV's ``Loader``: batches of a ``.beton`` file (or a dataset version) for training.

    Parameters
    ----------
    fname : str, path or Dataset
        The ``.beton`` file, a dataset directory, or an open ``beton.Dataset``.
    batch_size : int
        Samples per batch.
    num_workers : int
        Native worker threads; ``-1`` (FFCV's default) uses every core.
    os_cache : bool
        Read through the OS page cache (``True``) or beton's own page cache, filled in the
        epoch's order (``False``; FFCV's process cache).
    order : OrderOption or TraversalOrder subclass
        ``SEQUENTIAL``, ``RANDOM``, ``QUASI_RANDOM``, or a ``beton.traversal_order.TraversalOrder``
        subclass (instantiated with this loader, as FFCV does) whose ``sample_order(epoch)``
        gives the rows of an epoch.
    distributed : bool or (rank, world_size)
        ``True`` takes rank and world size from ``torch.distributed``.
    seed : int, optional
        Seed of the order and of random augmentations; ``None`` draws one at random, as FFCV
        does (``0`` when distributed with RANDOM).
    indices : sequence of int or IndexSet, optional
        The rows to read. A sequence means what it means in FFCV: SEQUENTIAL yields the rows in
        the order given, and a repeated row is read as often as it appears. An ``IndexSet``
        (``ds.where(...)``, a split) is a set.
    pipelines : dict
        Field name to its operations (a decoder first, then transforms), ``None`` to skip the
        field, or a ``PipelineSpec`` for a further view of a field. A field without an entry
        gets FFCV's default pipeline: its default decoder, then ``ToTensor()`` when torch is
        installed. ``pipelines={"index": []}`` adds beton's pseudo-field ``index``: each batch's
        sample ids (row ids, uint64), after the file's fields (off by default, as in FFCV).
    custom_fields : dict
        FFCV's fields of a custom type (type id 255): name to the ``Field`` subclass, whose
        ``metadata_type`` gives the layout. Such a field is not decoded (beton cannot run
        FFCV's per-sample decoder code): give it ``None`` as its pipeline.
    drop_last : bool
        Leave out the last, partial batch.
    batches_ahead : int
        Batches prepared ahead of the one being consumed (slots in flight).
    recompile : bool
        Rebuild the pipelines at every epoch, so that changes to an operation's attributes
        (e.g. a decoder's ``output_size``) take effect at the next epoch.
    version : int or str, optional
        The version of a dataset directory (beton's).
    fields : list of str or "pipelines", optional
        The fields each batch holds, in this order (beton's): a script keeps working when a
        curator adds a column to the dataset (``for images, labels in loader`` would otherwise
        get one more value per batch). ``"pipelines"`` reads the fields ``pipelines`` names
        (not ``None``), in its order. Default: FFCV's rule, every field of the file (in file
        order) except those whose pipeline is ``None``.
    fill_nulls : dict, optional
        Field name to the value its NULLs are decoded as (an int, float or bool of the field's
        type; beton's). A dataset directory's rows appended without a field added later hold
        NULL in it: without a value here, a field the loader decodes that has NULLs among the
        samples to load is an error at creation, naming the field and the samples.
    branch : str, optional
        The branch of a dataset directory to load (its latest version, or its ``version``;
        beton's; docs/VERSIONS.md). Default ``main``.

    Examples
    --------
    >>> from beton import Loader
    >>> from beton.loader import OrderOption
    >>> from beton.fields.rgb_image import RandomResizedCropRGBImageDecoder
    >>> loader = Loader("train.beton", batch_size=256, order=OrderOption.RANDOM, seed=0,
    ...                 pipelines={"image": [RandomResizedCropRGBImageDecoder((160, 160))]})
    >>> for images, labels in loader:  # doctest: +SKIP
    ...     pass

    A dataset directory whose columns may grow, read by name:

    >>> loader = Loader("photos/", batch_size=64, fields=["image", "label"])  # doctest: +SKIP
    """

    def __init__(self, fname, batch_size: int, num_workers: int = -1, os_cache: bool = DEFAULT_OS_CACHE,
                 order=OrderOption.SEQUENTIAL, distributed: bool = False, seed: Optional[int] = None,
                 indices: Optional[Sequence[int]] = None, pipelines: Dict[str, Any] = {},  # noqa: B006 (FFCV's)
                 custom_fields: Dict[str, Any] = {}, drop_last: bool = True,  # noqa: B006
                 batches_ahead: int = 3, recompile: bool = False, version=None,
                 fields: Optional[Any] = None, fill_nulls: Optional[Dict[str, Any]] = None,
                 branch: Optional[str] = None):
        from beton.dataset import Dataset

        custom_fields = dict(custom_fields or {})
        if custom_fields and isinstance(fname, Dataset):
            raise ValueError("custom_fields: give the file's path, not an open Dataset, so that it is "
                             "opened with the custom fields' layouts")
        self.dataset = fname if isinstance(fname, Dataset) else Dataset(
            fname, version=version, custom=custom_fields or None, branch=branch)
        self.fname = str(self.dataset.path)
        if isinstance(order, str):
            if order.upper() not in OrderOption.__members__:  # FFCV's error (a ValueError) for any other order
                raise ValueError(f"Order {order} is not a supported order type or a subclass of TraversalOrder")
            order = OrderOption[order.upper()]
        if seed is None:
            seed = 0 if distributed and order == OrderOption.RANDOM else int(np.random.randint(0, 2**31 - 1))
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.os_cache = bool(os_cache)
        self.order = order
        self.distributed = distributed
        self.seed = seed
        self.drop_last = drop_last
        self.batches_ahead = batches_ahead
        self.recompile = recompile
        self.custom_fields = custom_fields
        self._pipelines = dict(pipelines or {})
        self._selected = self._select_fields(fields)
        self.fill_nulls = dict(fill_nulls or {})
        self._args = dict(fname=fname, batch_size=batch_size, num_workers=num_workers, os_cache=os_cache,
                          order=order, distributed=distributed, seed=seed, indices=indices,
                          pipelines=pipelines, custom_fields=custom_fields, drop_last=drop_last,
                          batches_ahead=batches_ahead, recompile=recompile, version=version, fields=fields,
                          fill_nulls=fill_nulls)
        self._rank_world = _distributed_rank_world(distributed)
        # A sequence of row ids keeps its order and repeats (FFCV's indices); an IndexSet is a set.
        self._index_set, self._index_list = None, None
        if isinstance(indices, IndexSet):
            self._index_set = indices
        elif indices is not None:
            self._index_list = [int(i) for i in np.asarray(indices).reshape(-1).tolist()]
        self._indices = None
        # RANDOM on one process is FFCV's draw, np.random.default_rng(seed + epoch).permutation
        # (FFCV's class Random too), run natively (_native.Order.FfcvRandom: numpy's generator,
        # no array of every row); the native RANDOM, a ChaCha8 shuffle, is beton's Rust API's
        # and the CLI's; distributed, the native order is already torch's DistributedSampler's.
        self._ffcv_random = not distributed and (order == OrderOption.RANDOM or order is Random)
        self._traversal_order = None
        if not self._ffcv_random and _is_custom_order(order):
            # FFCV's TraversalOrder reads loader.indices, loader.seed, loader.distributed.
            self._indices = (np.asarray(self._index_list, dtype=np.uint64) if self._index_list is not None
                            else np.asarray(self._index_set.tolist(), dtype=np.uint64) if self._index_set is not None
                            else np.arange(len(self.dataset), dtype=np.uint64))
            self._traversal_order = order(self) if isinstance(order, type) else order
        with ffcv_exception_types():
            self._build(next_epoch=0)
        self._epoch = None

    @property
    def traversal_order(self) -> Optional[TraversalOrder]:
        """FFCV's ``traversal_order``: the order's ``TraversalOrder`` object (RANDOM's ``Random``
        made when first asked for: the loader draws the same permutation natively), or ``None``
        for SEQUENTIAL, QUASI_RANDOM and distributed RANDOM, which run natively.

        Examples
        --------
        >>> Loader("data.beton", 16, order=OrderOption.RANDOM, seed=0).traversal_order.sample_order(0)  # doctest: +SKIP
        array([...], dtype=uint64)
        """
        if self._traversal_order is None and self._ffcv_random:
            self._traversal_order = Random(self)
        return self._traversal_order

    @property
    def indices(self) -> np.ndarray:
        """FFCV's ``indices``: the rows read, one per sample, in order (uint64; made when first
        asked for).

        Examples
        --------
        >>> Loader("data.beton", 16, indices=[5, 3, 3]).indices.tolist()  # doctest: +SKIP
        [5, 3, 3]
        """
        if self._indices is None:
            self._indices = self._native.index_rows()
        return self._indices

    def _select_fields(self, fields) -> Optional[List[str]]:
        """The file's fields each batch holds, in order, from the ``fields`` argument (None:
        FFCV's rule, applied in ``_build``)."""
        from beton.pipeline import PipelineSpec

        if fields is None:
            return None
        kinds = [name for name, _, _ in self.dataset._native.fields()]
        if isinstance(fields, str):
            if fields != "pipelines":
                raise ValueError(f"fields={fields!r}: give a list of field names or 'pipelines'")
            return [name for name, spec in self._pipelines.items()
                    if spec is not None and not isinstance(spec, PipelineSpec) and name in kinds]
        selected = [str(f) for f in fields]
        for name in selected:
            if name not in kinds:
                raise KeyError(f"fields: no field {name!r}; the fields are {kinds}")
            if name in self._pipelines and self._pipelines[name] is None:
                raise ValueError(f"fields names {name!r}, whose pipeline is None (skipped)")
        if len(set(selected)) != len(selected):
            raise ValueError(f"fields: {selected} names a field twice")
        return selected

    def _build(self, next_epoch: int) -> None:
        """Makes the native loader from the pipelines as they are now (again at every epoch
        with ``recompile``)."""
        from beton.pipeline import PipelineSpec

        pipelines = self._pipelines
        kinds = {name: kind for name, kind, _ in self.dataset._native.fields()}
        self.fields: List[str] = []
        self.stages: Dict[str, list] = {}
        self._python_decoders: Dict[str, Any] = {}
        column_shape: Dict[str, tuple] = {}
        native: Dict[str, Any] = {}
        views = []
        for name, spec in pipelines.items():
            if isinstance(spec, PipelineSpec):
                if spec.source not in kinds:
                    raise KeyError(f"view {name!r}: no field {spec.source!r}; the fields are {list(kinds)}")
                if name in kinds:
                    raise ValueError(f"view {name!r}: a field has that name; give the view another one")
                ops = ([spec.decoder] if spec.decoder is not None else []) + list(spec.transforms)
                _check_devices(name, ops)
                if not ops or not getattr(ops[0], "_beton_image_decoder", False):
                    raise ValueError(f"view {name!r}: views of a field need an image decoder first")
                views.append((name, spec.source, ops))
            elif name == INDEX and name not in kinds:
                continue  # the sample ids, below
            elif name not in kinds:
                raise KeyError(f"pipeline for {name!r}: no such field; the fields are {list(kinds)}")
            elif spec is not None and not isinstance(spec, (list, tuple)):
                raise ValueError(f"the pipeline for {name!r} has to be either a PipelineSpec or a sequence "
                                 f"of operations, not {type(spec).__name__}")
        order = kinds if self._selected is None else self._selected
        for name in order:
            kind = kinds[name]
            if name in pipelines and pipelines[name] is None:
                continue
            if name in self.custom_fields:
                # FFCV's custom field: its decoder is Python (FFCV-style generated code), run on
                # each batch's sample ids by a DecoderStage; the rest of its pipeline as usual.
                ops = list(pipelines[name]) if name in pipelines else []
                handler = self.reader.handlers[name]
                if not ops or getattr(ops[0], "_beton_decoder", False) or not hasattr(ops[0], "generate_code"):
                    ops = [handler.get_decoder_class()()] + ops
                self.fields.append(name)
                self._python_decoders[name] = DecoderStage(ops[0], self.reader, name, self.memory_manager)
                self.stages[name] = [_stage(op) for op in ops[1:]]
                continue
            if kind == "custom":
                if name in pipelines:
                    raise ValueError(f"pipeline of {name!r}: a field of a custom type needs its Field class in "
                                     "custom_fields (FFCV's Loader argument) to be decoded")
                continue  # not decoded without its Field class, as in FFCV
            if name not in pipelines:
                ops = [_default_decoder(kind)] + _default_to_tensor()
            elif not (ops := list(pipelines[name])) or not getattr(ops[0], "_beton_decoder", False):
                ops = [_default_decoder(kind)] + ops  # FFCV puts the default decoder first
            _check_devices(name, ops)
            self.fields.append(name)
            if getattr(ops[0], "_beton_image_decoder", False):
                native[name], ops = _native_image_pipeline(name, ops)
            else:
                native[name] = ops[0]._native()
                if isinstance(ops[0], _ScalarDecoder) and not ops[0].flat:
                    column_shape[name] = (-1, 1)  # FFCV's (B, 1): a view of the native (B,)
                ops = ops[1:]
            self.stages[name] = [_stage(op) for op in ops]
        if INDEX in pipelines and INDEX not in kinds and pipelines[INDEX] is not None:
            # The pseudo-field of each batch's sample ids (uint64), after the file's fields.
            self.fields.append(INDEX)
            self._python_decoders[INDEX] = lambda ids: ids
            self.stages[INDEX] = [_stage(op) for op in pipelines[INDEX]]
        view_stages = []
        for name, source, ops in views:
            native[name], rest = _native_image_pipeline(name, ops, source=source)
            view_stages.append((name, rest))
        rank, world = self._rank_world
        custom = self._traversal_order is not None and not self._ffcv_random
        native_order = (self._traversal_order if custom else _native.Order.FfcvRandom if self._ffcv_random
                        else self.order._native())
        num_workers = self.num_workers
        self._native = _native.Loader(
            self.dataset._native, self.batch_size,
            num_workers=0 if num_workers is None or num_workers == -1 else num_workers,
            order=native_order, seed=self.seed,
            drop_last=self.drop_last, batches_ahead=self.batches_ahead, os_cache=self.os_cache,
            indices=None if custom else self._index_set, index_list=None if custom else self._index_list,
            rank=rank, world_size=world, fields=[f for f in self.fields if f not in self._python_decoders],
            pipelines=native, fill_nulls=self.fill_nulls or None)
        if next_epoch:
            self._native.set_epoch(next_epoch)
        for name, rest in view_stages:
            self.fields.append(name)
            self.stages[name] = [_stage(op) for op in rest]
        self._column_shape = column_shape
        self._code = snapshot(self, native)  # what Loader.code shows: the pipelines as built now
        # What each batch goes through, worked out once: per output, its Python decoder (or
        # None: a native column) and its stages, each with whether it takes the sample ids.
        from beton.pipeline.operation import BatchStage

        self._plan = [(name, self._python_decoders.get(name), column_shape.get(name),
                       [(stage, isinstance(stage, BatchStage)) for stage in self.stages[name]])
                      for name in self.fields]
        self._needs_ids = any(decoder is not None or any(ids for _, ids in stages)
                              for _, decoder, _, stages in self._plan)

    @property
    def reader(self):
        """FFCV's ``Reader`` of the file (header, fields, metadata, allocation table), made when
        first asked for.

        Examples
        --------
        >>> loader.reader.num_samples  # doctest: +SKIP
        155
        """
        if getattr(self, "_reader", None) is None:
            from beton.reader import Reader

            if self.dataset._is_directory:
                raise NotImplementedError(f"{self.fname} is a dataset directory: FFCV's Reader (and memory "
                                          "managers, custom_fields) read one .beton file; export a version to one")

            self._reader = Reader(self.fname, custom_handlers=self.custom_fields or None)
        return self._reader

    @property
    def memory_manager(self):
        """FFCV's memory manager of this loader: ``OSCacheManager`` with ``os_cache``, else
        ``ProcessCacheManager`` (a facade: beton's native engine does the loader's reads).

        Examples
        --------
        >>> type(Loader("data.beton", 16, os_cache=False).memory_manager).__name__  # doctest: +SKIP
        'ProcessCacheManager'
        """
        if getattr(self, "_memory_manager", None) is None:
            from beton.memory_managers import OSCacheManager, ProcessCacheManager

            self._memory_manager = (OSCacheManager if self.os_cache else ProcessCacheManager)(self.reader)
        return self._memory_manager

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration runs (FFCV's attribute), from 0.

        Examples
        --------
        >>> for batch in loader: pass  # doctest: +SKIP
        >>> loader.next_epoch  # doctest: +SKIP
        1
        """
        return self._native.next_epoch_number

    def filter(self, field_name: str, condition) -> "Loader":
        """FFCV's ``Loader.filter``: a new loader, with this one's arguments, over the samples
        for which ``condition(value)`` is true, ``value`` being the sample's ``field_name`` as
        this loader's pipeline for it gives it (its default pipeline when it has none).

        Unlike FFCV 1.0.2, whose filter assumes the loader reads every row, the samples kept
        are the right rows whatever ``indices`` are.

        Parameters
        ----------
        field_name : str
            The field the condition looks at.
        condition : callable
            Takes one sample's value (a row of the field's batch), returns a bool.

        Returns
        -------
        Loader
            A loader with this one's arguments and ``indices`` the rows kept, in order.

        Examples
        --------
        >>> odd = loader.filter("label", lambda label: label % 2 == 1)  # doctest: +SKIP
        """
        pipelines = {name: None for name, _, _ in self.dataset._native.fields()}
        if self._pipelines.get(field_name) is not None:
            pipelines[field_name] = self._pipelines[field_name]
        else:
            del pipelines[field_name]
        args = dict(self._args, pipelines=pipelines, order=OrderOption.SEQUENTIAL, drop_last=False)
        args["fname"] = self.dataset
        args.pop("custom_fields")
        sub = Loader(**args)
        rows = self.indices
        kept, position = [], 0
        for (batch,) in sub:
            for sample in batch:
                if condition(sample):
                    kept.append(int(rows[position]))
                position += 1
        final = dict(self._args, indices=kept, fname=self.dataset)
        final.pop("custom_fields")
        return Loader(**final)

    def __len__(self) -> int:
        return len(self._native)

    @property
    def index_set(self) -> IndexSet:
        """The rows read, as a set (``indices`` is FFCV's array, in order, with repeats).

        Examples
        --------
        >>> Loader("data.beton", 16, indices=[5, 3, 3]).index_set.tolist()  # doctest: +SKIP
        [3, 5]
        """
        custom = self._traversal_order is not None and not self._ffcv_random
        if not custom and self._index_list is None:
            return self._native.indices()
        # A list (or a custom order's rows): the native loader's ids are positions in it.
        return IndexSet(np.unique(self.indices).tolist())

    def __iter__(self):
        with ffcv_exception_types():
            if self.recompile and self._epoch is not None:
                self._build(next_epoch=self.next_epoch)  # new stages: generate_code() runs again
            self._epoch = self._native.epoch()
        return _EpochIterator(self, self._epoch)

    @property
    def code(self) -> str:
        """What the loader compiled, per output: the decoder and its arguments, the operations
        fused with it in the native stage (per sample, on the worker threads), the Python stages
        (per batch), and the shape and dtype after each (``B`` is the batch size). FFCV's
        ``Loader.code`` holds its generated functions; beton describes its pipelines instead.
        It changes when the pipelines are rebuilt: at each epoch with ``recompile=True``, or
        after ``generate_code()``.

        Examples
        --------
        >>> loader = Loader("data.beton", 16, pipelines={"image": [CenterCropRGBImageDecoder((64, 64))]})  # doctest: +SKIP
        >>> print(loader.code)  # doctest: +SKIP
        Loader('data.beton', batch_size=16): pipelines compiled for epoch 0
        image: field 'image' (rgb_image)
            decoder  CenterCropRGBImageDecoder(output_size=(64, 64), ratio=0.875, ...)  [native, ...]
            -> (B, 64, 64, 3) uint8
        label: field 'label' (int)
        ...
        """
        return str(self._code)

    def generate_code(self) -> None:
        """FFCV's ``generate_code``: rebuilds the pipelines from the operations as they are now
        (the next epoch uses them; ``code`` shows them), as ``recompile=True`` does at every
        epoch. An epoch being iterated finishes with the pipelines it started with.

        Examples
        --------
        >>> decoder = CenterCropRGBImageDecoder((64, 64))  # doctest: +SKIP
        >>> loader = Loader("data.beton", 16, pipelines={"image": [decoder]})  # doctest: +SKIP
        >>> decoder.output_size = (128, 128)  # doctest: +SKIP
        >>> loader.generate_code()  # doctest: +SKIP
        """
        with ffcv_exception_types():
            self._build(next_epoch=self.next_epoch)

    def state(self) -> str:
        """The state of the current epoch (JSON), to resume after its consumed batches.

        Returns
        -------
        str
            JSON naming the epoch, the batches consumed and what they depend on (seed, order,
            indices, batch size, ranks), which ``resume`` checks.

        Raises
        ------
        RuntimeError
            Before the first epoch started.

        Examples
        --------
        >>> it = iter(loader); _ = next(it)  # doctest: +SKIP
        >>> saved = loader.state()  # doctest: +SKIP
        """
        if self._epoch is None:
            raise RuntimeError("no epoch has started")
        return self._epoch.state()

    def resume(self, state: str) -> None:
        """The next iteration continues the saved epoch after its consumed batches.

        Parameters
        ----------
        state : str
            What ``state()`` returned, in this process or an earlier one.

        Raises
        ------
        InvalidArgumentError
            When the state is not a loader state, or was saved by a loader with other settings
            (the message names the first that differs).

        Examples
        --------
        >>> loader.resume(saved)  # doctest: +SKIP
        >>> rest = list(loader)  # the batches after the consumed ones  # doctest: +SKIP
        """
        self._native.resume(state)

    def stats(self) -> Dict[str, Any]:
        """Counters of the current (or last finished) epoch: pages and bytes read, cache hits,
        time the workers were busy and the consumer waited.

        Examples
        --------
        >>> for batch in loader: pass  # doctest: +SKIP
        >>> loader.stats()["consumer_wait_s"]  # doctest: +SKIP
        0.01
        """
        current: Dict[str, Any] = {} if self._epoch is None else self._epoch.stats()
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
        loader, out = self.loader, []
        # FFCV's operations get the batch's sample ids (mixup, Poison, ReplaceLabel, ...).
        ids = np.asarray(batch.indices()) if loader._needs_ids else None
        for name, decoder, shape, stages in loader._plan:
            if decoder is not None:
                value = decoder(ids)
            else:
                value = np.asarray(batch.column(name))
                if shape is not None:
                    value = value.reshape(shape)
            for stage, with_ids in stages:
                value = stage(value, ids) if with_ids else stage(value)
            out.append(value)
        return tuple(out)

    def close(self):
        self.epoch.close()

    def __del__(self):
        try:
            self.epoch.close()
        except Exception:
            pass
