"""The main job in Python: bundled real data to .beton, a query picks the subset, a small model
trains on it with beton's Loader.

1. Fashion-MNIST's test split (../shared/data/fashion-mnist, 10,000 grey 28x28 images, 10 classes;
   the first 3,000 bundled in examples/data/fashion-mnist when ../shared is absent)
   and the bundled ImageFolder (examples/data/imagefolder, 155 photos, 6 classes) are written to
   .beton files with beton.writer.DatasetWriter.
2. SQL picks what to train on (Fashion-MNIST: six classes of clothing; the photos: those at least
   200 px wide), and a seeded, class-stratified 80/20 split of it is stored in the file as the
   named splits `train` and `val`.
3. A small model trains for a few epochs on `train` with beton.loader.Loader (QUASI_RANDOM order,
   the image decoded natively) and is evaluated on `val`: accuracy, images/s, and where the time
   went (waiting for the loader vs computing).
4. Curation on versioned dataset directories: relabel and delete suspects found with SQL, append,
   train on the new version, diff and time travel; and dedup: near-duplicate photos found by
   perceptual hash, shown in a gallery and deleted as one version.

The model is a torch MLP on the CPU (scripts/main-job.sh installs torch into target/py-venv);
where torch is not installed, a softmax regression written in numpy takes its place.

Run: ``bash scripts/main-job.sh`` (builds the package first), or with beton installed:
``python examples/main_job.py [OUT_DIR]``.
"""

from __future__ import annotations

import gzip
import os
import sys
import time

import numpy as np

import beton
from beton.fields import IntField, RGBImageField
from beton.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
from beton.loader import Loader, OrderOption
from beton.transforms import NormalizeImage, RandomHorizontalFlip
from beton.writer import DatasetWriter

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


class Model:
    """Softmax regression / one-hidden-layer MLP on flattened, normalised pixels."""

    def __init__(self, inputs, classes, lr, seed=0):
        self.inputs, self.classes, self.lr = inputs, classes, lr
        try:
            import torch

            torch.manual_seed(seed)
            self.torch = torch
            self.net = torch.nn.Sequential(torch.nn.Linear(inputs, 128), torch.nn.ReLU(),
                                           torch.nn.Linear(128, classes))
            self.opt = torch.optim.SGD(self.net.parameters(), lr=lr, momentum=0.9)
            self.kind = "torch MLP (CPU)"
        except ImportError:
            self.torch = None
            rng = np.random.default_rng(seed)
            self.w = rng.normal(0, 0.01, (inputs, classes)).astype(np.float32)
            self.b = np.zeros(classes, np.float32)
            self.kind = "numpy softmax regression (torch not installed)"

    def step(self, x, y):
        if self.torch is not None:
            t = self.torch
            self.net.train()
            loss = t.nn.functional.cross_entropy(self.net(t.from_numpy(x)), t.from_numpy(y))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return float(loss)
        logits = x @ self.w + self.b
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-9).mean()
        p[np.arange(len(y)), y] -= 1
        self.w -= self.lr * (x.T @ p) / len(y)
        self.b -= self.lr * p.mean(0)
        return float(loss)

    def logits(self, x):
        if self.torch is not None:
            self.net.eval()
            with self.torch.no_grad():
                return self.net(self.torch.from_numpy(x)).numpy()
        return x @ self.w + self.b

    def predict(self, x):
        return self.logits(x).argmax(1)


