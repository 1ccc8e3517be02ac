"""The Loader from Python: FFCV's batch semantics, zero-copy batches that stay valid, pipelines,
queries as indices, resume, distributed shares."""

import gc
import os
import threading

import numpy as np
import pytest

import beton
from beton.loader import Loader, OrderOption


def test_partial_batches_like_ffcv(small):
    assert len(Loader(small, batch_size=7)) == 85
    assert len(Loader(small, batch_size=7, drop_last=False)) == 86
    assert len(Loader(small, batch_size=60)) == 10 == len(Loader(small, batch_size=60, drop_last=False))
    sizes = [len(b[0]) for b in Loader(small, batch_size=7, drop_last=False)]
    assert sizes == [7] * 85 + [5]


def test_values_and_disabled_fields(small):
    loader = Loader(small, batch_size=50, order=OrderOption.RANDOM, seed=1,
                    pipelines={"blob": None, "meta": None, "name": None})
    # FFCV's default pipelines: every field not disabled, the image whole (SimpleRGBImageDecoder),
    # then ToTensor() when torch is installed.
    assert loader.fields == ["label", "score", "arr", "image"]
    seen = []
    for label, score, arr, image in loader:
        label, score, arr, image = (np.asarray(x) for x in (label, score, arr, image))
        assert label.shape == (50, 1) and score.shape == (50, 1)  # FFCV's shape of scalar fields
        label, score = label.ravel(), score.ravel()
        assert image.shape == (50, 4, 5, 3) and (image == (label % 256)[:, None, None, None]).all()
        np.testing.assert_array_equal(score, label / 2)
        np.testing.assert_array_equal(arr, np.arange(6, dtype=np.float32).reshape(2, 3)[None] + label[:, None, None])
        seen.extend(label.tolist())
    assert sorted(seen) == list(range(600))


def test_bytes_json_and_ndarray_values_through_the_loader(small):
    from beton.fields import JSONField

    loader = Loader(small, batch_size=32, order=OrderOption.RANDOM, seed=3, drop_last=False,
                    pipelines={"score": None, "name": None, "image": None})
    assert loader.fields == ["label", "blob", "meta", "arr"]
    seen = 0
    for label, blob, meta, arr in loader:
        label, blob, arr = np.asarray(label).ravel(), np.asarray(blob), np.asarray(arr)
        assert blob.dtype == np.uint8 and blob.shape == (len(label), 6)  # padded to the longest (6 bytes)
        for i, row in zip(label.tolist(), blob):
            assert bytes(row) == bytes([i % 256]) * (i % 7) + bytes(6 - i % 7)
        assert JSONField.unpack(meta) == [{"i": i} for i in label.tolist()]
        np.testing.assert_array_equal(arr, np.arange(6, dtype=np.float32).reshape(2, 3) + label[:, None, None])
        seen += len(label)
    assert seen == 600


def test_same_seed_same_batches_whatever_the_workers(small):
    def epoch(workers):
        return [b[0].tolist() for b in Loader(small, batch_size=32, num_workers=workers, seed=5,
                                              order=OrderOption.QUASI_RANDOM)]
    assert epoch(1) == epoch(2) == epoch(3)


def test_held_batches_stay_valid(small):
    loader = Loader(small, batch_size=10, order=OrderOption.RANDOM, batches_ahead=1, num_workers=2,
                    pipelines={"meta": None, "name": None, "image": None})
    kept = list(loader)  # every batch held at once
    for label, score, blob, arr in kept:
        label, score, blob = np.asarray(label).ravel(), np.asarray(score).ravel(), np.asarray(blob)
        np.testing.assert_array_equal(score, label / 2)
        assert (blob[:, 0][label % 7 > 0] == (label % 256)[label % 7 > 0]).all()


