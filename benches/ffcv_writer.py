"""Usage: PY benches/ffcv_writer.py [--reps R] [IMAGEFOLDER ...]   (default: examples/data/imagefolder)

PY is the python of the venv holding the real FFCV 1.0.2 (/root/.cache/beton-ffcv-venv/bin/python,
or `PY=$(bash tests/ffcv/ffcv-env.sh | tail -n1)`). Run from anywhere after
`cargo build --release --bin beton`.

beton's writer vs FFCV 1.0.2's DatasetWriter, side by side in one run. For each ImageFolder, each
setting (jpg q90 max_resolution 256; raw max_resolution 256) and 1 and 2 workers, writes every
image of the folder (torchvision's ImageFolder rules: JPEG and PNG) as fields image + label:

- FFCV: `DatasetWriter(out, {'image': RGBImageField(...), 'label': IntField()}, num_workers=N)
  .from_indexed_dataset(ds)`, where ds[i] is `(PIL.Image.open(path).convert('RGB'), label)`, as an
  FFCV user writes it; FFCV's time therefore includes PIL's decode. FFCV always re-encodes
  (cv2.imencode) in jpg mode.
- beton: `target/release/beton write-imagefolder DIR OUT --mode M --max-resolution 256
  --quality 90 --workers N`, timed end to end as a process (scan, decode, resize, encode, write,
  fsync, rename). In jpg mode also with `--no-passthrough` (re-encode every JPEG, as FFCV does;
  by default beton stores a source JPEG that needs no downscale as is).

Runs are interleaved (FFCV, beton, beton --no-passthrough, FFCV, ...) after one untimed warm-up
of each, R times (default 3); the best time of each is kept. Prints images/s and the ratio
beton / FFCV. Output files go to a temporary folder under target/ (same disk as the sources).
"""
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import PIL
from PIL import Image
from ffcv.fields import IntField, RGBImageField
from ffcv.writer import DatasetWriter

REPO = Path(__file__).resolve().parent.parent
BETON = REPO / "target" / "release" / "beton"
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


def beton_write(root, out, mode, workers, passthrough=True):
    cmd = [str(BETON), "write-imagefolder", str(root), str(out), "--mode", mode, "--max-resolution", "256",
           "--quality", "90", "--workers", str(workers)]
    if not passthrough:
        cmd.append("--no-passthrough")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    args = sys.argv[1:]
    reps = 3
    if args[:1] == ["--reps"]:
        reps, args = int(args[1]), args[2:]
    if any(a.startswith("-") for a in args):
        sys.exit(__doc__.splitlines()[0])
    roots = args or [str(REPO / "examples" / "data" / "imagefolder")]
    if not BETON.exists():
        sys.exit(f"build beton first: cargo build --release --bin beton ({BETON} missing)")
    print(f"# {os.cpu_count()} cores; FFCV {importlib.metadata.version('ffcv')}, Pillow {PIL.__version__}; "
          f"best of {reps} interleaved runs after one warm-up; images/s end to end")
    print(f"{'folder':<16} {'images':>6} {'setting':<15} {'workers':>7} {'FFCV img/s':>10} "
          f"{'beton img/s':>11} {'beton/FFCV':>10} {'beton no-pass':>13} {'no-pass/FFCV':>12}")
    for root in roots:
        samples = image_folder(root)
        n = len(samples)
        (REPO / "target").mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=REPO / "target", prefix="ffcv-bench-") as tmp:
            for mode, setting in [("jpg", "jpg q90 max256"), ("raw", "raw max256")]:
                for workers in (1, 2):
                    runs = {
                        "ffcv": lambda: ffcv_write(samples, Path(tmp) / "ffcv.beton", mode, workers),
                        "beton": lambda: beton_write(root, Path(tmp) / "beton.beton", mode, workers),
                    }
                    if mode == "jpg":
                        runs["nopass"] = lambda: beton_write(root, Path(tmp) / "nopass.beton", mode, workers,
                                                             passthrough=False)
                    for fn in runs.values():  # warm-up: page cache, imports, numba
                        fn()
                    best = {k: float("inf") for k in runs}
                    for _ in range(reps):
                        for k, fn in runs.items():
                            best[k] = min(best[k], timed(fn))
                    rate = {k: n / t for k, t in best.items()}
                    nopass = (f"{rate['nopass']:>13.0f} {rate['nopass'] / rate['ffcv']:>11.2f}x"
                              if "nopass" in rate else f"{'-':>13} {'-':>12}")
                    print(f"{Path(root).name[:16]:<16} {n:>6} {setting:<15} {workers:>7} "
                          f"{rate['ffcv']:>10.0f} {rate['beton']:>11.0f} "
                          f"{rate['beton'] / rate['ffcv']:>9.2f}x {nopass}", flush=True)


if __name__ == "__main__":
    main()
