"""The same programs run with FFCV 1.0.2 and with beton give the same batches.

FFCV's batches were recorded by ``tests/ffcv/record_api.py`` (run with FFCV's python) into
``data/ffcv_api/``, together with the small ``.beton`` files FFCV wrote; set
``BETON_FFCV_PYTHON`` to FFCV's python to re-record into a temporary directory and compare live.
FFCV returns scalar fields as ``(B, 1)``, beton as ``(B,)``: they are compared flattened.
"""

import gzip
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from beton.loader import Loader, OrderOption
from beton.pipeline.operation import BatchStage

# torch < 2.6 tensors warn when numpy converts them (no `copy` keyword in their __array__).
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    src = os.path.join(HERE, "data", "ffcv_api")
    tmp = tmp_path_factory.mktemp("ffcv_api")
    live = os.environ.get("BETON_FFCV_PYTHON")
    if live:
        subprocess.run([live, os.path.join(REPO, "tests", "ffcv", "record_api.py"), str(tmp)], check=True,
                       capture_output=True)
        src = str(tmp)
    for name in ("data.beton", "custom.beton"):
        with gzip.open(os.path.join(src, name + ".gz")) as f, open(tmp / name, "wb") as out:
            shutil.copyfileobj(f, out)
    expected = dict(np.load(os.path.join(src, "expected.npz")))
    return {"data": str(tmp / "data.beton"), "custom": str(tmp / "custom.beton"), "e": expected}


def ffcv(rec, prog):
    e = rec["e"]
    n = int(e[f"{prog}/num_batches"])
    return [[e[f"{prog}/{b}/{f}"] for f in range(100) if f"{prog}/{b}/{f}" in e] for b in range(n)]