def test_query_as_indices_and_transforms(small, torch):
    from beton.transforms import Convert, Squeeze, ToTensor

    ds = beton.open(small)
    loader = Loader(small, batch_size=8, indices=ds.where("label % 10 = 3"),
                    pipelines={"label": [ToTensor(), Convert(torch.float32)], "score": None, "blob": None,
                               "meta": None, "arr": None, "name": None})
    labels = [b[0] for b in loader]
    assert all(t.dtype == torch.float32 for t in labels)
    assert torch.cat(labels).ravel().tolist() == [float(i) for i in range(3, 600, 10)][:56]
    double = Loader(small, batch_size=4, pipelines={"label": [lambda x: x * 2], "score": None, "blob": None,
                                                    "meta": None, "arr": None, "name": None})
    assert next(iter(double))[0].ravel().tolist() == [0, 2, 4, 6]


def test_to_tensor_shares_memory_with_the_batch(small, torch):
    from beton.transforms import ToTensor

    views = []

    def keep(x):
        views.append(x)
        return x

    loader = Loader(small, batch_size=8, num_workers=2, batches_ahead=1,
                    pipelines={"label": [ToTensor()], "arr": [keep, ToTensor()], "score": None, "blob": None,
                               "meta": None, "name": None, "image": None})
    held = list(loader)  # every batch held at once, as tensors
    assert len(held) == 75
    for (labels, arrs), view in zip(held, views):
        assert isinstance(arrs, torch.Tensor) and arrs.dtype == torch.float32
        # The numpy array views the loader's slot (its base is the native column), and the tensor
        # is that same memory: no copy.
        assert isinstance(view.base, beton._native.Column) and not view.flags.owndata
        assert arrs.data_ptr() == view.__array_interface__["data"][0]
        torch.testing.assert_close(arrs, torch.arange(6, dtype=torch.float32).reshape(2, 3) + labels[:, :, None])
    assert torch.cat([b[0] for b in held]).ravel().tolist() == list(range(600))
    labels, arrs = held[3]
    arrs[0, 0, 0] = -1.0
    assert views[3][0, 0, 0] == -1.0, "a write through the tensor is seen in the batch"


def test_resume_gives_the_rest_of_the_epoch(small):
    def make():
        return Loader(small, batch_size=16, order=OrderOption.RANDOM, seed=11,
                      pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None, "image": None})
    full = [b[0].tolist() for b in make()]
    first = make()
    it = iter(first)
    head = [next(it)[0].tolist() for _ in range(5)]
    state = first.state()
    second = make()
    second.resume(state)
    tail = [b[0].tolist() for b in second]
    assert head + tail == full


def test_distributed_shares_are_disjoint(small):
    shares = []
    for rank in range(2):
        loader = Loader(small, batch_size=10, order=OrderOption.RANDOM, distributed=(rank, 2), seed=2,
                        pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None, "image": None})
        shares.append({i for b in loader for i in b[0].ravel().tolist()})
    assert not (shares[0] & shares[1]) and len(shares[0] | shares[1]) == 600


def test_early_breaks_keep_threads_flat(small):
    loader = Loader(small, batch_size=8, num_workers=2, pipelines={"meta": None, "name": None})
    baseline = threading.active_count(), len(os.listdir("/proc/self/task"))
    for _ in range(100):
        for k, _b in enumerate(loader):
            if k == 2:
                break
    gc.collect()
    assert len(os.listdir("/proc/self/task")) <= baseline[1] + 4


def test_ffcv_style_custom_operation(small):
    from beton.pipeline import AllocationQuery, Compiler, Operation

    class AddOne(Operation):
        def generate_code(self):
            parallel = Compiler.get_iterator()

            def add_one(inp, dst):
                for i in parallel(inp.shape[0]):
                    dst[i] = inp[i] + 1
                return dst

            return add_one

        def declare_state_and_memory(self, previous_state):
            return previous_state, AllocationQuery(previous_state.shape, previous_state.dtype)

    loader = Loader(small, batch_size=5, pipelines={"label": [AddOne()], "score": None, "blob": None,
                                                    "meta": None, "arr": None, "name": None})
    assert next(iter(loader))[0].ravel().tolist() == [1, 2, 3, 4, 5]