def train(name, path, pipeline, classes, epochs, batch_size, lr):
    """Trains on split `train`, evaluates on `val`; prints per-epoch loss, images/s and waits."""
    ds = beton.open(path)
    label_of = {old: new for new, old in enumerate(classes)}
    remap = np.vectorize(lambda v: label_of[int(v)], otypes=[np.int64])

    def flat(images):
        return np.ascontiguousarray(images.reshape(len(images), -1), dtype=np.float32)

    others = {f: None for f in ds.schema if f not in ("image", "label")}  # e.g. columns curation added
    # Labels as (B,) for the loss (IntDecoder's default is FFCV's (B, 1)).
    label = [IntDecoder(flat=True)]
    train_loader = Loader(path, batch_size=batch_size, order=OrderOption.QUASI_RANDOM, seed=0, num_workers=-1,
                          indices=ds.split("train"), pipelines={"image": pipeline(True), "label": label, **others},
                          drop_last=False)
    val_loader = Loader(path, batch_size=256, indices=ds.split("val"),
                        pipelines={"image": pipeline(False), "label": label, **others}, drop_last=False)
    model = None
    print(f"\n== {name}: {len(ds.split('train'))} training / {len(ds.split('val'))} validation images, "
          f"{len(classes)} classes")
    for epoch in range(epochs):
        t0 = time.perf_counter()
        compute, seen, losses = 0.0, 0, []
        for images, labels in train_loader:
            x, y = flat(images), remap(labels)
            if model is None:
                model = Model(x.shape[1], len(classes), lr)
                print(f"model: {model.kind}, input {images.shape[1:]} -> {x.shape[1]} features")
            c0 = time.perf_counter()
            losses.append(model.step(x, y))
            compute += time.perf_counter() - c0
            seen += len(labels)
        wall = time.perf_counter() - t0
        stats = train_loader.stats()
        print(f"epoch {epoch}: loss {np.mean(losses):.3f}, {seen / wall:,.0f} images/s; of {wall:.2f} s: "
              f"training {compute:.2f} s, waiting for batches {stats['consumer_wait_s']:.2f} s, the rest "
              f"Python glue; loader threads busy {stats['worker_busy_s']:.2f} s")
    correct = total = 0
    for images, labels in val_loader:
        correct += int((model.predict(flat(images)) == remap(labels)).sum())
        total += len(labels)
    print(f"validation accuracy: {correct / total:.1%} ({correct}/{total})")
    return model


