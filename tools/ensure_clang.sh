#!/usr/bin/env bash
# Make sure the `clang` binary is installed, for tinygrad's CPU device: tinygrad builds
# its kernels (and its device's start-up code) by running `$CC` (default `clang`) with
# clang-only flags (--target=x86_64-none-unknown-elf -ffreestanding); gcc rejects them.
# Idempotent: does nothing when $CC or clang is found. Installs Debian's `clang` package
# (14 MB download) with apt-get when run as root (CI images); otherwise says what to run
# and exits 0, so the tinygrad row is `unavailable` with that reason.
set -euo pipefail

if command -v "${CC:-clang}" >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure_clang: no clang found and not root; run: sudo apt-get install -y clang (tinygrad's CPU device needs it)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_clang: no clang found and no apt-get; install clang by hand (tinygrad's CPU device needs it)" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends clang >/dev/null
command -v clang
