"""Every OrderOption over the same file: SEQUENTIAL and RANDOM batch by batch (RANDOM's
permutation comes from the seed), QUASI_RANDOM as the set of samples of each epoch (its
shuffle runs on numba's RNG: the order itself is FFCV's implementation detail)."""
import os

import numpy as np

from ffcv.fields import FloatField, IntField, NDArrayField
from ffcv.fields.basics import FloatDecoder, IntDecoder
from ffcv.fields.ndarray import NDArrayDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter


def run(tmp):
    path = os.path.join(tmp, "orders.beton")
    # Payloads of 100 kB in 2 MiB pages: QUASI_RANDOM shuffles pages (FFCV refuses a one-page file).
    DatasetWriter(path, {"label": IntField(), "value": FloatField(), "blob": NDArrayField(np.dtype("<f4"), (25600,))},
                  num_workers=1, page_size=1 << 21).from_indexed_dataset(
        [(i, i / 4, np.full(25600, i, dtype="<f4")) for i in range(70)])
    out = {}
    for option in (OrderOption.SEQUENTIAL, OrderOption.RANDOM, OrderOption.QUASI_RANDOM):
        loader = Loader(path, batch_size=16, num_workers=1, order=option, seed=5, drop_last=False,
                        os_cache=option != OrderOption.QUASI_RANDOM,
                        pipelines={"label": [IntDecoder()], "value": [FloatDecoder()], "blob": [NDArrayDecoder()]})
        for epoch in range(2):
            labels = []
            for b, (label, value, blob) in enumerate(loader):
                assert (np.array(blob)[:, :3] == np.array(label)).all()
                if option != OrderOption.QUASI_RANDOM:
                    out[f"{option.name}/{epoch}/{b}/label"] = np.array(label)
                    out[f"{option.name}/{epoch}/{b}/value"] = np.array(value)
                labels.append(np.array(label))
            if option == OrderOption.QUASI_RANDOM:
                out[f"{option.name}/{epoch}/sorted"] = np.sort(np.concatenate(labels), axis=0)
                out[f"{option.name}/{epoch}/shapes"] = np.array([x.shape for x in labels])
    return out