def main(out):
    os.makedirs(out, exist_ok=True)
    mean, std = np.array([0.5, 0.5, 0.5]) * 255, np.array([0.25, 0.25, 0.25]) * 255

    # 1. Fashion-MNIST test split -> .beton (raw 28x28 grey stored as RGB raw: FFCV's own format)
    # The whole test split when ../shared is beside the repo, else the bundled first 3,000.
    shared = os.path.join(HERE, "..", "..", "shared", "data", "fashion-mnist")
    if os.path.exists(os.path.join(shared, "t10k-images-idx3-ubyte.gz")):
        images = read_idx(os.path.join(shared, "t10k-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(shared, "t10k-labels-idx1-ubyte.gz"))
    else:
        images = read_idx(os.path.join(HERE, "data/fashion-mnist/t10k-3000-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(HERE, "data/fashion-mnist/t10k-3000-labels-idx1-ubyte.gz"))
    fm = os.path.join(out, "fashion-mnist.beton")
    t0 = time.perf_counter()
    DatasetWriter(fm, {"image": RGBImageField(), "label": IntField()}, progress=False).from_indexed_dataset(
        [(np.repeat(images[i][:, :, None], 3, axis=2), int(labels[i])) for i in range(len(labels))])
    ds = beton.open(fm)
    print(f"wrote {fm}: {len(ds)} samples in {time.perf_counter() - t0:.2f} s")

    # 2. A query picks the subset; a stratified split of it is stored in the file.
    clothes = [0, 1, 2, 3, 4, 6]  # tops, trousers, pullovers, dresses, coats, shirts: no shoes or bags
    subset = ds.where(f"label IN ({', '.join(map(str, clothes))})")
    counts = ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label").to_pydict()
    print("classes:", ", ".join(f"{FASHION[k]} {n}" for k, n in zip(counts["label"], counts["n"])))
    keys = [int(v) for v in ds.table(["label"]).column("label").to_numpy()[np.array(subset.tolist())]] \
        if _has_pyarrow() else [int(labels[i]) for i in subset.tolist()]
    tr, va = subset.stratified_split(keys, [0.8, 0.2], seed=0)
    ds.save_splits(train=tr, val=va)
    print(f"query {len(subset)} clothing images -> stored splits {sorted(ds.splits())}")
    fm_pipeline = (lambda training: [CenterCropRGBImageDecoder((28, 28), ratio=1.0),
                                     *([RandomHorizontalFlip()] if training else []),
                                     NormalizeImage(mean, std, np.float32)])
    model = train("Fashion-MNIST, clothing only", fm, fm_pipeline, clothes, epochs=4, batch_size=128, lr=0.01)
    curate(out, fm, model, fm_pipeline, clothes, images, labels)

    # 3. The ImageFolder photos -> .beton (JPEG q90, at most 256 px), wide photos only.
    pf = os.path.join(out, "photos.beton")
    t0 = time.perf_counter()
    report = DatasetWriter(pf, {"image": RGBImageField(write_mode="jpg", max_resolution=256), "label": IntField()},
                           progress=False).from_imagefolder(os.path.join(HERE, "data/imagefolder"))
    print(f"\nwrote {pf}: {report['num_samples']} photos of {report['classes']} in {time.perf_counter() - t0:.2f} s")
    photos = beton.open(pf)
    wide = photos.where("image.width >= 200")
    keys = [photos[i]["label"] for i in wide.tolist()]
    tr, va = wide.stratified_split(keys, [0.8, 0.2], seed=0)
    photos.save_splits(train=tr, val=va)
    print(f"query image.width >= 200: {len(wide)} of {len(photos)} photos")
    train("bundled photos (RRC 64 px)", pf,
          lambda training: [RandomResizedCropRGBImageDecoder((64, 64)) if training
                            else CenterCropRGBImageDecoder((64, 64)),
                            *([RandomHorizontalFlip()] if training else []),
                            NormalizeImage(mean, std, np.float32)],
          list(range(len(report["classes"]))), epochs=3, batch_size=16, lr=0.0005)
    dedup(out, pf)


def dedup(out, pf):
    """Near-duplicates of the photos: a second scrape brings 10 of them again, re-encoded at
    quality 70 and smaller; their perceptual hashes find them, a gallery shows each group, and
    one commit deletes all but the largest image of each (``restore`` would undo it)."""
    import shutil

    print("\n== dedup: near-duplicate photos ==")
    d = os.path.join(out, "photos.dataset")
    shutil.rmtree(d, ignore_errors=True)
    ds = beton.import_file(d, pf)
    again = [(ds[i]["image"][::2, ::2].copy(), ds[i]["label"]) for i in range(0, 100, 10)]
    DatasetWriter(d + os.sep, {"image": RGBImageField(write_mode="jpg", jpeg_quality=70), "label": IntField()},
                  progress=False).from_indexed_dataset(again)
    ds = beton.open(d)
    t0 = time.perf_counter()
    groups = ds.near_duplicates(by="image")  # pHash from the 1/8-scale decode, within 8 bits
    print(f"{len(ds)} photos: {groups.num_groups} groups of near-duplicates, {len(groups)} photos, "
          f"in {time.perf_counter() - t0:.2f} s")
    page = os.path.join(out, "duplicates.html")
    ds.gallery(groups, size=96, summaries=False, title="near-duplicate photos").save(page)
    print(f"wrote {page}: one line per group, each photo with its pHash distance")
    ds.delete(groups.extras(keep="largest"), message="dedup: keep the largest photo of each group")
    print(f"version {ds.version}: {len(ds)} photos, {ds.near_duplicates(by='image').num_groups} groups left; "
          f"ds.restore({ds.version - 1}) undoes it")


def curate(out, fm, model, pipeline, clothes, images, labels):
    """A curation session on a versioned dataset directory: find suspect samples with SQL,
    relabel some on a branch (reviewed with its diff and a gallery, then merged), delete some,
    add a score column, append new images, train again on the new version, print the log and
    the diff, then travel back in time."""
    import shutil

    print("\n== curation: a versioned dataset directory ==")
    d = os.path.join(out, "fashion-mnist.dataset")
    shutil.rmtree(d, ignore_errors=True)
    ds = beton.import_file(d, fm)  # version 1: the file, hard-linked; its splits move in
    # The model's prediction and confidence for every sample, as two new columns.
    loader = Loader(ds, batch_size=512, pipelines={"image": pipeline(False)}, drop_last=False)
    preds, conf = [], []
    for batch_images, _ in loader:
        x = np.ascontiguousarray(batch_images.reshape(len(batch_images), -1), dtype=np.float32)
        logits = model.logits(x)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        preds.append(np.asarray(clothes)[p.argmax(1)])
        conf.append(p.max(1))
    ds.add_column("pred", np.concatenate(preds).astype(np.int64), message="model predictions")
    ds.add_column("score", np.concatenate(conf).astype(np.float64), message="model confidence")
    suspects = ds.where("label IN (0, 1, 2, 3, 4, 6) AND label != pred AND score > 0.9")
    print(f"suspects (confidently misclassified clothing): {len(suspects)}")
    fix = suspects.tolist()[:5]
    # The relabel goes on a branch, is reviewed there (diff and gallery), then merged into main.
    review = ds.branch("relabel-suspects")
    review.update_rows(fix, {"label": [int(v) for v in ds.table(["pred"]).column("pred").to_numpy()[fix]]},
                       message="relabel 5 suspects")
    changed = ds.diff("main", "relabel-suspects")["changed"].get("label", [])
    page = os.path.join(out, "relabel-review.html")
    ds.gallery(diff=("main", "relabel-suspects"), size=64, summaries=False).save(page)
    print(f"branch relabel-suspects: {len(changed)} labels changed; review page {page}")
    report = ds.merge("relabel-suspects", message="merge the reviewed relabels")
    print(f"merged into main as version {report['version']}: {report['cells_set']} cells set, "
          f"{len(report['resolved'])} conflicts")
    drop = suspects.tolist()[5:8]
    ds.delete(beton.IndexSet(drop), message="drop 3 suspects")
    # 20 new images: mirrored copies of the first clothing images, written into the directory.
    new = [(np.repeat(images[i][:, ::-1, None], 3, axis=2), int(labels[i]))
           for i in range(len(labels)) if int(labels[i]) in clothes][:20]
    DatasetWriter(d + os.sep, {"image": RGBImageField(), "label": IntField()},
                  progress=False).from_indexed_dataset(new)
    ds = beton.open(d)
    appended = beton.IndexSet(list(range(len(ds) - len(new), len(ds))))
    ds.save_splits(train=ds.split("train") | appended)
    print(f"version {ds.version}: {len(ds)} samples in {ds.versions()[-1]['data_files']} data files")
    for v in ds.versions():
        print(f"  version {v['version']:2}  {v['operation']:<12} {v['num_rows']:6} rows  {v['message']}")
    diff = ds.diff(1, ds.version)
    print(f"diff 1 -> {ds.version}: {len(diff['added'])} rows added, {len(diff['deleted'])} deleted, "
          f"columns added {diff['added_columns']}, label changed in {len(diff['changed'].get('label', []))} rows")
    train(f"Fashion-MNIST, version {ds.version} of the dataset", d, pipeline, clothes, epochs=2, batch_size=128,
          lr=0.01)
    first = beton.open(d, version=1)
    print(f"time travel: version 1 has {len(first)} samples, version {ds.version} has {len(ds)}")


def _has_pyarrow():
    try:
        import pyarrow  # noqa: F401

        return True
    except ImportError:
        return False


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("target", "beton-main-job"))
