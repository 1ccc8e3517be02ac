"""The machine a benchmark ran on, as one line to print at the top of its output.

The benches run on shared, noisy machines; a figure is only worth quoting with the machine,
the load it ran under, the versions measured and the commit they were built from. The Rust
benches print the same line to stderr (`benches/common/machine.rs`).
"""

import datetime
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _first(path, key):
    """The value of the first `key: value` line of a /proc file, or None."""
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == key:
                    return v.strip()
    except OSError:
        pass
    return None


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git():
    try:
        run = lambda *a: subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)  # noqa: E731
        commit = run("rev-parse", "--short", "HEAD").stdout.strip()
        dirty = run("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return commit + (" (with uncommitted changes)" if dirty else "") if commit else "unknown"
    except OSError:
        return "unknown"


def machine(*dists):
    """One line: CPU model, cores, RAM, kernel, load average, python and the versions of the
    distributions `dists` (those not installed are left out; beton always), git commit, UTC time."""
    cpu = _first("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()
    family, model = _first("/proc/cpuinfo", "cpu family"), _first("/proc/cpuinfo", "model")
    if family and model:  # a VM's model name can be as vague as "AMD EPYC"
        cpu += f" (family {family} model {model})"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = _first("/proc/meminfo", "MemTotal")
    ram = f"{int(mem.split()[0]) / 2**20:.1f} GiB RAM" if mem else "RAM unknown"
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    versions = [f"python {platform.python_version()}"]
    for d in ("beton", *dists):
        v = _version(d)
        if v:
            versions.append(f"{d} {v}")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"# machine: {cpu}, {cores} cores, {ram}; {platform.system()} {platform.release()}; "
            f"load {load}; {', '.join(versions)}; git {_git()}; {now}")


if __name__ == "__main__":
    print(machine())
