"""Write ground-truth .beton fixtures with the real FFCV 1.0.2, each with NAME.expected.json.

Usage (with the python that ffcv-env.sh prints):
    python ffcv-fixtures.py OUT_DIR [IMAGES_DIR]
IMAGES_DIR: real pictures (jpg/png), the first 12 in sorted order are downscaled into the photo
fixtures (tests/data/ffcv/README.md lists the scikit-image photos used); without it those are skipped.
FFCV 1.0.2 refuses a dataset of 0 samples; that is recorded in OUT_DIR/empty.refused.txt. Every value in expected.json is read back through FFCV's own Reader, and the
whole file is iterated once through FFCV's Loader (decoded pixels for image fields of one size):
the describing code is describe() and load_once() of ffcv-load.py beside this file, so that
`ffcv-load.py NAME.beton --json X` reproduces the samples of NAME.expected.json. Where the written
values are known they are asserted equal to what FFCV read back. Each NAME.beton is then gzipped.

Copied from the project's shared tools (shared/tools/ffcv-fixtures.py), unchanged but for paths in
this docstring: it made tests/data/ffcv.
"""
import gzip, importlib.util, json, os, shutil, signal, struct, sys

import numpy as np
import torch
from ffcv.fields import (BytesField, FloatField, IntField, JSONField, NDArrayField, RGBImageField,
                         TorchTensorField)
from ffcv.types import TYPE_ID_HANDLER
from ffcv.writer import DatasetWriter

_spec = importlib.util.spec_from_file_location(
    "ffcv_load", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ffcv-load.py"))
ffcv_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ffcv_load)

OUT = sys.argv[1]
IMAGES = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(OUT, exist_ok=True)
sha = ffcv_load.sha
WRITE_TIMEOUT_S = 600  # FFCV's writer spins forever if a worker process dies


class Rows:
    def __init__(self, rows): self.rows = rows
    def __len__(self): return len(self.rows)
    def __getitem__(self, i): return self.rows[i]


def _timeout(signum, frame):
    raise TimeoutError(f"FFCV's DatasetWriter did not finish in {WRITE_TIMEOUT_S} s (a worker died?)")


def make(name, fields, rows, page_size=None, decode=(), check=None, custom=None):
    path = os.path.join(OUT, f"{name}.beton")
    kw = {"num_workers": 1}
    if page_size: kw["page_size"] = page_size
    old = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(WRITE_TIMEOUT_S)
    try:
        DatasetWriter(path, fields, **kw).from_indexed_dataset(Rows(rows))
    except BaseException:
        if os.path.exists(path): os.remove(path)  # no half-written fixture
        raise
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    decoded = ffcv_load.load_once(path, custom)  # FFCV's Loader iterates the whole file once
    for f in decode:  # same-size image fields get FFCV's decoded pixels
        assert f in decoded and len(decoded[f]) == len(rows), (name, f)
    exp = ffcv_load.describe(path, custom, decoded)
    # the descriptors FFCV wrote: the writer's field types and names, in order
    want = {v: k for k, v in TYPE_ID_HANDLER.items()}
    assert [(d["name"], d["type_id"]) for d in exp["fields"]] == \
        [(n, want.get(type(f), 255)) for n, f in fields.items()], name
    assert len(exp["samples"]) == len(rows)
    if check: check(exp, rows)
    with open(os.path.join(OUT, f"{name}.expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
    print(f"{name}: {len(rows)} samples, {os.path.getsize(path)} bytes", flush=True)
    return path


def gzip_all():
    for f in sorted(os.listdir(OUT)):
        if f.endswith(".beton"):
            p = os.path.join(OUT, f)
            with open(p, "rb") as src, gzip.GzipFile(p + ".gz", "wb", mtime=0, compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            os.remove(p)


rng = np.random.default_rng(20261122)

# 1. scalars, with edge values
ints = [0, 1, -1, 2**63 - 1, -2**63, 42] + rng.integers(-10**12, 10**12, 994).tolist()
floats = [0.0, -0.0, 1.5, float("inf"), float("-inf"), 1e-308] + rng.standard_normal(994).tolist()
def check_scalars(exp, rows):
    for s, (a, b) in zip(exp["samples"], rows):
        assert s["label"] == a and s["score"]["hex"] == float(b).hex()
make("scalars", {"label": IntField(), "score": FloatField()}, list(zip(ints, floats)), check=check_scalars)

# 2. raw images of odd sizes and constant colours
sizes = [(1, 1), (7, 3), (1, 1023), (1023, 1), (16, 16), (5, 9)]
raw_rows = [(np.full((h, w, 3), (i * 37) % 256, np.uint8) if i % 2 else
             rng.integers(0, 256, (h, w, 3), dtype=np.uint8),) for i, (h, w) in enumerate(sizes * 4)]
def check_raw(exp, rows):
    for s, (img,) in zip(exp["samples"], rows):
        assert s["image"]["mode"] == 1 and s["image"]["payload_sha256"] == sha(img.tobytes())
make("images_raw", {"image": RGBImageField(write_mode="raw")}, raw_rows, check=check_raw)

# 3. same-size images in every write mode, with FFCV's decoded pixels
def smooth(i, h=48, w=64):
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 4 + i * 9) % 256, (y * 5 + i * 3) % 256, ((x + y) * 2 + i) % 256], -1)
    return base.astype(np.uint8)
