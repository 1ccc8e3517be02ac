"""The loader over object storage against the same epoch from local disk (issue 24).

An ImageFolder is written to a .beton (kept under --out), uploaded to a local S3-compatible
server (moto, on 127.0.0.1) and read back through an HTTP proxy that adds --latency seconds to
every request (python/tests/s3_local.py: the one the tests use, with its faults off). Each round
runs one epoch (--order random or quasi-random) of the Python ``Loader`` (RandomResizedCrop --size + flip + NormalizeImage
to f16, --workers threads) from the local file (in the page cache), then one from the URL with
an empty cache directory (every byte fetched during the epoch), in alternating order. Round 0 is
a warm-up and is discarded. Reported: images/s of each (median, min-max), the median of the
per-round ratios remote/local, the bytes fetched against the bytes the epoch needs (every
sample's payload span plus the file's metadata: header, descriptors, data table, allocation
table), and the bound the server path sets: the whole object read with plain boto3 range GETs
(8 MiB, 16 at once) through the same proxy, MB/s, against the epoch's payload MB/s.

``--server static`` serves the folder holding the file with ``s3_local.StaticS3`` instead (HEAD
and ranged GET by ``os.sendfile``, the latency slept by the server): moto's own per-request cost,
which grows with the object's size, then stops being the bound.

With ``--streaming`` each round also runs one epoch of MosaicML Streaming (``mosaicml-streaming``)
over the same JPEG bytes written as MDS shards, uploaded to the same server and read through the
same proxy into a cold local cache, in a torch DataLoader with the same number of workers (PIL
decode, torchvision RandomResizedCrop + flip, the same normalisation to f16 per batch).

Usage: ``python benches/remote_loader.py DIR [--size 160] [--workers 2] [--batch-size 256]
[--rounds 4] [--latency 0.02] [--order random|quasi-random] [--streaming] [--out target/bench-data]``
(DIR: ``benches/bench-corpus.sh DIR 3000 10 0``). Needs beton installed, and moto[server] + boto3
(``pip install 'moto[server]'``); ``--streaming`` needs mosaicml-streaming, torch and torchvision.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "python" / "tests"))
from machine import machine  # noqa: E402
from s3_local import FaultProxy, Moto, StaticS3  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def loader(path, a):
    pipeline = [RandomResizedCropRGBImageDecoder((a.size, a.size)), RandomHorizontalFlip(),
                NormalizeImage(MEAN, STD, np.float16)]
    order = {"random": OrderOption.RANDOM, "quasi-random": OrderOption.QUASI_RANDOM}[a.order]
    return Loader(path, batch_size=a.batch_size, num_workers=a.workers, order=order, seed=1,
                  pipelines={"image": pipeline})


def epoch(path, a):
    """One epoch: (images/s, the loader's dataset)."""
    ld = loader(path, a)
    t0, n = time.perf_counter(), 0
    for images, _labels in ld:
        images[:, 0, 0, 0].sum()
        n += len(images)
    return n / (time.perf_counter() - t0), ld.dataset


def write_mds(path, out_dir):
    """The images and labels of the .beton file `path` (the stored JPEG bytes, as they are) as
    MosaicML Streaming MDS shards (no compression, 64 MB shards) in `out_dir`."""
    from streaming import MDSWriter

    ds = beton.open(path)
    with MDSWriter(out=str(out_dir), columns={"image": "bytes", "label": "int"}, compression=None,
                   size_limit="64mb", progress_bar=False) as w:
        for start in range(0, len(ds), 1000):
            t = ds.take(range(start, min(start + 1000, len(ds))), ["image", "label"])
            for img, label in zip(t.column("image").to_pylist(), t.column("label").to_pylist()):
                w.write({"image": img["data"], "label": label})


def streaming_epoch(remote, cache, a):
    """One epoch of MosaicML Streaming's StreamingDataset from `remote` (shuffled, cold `cache`),
    in a torch DataLoader of `a.workers` processes: PIL decode, torchvision RandomResizedCrop
    + flip, then per batch the same normalisation to f16. Returns (images/s, bytes downloaded)."""
    import io

    import torch
    import torchvision.transforms as T
    from PIL import Image
    from streaming import StreamingDataset

    tf = T.Compose([T.RandomResizedCrop(a.size, antialias=True), T.RandomHorizontalFlip(), T.PILToTensor()])

    class Images(StreamingDataset):
        def __getitem__(self, i):
            s = super().__getitem__(i)
            return tf(Image.open(io.BytesIO(s["image"])).convert("RGB")), s["label"]

    ds = Images(remote=remote, local=cache, shuffle=True, shuffle_seed=1, batch_size=a.batch_size)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, num_workers=a.workers)
    mean = torch.tensor(MEAN, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32).view(1, 3, 1, 1)
    t0, n = time.perf_counter(), 0
    for images, _labels in dl:
        images = ((images.float() - mean) / std).half()
        n += len(images)
    rate = n / (time.perf_counter() - t0)
    downloaded = sum(f.stat().st_size for f in Path(cache).rglob("*.mds"))
    return rate, downloaded


