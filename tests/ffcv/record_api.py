"""Record FFCV 1.0.2's public API and reference batches, for beton's FFCV-compatibility tests.

Run with the python of an environment where FFCV 1.0.2 is installed (torch, numba, cv2):

    python tests/ffcv/record_api.py [OUT_DIR]     # default: python/tests/data/ffcv_api/

It writes into OUT_DIR:

- ``signatures.json``: for every public module of FFCV (``MODULES`` below), its public names
  (``__all__``, else the classes and functions it defines) with their call signatures: a class's
  constructor and its public methods, a function's parameters. Parameters are recorded as
  ``[name, kind, repr(default) or null]``.
- ``data.beton.gz`` / ``custom.beton.gz``: small files written by FFCV's ``DatasetWriter``.
- ``expected.npz``: FFCV's batches for the programs in ``PROGRAMS`` (each a Loader or a
  transform run), keyed ``PROGRAM/NAME``, and draws of FFCV's random helpers.

``python/tests/test_ffcv_api.py`` and ``python/tests/test_ffcv_equivalence.py`` read them (CI has
no FFCV); with ``BETON_FFCV_PYTHON`` set, the equivalence test re-runs this script into a
temporary directory and compares against the fresh recording.
"""
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
    if inspect.isclass(value) or inspect.isfunction(value):
        return f"<{value.__module__.split('.')[0]}.{value.__qualname__}>"
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


def pair_field():
    """A custom FFCV field (type id 255): two int32s per sample, in the row itself."""
    from dataclasses import replace

    from ffcv.fields.base import Field
    from ffcv.pipeline.allocation_query import AllocationQuery
    from ffcv.pipeline.operation import Operation

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
        np.savez_compressed(os.path.join(out, "expected.npz"), **res)
        for p in (path, cpath):
            with open(p, "rb") as src, gzip.open(os.path.join(out, os.path.basename(p) + ".gz"), "wb", 9) as dst:
                shutil.copyfileobj(src, dst)
    finally:
        shutil.rmtree(tmp)
    print(f"record_api: wrote {out}")


if __name__ == "__main__":
    main()
