#!/usr/bin/env bash
# Installs what building beton needs on a fresh Debian/Ubuntu machine: a C toolchain, cmake and
# nasm (libjpeg-turbo is compiled from source by the turbojpeg crate and linked statically), and
# checks for a Rust toolchain (rust-toolchain.toml pins the version; rustup fetches it).
# Idempotent and quiet when everything is there.
set -euo pipefail
need=()
# `script` (util-linux, Debian's bsdutils) runs the CLI on a pseudo-terminal in tests/cli/progress.rs.
for tool in cmake nasm cc pkg-config script; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  pkgs=()
  for tool in "${need[@]}"; do
    case "$tool" in cc) pkgs+=(build-essential) ;; script) pkgs+=(bsdutils) ;; *) pkgs+=("$tool") ;; esac
  done
  echo "[setup] installing ${pkgs[*]} (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >&2
fi
# Python 3 with venv (the Python package is built into target/py-venv by maturin).
if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  echo "[setup] installing python3-venv python3-pip (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 python3-venv python3-pip >&2
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "[setup] cargo not found: install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version" >&2
  exit 1
fi
