"""Time of one ``ds[i]`` (a sample's values read into Python), the path a Python training loop
over ``beton.open(...)`` takes per sample. Run it with two builds side by side (each its own
``PYTHONPATH`` or venv) and compare the minima:

    python benches/getitem.py FILE [--reads 2000] [--rounds 5]
"""

import argparse
import time

import beton


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ds = beton.open(args.file)
    n = len(ds)
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for i in range(args.reads):
            ds[i % n]
        times.append((time.perf_counter() - start) / args.reads * 1e6)
    times.sort()
    print(f"{times[0]:.1f} us per ds[i] (min of {args.rounds}x{args.reads}), median {times[len(times) // 2]:.1f}")


if __name__ == "__main__":
    main()
