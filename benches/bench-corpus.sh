#!/usr/bin/env bash
# bench-corpus.sh - make a deterministic, ImageNet-shaped benchmark ImageFolder.
#
# Usage: benches/bench-corpus.sh OUT_DIR [N=3000] [CLASSES=5] [SEED=0]
#
# Produces OUT_DIR/class_K/NNNNN.jpg: N baseline JPEGs (RGB, 4:2:0, quality 88-92)
# spread round-robin over CLASSES folders (class_0 .. class_{CLASSES-1}; zero-padded
# when CLASSES > 10 so that names sort numerically). NNNNN is the global image index.
# Each image is a random crop (random scale 8-100% of the photo area, random aspect)
# of one of the photos under $BETON_BENCH_PHOTOS (default: the bundled examples/data/imagefolder), to
# a typical ImageNet training size: long side 500 most of the time (500x375, 500x333,
# 375x500, ...; short side mostly 333-500), sometimes smaller (long side 160-499),
# randomly flipped, brightness-jittered (x0.85-1.15) and given mild seeded noise
# (+-4 levels) so that all images differ. Class K draws from its own subset of the
# photos, so labels are learnable. Files average ~38 KB (smoother than ImageNet's
# ~110 KB camera JPEGs). Defaults: ~114 MB, ~20 s on 2 cores.
# Same arguments (and same Pillow/libjpeg version) -> byte-identical output.
# Needs python3 (or $PYTHON) with Pillow, installed with pip if missing; uses all
# CPU cores. Prints one summary line: count, total MB, mean width x height, time.
# OUT_DIR must not exist or must be empty.
# The figures in benches/README.md come from corpora of the project's 28-photo set
# (BETON_BENCH_PHOTOS=DIR of those photos; not bundled): the bundled photos give the same shape.
# Copied from the project's shared tools (shared/tools/bench-corpus.sh), with the photos folder
# made a setting and walked recursively (a flat folder gives the same list as before).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 4 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
OUT_DIR=$1
N=${2:-3000}
CLASSES=${3:-5}
SEED=${4:-0}
PHOTOS="$(cd "${BETON_BENCH_PHOTOS:-$(dirname "$0")/../examples/data/imagefolder}" && pwd)"
PY=${PYTHON:-python3}

if ! "$PY" -c 'import PIL' 2>/dev/null; then
  echo "bench-corpus: installing Pillow" >&2
  "$PY" -m pip install --quiet pillow
fi

exec "$PY" - "$OUT_DIR" "$N" "$CLASSES" "$SEED" "$PHOTOS" <<'PY'
import os, sys, time, random, multiprocessing as mp
from PIL import Image, ImageChops

out_dir, n, classes, seed, photos_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if n < 1 or classes < 1:
    sys.exit("bench-corpus: N and CLASSES must be >= 1")
if os.path.isdir(out_dir) and os.listdir(out_dir):
    sys.exit(f"bench-corpus: {out_dir} is not empty; remove it or pick another OUT_DIR")
# Every image under photos_dir, by relative path (a flat folder lists just its file names).
photos = sorted(os.path.relpath(os.path.join(d, f), photos_dir) for d, _, fs in os.walk(photos_dir)
                for f in fs if f.lower().endswith(('.jpg', '.jpeg', '.png')))
if not photos:
    sys.exit(f"bench-corpus: no photos in {photos_dir}")
cw = max(1, len(str(classes - 1))) if classes > 10 else 1
iw = max(5, len(str(n - 1)))
class_dirs = [f"class_{k:0{cw}d}" for k in range(classes)]
for d in class_dirs:
    os.makedirs(os.path.join(out_dir, d), exist_ok=True)
# photo subsets per class (all photos when there are more classes than photos)
subsets = [[p for j, p in enumerate(photos) if j % classes == k] or photos for k in range(classes)]

# typical ImageNet aspect ratios (long/short) and their weights
ASPECTS = [(4 / 3, 45), (3 / 2, 30), (1.0, 6), (5 / 4, 5), (16 / 9, 4), (None, 10)]
_cache = {}
NOISE = 4
NOISE_LUT = [v * (2 * NOISE + 1) // 256 for v in range(256)] * 3

def photo(name):
    im = _cache.get(name)
    if im is None:
        im = Image.open(os.path.join(photos_dir, name))
        im = im.convert('RGB')
        _cache[name] = im
    return im

def make(i):
    rng = random.Random(f"bench-corpus/{seed}/{i}")
    k = i % classes
    src = photo(rng.choice(subsets[k]))
    # target size
    a = rng.choices([x for x, _ in ASPECTS], [w for _, w in ASPECTS])[0]
    if a is None:
        a = rng.uniform(1.1, 2.2)
    long_side = 500 if rng.random() < 0.8 else rng.randint(160, 499)
    short_side = max(16, round(long_side / a))
    W, H = (long_side, short_side) if rng.random() < 0.78 else (short_side, long_side)
    # random crop with the target aspect (+-10%) and 8-100% of the photo area
    sw, sh = src.size
    ar = (W / H) * rng.uniform(0.9, 1.1)
    # prefer crops at least ~as large as the output (downscaling keeps detail, as
    # in real camera photos); small photos get the whole range and are upscaled
    lo = min(1.0, max(0.08, 0.7 * W * H / (sw * sh)))
    for _ in range(10):
        area = sw * sh * rng.uniform(lo, 1.0)
        cw_ = round((area * ar) ** 0.5)
        ch_ = round((area / ar) ** 0.5)
        if cw_ <= sw and ch_ <= sh:
            break
    else:  # fall back to the largest crop of that aspect
        cw_, ch_ = (sw, round(sw / ar)) if sw / sh < ar else (round(sh * ar), sh)
    cw_, ch_ = max(1, min(cw_, sw)), max(1, min(ch_, sh))
    x = rng.randint(0, sw - cw_)
    y = rng.randint(0, sh - ch_)
    im = src.resize((W, H), Image.BICUBIC, box=(x, y, x + cw_, y + ch_), reducing_gap=2.0)
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    f = rng.uniform(0.85, 1.15)
    im = im.point([min(255, round(v * f)) for v in range(256)] * 3)
    # mild seeded sensor-like noise (+-NOISE levels per channel) so that file sizes
    # and entropy-decoding cost resemble camera JPEGs rather than smooth upscales
    noise = Image.frombytes('RGB', (W, H), rng.randbytes(W * H * 3)).point(NOISE_LUT)
    im = ImageChops.add(im, noise, 1.0, -NOISE)
    path = os.path.join(out_dir, class_dirs[k], f"{i:0{iw}d}.jpg")
    im.save(path, 'JPEG', quality=rng.randint(88, 92), subsampling=2, optimize=False)
    return W, H, os.path.getsize(path)

if __name__ == '__main__':
    t0 = time.time()
    for name in photos:  # decode once in the parent; forked workers share it
        photo(name)
    procs = os.cpu_count() or 1
    ctx = mp.get_context('fork')
    with ctx.Pool(procs) as pool:
        res = pool.map(make, range(n), chunksize=max(1, min(64, n // (procs * 8) or 1)))
    tot = sum(r[2] for r in res)
    mw = sum(r[0] for r in res) / n
    mh = sum(r[1] for r in res) / n
    print(f"bench-corpus: {n} JPEGs in {classes} classes under {out_dir}: {tot / 1e6:.1f} MB, "
          f"mean {mw:.0f}x{mh:.0f} px, seed {seed}, {time.time() - t0:.1f}s on {procs} cores")
PY
