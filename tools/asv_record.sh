#!/usr/bin/env bash
# Record asv results for the checked-out commit on the already-installed environment
# (.venv from `make setup`): the fast path for CI and for a box that only measures.
#
#   tools/asv_record.sh [MACHINE] [extra asv run options...]
#
# MACHINE defaults to the stable name tools/asv_machine.py derives plus the sweep size
# (e.g. linux-x86_64-2cpu-nogpu-small): the size (GRADMEM_ASV_SIZE, default small) is
# not in asv's keys, so tiny and small figures under one name would make false steps. asv names an existing environment after its interpreter
# path, and that name is part of every graph's key, so the interpreter is reached
# through a fixed link (GRADMEM_ASV_PYTHON_LINK, default /tmp/gradmem-asv-venv) that
# does not depend on where the repository is checked out.
set -euo pipefail
cd "$(dirname "$0")/.."
link=${GRADMEM_ASV_PYTHON_LINK:-/tmp/gradmem-asv-venv}
ln -sfn "$PWD/.venv" "$link"
# The first argument is the machine name unless it is an option for asv run.
name=
if [[ $# -gt 0 && $1 != -* ]]; then name=$1; shift; fi
machine=$(.venv/bin/python tools/asv_machine.py ${name:+--machine "$name"} --suffix "${GRADMEM_ASV_SIZE:-small}")
exec .venv/bin/asv run -E "existing:$link/bin/python" --machine "$machine" \
    --set-commit-hash "$(git rev-parse HEAD)" "$@"