def same(a, b, atol=0):
    """Equal values of the same shape and dtype (FFCV's (B, 1) scalars stay (B, 1))."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"shape {a.shape}, FFCV's {b.shape}"
    assert a.dtype == b.dtype, f"dtype {a.dtype}, FFCV's {b.dtype}"
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=0)


def labels(rec, **kw):
    base = dict(batch_size=4, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                pipelines={"image": None, "cls": None, "value": None})
    base.update(kw)
    return [[np.array(x) for x in b] for b in Loader(rec["data"], **base)]


def pairs(*sequences):
    """``zip`` of sequences that must be equally long and not empty (a plain ``zip`` stops at
    the shorter one: a loader that yields no batch, or fewer, would pass)."""
    sequences = [list(s) for s in sequences]
    lengths = [len(s) for s in sequences]
    assert len(set(lengths)) == 1 and lengths[0] > 0, f"lengths {lengths}"
    return zip(*sequences)


def compare(got, want):
    for g, w in pairs(got, want):
        assert len(g) == len(w)
        for x, y in zip(g, w):
            same(x, y)


def image_batches(rec, batch_size=8):
    from beton.fields.rgb_image import SimpleRGBImageDecoder

    loader = Loader(rec["data"], batch_size=batch_size, num_workers=1, drop_last=False,
                    pipelines={"image": [SimpleRGBImageDecoder()], "value": None})
    out = []
    for k, (img, label, cls) in enumerate(loader):
        ids = np.arange(k * batch_size, k * batch_size + len(img), dtype=np.uint64)
        out.append((np.array(img), np.array(label).reshape(-1, 1), np.array(cls).reshape(-1, 1), ids))
    return out


def test_all_fields_equal(rec):
    from beton.fields.rgb_image import SimpleRGBImageDecoder

    got = [[np.array(x) for x in b] for b in Loader(rec["data"], batch_size=16, num_workers=1, drop_last=False,
                                                     pipelines={"image": [SimpleRGBImageDecoder()]})]
    compare(got, ffcv(rec, "all_fields"))


def test_indices_keep_their_order(rec):
    compare(labels(rec, batch_size=2, indices=[5, 3, 1]), ffcv(rec, "indices_531"))


def test_repeated_indices_are_repeated(rec):
    compare(labels(rec, batch_size=5, indices=[2, 2, 7, 7, 7]), ffcv(rec, "repeated"))


@pytest.mark.parametrize("drop_last", [True, False])
def test_drop_last(rec, drop_last):
    compare(labels(rec, batch_size=10, drop_last=drop_last), ffcv(rec, f"drop_last_{str(drop_last).lower()}"))


def test_batches_ahead(rec):
    compare(labels(rec, batch_size=8, batches_ahead=1), ffcv(rec, "batches_ahead_1"))


class FakeLoader:
    def __init__(self, path, indices, seed, batch_size=8):
        self.fname, self.indices, self.seed, self.distributed, self.batch_size = path, indices, seed, False, batch_size


def test_random_order_equals_ffcvs(rec):
    from beton.traversal_order import Random

    order = Random(FakeLoader(rec["data"], np.arange(64, dtype="uint64"), 11))
    same(order.sample_order(0), rec["e"]["order_random/epoch0"])
    same(order.sample_order(1), rec["e"]["order_random/epoch1"])


def test_random_order_class_through_loader(rec):
    from beton.traversal_order import Random

    got = labels(rec, batch_size=8, order=Random, seed=3)
    compare(got, ffcv(rec, "random_seed3"))


def test_quasi_random_is_a_page_local_permutation(rec):
    from beton.traversal_order import QuasiRandom

    indices = np.arange(0, 64, 2, dtype="uint64")
    got = QuasiRandom(FakeLoader(rec["data"], indices, 11)).sample_order(0)
    want = rec["e"]["order_quasi/epoch0"]
    assert sorted(got.tolist()) == sorted(want.tolist()) == indices.tolist()
    assert got.tolist() != indices.tolist()


def test_custom_traversal_order(rec):
    from beton.traversal_order.base import TraversalOrder

    class Reverse(TraversalOrder):
        def sample_order(self, epoch):
            return self.indices[::-1]

    assert rec["e"]["custom_order/refused"] == 1  # FFCV 1.0.2 refuses subclasses (isinstance on a class)
    got = labels(rec, batch_size=8, order=Reverse)
    assert np.concatenate([b[0] for b in got]).ravel().tolist() == list(range(63, -1, -1))


def test_mixup_equals_ffcv(rec):
    from beton.transforms import ImageMixup, LabelMixup

    im, lm = BatchStage(ImageMixup(0.5, False)), BatchStage(LabelMixup(0.5, False))
    for (img, label, _, ids), want in pairs(image_batches(rec), ffcv(rec, "mixup")):
        same(im(img.copy(), ids), want[0], atol=1)
        same(lm(label, ids), want[1])


def test_mixup_same_lambda_to_one_hot(rec):
    from beton.transforms import ImageMixup, LabelMixup, MixupToOneHot

    im, lm, oh = BatchStage(ImageMixup(0.4, True)), LabelMixup(0.4, True), MixupToOneHot(10)
    for (img, _, cls, ids), want in pairs(image_batches(rec), ffcv(rec, "mixup_same")):
        same(im(img.copy(), ids), want[0], atol=1)
        np.testing.assert_allclose(oh._batch(lm._batch(cls, ids)), want[1], atol=1e-6)


def test_mixup_through_loader(rec):
    from beton.fields.basics import IntDecoder
    from beton.fields.rgb_image import SimpleRGBImageDecoder
    from beton.transforms import ImageMixup, LabelMixup

    loader = Loader(rec["data"], batch_size=8, num_workers=1, drop_last=False, pipelines={
        "image": [SimpleRGBImageDecoder(), ImageMixup(0.5, False)], "label": [IntDecoder(), LabelMixup(0.5, False)],
        "cls": None, "value": None})
    for got, want in pairs(loader, ffcv(rec, "mixup")):
        same(got[0], want[0], atol=1)
        same(got[1], want[1])


def test_poison_and_replace_label(rec):
    from beton.transforms import Poison, ReplaceLabel

    e = rec["e"]
    poison = BatchStage(Poison(e["poison/mask"], e["poison/alpha"], [0, 5, 9, 33], clamp=(10, 240)))
    relabel = BatchStage(ReplaceLabel([1, 5, 40], 99))
    for (img, label, _, ids), want in pairs(image_batches(rec), ffcv(rec, "poison")):
        same(poison(img, ids), want[0], atol=1)
        same(relabel(label, ids), want[1])


def test_tensor_ops(rec, torch):
    from beton.transforms import Convert, ModuleWrapper, Squeeze, ToTensor, ToTorchImage, View

    for (img, label, cls, ids), want in pairs(image_batches(rec), ffcv(rec, "tensor_ops")):
        x = img
        for op in [ToTensor(), ToTorchImage(channels_last=False), Convert(torch.float32),
                   ModuleWrapper(torch.nn.AvgPool2d(2))]:
            x = BatchStage(op)(x, ids)
        same(x.numpy(), want[0], atol=1e-4)
        y = label
        for op in [ToTensor(), Squeeze(1), View(torch.float64)]:
            y = BatchStage(op)(y, ids)
        assert y.numpy().tobytes() == want[1].tobytes()
        assert BatchStage(View(np.uint8))(cls, ids).tobytes() == want[2].tobytes()


def test_random_resized_crop(rec):
    from beton.transforms import RandomResizedCrop
    from beton.transforms.utils import fast_crop

    e = rec["e"]
    ident = BatchStage(RandomResizedCrop((1.0, 1.0), (4 / 3, 4 / 3), 12))
    rrc = BatchStage(RandomResizedCrop((0.08, 1.0), (0.75, 4 / 3), 10))
    for (img, _, _, ids), want, want_rrc in pairs(image_batches(rec), ffcv(rec, "rrc_identity"), ffcv(rec, "rrc")):
        same(ident(img, ids), want[0], atol=1)
        got = rrc(img, ids)
        assert got.shape == want_rrc[0].shape and got.dtype == want_rrc[0].dtype
        assert np.array_equal(got, rrc(img, ids))  # deterministic from the sample ids
    src = np.random.RandomState(0).randint(0, 256, size=(64, 12, 16, 3), dtype=np.uint8)[0]
    for k, (r0, r1, c0, c1) in enumerate(e["rrc/boxes"]):
        for size in (4, 10, 20):
            dst = np.zeros((size, size, 3), np.uint8)
            fast_crop.resize_crop(src, r0, r1, c0, c1, dst)
            same(dst, e[f"rrc/resize/{k}/{size}"], atol=1)
    rng = np.random.default_rng(0)
    ours = np.array([fast_crop.get_random_crop(120, 160, np.array([0.08, 1.0]), np.array([0.75, 4 / 3]), rng)
                     for _ in range(4000)])
    theirs = e["rrc/crops"]
    for col in (2, 3):  # crop heights and widths: same distribution
        assert abs(ours[:, col].mean() - theirs[:, col].mean()) < 0.05 * theirs[:, col].mean()


def pair_classes():
    """The custom field FFCV wrote ``custom.beton`` with (``record_api.pair_field``), on beton's
    classes, and its decoder."""
    path = os.path.join(REPO, "tests", "ffcv", "record_api.py")
    spec = importlib.util.spec_from_file_location("record_api", path)
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    PairField = recorder.pair_field("beton")
    return PairField, PairField().get_decoder_class()


def test_custom_field_decoder(rec):
    from beton.loader.decoder_stage import DecoderStage
    from beton.reader import Reader

    PairField, PairDecoder = pair_classes()
    reader = Reader(rec["custom"], custom_handlers={"pair": PairField})
    stage = DecoderStage(PairDecoder(), reader, "pair")
    for k, want in enumerate(ffcv(rec, "custom_fields")):
        ids = np.arange(5 * k, min(5 * k + 5, 12))
        same(reader.metadata["f0"][ids][:, None], want[0])  # the label batch: FFCV's (B, 1)
        same(stage(ids), want[1])


def test_custom_fields_through_loader(rec):
    PairField, PairDecoder = pair_classes()
    loader = Loader(rec["custom"], batch_size=5, num_workers=1, drop_last=False, custom_fields={"pair": PairField},
                    pipelines={"pair": [PairDecoder()]})
    compare([[np.array(x) for x in b] for b in loader], ffcv(rec, "custom_fields"))


def test_loader_filter(rec):
    loader = Loader(rec["data"], batch_size=8, num_workers=1, drop_last=False,
                    pipelines={"image": None, "value": None}).filter("cls", lambda c: int(np.ravel(c)[0]) in (2, 7))
    assert len(loader) == int(rec["e"]["filter/len"])
    compare([[np.array(x) for x in b] for b in loader], ffcv(rec, "filter"))


def test_memory_managers_read_payloads(rec):
    from beton.memory_managers import OSCacheManager, ProcessCacheManager
    from beton.reader import Reader

    reader = Reader(rec["data"])
    assert reader.field_names == ["image", "label", "cls", "value"] and int(reader.num_samples) == 64
    want = np.random.RandomState(0).randint(0, 256, size=(64, 12, 16, 3), dtype=np.uint8)
    for manager in (OSCacheManager(reader), ProcessCacheManager(reader)):
        read = manager.compile_reader()
        with manager.schedule_epoch([[3, 9]]) as ctx:
            ptr = reader.metadata["f0"][9]["data_ptr"]
            assert read(ptr, ctx.state).tobytes() == want[9].tobytes()
