"""Every public name of FFCV 1.0.2's public modules is importable from beton's same path, with
FFCV's call signature, value or target; FFCV's module-level helpers give FFCV's results; the
Loader raises FFCV's exception types for FFCV's misuses; ``Loader.code`` describes the compiled
pipelines. The names, signatures, helper results and exception types were recorded from the real
FFCV by ``tests/ffcv/record_api.py`` into ``data/ffcv_api/`` (CI has no FFCV; with
``BETON_FFCV_PYTHON`` set, the script re-records into a temporary directory and the tests compare
against that).

Left out as FFCV internals (not recorded): ``ffcv.benchmarks``, ``ffcv.libffcv``,
``ffcv._libffcv``, ``ffcv.memory_allocator``, ``ffcv.loader.epoch_iterator``,
``ffcv.pipeline.graph``, ``ffcv.memory_managers.process_cache.schedule`` / ``.page_reader``, and
their objects where another module imports them (recorded as ``internal`` aliases, e.g.
``ffcv.loader.loader.Graph``, ``ffcv.fields.rgb_image.imdecode``).

A name is a class, a function, a value (a constant or typing alias: its canonical ``repr``, or
its type where it has none) or an alias (an FFCV object another module imports: beton's name is
the same object as beton's counterpart of the target). A signature matches when FFCV's
parameters come first, in order, with the same names, kinds and defaults; beton may add optional
parameters after them (its extensions, e.g. ``interpolation``). Methods are compared for the
contracts users subclass or call (``Operation``, ``TraversalOrder``, ``MemoryManager``,
``Reader``, ``Pipeline``...); ``Field`` methods are not, as beton's writer takes Python values
(``encode(value)``) where FFCV's fills metadata rows.
"""

import builtins
import gzip
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

