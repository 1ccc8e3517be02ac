"""Record FFCV 1.0.2's public API and reference batches, for beton's FFCV-compatibility tests.

Run with the python of an environment where FFCV 1.0.2 is installed (torch, numba, cv2):

    python tests/ffcv/record_api.py [OUT_DIR]     # default: python/tests/data/ffcv_api/

It writes into OUT_DIR:

- ``signatures.json``: for every public module of FFCV (``MODULES`` below), its public names
  (``__all__``, else the classes and functions it defines) with their call signatures: a class's
  constructor and its public methods, a function's parameters. Parameters are recorded as
  ``[name, kind, repr(default) or null]``. Also every other name the module binds that user code
  can import from it: its top-level assignments (constants, typing aliases such as
  ``ffcv.loader.loader.ORDER_TYPE``, as ``value`` with a canonical ``repr``) and the FFCV
  classes and functions it imports from elsewhere (re-exports such as
  ``ffcv.loader.loader.Reader``, as ``alias`` with their ``target``; ``internal`` when the target
  lives in a module left out below).
- ``data.beton.gz`` / ``custom.beton.gz``: small files written by FFCV's ``DatasetWriter``.
- ``expected.npz``: FFCV's batches for the programs in ``PROGRAMS`` (each a Loader or a
  transform run), keyed ``PROGRAM/NAME``, draws of FFCV's random helpers, the results of FFCV's
  module-level helpers (``helper_results``: the same code runs on beton's modules in the tests)
  and the exception class FFCV raises for each misuse of ``misuses``.

``python/tests/test_ffcv_api.py`` and ``python/tests/test_ffcv_equivalence.py`` read them (CI has
no FFCV); with ``BETON_FFCV_PYTHON`` set, both re-run this script into a temporary directory and
compare against the fresh recording. Re-recording changes the ``rrc`` batches only (FFCV's
threads draw them from numba's unseeded generator); the gzipped files are written with mtime 0.
"""
import ast
import enum
import gzip
import importlib
import inspect
import json
import os
import shutil
import sys
import tempfile

import numpy as np

# Public modules of FFCV 1.0.2. Left out as internals, not user API: ffcv.benchmarks (FFCV's own
# benchmark suite), ffcv.libffcv and ffcv._libffcv (ctypes bindings to its C helpers),
# ffcv.memory_allocator (the writer's page allocator), ffcv.loader.epoch_iterator (the loader's
# thread), ffcv.pipeline.graph (the code generator), ffcv.memory_managers.process_cache.schedule
# and .page_reader (the process cache's threads).
MODULES = [
    "ffcv", "ffcv.fields", "ffcv.fields.base", "ffcv.fields.basics", "ffcv.fields.bytes",
    "ffcv.fields.decoders", "ffcv.fields.json", "ffcv.fields.ndarray", "ffcv.fields.rgb_image",
    "ffcv.loader", "ffcv.loader.loader", "ffcv.memory_managers", "ffcv.memory_managers.base",
    "ffcv.memory_managers.common", "ffcv.memory_managers.os_cache", "ffcv.memory_managers.process_cache",
    "ffcv.memory_managers.process_cache.context", "ffcv.memory_managers.process_cache.manager",
    "ffcv.pipeline", "ffcv.pipeline.allocation_query", "ffcv.pipeline.compiler", "ffcv.pipeline.operation",
    "ffcv.pipeline.pipeline", "ffcv.pipeline.pipeline_spec", "ffcv.pipeline.state", "ffcv.reader",
    "ffcv.transforms", "ffcv.transforms.color_jitter", "ffcv.transforms.common", "ffcv.transforms.cutout",
    "ffcv.transforms.flip", "ffcv.transforms.mixup", "ffcv.transforms.module", "ffcv.transforms.normalize",
    "ffcv.transforms.ops", "ffcv.transforms.poisoning", "ffcv.transforms.random_resized_crop",
    "ffcv.transforms.replace_label", "ffcv.transforms.translate", "ffcv.transforms.utils",
    "ffcv.transforms.utils.fast_crop", "ffcv.traversal_order", "ffcv.traversal_order.base",
    "ffcv.traversal_order.quasi_random", "ffcv.traversal_order.random", "ffcv.traversal_order.sequential",
    "ffcv.types", "ffcv.utils", "ffcv.writer",
]


