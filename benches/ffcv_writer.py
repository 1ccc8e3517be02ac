"""beton's writer vs FFCV 1.0.2's DatasetWriter, side by side in one run.

Usage (FFCV's python, from the repo root, after `cargo build --release --bin beton`):
    PY=$(bash ../shared/tools/ffcv-env.sh | tail -n1)
    $PY benches/ffcv_writer.py [IMAGEFOLDER ...]      # default: examples/data/imagefolder

For each folder, each setting (jpg q90 max_resolution 256; raw max_resolution 256) and 1 and 2
workers, writes the folder's JPEGs with FFCV (images loaded the way an FFCV user does, with
PIL.Image.open(path).convert('RGB') in the dataset's __getitem__, so FFCV's time includes the
decode) and with `beton write-imagefolder` (same images, same settings), best of 3 runs each, and
prints images/s and the ratio beton / FFCV. The files are written to a temporary folder on the same
disk as the repo.
"""
import os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

from PIL import Image
from ffcv.fields import IntField, RGBImageField
from ffcv.writer import DatasetWriter

REPO = Path(__file__).resolve().parent.parent
BETON = REPO / "target" / "release" / "beton"


def jpeg_folder(root, tmp):
    """A copy of root's class folders holding only its JPEGs (beton and FFCV see the same files)."""
    out = Path(tmp) / "jpegs"
    for cls in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        for f in sorted(cls.rglob("*")):
            if f.suffix.lower() in (".jpg", ".jpeg"):
                dst = out / cls.name / f.name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst)
    classes = sorted(p.name for p in out.iterdir())
    samples = [(f, classes.index(f.parent.name)) for f in sorted(out.rglob("*.jp*g"))]
    return out, samples


class Folder:
    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        return Image.open(path).convert("RGB"), label


def best_of(n, fn):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    roots = sys.argv[1:] or [str(REPO / "examples" / "data" / "imagefolder")]
    if not BETON.exists():
        sys.exit(f"build beton first: cargo build --release --bin beton ({BETON} missing)")
    print(f"{'folder':<14} {'setting':<16} {'workers':>7} {'FFCV img/s':>11} {'beton img/s':>12} {'beton/FFCV':>10}")
    for root in roots:
        with tempfile.TemporaryDirectory(dir=REPO / "target") as tmp:
            folder, samples = jpeg_folder(root, tmp)
            n = len(samples)
            out = Path(tmp) / "out.beton"
            for setting, mode in [("jpg q90 max256", "jpg"), ("raw max256", "raw")]:
                for workers in (1, 2):
                    def ffcv():
                        field = RGBImageField(write_mode=mode, max_resolution=256, jpeg_quality=90)
                        w = DatasetWriter(str(out), {"image": field, "label": IntField()}, num_workers=workers)
                        with open(os.devnull, "w") as devnull:  # FFCV's tqdm bar
                            err, sys.stderr = sys.stderr, devnull
                            try:
                                w.from_indexed_dataset(Folder(samples))
                            finally:
                                sys.stderr = err

                    def beton():
                        subprocess.run([str(BETON), "write-imagefolder", str(folder), str(out), "--mode", mode,
                                        "--max-resolution", "256", "--quality", "90", "--workers", str(workers)],
                                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

                    t_ffcv = best_of(3, ffcv)
                    t_beton = best_of(3, beton)
                    print(f"{Path(root).name[:14]:<14} {setting:<16} {workers:>7} {n / t_ffcv:>11.0f} "
                          f"{n / t_beton:>12.0f} {t_ffcv / t_beton:>9.1f}x", flush=True)


if __name__ == "__main__":
    main()
