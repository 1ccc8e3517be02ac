"""JSON and bytes fields, read with BytesDecoder and unpacked with JSONField.unpack. Each row
is compared up to its value's length: past it FFCV leaves whatever the batch buffer held
(beton writes zeros)."""
import json
import os

import numpy as np

from ffcv.fields import BytesField, JSONField
from ffcv.fields.bytes import BytesDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter


def run(tmp):
    path = os.path.join(tmp, "json.beton")
    data = [({"id": i, "tags": ["a"] * (i % 4), "score": i / 8}, np.arange(1 + i % 9, dtype=np.uint8) + i)
            for i in range(40)]
    DatasetWriter(path, {"meta": JSONField(), "raw": BytesField()}, num_workers=2).from_indexed_dataset(data)
    loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL,
                    pipelines={"meta": [BytesDecoder()], "raw": [BytesDecoder()]})
    out = {}
    for b, (meta, raw) in enumerate(loader):
        rows = range(8 * b, 8 * b + len(raw))
        out[f"shapes/{b}"] = np.array([np.array(meta).shape, np.array(raw).shape])
        out[f"raw/{b}"] = np.concatenate([np.array(raw)[k, :len(data[i][1])] for k, i in enumerate(rows)])
        unpacked = JSONField.unpack(meta)
        out[f"unpacked/{b}"] = np.array([json.dumps(v, sort_keys=True) for v in unpacked])
    return out