def params(fn, drop_self):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for k, p in enumerate(sig.parameters.values()):
        if drop_self and k == 0 and p.name in ("self", "cls"):
            continue
        default = None if p.default is inspect.Parameter.empty else default_repr(p.default)
        out.append([p.name, p.kind.name, default])
    return out


def default_repr(value):
    """A default as recorded: a class or function as ``<package.qualname>`` (beton's, where
    beton's tests run this on beton's modules, named as FFCV's), anything else as its repr."""
    if inspect.isclass(value) or inspect.isfunction(value):
        package = value.__module__.split(".")[0]
        return f"<{'ffcv' if package == 'beton' else package}.{value.__qualname__}>"
    return repr(value)


# Module-level constants users import (the file format's dtypes, the writer's page limits).
CONSTANTS = {"ffcv.types": ["CURRENT_VERSION", "HeaderType", "ALLOC_TABLE_TYPE", "FieldDescType", "TYPE_ID_HANDLER"],
             "ffcv.fields.base": ["ARG_TYPE"], "ffcv.writer": ["MIN_PAGE_SIZE", "MAX_PAGE_SIZE"]}


def public_names(mod):
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return CONSTANTS.get(mod.__name__, []) + sorted(n for n, v in vars(mod).items() if not n.startswith("_")
                  and (inspect.isclass(v) or inspect.isfunction(v) or hasattr(v, "py_func"))
                  and getattr(v, "__module__", None) == mod.__name__)


# The modules left out of MODULES above: a name re-exported from one of them is recorded as an
# ``internal`` alias (FFCV's implementation, e.g. ``ffcv.loader.loader.Graph``).
INTERNAL_MODULES = ("ffcv.benchmarks", "ffcv.libffcv", "ffcv._libffcv", "ffcv.memory_allocator",
                    "ffcv.loader.epoch_iterator", "ffcv.pipeline.graph",
                    "ffcv.memory_managers.process_cache.schedule", "ffcv.memory_managers.process_cache.page_reader")


def assigned_names(mod):
    """The names ``mod``'s source binds at its top level with ``=`` (constants, typing aliases)."""
    try:
        tree = ast.parse(inspect.getsource(mod))
    except (OSError, TypeError):  # an empty package __init__
        return set()
    out = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def alias_names(mod, package="ffcv"):
    """Every other public name of ``mod`` that code can import from it: its top-level
    assignments, and the classes and functions of ``package`` it imports from its other modules.
    Left out: modules, third-party names (``np``, ``Optional``), and objects that are neither
    (``ffcv.utils.cast_int_to_byte_ptr``, a numba intrinsic callable only from compiled code)."""
    listed, assigned = set(public_names(mod)), assigned_names(mod)
    out = []
    for name, value in vars(mod).items():
        if name.startswith("_") or name in listed or inspect.ismodule(value):
            continue
        home = getattr(value, "__module__", None) or ""
        if name in assigned or ((inspect.isclass(value) or inspect.isfunction(value) or hasattr(value, "py_func"))
                                and home.split(".")[0] == package and home != mod.__name__):
            out.append(name)
    return sorted(out)