uniform = [(smooth(i), i % 10) for i in range(60)]
const = [(np.full((32, 32, 3), c, np.uint8), k) for k, c in enumerate([0, 128, 255, 17, 200])]
for mode, kw in [("jpg", dict(write_mode="jpg", jpeg_quality=90)),
                 ("raw", dict(write_mode="raw")),
                 ("smart", dict(write_mode="smart", smart_threshold=64 * 48 * 3 - 1)),
                 ("proportion", dict(write_mode="proportion", compress_probability=0.5))]:
    np.random.seed(7)  # 'proportion' draws from numpy's global generator
    make(f"uniform_{mode}", {"image": RGBImageField(**kw), "label": IntField()}, uniform, decode=["image"])
make("constant_jpg", {"image": RGBImageField(write_mode="jpg", jpeg_quality=95), "label": IntField()},
     const, decode=["image"])
make("maxres_jpg_q75", {"image": RGBImageField(write_mode="jpg", max_resolution=40, jpeg_quality=75),
                        "label": IntField()}, uniform[:20], decode=["image"])

# 4. real pictures, variable sizes (jpg and raw)
if IMAGES:
    from PIL import Image
    files = sorted(f for f in os.listdir(IMAGES) if f.lower().endswith((".jpg", ".jpeg", ".png")))[:12]
    photos = []
    for k, f in enumerate(files):
        im = Image.open(os.path.join(IMAGES, f)).convert("RGB")
        side = [96, 72, 50, 33][k % 4]
        im.thumbnail((side, side), Image.LANCZOS)
        photos.append((np.asarray(im), k))
    make("photos_jpg", {"image": RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()}, photos)
    make("photos_raw", {"image": RGBImageField(write_mode="raw"), "label": IntField()}, photos)

# 5. bytes and JSON
bj = [(rng.integers(0, 256, int(n), dtype=np.uint8), {"i": i, "name": "é" * (i % 4), "tags": list(range(i % 3)),
       "nested": {"x": i / 4}}) for i, n in enumerate(rng.integers(0, 300, 50))]
def check_bytes_json(exp, rows):
    for s, (blob, meta) in zip(exp["samples"], rows):
        assert s["blob"] == {"nbytes": len(blob), "sha256": sha(blob.tobytes())} and s["meta"]["value"] == meta
make("bytes_json", {"blob": BytesField(), "meta": JSONField()}, bj, check=check_bytes_json)

# 6. ndarrays and tensors
nd = [(rng.integers(0, 256, (4, 4), dtype=np.uint8), rng.integers(-300, 300, (3,), dtype=np.int16),
       rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal(5),
       torch.from_numpy(rng.standard_normal((3, 2)).astype(np.float32))) for _ in range(40)]
def check_nd(exp, rows):
    for s, row in zip(exp["samples"], rows):
        for k, v in zip(["u8", "i16", "f32", "f64", "tensor"], row):
            v = np.ascontiguousarray(v.numpy() if isinstance(v, torch.Tensor) else v)
            assert s[k] == {"dtype": str(v.dtype), "shape": list(v.shape), "nbytes": v.nbytes,
                            "sha256": sha(v.tobytes())}, (k, s[k])
make("ndarrays", {"u8": NDArrayField(np.dtype("uint8"), (4, 4)), "i16": NDArrayField(np.dtype("int16"), (3,)),
                  "f32": NDArrayField(np.dtype("float32"), (2, 3, 4)), "f64": NDArrayField(np.dtype("float64"), (5,)),
                  "tensor": TorchTensorField(torch.float32, (3, 2))}, nd, check=check_nd)

# 7. odd field counts and name lengths (16 characters is the maximum)
make("odd3", {"x": IntField(), "abcdefghijklmnop": FloatField(), "b": BytesField()},
     [(i, i / 7, np.full(i % 5 + 1, i % 256, np.uint8)) for i in range(33)])  # BytesField wants uint8 arrays
make("odd5", {"a": FloatField(), "bb": IntField(), "ccc": JSONField(), "dddd": IntField(), "eeeee": FloatField()},
     [(i * 0.1, -i, {"k": i}, i * i, -i / 3) for i in range(17)])

# 7b. a custom field: FFCV writes type id 255 for a Field class it does not know, with that class's
# to_binary() as the arguments; reading it back needs the class (ffcv-load.py --custom NAME=DTYPE)
from ffcv.fields.base import ARG_TYPE, Field
EXT_DTYPE = np.dtype([("a", "<u4"), ("b", "<u2")])  # 6-byte packed rows
class ExtField(Field):
    metadata_type = EXT_DTYPE
    @staticmethod
    def from_binary(binary): return ExtField()
    def to_binary(self):
        out = np.zeros(1, dtype=ARG_TYPE)[0]
        tag = np.frombuffer(b"ext-args\x01\x02", np.uint8)
        out[0][:len(tag)] = tag
        return out
    def encode(self, destination, field, malloc):
        destination["a"], destination["b"] = field
    def get_decoder_class(self): raise NotImplementedError
