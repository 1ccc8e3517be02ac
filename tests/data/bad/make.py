"""Regenerates the bad-file registry (tests/data/bad/*.beton), each file a few KB, from the
small `custom_field` FFCV fixture or from scratch. storage/tests/integration/corrupt.rs
(BAD_FILES) lists the error each must give, on open or on reading its samples. Run from the repo root: python3 tests/data/bad/make.py"""
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


def one_payload(type_id, name, payload, row_ptr_delta=0):
    """One sample of one {ptr, size} field (Bytes 3, JSON 5) on 1 KiB pages: the file opens and
    only reading the sample fails. 3 KB."""
    page = 1024
    table = 24 + 1041
    data_start = -(-(table + 16) // page) * page
    row = struct.pack("<QQ", data_start + row_ptr_delta, len(payload))
    out = header(1, 1, data_start + page, page=page) + descriptor(type_id, name) + row
    out += bytes(data_start - len(out)) + payload.ljust(page, b"\0")
    return out + struct.pack("<QQQ", 0, data_start, len(payload))


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
    "row-pointer-not-allocated.beton": one_payload(3, b"blob", b"hello", row_ptr_delta=1),
    "json-without-nul.beton": one_payload(5, b"meta", b'{"a": 1}'),
}
for name, data in files.items():
    (out / name).write_bytes(data)
    print(name, len(data))