def canonical(value, package="ffcv"):
    """A repr of a module-level value that does not depend on the package's name or the Python
    version's typing reprs: classes as ``<ffcv.module.Name>``, typing aliases as
    ``Origin[args]``, mappings with their values' names, dtypes by ``descr``."""
    import typing

    def name(v):
        if inspect.isclass(v) or inspect.isfunction(v):
            mod = v.__module__
            mod = "ffcv" + mod[len(package):] if mod.split(".")[0] == package else mod
            return f"<{mod}.{v.__qualname__}>"
        return repr(v)

    def walk(v):
        origin = typing.get_origin(v)
        if origin is not None:
            label = getattr(origin, "_name", None) or getattr(origin, "__name__", None) or repr(origin)
            return f"{label}[{', '.join(walk(a) for a in typing.get_args(v))}]"
        if isinstance(v, enum.Enum):
            return f"{type(v).__name__}.{v.name}"
        return name(v)

    if isinstance(value, np.dtype):
        return repr(value.descr)
    if hasattr(value, "items") and callable(value.items):
        return repr({walk(k): getattr(v, "__name__", v) for k, v in value.items()})
    if isinstance(value, (str, int, float, bool, bytes)) or value is None:
        return repr(value)
    if typing.get_origin(value) is not None:
        return walk(value)
    return None  # no stable repr (a lock): only its type is compared


def describe_alias(value, name, package="ffcv"):
    """``{kind: alias, target}`` for an imported class or function, else ``{kind: value}``."""
    if inspect.isclass(value) or inspect.isfunction(value) or hasattr(value, "py_func"):
        target = f"{value.__module__}.{getattr(value, '__qualname__', name)}"
        out = {"kind": "alias", "target": "ffcv" + target[len(package):]}
        if out["target"].startswith(INTERNAL_MODULES):
            out["internal"] = True
        return out
    return {"kind": "value", "type": type(value).__name__, "canonical": canonical(value, package)}


def describe(value):
    if inspect.isclass(value):
        methods = {}
        for klass in reversed(value.__mro__):
            if not klass.__module__.startswith("ffcv"):
                continue
            for name, member in vars(klass).items():
                if name.startswith("_") and name != "__init__":
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    methods[name] = params(member.__func__, isinstance(member, classmethod))
                elif isinstance(member, property):
                    methods[name] = "property"
                elif inspect.isfunction(member):
                    methods[name] = params(member, True)
        init = methods.pop("__init__", None)
        return {"kind": "class", "init": init, "methods": methods,
                "bases": [b.__name__ for b in value.__mro__[1:] if b.__module__.startswith("ffcv")]}
    if inspect.isfunction(value) or hasattr(value, "py_func"):
        return {"kind": "function", "params": params(getattr(value, "py_func", value), False)}
    if isinstance(value, np.dtype):
        return {"kind": "value", "repr": repr(value.descr)}
    if isinstance(value, dict):
        return {"kind": "value", "repr": repr({k: getattr(v, "__name__", v) for k, v in value.items()})}
    return {"kind": "value", "repr": repr(value)}


def record_signatures():
    out = {}
    for modname in MODULES:
        mod = importlib.import_module(modname)
        out[modname] = {name: describe(getattr(mod, name)) for name in public_names(mod)}
        out[modname].update({name: describe_alias(getattr(mod, name), name) for name in alias_names(mod)})
    return out


# ---- reference data -------------------------------------------------------------------------

N = 64


def images():
    rng = np.random.RandomState(0)
    return rng.randint(0, 256, size=(N, 12, 16, 3), dtype=np.uint8)


def write_files(out):
    from ffcv.fields import FloatField, IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    class DS:
        def __len__(self):
            return N

        def __getitem__(self, i):
            return images()[i], i, i % 10, i * 0.5

    path = os.path.join(out, "data.beton")
    DatasetWriter(path, {"image": RGBImageField(write_mode="raw"), "label": IntField(), "cls": IntField(),
                         "value": FloatField()}, num_workers=1).from_indexed_dataset(DS())
    cpath = os.path.join(out, "custom.beton")
    Pair = pair_field()
    DatasetWriter(cpath, {"label": IntField(), "pair": Pair()}, num_workers=1).from_indexed_dataset(
        [(i, (i, 100 - i)) for i in range(12)])
    return path, cpath


