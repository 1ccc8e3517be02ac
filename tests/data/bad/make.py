"""Regenerates the bad-file registry (tests/data/bad/*.beton), each file a few KB, from the
small `custom_field` FFCV fixture or from scratch. tests/storage/corrupt.rs lists the error each
must give. Run from the repo root: python3 tests/data/bad/make.py"""
import gzip, struct
from pathlib import Path

out = Path(__file__).parent
base = gzip.open(out.parent / "ffcv" / "custom_field.beton.gz").read()  # 3363 bytes


def patch(data, at, new):
    data = bytearray(data)
    data[at:at + len(new)] = new
    return bytes(data)


def header(num_fields, num_samples, alloc_ptr, version=2, page=1 << 21):
    return struct.pack("<HHIQQ", version, num_fields, page, num_samples, alloc_ptr)


def descriptor(type_id, name, args=b""):
    return bytes([type_id]) + name.ljust(16, b"\0") + args.ljust(1024, b"\0")


files = {
    "empty.beton": b"",
    "version-1.beton": patch(base, 0, struct.pack("<H", 1)),
    "custom-field-no-layout.beton": base,
    "crashed-ffcv-write.beton": patch(base, 16, struct.pack("<Q", 0)),
    "alloc-table-ptr-zero-no-data.beton": header(1, 5, 0) + descriptor(1, b"label"),
    "name-not-ascii.beton": patch(base, 24 + 1, "é".encode()),
    "ndarray-blob-bad-json.beton": (
        header(1, 0, 24 + 1041)
        + descriptor(4, b"arr", struct.pack("<Q", 4) + bytes(31 * 8) + struct.pack("<Q", 7) + b"[[oops")
    ),
    "extension-bad-slot.beton": (
        header(1, 0, 24 + 1041)
        + descriptor(255, b"caption", b"BETONEXT" + struct.pack("<HHIII", 1, 1, 4, 1, 0))
    ),
}
for name, data in files.items():
    (out / name).write_bytes(data)
    print(name, len(data))
