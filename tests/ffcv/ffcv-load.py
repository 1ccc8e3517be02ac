"""Open a .beton with the real FFCV 1.0.2 and print every value as FFCV sees it.

Usage (with the python that ffcv-env.sh prints):
    python ffcv-load.py FILE.beton [--json OUT.json] [--custom NAME=DTYPE ...]

1. FFCV's Reader parses the file; every field of every sample is described as in the fixtures'
   NAME.expected.json (see describe()).
2. FFCV's Loader then iterates the whole file once (num_workers=1, SEQUENTIAL, batch_size=1,
   drop_last=False, default decoders). Image fields whose samples all have one size go through
   SimpleRGBImageDecoder and each sample gets "decoded_sha256" (sha256 of the HWC uint8 pixels);
   image fields of varying sizes are decoded through CenterCropRGBImageDecoder((8, 8), 1.0),
   which proves that FFCV can decode them but records nothing.
Any failure (FFCV's Reader or Loader raising, or a layout FFCV would misread, such as an
allocation table pointer of 0 left by an interrupted write) exits with status 1 and one line on
stderr starting with "ffcv-load: FAIL".

Custom fields (type id 255, written by FFCV for Field classes it does not know): FFCV's Reader maps
type ids through ffcv.types.TYPE_ID_HANDLER, where 255 is None, and refuses the file unless a
custom handler is given for the field's name. The row layout of such a field (its metadata dtype)
is defined by the Field class that wrote it and is not stored in the file, so it has to be given:
    --custom NAME=DTYPE    e.g. --custom boxes='<u8'  or  --custom meta="[('ptr','<u8'),('size','<u8')]"
DTYPE is anything numpy.dtype() accepts, a Python literal for a structured descr included. The field
is then read with a stub Field of that metadata dtype, skipped by the Loader, and each sample's value
is {"metadata_hex": the field's bytes in the row}.

stdout: one summary line. --json OUT.json: {"ffcv_version", "header", "fields", "metadata_row_size",
"metadata_dtype", "alloc_table_entries", "samples"}, with samples in the shape of expected.json.

Copied from the project's shared tools (shared/tools/ffcv-load.py), unchanged; tests/ffcv/check-with-ffcv.sh
runs it on every kind of file beton writes.
"""
import argparse, ast, hashlib, json, struct, sys

import numpy as np

HEADER_SIZE = 24
FIELD_DESC_SIZE = 1041
ALLOC_ENTRY_SIZE = 24


class LayoutError(Exception):
    pass


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def parse_layout(path):
    """Header, descriptors and allocation table straight from the bytes (independent of Reader)."""
    raw = open(path, "rb").read()
    if len(raw) < HEADER_SIZE:
        raise LayoutError(f"file is {len(raw)} bytes, shorter than the {HEADER_SIZE}-byte header")
    version, num_fields, page_size, num_samples, alloc_ptr = struct.unpack_from("<HHIQQ", raw, 0)
    if len(raw) < HEADER_SIZE + FIELD_DESC_SIZE * num_fields:
        raise LayoutError(f"file is {len(raw)} bytes, too short for {num_fields} field descriptors")
    fields = []
    for k in range(num_fields):
        off = HEADER_SIZE + FIELD_DESC_SIZE * k
        type_id = raw[off]
        name = raw[off + 1: off + 17].split(b"\0")[0].decode("ascii")
        args = raw[off + 17: off + FIELD_DESC_SIZE]
        fields.append({"type_id": type_id, "name": name, "arguments_hex": args.rstrip(b"\0").hex(),
                       "arguments_len_nonzero": len(args.rstrip(b"\0"))})
    header = {"version": version, "num_fields": num_fields, "page_size": page_size,
              "num_samples": num_samples, "alloc_table_ptr": alloc_ptr, "file_size": len(raw)}
    if alloc_ptr == 0:
        raise LayoutError("alloc_table_ptr is 0: the writer never finished (interrupted or crashed "
                          "write); FFCV would read the whole file as its allocation table")
    if alloc_ptr > len(raw):
        raise LayoutError(f"alloc_table_ptr {alloc_ptr} is past the end of the file ({len(raw)} bytes)")
    if (len(raw) - alloc_ptr) % ALLOC_ENTRY_SIZE:
        raise LayoutError(f"allocation table ({len(raw) - alloc_ptr} bytes from {alloc_ptr}) is not "
                          f"a whole number of {ALLOC_ENTRY_SIZE}-byte entries")
    return raw, header, fields, (len(raw) - alloc_ptr) // ALLOC_ENTRY_SIZE


