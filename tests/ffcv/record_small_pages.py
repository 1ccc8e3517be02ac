"""Records what FFCV 1.0.2 reads from files whose page size beton's writer chose (pages under
FFCV's 2 MiB minimum), for ``python/tests/test_small_pages.py``.

Usage (with FFCV's python, ``tests/ffcv/ffcv-env.sh``):
    python record_small_pages.py OUT.json FILE.beton...

For each file: its sha256 and header, every sample as FFCV's ``Reader`` sees it (the label and
the sha256 of each payload), and what FFCV's ``Loader`` gives through its OS cache and through
its process cache (``os_cache=False``, which reads whole pages: ``page_size`` bytes at ``page ×
page_size``), in SEQUENTIAL order (batches of 16: labels, and the sha256 and mean of each
sample's decoded image and array) and in QUASI_RANDOM order (the order FFCV draws from its page map, and the same
per-sample hashes). Files are written by the test with beton; the test checks that it wrote these
very bytes (the sha256) before comparing, and with ``BETON_FFCV_PYTHON`` set runs this script
live instead of reading the committed recording.
"""
import hashlib
import json
import sys

import numpy as np


def sha(b):
    return hashlib.sha256(np.ascontiguousarray(b).tobytes() if isinstance(b, np.ndarray) else bytes(b)).hexdigest()


def reader_view(path):
    from ffcv.reader import Reader

    r = Reader(path)
    raw = open(path, "rb").read()
    sizes = {int(p): int(s) for p, s in zip(r.alloc_table["ptr"], r.alloc_table["size"])}
    names = list(r.handlers)
    samples = []
    for row in r.metadata:
        s = {}
        for k, name in enumerate(names):
            m = row[f"f{k}"]
            if name == "label":
                s[name] = int(m)
            else:
                ptr = int(m["data_ptr"]) if m.dtype.names else int(m)
                s[name] = sha(raw[ptr:ptr + sizes[ptr]])
        samples.append(s)
    return {"page_size": int(r.page_size), "num_samples": int(r.num_samples), "fields": names,
            "samples": samples}


def loader_view(path, fields, order, os_cache):
    from ffcv.fields.decoders import IntDecoder, NDArrayDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    decoders = {"label": [IntDecoder()], "image": [SimpleRGBImageDecoder()], "array": [NDArrayDecoder()]}
    pipelines = {name: decoders[name] for name in fields}
    loader = Loader(path, batch_size=16, num_workers=1, order=getattr(OrderOption, order), drop_last=False,
                    os_cache=os_cache, seed=5, pipelines=pipelines)
    batches = []
    for batch in loader:
        out = {}
        for name, value in zip(fields, batch):
            value = np.asarray(value)
            if name == "label":
                out[name] = value.reshape(-1).tolist()
            else:  # JPEG pixels differ by a codec's rounding: their mean is kept too
                out[name] = [[sha(v), float(np.mean(v))] for v in value]
        batches.append(out)
    return batches


def main(argv):
    out, files = argv[0], argv[1:]
    recording = {}
    for path in files:
        view = reader_view(path)
        view["sha256"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
        decoded = [name for name in view["fields"] if name in ("label", "image", "array")]
        for order in ("SEQUENTIAL", "QUASI_RANDOM"):
            for os_cache in (True, False):
                view[f"{order}/os_cache={os_cache}"] = loader_view(path, decoded, order, os_cache)
        recording[path.rsplit("/", 1)[-1]] = view
    with open(out, "w") as f:
        json.dump({"ffcv_version": "1.0.2", "files": recording}, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
