"""Every public name of FFCV 1.0.2's public modules is importable from beton's same path, with
FFCV's call signature: the names and signatures were recorded from the real FFCV by
``tests/ffcv/record_api.py`` into ``data/ffcv_api/signatures.json`` (CI has no FFCV).

Left out as FFCV internals (not recorded): ``ffcv.benchmarks``, ``ffcv.libffcv``,
``ffcv._libffcv``, ``ffcv.memory_allocator``, ``ffcv.loader.epoch_iterator``,
``ffcv.pipeline.graph``, ``ffcv.memory_managers.process_cache.schedule`` / ``.page_reader``.

A signature matches when FFCV's parameters come first, in order, with the same names, kinds and
defaults; beton may add optional parameters after them (its extensions, e.g. ``interpolation``).
Methods are compared for the contracts users subclass or call (``Operation``, ``TraversalOrder``,
``MemoryManager``, ``Reader``, ``Pipeline``...); ``Field`` methods are not, as beton's writer
takes Python values (``encode(value)``) where FFCV's fills metadata rows.
"""

import importlib
import inspect
import json
import os

import pytest

HERE = os.path.dirname(__file__)
RECORDED = json.load(open(os.path.join(HERE, "data", "ffcv_api", "signatures.json")))

# FFCV module-level helpers that are implementation details of FFCV's writer and JPEG path
# (OpenCV calls, worker processes), not API; beton has no counterpart.
INTERNAL = {
    "ffcv.writer": {"count_samples_in_shard", "from_shard", "handle_sample", "worker_job_indexed_dataset",
                    "worker_job_webdataset", "MIN_PAGE_SIZE", "MAX_PAGE_SIZE"},
    "ffcv.fields.rgb_image": {"encode_jpeg", "resizer", "get_random_crop", "get_center_crop"},
    "ffcv.transforms.normalize": {"ch_dtype_from_numpy"},
}

# Where beton's signature differs from FFCV's (class name -> reason). Each entry is
# checked to still differ, so a fix shows up here.
KNOWN = {
    # beton gives defaults to arguments FFCV requires (a program written for FFCV passes them).
    "CenterCropRGBImageDecoder": "ratio has a default (224/256) in beton",
    "NormalizeImage": "type has a default (np.float32) in beton",
}
CONTRACT_METHODS = {"Operation", "TraversalOrder", "Sequential", "Random", "QuasiRandom", "MemoryManager",
                    "MemoryContext", "OSCacheManager", "ProcessCacheManager", "Reader", "Pipeline", "PipelineSpec",
                    "Compiler", "OSCacheContext", "ProcessCacheContext"}


def beton_module(name):
    return importlib.import_module("beton" + name[len("ffcv"):])


def params_of(fn, drop_self):
    out = []
    for k, p in enumerate(inspect.signature(fn).parameters.values()):
        if drop_self and k == 0 and p.name in ("self", "cls"):
            continue
        default = None if p.default is inspect.Parameter.empty else default_repr(p.default)
        out.append([p.name, p.kind.name, default])
    return out


def default_repr(value):
    if inspect.isclass(value) or inspect.isfunction(value):
        return f"<{value.__module__.split('.')[0]}.{value.__qualname__}>".replace("<beton.", "<ffcv.")
    return repr(value)


def matches(ffcv_params, beton_params):
    if ffcv_params is None:
        return True
    if beton_params[:len(ffcv_params)] != ffcv_params:
        return False
    return all(p[2] is not None or p[1] in ("VAR_POSITIONAL", "VAR_KEYWORD") for p in beton_params[len(ffcv_params):])


def mismatches(module, name, rec, value):
    out = []
    if rec["kind"] == "function":
        if not matches(rec["params"], params_of(value, False)):
            out.append(f"{name}{params_of(value, False)} != {rec['params']}")
    elif rec["kind"] == "class":
        if rec["init"] is not None and not matches(rec["init"], params_of(value.__init__, True)):
            out.append(f"{name}.__init__ {params_of(value.__init__, True)} != {rec['init']}")
        if name in CONTRACT_METHODS:
            for meth, sig in rec["methods"].items():
                attr = inspect.getattr_static(value, meth, None)
                if attr is None:
                    out.append(f"{name}.{meth} missing")
                elif sig == "property" or isinstance(attr, property):
                    continue
                else:
                    fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
                    got = params_of(fn, not isinstance(attr, staticmethod))
                    if not matches(sig, got):
                        out.append(f"{name}.{meth} {got} != {sig}")
    elif rec["repr"] is not None and module == "ffcv.types" and name != "TYPE_ID_HANDLER":
        got = repr(value.descr) if hasattr(value, "descr") else repr(value)
        if got != rec["repr"]:
            out.append(f"{name} = {got} != {rec['repr']}")
    return out


CASES = [(m, n) for m in sorted(RECORDED) for n in sorted(RECORDED[m]) if n not in INTERNAL.get(m, ())]


@pytest.mark.parametrize("module,name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_ffcv_name_has_ffcv_signature(module, name):
    mod = beton_module(module)
    assert hasattr(mod, name), f"beton{module[4:]}.{name} is missing"
    problems = mismatches(module, name, RECORDED[module][name], getattr(mod, name))
    if name in KNOWN:
        assert problems, f"{module}.{name} now matches FFCV: drop it from KNOWN"
    else:
        assert not problems, problems


def test_every_public_ffcv_module_is_recorded():
    assert "ffcv.traversal_order.quasi_random" in RECORDED and "ffcv.memory_managers.process_cache" in RECORDED
    assert len(CASES) > 120