def parse_custom(specs):
    """['NAME=DTYPE', ...] -> {NAME: np.dtype}."""
    out = {}
    for spec in specs or []:
        name, sep, text = spec.partition("=")
        if not sep or not name:
            raise LayoutError(f"--custom wants NAME=DTYPE, got {spec!r}")
        try:
            descr = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            descr = text
        out[name] = np.dtype(descr)
    return out


def custom_field_class(dtype):
    """A stub FFCV Field whose rows have `dtype`; enough for FFCV's Reader (and a disabled Loader field)."""
    from ffcv.fields.base import Field

    class CustomStubField(Field):
        metadata_dtype = np.dtype(dtype)

        def __init__(self, arguments=None):
            self.arguments = arguments

        @property
        def metadata_type(self):
            return self.metadata_dtype

        @staticmethod
        def from_binary(binary):
            return CustomStubField(np.array(binary, copy=True))

        def to_binary(self):
            raise NotImplementedError("ffcv-load's stub for a custom field cannot write")

        def encode(self, destination, field, malloc):
            raise NotImplementedError("ffcv-load's stub for a custom field cannot write")

        def get_decoder_class(self):
            raise NotImplementedError("ffcv-load's stub for a custom field has no decoder")

    return CustomStubField


def custom_handlers(path, descs, custom):
    """{name: stub Field class} for every type-255 field; error naming any without a --custom dtype."""
    from ffcv.types import TYPE_ID_HANDLER
    out = {}
    unknown = []
    for d in descs:
        if d["type_id"] not in TYPE_ID_HANDLER:
            raise LayoutError(f"field {d['name']}: type id {d['type_id']} is unknown to FFCV 1.0.2, whose "
                              f"Reader knows 0-6 and 255 (custom) only and cannot open this file")
        if d["name"] in custom:
            out[d["name"]] = custom_field_class(custom[d["name"]])
        elif TYPE_ID_HANDLER.get(d["type_id"], None) is None:
            unknown.append(f"{d['name']} (type id {d['type_id']})")
    if unknown:
        raise LayoutError("custom fields need their metadata dtype, which the file does not store: "
                          + ", ".join(unknown) + "; pass --custom NAME=DTYPE for each")
    return out


def describe(path, custom=None, decoded=None):
    """expected.json's content: header, descriptors and every value of every sample, as FFCV's Reader sees it.

    custom: {field name: numpy dtype} for type-255 fields. decoded: {field name: [sha256 per sample]}
    from load_once(), stored as "decoded_sha256" in that field's image values.
    """
    from ffcv.fields import JSONField
    from ffcv.reader import Reader

    raw, header, descs, n_alloc = parse_layout(path)
    customs = custom_handlers(path, descs, custom or {})
    r = Reader(path, custom_handlers=customs)
    assert int(r.num_samples) == header["num_samples"] and int(r.page_size) == header["page_size"]
    assert len(r.alloc_table) == n_alloc
    if len(r.metadata) != header["num_samples"]:
        raise LayoutError(f"FFCV's Reader found {len(r.metadata)} metadata rows for "
                          f"{header['num_samples']} samples: the file is cut short")
    alloc = {}
    for sid, ptr, size in r.alloc_table.tolist():
        alloc.setdefault(sid, {})[ptr] = size

    def payload(i, name, ptr):
        size = alloc.get(i, {}).get(ptr)
        if size is None:
            raise LayoutError(f"sample {i} field {name}: pointer {ptr} is not in the allocation table")
        if ptr + size > len(raw):
            raise LayoutError(f"sample {i} field {name}: {size} bytes at {ptr} run past the end of the file")
        return size, raw[ptr:ptr + size]

    # Dispatch on the descriptor's type id: FFCV reads JSON (5) back as a plain BytesField and
    # TorchTensor (6) as an NDArrayField, since those classes inherit from_binary().
    handlers = [(d["name"], None if d["name"] in customs else d["type_id"], r.handlers[d["name"]])
                for d in descs]
    assert [n for n, _, _ in handlers] == list(r.handlers), "duplicate field names"
    samples = []
    for i in range(int(r.num_samples)):
        row = r.metadata[i]
        s = {}
        for k, (name, type_id, field) in enumerate(handlers):
            m = row[f"f{k}"]  # FFCV names the data table's columns by position
            if type_id == 1:  # IntField
                s[name] = int(m)
            elif type_id == 0:  # FloatField
                f = float(m)
                s[name] = {"repr": repr(f), "hex": f.hex()}
            elif type_id == 2:  # RGBImageField
                ptr, mode, w, h = int(m["data_ptr"]), int(m["mode"]), int(m["width"]), int(m["height"])
                size, data = payload(i, name, ptr)
                s[name] = {"mode": mode, "width": w, "height": h, "nbytes": size, "payload_sha256": sha(data)}
                if decoded and name in decoded:
                    s[name]["decoded_sha256"] = decoded[name][i]
            elif type_id in (3, 5):  # BytesField, JSONField
                ptr, size = int(m["ptr"]), int(m["size"])
                asize, data = payload(i, name, ptr)
                if asize != size:
                    raise LayoutError(f"sample {i} field {name}: metadata size {size} but "
                                      f"allocation size {asize}")
                if type_id == 5:
                    s[name] = {"nbytes": size, "value": JSONField.unpack(np.frombuffer(data, np.uint8))}
                else:
                    s[name] = {"nbytes": size, "sha256": sha(data)}
            elif type_id in (4, 6):  # NDArrayField, TorchTensorField
                size, data = payload(i, name, int(m))
                s[name] = {"dtype": str(np.dtype(field.dtype)), "shape": [int(x) for x in field.shape],
                           "nbytes": size, "sha256": sha(data)}
            else:  # custom (type 255) field read through the stub
                s[name] = {"metadata_hex": np.ascontiguousarray(m).tobytes().hex()}
        samples.append(s)
    return {"ffcv_version": "1.0.2", "header": header, "fields": descs,
            "metadata_row_size": int(r.metadata.dtype.itemsize),
            "metadata_dtype": str(r.metadata.dtype.descr),
            "alloc_table_entries": n_alloc, "samples": samples}


