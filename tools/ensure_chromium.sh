#!/usr/bin/env bash
# Make sure a headless Chromium is installed, for the report's browser test
# (tests/report/test_report_chromium.py). Idempotent: does nothing when one is found.
# Installs Debian's `chromium` package with apt-get when run as root (CI images);
# otherwise says what to run and exits 0, so the browser test skips with its reason.
set -euo pipefail

for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
        exit 0
    fi
done

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure_chromium: no chromium found and not root; run: sudo apt-get install -y chromium" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: no chromium found and no apt-get; install Chromium by hand" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium
