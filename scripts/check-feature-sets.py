#!/usr/bin/env python3
"""Fails when a build in scripts/test.sh resolves other features than the workspace's test build.

Cargo unifies a dependency's features per build: `cargo test --workspace` turns on what every
crate and dev-dependency asks for, while `maturin develop` (the Python extension alone) and the
CUDA step (`-p beton-loader --features cuda`) see only their own crates. A dependency whose
features differ is compiled again, with everything above it: one missing `serde/alloc` cost CI
minutes. This compares the feature set of every package the builds share (`cargo tree`, a few
seconds) and names each difference and the crate to pin it in.
"""
import collections
import subprocess
import sys

# (name, cargo tree arguments). The first is the reference every other build must agree with.
BUILDS = [
    ("workspace tests", ["--workspace", "-e", "normal,build,dev"]),
    ("maturin develop (python/Cargo.toml)", ["-p", "beton-python", "-e", "normal,build"]),
    ("CUDA step (loader/Cargo.toml)", ["-p", "beton-loader", "--features", "cuda,beton-storage/remote", "-e", "normal,build,dev"]),
]
# Differences the step exists for: the crate under test with its own feature turned on.
EXPECTED = {"beton-loader": {"cuda"}}


def feature_sets(args):
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-f", "{p}|{f}", "--prefix", "none", *args],
        capture_output=True, text=True, check=True,
    ).stdout
    sets = collections.defaultdict(set)
    for line in out.splitlines():
        if "|" not in line:
            continue
        package, features = line.split("|", 1)
        name_version = " ".join(package.split()[:2])
        sets[name_version].update(f for f in features.replace("(*)", "").strip().split(",") if f)
    return sets


def main():
    reference_name, reference_args = BUILDS[0]
    reference = feature_sets(reference_args)
    failed = False
    for name, args in BUILDS[1:]:
        build = feature_sets(args)
        for package in sorted(build.keys() & reference.keys()):
            extra = build[package] - reference[package] - EXPECTED.get(package.split()[0], set())
            missing = reference[package] - build[package]
            if extra or missing:
                failed = True
                print(f"{name}: {package} differs from {reference_name}: "
                      f"missing {sorted(missing)}, extra {sorted(extra)}", file=sys.stderr)
    if failed:
        print("Name the missing features on a dependency of that build's crate, so both builds "
              "compile the package once (see python/Cargo.toml).", file=sys.stderr)
        return 1
    print(f"feature sets agree across {len(BUILDS)} builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