def pair_field(package="ffcv"):
    """A custom FFCV field (type id 255): two int32s per sample, in the row itself. Built on
    ``package``'s classes: FFCV's here, beton's in beton's tests of the recorded file."""
    from dataclasses import replace

    Field = importlib.import_module(f"{package}.fields.base").Field
    AllocationQuery = importlib.import_module(f"{package}.pipeline.allocation_query").AllocationQuery
    Operation = importlib.import_module(f"{package}.pipeline.operation").Operation

    class PairDecoder(Operation):
        def declare_state_and_memory(self, previous_state):
            return replace(previous_state, shape=(2,), dtype=np.dtype("<i4")), AllocationQuery((2,), np.dtype("<i4"))

        def generate_code(self):
            def decode(indices, destination, metadata, storage_state):
                for ix in range(indices.shape[0]):
                    destination[ix, 0] = metadata[indices[ix]]["a"]
                    destination[ix, 1] = metadata[indices[ix]]["b"]
                return destination
            return decode

    class PairField(Field):
        @property
        def metadata_type(self):
            return np.dtype([("a", "<i4"), ("b", "<i4")])

        @staticmethod
        def from_binary(binary):
            return PairField()

        def to_binary(self):
            return np.zeros(1, dtype=np.dtype([("", "<u1", 1024)]))[0]

        def encode(self, destination, field, malloc):
            destination["a"], destination["b"] = field

        def get_decoder_class(self):
            return PairDecoder

    return PairField


def run(loader, n=None):
    """All batches of one epoch (or the first n), as lists of numpy arrays."""
    out = []
    for k, batch in enumerate(loader):
        if n is not None and k == n:
            break
        out.append([np.array(x.cpu() if hasattr(x, "cpu") else x) for x in batch])
    return out