def plain_get_rate(endpoint, key, size, request=8 << 20, in_flight=16):
    """MB/s of the whole object read with boto3 range GETs of `request` bytes, `in_flight` at a
    time, through `endpoint`: what this server path gives at best (the bandwidth bound)."""
    import concurrent.futures as cf

    import boto3
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    ranges = [(a, min(a + request, size) - 1) for a in range(0, size, request)]
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(in_flight) as ex:
        got = sum(ex.map(lambda r: len(client.get_object(Bucket="bench", Key=key, Range=f"bytes={r[0]}-{r[1]}")
                                       ["Body"].read()), ranges))
    return got / 1e6 / (time.perf_counter() - t0)


def needed_bytes(path):
    """Bytes an epoch of every sample needs: payload spans plus the metadata."""
    ds = beton.open(path)
    plan = ds.explain("true")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(24), dtype=[("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"),
                                                  ("num_samples", "<u8"), ("alloc_table_ptr", "<u8")])[0]
    table_end = plan.scan["row_major"] + 24 + 1088 * int(header["num_fields"])
    return plan.total["bytes"] + table_end + (size - int(header["alloc_table_ptr"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--size", type=int, default=160)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--order", choices=["random", "quasi-random"], default="random")
    p.add_argument("--out", default=str(REPO / "target" / "bench-data"))
    p.add_argument("--server", choices=["moto", "static"], default="moto",
                   help="moto behind the latency proxy, or s3_local.StaticS3 (sendfile, the latency built in)")
    p.add_argument("--streaming", action="store_true",
                   help="also an epoch of MosaicML Streaming (MDS shards of the same JPEG bytes) each round")
    a = p.parse_args()
    print(machine())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"remote-{Path(a.dir).name}.beton"
    if not path.exists():
        beton.DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", max_resolution=256), "label": IntField()},
                            num_workers=a.workers).from_imagefolder(a.dir)
    size = os.path.getsize(path)
    n = len(beton.open(path))
    print(f"{path}: {n} images, {size / 1e6:.1f} MB; RRC-{a.size}, {a.workers} threads, batch {a.batch_size}, "
          f"{a.order}; {a.latency * 1000:.0f} ms added to every request")

    if a.server == "moto":
        server = Moto()
        client = server.client()
        client.create_bucket(Bucket="bench")
        client.upload_file(str(path), "bench", path.name)
        proxy = FaultProxy(server.url, latency=a.latency, errors=0.0, resets=0.0)
        endpoint = proxy.url
    else:
        # The folder itself is the bucket; the server sleeps the latency itself.
        server, client, proxy = StaticS3(out, bucket="bench", latency=a.latency), None, None
        endpoint = server.url
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                      AWS_ENDPOINT_URL=endpoint)
    url = f"s3://bench/{path.name}"
    need = needed_bytes(path)
    rows = {"local": [], "remote": [], "ratio": [], "fetched": [], "requests": [], "plain": [], "remote_mbs": [],
            "streaming": [], "streaming_bytes": []}
    if a.streaming:
        mds = out / f"mds-{Path(a.dir).name}"
        if not (mds / "index.json").exists():
            write_mds(path, mds)
        mds_key = "mds" if client is not None else mds.name
        if client is not None:
            for f in sorted(mds.iterdir()):
                client.upload_file(str(f), "bench", f"mds/{f.name}")
        os.environ["S3_ENDPOINT_URL"] = endpoint
        mds_bytes = sum(f.stat().st_size for f in mds.glob("*.mds"))
        print(f"MDS: {len(list(mds.glob('*.mds')))} shards, {mds_bytes / 1e6:.1f} MB")
    try:
        for r in range(a.rounds + 1):
            cache = tempfile.mkdtemp(prefix="beton-bench-cache-")
            os.environ["BETON_CACHE_DIR"] = cache
            order = ["local", "remote"] if r % 2 == 0 else ["remote", "local"]
            got = {}
            for which in order:
                got[which] = epoch(str(path) if which == "local" else url, a)
            stats = got["remote"][1].explain("false").remote
            shutil.rmtree(cache, ignore_errors=True)
            streaming = ""
            if a.streaming:
                from streaming.base.util import clean_stale_shared_memory

                clean_stale_shared_memory()
                local = tempfile.mkdtemp(prefix="streaming-cache-")
                s_rate, s_bytes = streaming_epoch(f"s3://bench/{mds_key}", local, a)
                shutil.rmtree(local, ignore_errors=True)
                streaming = (f"; Streaming {s_rate:.0f} img/s (beton remote {got['remote'][0] / s_rate:.2f}x), "
                             f"{s_bytes / 1e6:.1f} MB downloaded")
                if r > 0:
                    rows["streaming"].append(s_rate)
                    rows["streaming_bytes"].append(s_bytes / need)
            plain = plain_get_rate(endpoint, path.name, size)
            remote_mbs = got["remote"][0] * need / n / 1e6
            line = (f"round {r}{' (warm-up)' if r == 0 else ''}: local {got['local'][0]:.0f} img/s, "
                    f"remote {got['remote'][0]:.0f} img/s ({got['remote'][0] / got['local'][0]:.2f}x), "
                    f"{stats['requests']} requests, {stats['bytes'] / 1e6:.1f} MB fetched "
                    f"({stats['bytes'] / need:.3f}x needed); epoch reads {remote_mbs:.0f} MB/s, plain range GETs "
                    f"{plain:.0f} MB/s{streaming}")
            print(line, flush=True)
            if r > 0:
                rows["local"].append(got["local"][0])
                rows["remote"].append(got["remote"][0])
                rows["ratio"].append(got["remote"][0] / got["local"][0])
                rows["fetched"].append(stats["bytes"] / need)
                rows["requests"].append(stats["requests"])
                rows["plain"].append(plain)
                rows["remote_mbs"].append(remote_mbs)
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()

    def span(v, f="{:.0f}"):
        return f"{f.format(statistics.median(v))} ({f.format(min(v))}-{f.format(max(v))})"
    print()
    print("| | images/s, median (min-max) |")
    print("|---|---|")
    print(f"| local file (page cache) | {span(rows['local'])} |")
    print(f"| s3:// through loopback {a.server} + {a.latency * 1000:.0f} ms/request, cold cache | {span(rows['remote'])} |")
    print(f"\nremote / local: {span(rows['ratio'], '{:.2f}')}x; bytes fetched / needed: "
          f"{span(rows['fetched'], '{:.3f}')}x ({need / 1e6:.1f} MB needed); requests per epoch: "
          f"{span(rows['requests'])}")
    print(f"the remote epoch's payload MB/s: {span(rows['remote_mbs'])}; the same server path read with plain "
          f"boto3 range GETs (8 MiB, 16 at once, no decoding): {span(rows['plain'])} MB/s")
    if rows["streaming"]:
        ratios = [b / s for b, s in zip(rows["remote"], rows["streaming"])]
        print(f"MosaicML Streaming, same JPEG bytes in MDS shards through the same server and proxy, cold cache, "
              f"{a.workers} DataLoader workers (PIL decode, torchvision RRC-{a.size} + flip, same normalisation): "
              f"{span(rows['streaming'])} img/s; beton remote / Streaming {span(ratios, '{:.2f}')}x; Streaming "
              f"downloaded {span(rows['streaming_bytes'], '{:.3f}')}x the bytes beton's epoch needs")


if __name__ == "__main__":
    main()