def test_writer_from_arrow_and_imagefolder(tmp_path):
    import pyarrow as pa

    from beton.fields import IntField, RGBImageField, TextField
    from beton.writer import DatasetWriter

    t = pa.table({"label": [3, 1, 2], "caption": ["a", "b", "c"]})
    DatasetWriter(tmp_path / "a.beton", {"label": IntField(), "caption": TextField()}, progress=False).from_arrow(t)
    ds = beton.open(tmp_path / "a.beton")
    assert [ds[i]["caption"] for i in range(3)] == ["a", "b", "c"]
    root = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
    w = DatasetWriter(tmp_path / "f.beton", {"image": RGBImageField(write_mode="jpg", max_resolution=32),
                                              "label": IntField()}, progress=False)
    report = w.from_imagefolder(root)
    assert report["num_samples"] == 155 and len(report["classes"]) == 6
    f = beton.open(tmp_path / "f.beton")
    assert f.where("image.width <= 32 AND image.height <= 32").tolist() == list(range(155))
    assert f.query("SELECT count(*) AS n FROM samples WHERE label = 0").column("n")[0].as_py() > 0


def test_ctrl_c_or_false_from_progress_stops_a_write(tmp_path):
    from beton.fields import IntField

    calls = []

    def stop(done, total):
        calls.append(done)
        return False

    with pytest.raises(ValueError, match="cancel"):
        beton._native.write(str(tmp_path / "x.beton"), {"label": beton._native.IntField()}, 10_000, lambda i: [i],
                            chunk_size=100, progress=stop)
    assert calls and not (tmp_path / "x.beton").exists()


def test_ctrl_c_interrupts_a_write_and_leaves_no_file(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "big.beton"
    script = f"""
import time, beton._native as n
def get(i):
    time.sleep(0.001)
    return [i]
print("started", flush=True)
n.write({str(out)!r}, {{"label": n.IntField()}}, 1_000_000, get, chunk_size=64)
"""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".big.beton")], "temporary files removed"