def programs(path, cpath):
    import torch
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.rgb_image import SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import (Convert, ImageMixup, LabelMixup, MixupToOneHot, ModuleWrapper, Poison,
                                 RandomResizedCrop, ReplaceLabel, Squeeze, ToTensor, ToTorchImage, View)
    from ffcv.transforms.utils import fast_crop
    from ffcv.traversal_order import QuasiRandom, Random
    from ffcv.traversal_order.base import TraversalOrder

    res = {}
    only = {"image": None, "cls": None, "value": None}

    def L(**kw):
        base = dict(batch_size=4, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False)
        base.update(kw)
        return Loader(path, **base)

    def put(prog, batches):
        for b, batch in enumerate(batches):
            for f, x in enumerate(batch):
                res[f"{prog}/{b}/{f}"] = x
        res[f"{prog}/num_batches"] = np.array(len(batches))

    put("indices_531", run(L(batch_size=2, indices=[5, 3, 1], pipelines=only)))
    put("repeated", run(L(batch_size=5, indices=[2, 2, 7, 7, 7], pipelines=only)))
    put("drop_last_true", run(L(batch_size=10, drop_last=True, pipelines=only)))
    put("drop_last_false", run(L(batch_size=10, drop_last=False, pipelines=only)))
    put("batches_ahead_1", run(L(batch_size=8, batches_ahead=1, pipelines=only)))
    put("random_seed3", run(L(batch_size=8, order=OrderOption.RANDOM, seed=3, pipelines=only)))
    put("all_fields", run(L(batch_size=16, pipelines={"image": [SimpleRGBImageDecoder()]})))

    # Orders on their own: Random's sample_order, QuasiRandom's (distribution only: numba's RNG).
    loader = L(batch_size=8, seed=11, pipelines=only)
    res["order_random/epoch0"] = np.array(Random(loader).sample_order(0))
    res["order_random/epoch1"] = np.array(Random(loader).sample_order(1))
    loader = L(batch_size=8, seed=11, indices=list(range(0, 64, 2)), pipelines=only, os_cache=False)
    res["order_quasi/epoch0"] = np.array(QuasiRandom(loader).sample_order(0))

    class Reverse(TraversalOrder):
        def sample_order(self, epoch):
            return self.indices[::-1]

    try:  # FFCV 1.0.2 tests isinstance(order, TraversalOrder) on the class: it refuses subclasses
        L(order=Reverse, pipelines=only)
        res["custom_order/refused"] = np.array(0)
    except ValueError:
        res["custom_order/refused"] = np.array(1)

    # Batch transforms on images and labels.
    img = [SimpleRGBImageDecoder()]
    put("mixup", run(L(batch_size=8, pipelines={
        "image": img + [ImageMixup(0.5, False)], "label": [IntDecoder(), LabelMixup(0.5, False)],
        "cls": None, "value": None})))
    put("mixup_same", run(L(batch_size=8, pipelines={
        "image": [SimpleRGBImageDecoder(), ImageMixup(0.4, True)],
        "cls": [IntDecoder(), LabelMixup(0.4, True), ToTensor(), MixupToOneHot(10)],
        "label": None, "value": None})))
    mask = np.random.RandomState(1).randint(0, 256, size=(12, 16, 3)).astype(np.uint8)
    alpha = np.full((12, 16), 0.25, dtype=np.float32)
    res["poison/mask"], res["poison/alpha"] = mask, alpha
    put("poison", run(L(batch_size=8, pipelines={
        "image": [SimpleRGBImageDecoder(), Poison(mask, alpha, [0, 5, 9, 33], clamp=(10, 240))],
        "label": [IntDecoder(), ReplaceLabel([1, 5, 40], 99)], "cls": None, "value": None})))
    put("tensor_ops", run(L(batch_size=8, pipelines={
        "image": [SimpleRGBImageDecoder(), ToTensor(), ToTorchImage(channels_last=False),
                  Convert(torch.float32), ModuleWrapper(torch.nn.AvgPool2d(2))],
        "label": [IntDecoder(), ToTensor(), Squeeze(1), View(torch.float64)],
        "cls": [IntDecoder(), View(np.uint8)], "value": None})))
    put("rrc_identity", run(L(batch_size=8, pipelines={
        "image": [SimpleRGBImageDecoder(), RandomResizedCrop((1.0, 1.0), (4 / 3, 4 / 3), 12)],
        "label": None, "cls": None, "value": None})))
    put("rrc", run(L(batch_size=8, pipelines={
        "image": [SimpleRGBImageDecoder(), RandomResizedCrop((0.08, 1.0), (0.75, 4 / 3), 10)],
        "label": None, "cls": None, "value": None})))
    # RRC's helpers: crop draws (numba's unseeded RNG: distribution only) and resizes of given boxes.
    res["rrc/crops"] = np.array([fast_crop.get_random_crop(120, 160, np.array([0.08, 1.0]),
                                                           np.array([0.75, 4 / 3])) for _ in range(4000)])
    src = images()[0]
    boxes = [(0, 12, 0, 16), (2, 10, 3, 15), (0, 5, 0, 7), (4, 12, 8, 16), (1, 12, 0, 9)]
    res["rrc/boxes"] = np.array(boxes)
    for k, (r0, r1, c0, c1) in enumerate(boxes):
        for size in (4, 10, 20):
            dst = np.zeros((size, size, 3), np.uint8)
            fast_crop.resize_crop(src, r0, r1, c0, c1, dst)
            res[f"rrc/resize/{k}/{size}"] = dst

    Pair = pair_field()
    put("custom_fields", run(Loader(cpath, batch_size=5, num_workers=1, order=OrderOption.SEQUENTIAL,
                                    drop_last=False, custom_fields={"pair": Pair},
                                    pipelines={"pair": [Pair().get_decoder_class()()]})))
    flt = L(batch_size=8, pipelines={"image": None, "value": None}).filter("cls", lambda c: c[0] in (2, 7))
    put("filter", run(flt))
    res["filter/len"] = np.array(len(flt))
    return res


# ---- module-level helpers ---------------------------------------------------------------------
# ``helper_results`` runs on FFCV's modules here and on beton's in python/tests/test_ffcv_api.py:
# one program, two implementations, compared result by result.

