"""Usage: PY benches/ffcv_writer.py [--rounds R] [--min-seconds S] [--beton-bin PATH] [IMAGEFOLDER ...]
(default folder: examples/data/imagefolder)

PY is the python of the venv holding the real FFCV 1.0.2 (/root/.cache/beton-ffcv-venv/bin/python,
or `PY=$(bash tests/ffcv/ffcv-env.sh | tail -n1)`). Build the CLI first: `cargo build --release
--bin beton`; the binary is taken from --beton-bin, else $CARGO_TARGET_DIR/release/beton, else
target/release/beton.

beton's writer vs FFCV 1.0.2's DatasetWriter, side by side in one run. For each ImageFolder, each
setting (jpg q90 max_resolution 256; raw max_resolution 256) and 1 and 2 workers, writes every
image of the folder (torchvision's ImageFolder rules: JPEG and PNG) as fields image + label:

- FFCV: `DatasetWriter(out, {'image': RGBImageField(...), 'label': IntField()}, num_workers=N)
  .from_indexed_dataset(ds)`, where ds[i] is `(PIL.Image.open(path).convert('RGB'), label)`, as an
  FFCV user writes it; FFCV's time therefore includes PIL's decode. FFCV always re-encodes
  (cv2.imencode) in jpg mode.
- beton: `beton write-imagefolder DIR OUT --mode M --max-resolution 256 --quality 90 --workers N`,
  timed end to end as a process (scan, decode, resize, encode, write, fsync, rename), with the
  defaults (a restart marker every MCU, source JPEGs that need no downscale stored as they are).
  In jpg mode also with `--no-passthrough` (re-encode every JPEG, as FFCV does) and with
  `--restart-interval 0` (no restart markers: FFCV's layout, and beton's writer before
  2026-11-23).

How it is measured, for a shared machine: rounds, each running every writer once in turn (the
order reversed every other round, so a drift in the machine's load falls on both sides); round 0
is a warm-up (page cache, imports, numba) and is discarded. A writer whose warm-up took less than
--min-seconds (default 1) repeats its write in every later round until that much work is done
(the 155 bundled photos take beton well under 0.1 s, where process start-up and fsync would
otherwise be the measurement). Each round gives one ratio per beton variant, FFCV's time over
beton's; the table shows the median of those per-round ratios with their min-max, and the median
images/s. Output files go to a temporary folder under target/ (same disk as the sources).
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image
from ffcv.fields import IntField, RGBImageField
from ffcv.writer import DatasetWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# torchvision's IMG_EXTENSIONS restricted to what both writers decode here.
EXTENSIONS = (".jpg", ".jpeg", ".png")


def image_folder(root):
    """(path, label) pairs by torchvision's ImageFolder rules, as `beton write-imagefolder` scans."""
    root = Path(root)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    samples = []
    for label, cls in enumerate(classes):
        files = sorted(f for f in (root / cls).rglob("*") if f.is_file() and f.suffix.lower() in EXTENSIONS)
        samples += [(f, label) for f in files]
    return samples


class Folder:
    """The indexed dataset an FFCV user hands to DatasetWriter."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        return Image.open(path).convert("RGB"), label


def ffcv_write(samples, out, mode, workers):
    field = RGBImageField(write_mode=mode, max_resolution=256, jpeg_quality=90)
    writer = DatasetWriter(str(out), {"image": field, "label": IntField()}, num_workers=workers)
    with open(os.devnull, "w") as devnull:  # FFCV's tqdm bar
        err, sys.stderr = sys.stderr, devnull
        try:
            writer.from_indexed_dataset(Folder(samples))
        finally:
            sys.stderr = err


def beton_write(beton, root, out, mode, workers, extra=()):
    cmd = [str(beton), "write-imagefolder", str(root), str(out), "--mode", mode, "--max-resolution", "256",
           "--quality", "90", "--workers", str(workers), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(fn, k=1):
    """Seconds per call of `fn`, over `k` calls in a row."""
    t = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t) / k


def spread(xs):
    """`median× (min-max)` of ratios."""
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser(usage=__doc__.splitlines()[0].removeprefix("Usage: "))
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds after the warm-up round")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="work per measurement (repeats short writes)")
    ap.add_argument("--beton-bin")
    a = ap.parse_args()
    roots = a.folders or [str(REPO / "examples" / "data" / "imagefolder")]
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    beton = Path(a.beton_bin) if a.beton_bin else target / "release" / "beton"
    if not beton.exists():
        sys.exit(f"build beton first: cargo build --release --bin beton ({beton} missing)")
    print(machine("ffcv", "pillow", "opencv-python", "numpy"))
    print(f"# beton CLI: {beton}; {a.rounds} interleaved rounds after a warm-up round, each write repeated "
          f"to >= {a.min_seconds:g} s; ratio = FFCV's time / beton's, median of per-round ratios (min-max); "
          f"images/s median")
    variants = {"beton": (), "no-pass": ("--no-passthrough",), "ri0": ("--restart-interval", "0")}
    cols = "  ".join(f"{v + ' img/s':>13} {v + ' / FFCV':>22}" for v in variants)
    print(f"{'folder':<16} {'images':>6} {'setting':<15} {'workers':>7} {'FFCV img/s':>10}  {cols}")
    (REPO / "target").mkdir(exist_ok=True)
    for root in roots:
        samples = image_folder(root)
        n = len(samples)
        with tempfile.TemporaryDirectory(dir=REPO / "target", prefix="ffcv-bench-") as tmp:
            for mode, setting in [("jpg", "jpg q90 max256"), ("raw", "raw max256")]:
                for workers in (1, 2):
                    runs = {"ffcv": lambda: ffcv_write(samples, Path(tmp) / "ffcv.beton", mode, workers)}
                    for v, extra in variants.items():
                        if mode == "jpg" or not extra:
                            runs[v] = (lambda extra=extra, v=v:
                                       beton_write(beton, root, Path(tmp) / f"{v}.beton", mode, workers, extra))
                    # Warm-up round (discarded), which also sets each writer's repeat count.
                    reps = {k: max(1, math.ceil(a.min_seconds / timed(fn))) for k, fn in runs.items()}
                    times = {k: [] for k in runs}
                    for r in range(a.rounds):
                        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
                        for k in order:
                            times[k].append(timed(runs[k], reps[k]))
                    rates = {k: [n / t for t in ts] for k, ts in times.items()}
                    line = (f"{Path(root).name[:16]:<16} {n:>6} {setting:<15} {workers:>7} "
                            f"{statistics.median(rates['ffcv']):>10.0f}")
                    for v in variants:
                        if v in times:
                            ratios = [f / b for f, b in zip(times["ffcv"], times[v])]
                            line += (f"  {statistics.median(rates[v]):>13.0f} "
                                     f"{spread(ratios):>22}")
                        else:
                            line += f"  {'-':>13} {'-':>22}"
                    print(line + "  [writes per measurement: " + ", ".join(f"{k} {r}" for k, r in reps.items())
                          + "]", flush=True)


if __name__ == "__main__":
    main()