# torch < 2.6 tensors warn when numpy converts them (no `copy` keyword in their __array__).
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def _load_recorder():
    """tests/ffcv/record_api.py as a module: its helper and misuse programs run on beton here."""
    spec = importlib.util.spec_from_file_location("record_api", os.path.join(REPO, "tests", "ffcv", "record_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _load_recorder()


def _recording_dir():
    """The committed recording, or with BETON_FFCV_PYTHON a fresh one made by FFCV now."""
    live = os.environ.get("BETON_FFCV_PYTHON")
    if not live:
        return os.path.join(HERE, "data", "ffcv_api")
    out = tempfile.mkdtemp(prefix="ffcv_api_")
    subprocess.run([live, os.path.join(REPO, "tests", "ffcv", "record_api.py"), out], check=True,
                   capture_output=True)
    return out


RECORDING = _recording_dir()
RECORDED = json.load(open(os.path.join(RECORDING, "signatures.json")))

# Names FFCV's fields.base and fields.basics import from ffcv.pipeline; beton's modules get them
# with issue 37 item 2 (FFCV's custom-field API, in those files).

# Where beton's signature differs from FFCV's (class name, or module.name where only that name
# differs and its aliases elsewhere match -> reason). Each entry is checked to still differ, so a
# fix shows up here.
KNOWN = {
    # beton gives defaults to arguments FFCV requires (a program written for FFCV passes them).
    "CenterCropRGBImageDecoder": "ratio has a default (224/256) in beton",
    "NormalizeImage": "type has a default (np.float32) in beton",
    # FFCV's 8 MiB padded every file to two pages at least (16 MiB for two images); beton
    # chooses from the payload when page_size is not given (docs/FFCV_DIFFERENCES.md).
    "ffcv.writer.DatasetWriter": "page_size defaults to None in beton: chosen from the payload",
}
CONTRACT_METHODS = {"Operation", "TraversalOrder", "Sequential", "Random", "QuasiRandom", "MemoryManager",
                    "MemoryContext", "OSCacheManager", "ProcessCacheManager", "Reader", "Pipeline", "PipelineSpec",
                    "Compiler", "OSCacheContext", "ProcessCacheContext"}


def beton_module(name):
    return importlib.import_module("beton" + name[len("ffcv"):])


def params_of(fn, drop_self):
    """``fn``'s parameters as the recorder records FFCV's (beton's classes named as FFCV's)."""
    out = R.params(fn, drop_self)
    assert out is not None, f"{fn!r} has no signature"
    return out


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
    elif rec["kind"] == "alias":
        target_module, target_name = rec["target"].rsplit(".", 1)
        target = getattr(beton_module(target_module), target_name, None)
        if value is not target:
            out.append(f"{name} is {value!r}, not beton's counterpart of {rec['target']} ({target!r})")
    elif "canonical" in rec:  # a module's constant or typing alias
        if rec["canonical"] is not None and R.canonical(value, "beton") != rec["canonical"]:
            out.append(f"{name} = {R.canonical(value, 'beton')} != {rec['canonical']}")
        if rec["canonical"] is None and type(value).__name__ != rec["type"]:
            out.append(f"{name} is a {type(value).__name__}, not a {rec['type']}")
    elif rec["repr"] is not None and module == "ffcv.types" and name != "TYPE_ID_HANDLER":
        got = repr(value.descr) if hasattr(value, "descr") else repr(value)
        if got != rec["repr"]:
            out.append(f"{name} = {got} != {rec['repr']}")
    return out


CASES = [(m, n) for m in sorted(RECORDED) for n in sorted(RECORDED[m]) if not RECORDED[m][n].get("internal")]


def _case(module, name):
    marks = []
    return pytest.param(module, name, marks=marks, id=f"{module}.{name}")


@pytest.mark.parametrize("module,name", [_case(m, n) for m, n in CASES])
def test_ffcv_name_has_ffcv_signature(module, name):
    mod = beton_module(module)
    assert hasattr(mod, name), f"beton{module[4:]}.{name} is missing"
    problems = mismatches(module, name, RECORDED[module][name], getattr(mod, name))
    if name in KNOWN or f"{module}.{name}" in KNOWN:
        assert problems, f"{module}.{name} now matches FFCV: drop it from KNOWN"
    else:
        assert not problems, problems


def test_every_public_ffcv_module_is_recorded():
    assert "ffcv.traversal_order.quasi_random" in RECORDED and "ffcv.memory_managers.process_cache" in RECORDED
    assert len(CASES) > 250
    # Module-level functions, constants and aliases are recorded, not only classes.
    loader = RECORDED["ffcv.loader.loader"]
    assert loader["ORDER_TYPE"]["kind"] == "value" and loader["ORDER_TYPE"]["canonical"].startswith("Union[")
    assert loader["Reader"] == {"kind": "alias", "target": "ffcv.reader.Reader"}
    assert loader["Graph"]["internal"] and ("ffcv.loader.loader", "Graph") not in CASES
    assert RECORDED["ffcv.fields.rgb_image"]["get_random_crop"]["kind"] == "function"
    assert RECORDED["ffcv.writer"]["count_samples_in_shard"]["kind"] == "function"


# ---- FFCV's module-level helpers, against the recording -----------------------------------------


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(os.path.join(RECORDING, "expected.npz")))


@pytest.fixture(scope="module")
def helpers():
    """``helper_results`` of the recording script, run on beton's modules. FFCV seeds numba's
    generator for ``fast_crop``; beton's ``fast_crop`` draws from numpy's global generator, which
    ``np.random.seed`` seeds (numba's is the same MT19937 with the same seeding)."""
    from beton import writer
    from beton.fields import rgb_image
    from beton.transforms import normalize
    from beton.transforms.utils import fast_crop

    return R.helper_results(rgb_image, fast_crop, normalize, writer, np.random.seed)


def keys(expected, prefix):
    found = sorted(k for k in expected if k.startswith(prefix))
    assert found, f"the recording has no {prefix}*"
    return found


def test_crop_boxes_equal_ffcvs_for_the_same_seed(helpers, expected):
    for key in keys(expected, "helpers/random_crop/") + keys(expected, "helpers/fast_random_crop/") + [
            "helpers/center_crop", "helpers/fast_center_crop"]:
        assert helpers[key].tolist() == expected[key].tolist(), key


def test_ch_dtype_from_numpy_equals_ffcvs(helpers, expected, torch):
    assert helpers["helpers/ch_dtype"].tolist() == expected["helpers/ch_dtype"].tolist()


def test_resizer_resizes_as_ffcv(helpers, expected):
    for key in keys(expected, "helpers/resizer/"):
        got, want = helpers[key], expected[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if want.dtype == np.uint8:  # OpenCV's INTER_AREA pixels exactly
            assert got.tobytes() == want.tobytes(), key
        else:  # float images: float32 sums in another order
            np.testing.assert_allclose(got, want, atol=1e-6, rtol=0, err_msg=key)


def test_encode_jpeg_gives_ffcvs_bytes(helpers, expected):
    for key in keys(expected, "helpers/encode_jpeg/"):
        assert helpers[key].dtype == np.uint8 and helpers[key].ndim == 1
        assert helpers[key].tobytes() == expected[key].tobytes(), key


def test_encode_jpeg_refuses_what_is_not_rgb():
    from beton.fields.rgb_image import encode_jpeg

    with pytest.raises(ValueError):
        encode_jpeg(np.zeros((4, 4), np.uint8), 90)
    with pytest.raises(ValueError):
        encode_jpeg(np.zeros((4, 4, 3), np.float32), 90)


def test_writer_helpers_write_as_ffcvs(helpers, expected):
    for key in keys(expected, "writer/"):
        assert helpers[key].tolist() == expected[key].tolist(), key


def test_webdataset_helpers(tmp_path):
    """``from_shard``, ``count_samples_in_shard`` and ``worker_job_webdataset`` (not recorded: the
    recording's environment has no webdataset; FFCV's code is ffcv/writer.py lines 21-83)."""
    pytest.importorskip("webdataset")
    import ctypes
    import io
    import queue
    import tarfile
    from multiprocessing import Value

    from beton.writer import count_samples_in_shard, from_shard, worker_job_webdataset

    shards = []
    for s, n in enumerate((3, 2)):
        path = tmp_path / f"shard-{s}.tar"
        with tarfile.open(path, "w") as tar:
            for k in range(n):
                for ext, text in (("a", str(10 * s + k)), ("b", str(k + 2))):
                    data = text.encode()
                    info = tarfile.TarInfo(f"{s:02d}{k:04d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(str(path))

    def pipeline(ds):
        return ds.to_tuple("a", "b").map_tuple(lambda a: (int(a), 3), lambda b: (0, int(b)))

    assert [count_samples_in_shard(s, pipeline) for s in shards] == [3, 2]
    assert [x[0][0] for x in from_shard(shards[1], pipeline)] == [10, 11]

    class SharedMemory:
        buf = bytearray(5 * R.WRITER_META.itemsize)

    todo, allocations, done, alloc = queue.Queue(), queue.Queue(), Value(ctypes.c_uint64, 0), R.FakeAllocator()
    for item in ((shards[0], 0), (shards[1], 3), None):
        todo.put(item)
    worker_job_webdataset(todo, SharedMemory, R.WRITER_META, {"p": R.PairEncoder(), "q": R.PairEncoder()}, alloc,
                          done, allocations, pipeline)
    meta = np.frombuffer(bytes(SharedMemory.buf), R.WRITER_META)
    assert meta["p"]["a"].tolist() == [0, 1, 2, 10, 11] and done.value == 5
    assert [row[0] for row in allocations.get_nowait()] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert alloc.log[4:7] == ["sample 1", "refuse 3", "sample 1"]  # refused once: sample 1 written again


# ---- exception types: the misuses of MISUSES, against FFCV's --------------------------------------

# Where beton raises another type than FFCV (misuse -> (beton's type, why)). Each is checked to
# still differ; docs/FFCV_DIFFERENCES.md lists them.
ERRORS_KNOWN = {
    # FFCV runs a decoder it does not expect as a transform after the field's default decoder
    # (pipeline_spec.py, accept_decoder), which then fails on what it is given: numpy's
    # IndexError, an AttributeError, or a hang. beton refuses the decoder for the field's type.
    "image_decoder_on_int": ("TypeError", "FFCV: IndexError (metadata['width'] on an int column)"),
    "crop_decoder_on_int": ("TypeError", "FFCV: IndexError (metadata['width'] on an int column)"),
    "ndarray_decoder_on_int": ("TypeError", "FFCV: AttributeError ('IntField' object has no attribute 'shape')"),
    "bytes_decoder_on_int": ("TypeError", "FFCV: IndexError"),
    "bytes_decoder_on_ndarray": ("TypeError", "FFCV: IndexError"),
    "ndarray_decoder_on_bytes": ("TypeError", "FFCV: AttributeError"),
    "stage_not_an_operation": ("TypeError", "FFCV: AttributeError ('int' object has no attribute 'accept_field')"),
    "unknown_field": ("KeyError", "FFCV: a bare AssertionError in its graph (graph.py, Graph.__init__)"),
}


@pytest.fixture(scope="module")
def misuses(tmp_path_factory):
    import beton.fields as fields
    from beton.fields import decoders
    from beton.loader import Loader, OrderOption
    from beton.writer import DatasetWriter

    tmp = tmp_path_factory.mktemp("misuses")
    sizes = str(tmp / "sizes.beton")
    DatasetWriter(sizes, R.sizes_fields(fields), num_workers=1, progress=False).from_indexed_dataset(R.sizes_samples())
    custom = str(tmp / "custom.beton")
    with gzip.open(os.path.join(RECORDING, "custom.beton.gz")) as f, open(custom, "wb") as out:
        out.write(f.read())
    return R.misuses(Loader, OrderOption, decoders, sizes, custom, str(tmp / "missing.beton"))


def raised(thunk):
    try:
        thunk()
    except Exception as e:
        return e
    return None


MISUSE_NAMES = ["simple_decoder_over_sizes", "default_decoder_over_sizes", "int_decoder_on_images_of_sizes",
                "crop_decoder_over_sizes", "image_decoder_on_int", "crop_decoder_on_int", "ndarray_decoder_on_int",
                "bytes_decoder_on_int", "bytes_decoder_on_ndarray", "ndarray_decoder_on_bytes",
                "image_decoder_on_bytes", "pipeline_not_a_list", "stage_not_an_operation", "unknown_field",
                "order_name", "order_number", "missing_file", "custom_field_without_class"]


def test_every_misuse_is_tested(misuses, expected):
    assert sorted(misuses) == sorted(MISUSE_NAMES) == sorted(k[len("errors/"):] for k in keys(expected, "errors/"))


@pytest.mark.parametrize("name", MISUSE_NAMES)
def test_misuse_raises_ffcvs_exception_type(name, misuses, expected):
    import beton

    ffcv = str(expected[f"errors/{name}"])
    error = raised(misuses[name])
    if name in ERRORS_KNOWN:
        beton_type, why = ERRORS_KNOWN[name]
        assert beton_type != ffcv, f"{name}: FFCV's type is now beton's: drop it from ERRORS_KNOWN"
        assert (error is None) if beton_type == "ok" else isinstance(error, getattr(builtins, beton_type)), (
            name, error, why)
    elif ffcv == "ok":
        assert error is None, (name, error)
    else:
        assert isinstance(error, getattr(builtins, ffcv)), f"{name}: FFCV raises {ffcv}, beton {error!r}"
    if error is not None and not isinstance(error, (KeyError, FileNotFoundError)) and "decoder" in name:
        # beton's error keeps its base class and message, adding FFCV's type.
        assert isinstance(error, beton.InvalidDecoderError) and isinstance(error, beton.InvalidArgumentError)
        assert str(error).startswith("invalid decoder for field ")


def test_simple_decoder_over_sizes_is_a_type_error_with_betons_message(misuses):
    import beton

    # FFCV: ffcv/fields/rgb_image.py, SimpleRGBImageDecoder.declare_state_and_memory, raise TypeError(msg).
    with pytest.raises(TypeError, match="SimpleRGBImageDecoder needs images of one size") as info:
        misuses["simple_decoder_over_sizes"]()
    assert isinstance(info.value, beton.BetonError) and isinstance(info.value, ValueError)
    assert type(info.value) is beton.InvalidDecoderError and info.value.path is None


# ---- Loader.code --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("code") / "data.beton"
    with gzip.open(os.path.join(RECORDING, "data.beton.gz")) as f, open(path, "wb") as out:
        out.write(f.read())
    return str(path)


def test_code_describes_each_pipeline(data_file):
    from beton.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from beton.loader import Loader
    from beton.transforms import ImageMixup, NormalizeImage, RandomHorizontalFlip, ToTensor

    loader = Loader(data_file, batch_size=4, num_workers=1, pipelines={
        "image": [RandomResizedCropRGBImageDecoder((8, 6)), RandomHorizontalFlip(),
                  NormalizeImage(np.array([1.0, 2, 3]), np.array([2.0, 2, 2]), np.float16), ImageMixup(0.5, False)],
        "label": [IntDecoder(), ToTensor()], "cls": None, "value": None})
    code = loader.code
    assert isinstance(code, str)
    image, label = code.split("\nimage: ")[1].split("\nlabel: ")
    assert "decoder  RandomResizedCropRGBImageDecoder(output_size=(8, 6)" in image
    assert "native   RandomHorizontalFlip(flip_prob=0.5)  [fused with the decoder]" in image
    assert "native   NormalizeImage(" in image and "type=float16" in image
    assert "-> (B, 8, 6, 3) float16" in image  # the native stage's output: HWC, as normalised
    assert "python   ImageMixup(alpha=0.5, same_lambda=False)  [per batch]" in image
    assert "decoder  IntDecoder()  [native" in label and "python   ToTensor()" in label
    assert "cls" not in code.split("\n", 1)[1] and "value" not in code.split("\n", 1)[1]  # skipped fields
    first = next(iter(loader))
    assert tuple(first[0].shape[1:]) == (8, 6, 3) and first[0].dtype == np.float16


def test_code_shows_a_recompiled_attribute_after_the_next_epoch(data_file):
    from beton.fields.decoders import CenterCropRGBImageDecoder
    from beton.loader import Loader

    decoder = CenterCropRGBImageDecoder((8, 8), 1.0)
    loader = Loader(data_file, batch_size=16, num_workers=1, recompile=True,
                    pipelines={"image": [decoder], "label": None, "cls": None, "value": None})
    assert "output_size=(8, 8)" in loader.code and "compiled for epoch 0" in loader.code
    assert [b[0].shape[1:3] for b in loader][0] == (8, 8)
    decoder.output_size = (4, 4)
    assert "output_size=(8, 8)" in loader.code  # not compiled yet: the next epoch compiles it
    assert [b[0].shape[1:3] for b in loader][0] == (4, 4)
    assert "output_size=(4, 4)" in loader.code and "-> (B, 4, 4, 3) uint8" in loader.code
    assert "compiled for epoch 1" in loader.code


def test_code_without_recompile_keeps_the_first_pipelines(data_file):
    from beton.fields.decoders import CenterCropRGBImageDecoder
    from beton.loader import Loader

    decoder = CenterCropRGBImageDecoder((8, 8), 1.0)
    loader = Loader(data_file, batch_size=16, num_workers=1,
                    pipelines={"image": [decoder], "label": None, "cls": None, "value": None})
    list(loader)
    decoder.output_size = (4, 4)
    assert [b[0].shape[1:3] for b in loader][0] == (8, 8) and "output_size=(8, 8)" in loader.code
    loader.generate_code()  # FFCV's method: compiles the operations as they are now
    assert "output_size=(4, 4)" in loader.code
    assert [b[0].shape[1:3] for b in loader][0] == (4, 4)


def test_code_of_a_custom_field_and_the_sample_ids(tmp_path):
    from beton.loader import Loader

    from test_ffcv_equivalence import pair_classes  # FFCV's test's custom field, in beton

    PairField, PairDecoder = pair_classes()
    path = tmp_path / "custom.beton"
    with gzip.open(os.path.join(RECORDING, "custom.beton.gz")) as f, open(path, "wb") as out:
        out.write(f.read())
    loader = Loader(str(path), batch_size=4, num_workers=1, custom_fields={"pair": PairField},
                    pipelines={"pair": [PairDecoder()], "index": []})
    code = loader.code
    assert "pair: field 'pair' (custom)\n    decoder  PairDecoder()  [Python, per batch]\n    -> (B, 2) int32" in code
    assert "index: the batch's sample ids (beton)" in code and "-> (B,) uint64" in code