# (height, width, scale, ratio) of the crop draws: plain draws, draws that often fall back after
# ten tries (a crop wider than the image: in_ratio < min(ratio); taller: in_ratio > max(ratio)),
# a fixed box, and a thin image.
CROP_CASES = [(120, 160, (0.08, 1.0), (3 / 4, 4 / 3)), (100, 100, (0.95, 1.0), (3.0, 4.0)),
              (100, 100, (0.95, 1.0), (0.2, 0.25)), (64, 48, (1.0, 1.0), (3 / 4, 3 / 4)),
              (33, 500, (0.08, 1.0), (3 / 4, 4 / 3))]
CENTER_CASES = [(h, w, r) for h, w in [(120, 160), (160, 120), (33, 500), (7, 7), (100, 101)]
                for r in (224 / 256, 1.0, 0.5)]
# Left out: unsigned types wider than 8 bits (torch < 2.3 refuses them, later ones accept them:
# the answer depends on the torch installed, not on FFCV or beton).
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64",
          "complex128", np.float32, np.int64, np.dtype(">f8")]


def helper_images():
    rng = np.random.RandomState(5)
    ramp = np.linspace(0, 255, 37 * 53 * 3).reshape(37, 53, 3)
    return {"small": rng.randint(0, 256, size=(12, 16, 3)).astype(np.uint8),
            "ramp": (0.7 * ramp + 0.3 * rng.randint(0, 256, size=ramp.shape)).astype(np.uint8),
            "tall": rng.randint(0, 256, size=(40, 18, 3)).astype(np.uint8),
            "float": rng.rand(10, 14, 3).astype(np.float32)}


class FakeAllocator:
    """The part of FFCV's ``MemoryAllocator`` that ``handle_sample`` and the worker jobs use,
    logging every call. Its first allocation for sample 1 raises ``MemoryError`` (as FFCV's does
    when a sample does not fit the rest of a page) to exercise the writer's one retry."""

    def __init__(self):
        self.log, self.next_ptr, self.allocations, self.refused = [], 1000, [], False

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")

    def set_current_sample(self, ix):
        self.current = int(ix)
        self.log.append(f"sample {ix}")

    def malloc(self, size):
        if self.current == 1 and not self.refused:
            self.refused = True
            self.log.append(f"refuse {size}")
            raise MemoryError
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + size
        self.allocations.append((self.current, ptr, size))
        self.log.append(f"malloc {size} at {ptr}")
        return ptr, np.zeros(size, np.uint8)


class PairEncoder:
    """A field as FFCV's writer sees it (``encode(destination, value, malloc)``): ``a`` in the
    metadata row, ``b`` as ``b`` bytes in the heap, its pointer in the row."""

    def encode(self, destination, value, malloc):
        destination["a"] = value[0]
        destination["ptr"], buffer = malloc(value[1])
        buffer[:] = value[1]


WRITER_ROW = np.dtype([("a", "<i4"), ("ptr", "<u8")])
WRITER_META = np.dtype([("p", WRITER_ROW), ("q", WRITER_ROW)])


def writer_results(writer):
    """FFCV's writer helpers on fakes: ``handle_sample`` (with the retry) and
    ``worker_job_indexed_dataset`` (its queue, progress counter and allocations)."""
    import ctypes
    import queue
    from multiprocessing import Value

    res = {}
    samples = [((k, 3), (10 * k, 2)) for k in range(5)]
    fields = {"p": PairEncoder(), "q": PairEncoder()}
    meta, alloc = np.zeros(5, WRITER_META), FakeAllocator()
    for ix in (0, 1, 2):
        writer.handle_sample(samples[ix], ix, WRITER_META.names, meta, alloc, fields)
    res["writer/handle_sample/log"] = np.array(alloc.log)
    res["writer/handle_sample/metadata"] = meta.view(np.uint8)

    class SharedMemory:
        buf = bytearray(5 * WRITER_META.itemsize)

    todo, allocations, done = queue.Queue(), queue.Queue(), Value(ctypes.c_uint64, 0)
    for chunk in ([(0, 4), (1, 0)], [(2, 3), (3, 2), (4, 1)], None):
        todo.put(chunk)
    alloc = FakeAllocator()
    writer.worker_job_indexed_dataset(todo, SharedMemory, WRITER_META, fields, alloc, done, allocations, samples)
    res["writer/worker_job/log"] = np.array(alloc.log)
    res["writer/worker_job/metadata"] = np.frombuffer(bytes(SharedMemory.buf), np.uint8)
    res["writer/worker_job/allocations"] = np.array(allocations.get_nowait())
    res["writer/worker_job/done"] = np.array(done.value)
    return res