def load_once(path, custom=None):
    """Iterate the whole file once through FFCV's Loader; {image field: [decoded sha256 per sample]}
    for image fields of one size (see the module docstring)."""
    from ffcv.fields import RGBImageField
    from ffcv.fields.decoders import CenterCropRGBImageDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.reader import Reader

    _, header, descs, _ = parse_layout(path)
    customs = custom_handlers(path, descs, custom or {})
    r = Reader(path, custom_handlers=customs)
    n = int(r.num_samples)
    pipelines, uniform = {}, []
    for k, (name, field) in enumerate(r.handlers.items()):
        if name in customs:
            pipelines[name] = None
        elif isinstance(field, RGBImageField):
            col = r.metadata[f"f{k}"]
            if n and len(set(zip(col["width"].tolist(), col["height"].tolist()))) == 1:
                pipelines[name] = [SimpleRGBImageDecoder()]
                uniform.append(name)
            else:
                pipelines[name] = [CenterCropRGBImageDecoder((8, 8), 1.0)]
    enabled = [name for name in r.handlers if pipelines.get(name, "default") is not None]
    loader = Loader(path, batch_size=1, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines=pipelines, custom_fields=customs)
    decoded = {name: [] for name in uniform}
    seen = 0
    for batch in loader:
        batch = batch if isinstance(batch, (tuple, list)) else (batch,)
        assert len(batch) == len(enabled), (len(batch), enabled)
        for name, out in zip(enabled, batch):
            if name in decoded:
                for img in out:
                    decoded[name].append(sha(np.ascontiguousarray(np.asarray(img)).tobytes()))
        seen += len(batch[0]) if batch else 1
    if seen != n:
        raise LayoutError(f"FFCV's Loader gave {seen} samples, the header says {n}")
    return decoded


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--json", help="write the full description here")
    ap.add_argument("--custom", action="append", metavar="NAME=DTYPE",
                    help="metadata dtype of a custom (type 255) field; repeat per field")
    a = ap.parse_args(argv)
    stage = "reading the layout"
    try:
        custom = parse_custom(a.custom)
        custom_handlers(a.file, parse_layout(a.file)[2], custom)
        stage = "iterating FFCV's Loader"
        decoded = load_once(a.file, custom)
        stage = "reading with FFCV's Reader"
        out = describe(a.file, custom, decoded)
    except Exception as e:  # any failure, FFCV's or ours, is a clear one-line error
        print(f"ffcv-load: FAIL {a.file}: {stage}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    h = out["header"]
    print(f"ffcv-load: ok {a.file}: {h['num_samples']} samples, {h['num_fields']} fields "
          f"({', '.join(d['name'] for d in out['fields'])}), page_size {h['page_size']}, "
          f"row {out['metadata_row_size']} bytes, {out['alloc_table_entries']} allocations; "
          f"FFCV's Loader read every sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