def check_custom(exp, rows):
    for s, (label, ab, f) in zip(exp["samples"], rows):
        assert s["label"] == label and s["flag"] == f
        assert s["ext"] == {"metadata_hex": np.array([ab], EXT_DTYPE).tobytes().hex()}, s["ext"]
make("custom_field", {"label": IntField(), "ext": ExtField(), "flag": IntField()},
     [(i, (i * 2654435761 % 2**32, i * 7 % 2**16), -i) for i in range(9)],
     check=check_custom, custom={"ext": EXT_DTYPE})

# 8. zero samples
try:
    make("empty", {"label": IntField(), "score": FloatField()}, [])
except Exception as e:  # recorded in README if FFCV refuses; make() removed the partial file
    print("empty: FFCV refused:", repr(e))
    with open(os.path.join(OUT, "empty.refused.txt"), "w") as f:
        f.write(f"FFCV 1.0.2's DatasetWriter refused a dataset of 0 samples: {e!r}\n")

# 9. page sizes: 2 MiB with >= 16 pages of low-entropy payloads; a 16 MiB page file
big = [(i, np.full(300_000, i % 251, np.uint8)) for i in range(120)]
make("pages_2mib", {"label": IntField(), "blob": BytesField()}, big, page_size=1 << 21)
make("pages_16mib", {"label": IntField(), "blob": BytesField()}, big[:70], page_size=1 << 24)

# 10. a write killed mid-way: what FFCV really leaves on disk when the writer's worker process gets
# SIGKILL while writing sample 15 of 20 (2 MiB pages of 300 000 bytes each, 6 samples a page): the
# header is the one prepare() wrote (alloc_table_ptr = 0, num_samples = 20), the metadata region is
# the zeros written as padding before the first page, the pages flushed so far follow, and there is
# no allocation table. FFCV's main process then waits forever; an alarm stops it.
class KilledAt(Rows):
    def __getitem__(self, i):
        if i == 15: os.kill(os.getpid(), signal.SIGKILL)
        return self.rows[i]
crash_path = os.path.join(OUT, "crashed_write.beton")
WRITE_TIMEOUT_S, saved_timeout = 30, WRITE_TIMEOUT_S
old = signal.signal(signal.SIGALRM, _timeout)
signal.alarm(WRITE_TIMEOUT_S)
try:
    DatasetWriter(crash_path, {"label": IntField(), "blob": BytesField()}, page_size=1 << 21,
                  num_workers=1).from_indexed_dataset(KilledAt(big[:20]))
    raise SystemExit("crashed_write: the writer finished although its worker was killed")
except TimeoutError:
    pass
finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
    WRITE_TIMEOUT_S = saved_timeout
raw_c = open(crash_path, "rb").read()
version, num_fields, page_size, num_samples, alloc_ptr = struct.unpack_from("<HHIQQ", raw_c, 0)
assert alloc_ptr == 0 and num_samples == 20, (alloc_ptr, num_samples)
meta_end = 24 + 2 * 1041 + 20 * 24
assert not any(raw_c[24 + 2 * 1041: meta_end]), "metadata region should be zeros"
try:  # what FFCV's own Reader makes of it
    from ffcv.reader import Reader
    rc = Reader(crash_path)
    reader_view = (f"opens without error: {len(rc.alloc_table)} allocation entries read from offset 0, "
                   f"{len(rc.metadata)} all-zero metadata rows")
except Exception as e:
    reader_view = f"raises {type(e).__name__}: {e}"
with open(os.path.join(OUT, "crashed_write.expected.json"), "w") as f:
    json.dump({"ffcv_version": "1.0.2",
               "how": "DatasetWriter(page_size=2 MiB, num_workers=1) over 20 samples (label: IntField, "
                      "blob: BytesField of 300000 bytes); the worker process got SIGKILL when asked for "
                      "sample 15; the file is left exactly as FFCV left it",
               "header": {"version": version, "num_fields": num_fields, "page_size": page_size,
                          "num_samples": num_samples, "alloc_table_ptr": alloc_ptr, "file_size": len(raw_c)},
               "fields": [
                   {"type_id": raw_c[24 + 1041 * k], "name": raw_c[25 + 1041 * k: 41 + 1041 * k].split(b"\0")[0].decode()}
                   for k in range(num_fields)],
               "pages_written": (len(raw_c) - page_size) // page_size if len(raw_c) > page_size else 0,
               "ffcv_reader": reader_view,
               "expect": "open/verify fail with an error naming the interrupted write (alloc_table_ptr is 0)"},
              f, indent=1, sort_keys=True)
print(f"crashed_write: {len(raw_c)} bytes; FFCV's Reader {reader_view}", flush=True)

gzip_all()