def result_or_error(fn, *args):
    """``str(fn(*args))``, or the name of the built-in exception class it raises."""
    try:
        return str(fn(*args))
    except Exception as e:
        return next(k.__name__ for k in type(e).__mro__ if k.__module__ == "builtins")


def helper_results(rgb_image, fast_crop, normalize, writer, seed_fast_crop):
    """The module-level helpers' results: crop boxes from seeded generators (``rgb_image``'s draw
    from numpy's global generator, ``fast_crop``'s from numba's, which ``seed_fast_crop``
    seeds), ``ch_dtype_from_numpy``, ``resizer``, ``encode_jpeg``, the writer's helpers."""
    res = {}
    for k, (h, w, scale, ratio) in enumerate(CROP_CASES):
        np.random.seed(k)
        res[f"helpers/random_crop/{k}"] = np.array([rgb_image.get_random_crop(h, w, scale, ratio) for _ in range(60)])
        seed_fast_crop(k)
        res[f"helpers/fast_random_crop/{k}"] = np.array(
            [fast_crop.get_random_crop(h, w, np.array(scale), np.array(ratio)) for _ in range(60)])
    res["helpers/center_crop"] = np.array([rgb_image.get_center_crop(h, w, None, r) for h, w, r in CENTER_CASES])
    res["helpers/fast_center_crop"] = np.array([fast_crop.get_center_crop(h, w, r) for h, w, r in CENTER_CASES])
    res["helpers/ch_dtype"] = np.array([result_or_error(normalize.ch_dtype_from_numpy, d) for d in DTYPES])
    for name, image in helper_images().items():
        # None, or a target at least the longer side, returns the image: tried on the small ones.
        for target in (None, 8, 13, 20, 37) if image.size < 1000 else (8, 13, 20, 37):
            res[f"helpers/resizer/{name}/{target}"] = rgb_image.resizer(image, target)
        if image.dtype == np.uint8:
            for quality in (50, 90):
                res[f"helpers/encode_jpeg/{name}/{quality}"] = rgb_image.encode_jpeg(image, quality)
    res.update(writer_results(writer))
    return res


def ffcv_helper_results():
    import numba
    from ffcv import writer
    from ffcv.fields import rgb_image
    from ffcv.transforms import normalize
    from ffcv.transforms.utils import fast_crop

    @numba.njit
    def seed_numba(seed):  # numba's generator is seeded from compiled code only
        np.random.seed(seed)

    return helper_results(rgb_image, fast_crop, normalize, writer, seed_numba)


# ---- misuses ---------------------------------------------------------------------------------
# Each misuse: (name, field the pipeline is for, decoder class name or None, how it differs).
# The Loader raises what FFCV raises (FFCV raises while building the Loader; beton may raise at
# the first batch). ``sizes.beton`` has images of several sizes, an int, an ndarray and bytes.

def sizes_samples():
    sizes = [(8, 8), (10, 12), (8, 8), (12, 10)]
    return [(np.full((h, w, 3), k, np.uint8), k, np.full(3, k, np.float32), np.full(4, k, np.uint8))
            for k, (h, w) in enumerate(sizes)]


def sizes_fields(fields):
    return {"image": fields.RGBImageField(write_mode="raw"), "label": fields.IntField(),
            "arr": fields.NDArrayField(np.dtype("float32"), (3,)), "b": fields.BytesField()}


