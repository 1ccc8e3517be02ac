"""Run by test_ddp.py under torchrun: each rank iterates RANDOM and QUASI_RANDOM epochs with
distributed=True and writes the ids it read to OUT_DIR/rank{r}-{order}-{epoch}.txt."""

import os
import sys

import torch.distributed as dist

from beton.loader import Loader, OrderOption


def main(path, out_dir):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for order in (OrderOption.RANDOM, OrderOption.QUASI_RANDOM):
        loader = Loader(path, batch_size=16, order=order, distributed=True, seed=7, drop_last=False,
                        pipelines={"blob": None, "meta": None, "name": None, "arr": None, "score": None, "image": None})
        for epoch in range(2):
            ids = [int(i) for (label,) in loader for i in label]
            with open(os.path.join(out_dir, f"rank{rank}-{order.name.lower()}-{epoch}.txt"), "w") as f:
                f.write(" ".join(map(str, ids)))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
