#!/usr/bin/env bash
# Record asv results for the checked-out commit on the already-installed environment
# (.venv from `make setup`): the fast path for CI and for a box that only measures.
#
#   tools/asv_record.sh [MACHINE] [extra asv run options...]
#
# MACHINE defaults to the stable name tools/asv_machine.py derives plus the sweep size
# (e.g. linux-x86_64-2cpu-nogpu-small): the size (GRADMEM_ASV_SIZE, default small) is
# not in asv's keys, so tiny and small figures under one name would make false steps.
# The environment is `installed` (harness/asv_env.py): named by the Python and package
# versions, not the interpreter's path, so every checkout and machine with the same
# versions records into one series. Other commits: tools/asv_history.py.
set -euo pipefail
cd "$(dirname "$0")/.."
# The first argument is the machine name unless it is an option for asv run.
name=
if [[ $# -gt 0 && $1 != -* ]]; then name=$1; shift; fi
machine=$(.venv/bin/python tools/asv_machine.py ${name:+--machine "$name"} --suffix "${GRADMEM_ASV_SIZE:-small}")
exec .venv/bin/asv run -E "installed:$PWD/.venv/bin/python" --machine "$machine" \
    --set-commit-hash "$(git rev-parse HEAD)" "$@"