def misuses(Loader, OrderOption, decoders, sizes_path, custom_path, missing_path):
    """``name -> thunk`` making (and reading a batch of) a Loader used wrongly. Left out: the
    misuses after which FFCV 1.0.2 hangs instead of raising (``FloatDecoder`` on an int field,
    ``IntDecoder`` on an ndarray field, ``IntDecoder`` on images of one size: its decoding
    thread dies and the loop waits for ever)."""
    D = decoders

    def only(field, ops):
        return {k: (ops if k == field else None) for k in ("image", "label", "arr", "b")}

    def make(fname=sizes_path, order=OrderOption.SEQUENTIAL, **kw):
        def thunk():
            loader = Loader(fname, batch_size=2, num_workers=1, order=order, **kw)
            next(iter(loader))
        return thunk

    return {
        "simple_decoder_over_sizes": make(pipelines=only("image", [D.SimpleRGBImageDecoder()])),
        "default_decoder_over_sizes": make(pipelines=only("image", [])),
        "int_decoder_on_images_of_sizes": make(pipelines=only("image", [D.IntDecoder()])),
        "crop_decoder_over_sizes": make(pipelines=only("image", [D.RandomResizedCropRGBImageDecoder((4, 4))])),
        "image_decoder_on_int": make(pipelines=only("label", [D.SimpleRGBImageDecoder()])),
        "crop_decoder_on_int": make(pipelines=only("label", [D.CenterCropRGBImageDecoder((4, 4), 1.0)])),
        "ndarray_decoder_on_int": make(pipelines=only("label", [D.NDArrayDecoder()])),
        "bytes_decoder_on_int": make(pipelines=only("label", [D.BytesDecoder()])),
        "bytes_decoder_on_ndarray": make(pipelines=only("arr", [D.BytesDecoder()])),
        "ndarray_decoder_on_bytes": make(pipelines=only("b", [D.NDArrayDecoder()])),
        "image_decoder_on_bytes": make(pipelines=only("b", [D.SimpleRGBImageDecoder()])),
        "pipeline_not_a_list": make(pipelines=only("label", D.IntDecoder())),
        "stage_not_an_operation": make(pipelines=only("label", [D.IntDecoder(), 5])),
        "unknown_field": make(pipelines={"nope": [D.IntDecoder()], "image": None, "arr": None, "b": None}),
        "order_name": make(order="nope", pipelines=only("label", [])),
        "order_number": make(order=5, pipelines=only("label", [])),
        "missing_file": make(fname=missing_path),
        "custom_field_without_class": make(fname=custom_path),
    }


def outcome(thunk):
    """The name of the built-in exception class ``thunk`` raises (the first in its MRO), or ``ok``."""
    return result_or_error(lambda: thunk() or "ok")


def ffcv_misuse_results(tmp, cpath):
    from ffcv import fields
    from ffcv.fields import decoders
    from ffcv.loader import Loader, OrderOption
    from ffcv.writer import DatasetWriter

    sizes = os.path.join(tmp, "sizes.beton")
    DatasetWriter(sizes, sizes_fields(fields), num_workers=1).from_indexed_dataset(sizes_samples())
    cases = misuses(Loader, OrderOption, decoders, sizes, cpath, os.path.join(tmp, "missing.beton"))
    return {f"errors/{name}": np.array(outcome(thunk)) for name, thunk in cases.items()}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "python", "tests", "data", "ffcv_api")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "signatures.json"), "w") as f:
        json.dump(record_signatures(), f, indent=1, sort_keys=True)
    tmp = tempfile.mkdtemp()
    try:
        path, cpath = write_files(tmp)
        res = programs(path, cpath)
        res.update(ffcv_helper_results())
        res.update(ffcv_misuse_results(tmp, cpath))
        np.savez_compressed(os.path.join(out, "expected.npz"), **res)
        for p in (path, cpath):
            # mtime=0: the same file gives the same bytes at every recording.
            with open(p, "rb") as src, gzip.GzipFile(os.path.join(out, os.path.basename(p) + ".gz"), "wb", 9,
                                                     mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    finally:
        shutil.rmtree(tmp)
    print(f"record_api: wrote {out}")


if __name__ == "__main__":
    main()