def test_an_exception_in_the_progress_callback_is_raised(tmp_path):
    def boom(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        beton._native.write(str(tmp_path / "x.beton"), {"label": beton._native.IntField()}, 1000, lambda i: [i],
                            chunk_size=100, progress=boom)


def test_100_epochs_with_early_breaks_keep_memory_flat(small):
    """In a child process of its own (the shared test process's RSS moves with every other
    test): RSS after 100 epochs, each broken off early, against RSS after the first 10, relative
    to what one epoch's batches hold. A leak of the epoch's slots (~a batch each) would grow it
    by ~90 epochs' worth."""
    import subprocess
    import sys

    script = f"""
import json
from beton.loader import Loader, OrderOption

def rss_kib():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])

loader = Loader({str(small)!r}, batch_size=16, num_workers=2, order=OrderOption.RANDOM, pipelines={{"meta": None}})
rss, batch_kib = [], 0
for epoch in range(100):
    for k, batch in enumerate(loader):
        batch_kib = max(batch_kib, sum(getattr(x, "nbytes", 0) for x in batch) // 1024)
        if k == epoch % 5:
            break
    rss.append(rss_kib())
print(json.dumps({{"rss": rss, "batch_kib": batch_kib}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=600)
    got = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    rss, batch_kib = got["rss"], max(1, got["batch_kib"])
    grew = rss[-1] - rss[9]
    # 90 leaked epochs would hold >= 90 batches (plus their slots); allow 16 batches and 4 MiB of
    # allocator noise.
    assert grew < 16 * batch_kib + 4 * 1024, f"RSS grew {rss[9]} -> {rss[-1]} KiB (a batch is {batch_kib} KiB)"


def _gpu_pipeline(device):
    """FFCV's GPU image pipeline: decode, to torch, to the device, NCHW, normalise to float16."""
    from beton.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from beton.transforms import NormalizeImage, ToDevice, ToTensor, ToTorchImage

    mean, std = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255
    return {"image": [SimpleRGBImageDecoder(), ToTensor(), ToDevice(device, non_blocking=True),
                      ToTorchImage(channels_last=False), NormalizeImage(mean, std, np.float16)],
            "label": [IntDecoder(), ToTensor(), ToDevice(device)]}


def test_to_device_cuda_without_cuda_fails_at_creation_naming_the_op(small, torch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the error path is not reachable")
    for device in ["cuda:0", torch.device("cuda"), 0]:
        # Fields are checked in the file's order: `label` comes first.
        with pytest.raises(RuntimeError, match=r"ToDevice\(.*\) in the pipeline of field 'label': no CUDA device "
                                               r"is available \(torch.cuda.is_available\(\) is False\)"):
            Loader(small, batch_size=4, pipelines=_gpu_pipeline(device))
    with pytest.raises(RuntimeError, match=r"ToDevice\('cuda:1'\) in the pipeline of field 'image'"):
        Loader(small, batch_size=4, pipelines={"image": _gpu_pipeline("cuda:1")["image"]})
    # The CPU twin of the same pipeline builds.
    Loader(small, batch_size=4, pipelines=_gpu_pipeline("cpu"))


def test_to_device_cuda_without_torch_fails_at_creation(small, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(RuntimeError, match=r"ToDevice\('cuda'\) in the pipeline of field 'label': no CUDA "
                                           r"device is available \(torch is not installed"):
        Loader(small, batch_size=4, pipelines=_gpu_pipeline("cuda"))


def test_ffcvs_documented_custom_operation_runs(tmp_path, torch):
    """FFCV's "Making custom transforms" example (PickACorner), unchanged: an Operation whose
    code fills ``dst`` with ``Compiler.get_iterator()``, its state made with dataclasses.replace."""
    from dataclasses import replace
    from typing import Callable, Optional, Tuple

    from beton.fields import IntField, RGBImageField
    from beton.fields.decoders import SimpleRGBImageDecoder
    from beton.pipeline.allocation_query import AllocationQuery
    from beton.pipeline.compiler import Compiler
    from beton.pipeline.operation import Operation
    from beton.pipeline.state import State
    from beton.transforms import ToTensor
    from beton.writer import DatasetWriter

    class PickACorner(Operation):
        def generate_code(self) -> Callable:
            parallel_range = Compiler.get_iterator()

            def pick_a_corner(images, dst):
                which_corner = np.random.rand(images.shape[0])
                for i in parallel_range(images.shape[0]):
                    if which_corner[i] > 2:  # never: the top-left corner, so the test can check it
                        dst[i] = images[i, -images.shape[1] // 2:, -images.shape[2] // 2:]
                    else:
                        dst[i] = images[i, :images.shape[1] // 2, :images.shape[2] // 2]
                return dst

            return pick_a_corner

        def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
            h, w, c = previous_state.shape
            new_shape = (h // 2, w // 2, c)
            return replace(previous_state, shape=new_shape), AllocationQuery(new_shape, previous_state.dtype)

    path = tmp_path / "corners.beton"
    images = [np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3) + i for i in range(12)]
    DatasetWriter(path, {"image": RGBImageField(), "label": IntField()}, progress=False).from_indexed_dataset(
        list(zip(images, range(12))))
    loader = Loader(path, batch_size=4, pipelines={"image": [SimpleRGBImageDecoder(), PickACorner(), ToTensor()]})
    batches = list(loader)
    assert len(batches) == 3
    for corners, labels in batches:
        assert isinstance(corners, torch.Tensor) and tuple(corners.shape) == (4, 4, 3, 3)
        for corner, label in zip(corners.numpy(), labels.ravel().tolist()):
            np.testing.assert_array_equal(corner, images[label][:4, :3])
