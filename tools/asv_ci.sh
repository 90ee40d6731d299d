#!/usr/bin/env bash
# What CI runs on each push (.github/workflows/asv.yml), one script so that it can be run
# and tested locally: record HEAD, gate it against the nearest recorded ancestor, publish
# the history site with HEAD's comparison page beside it.
#
#   tools/asv_ci.sh [MACHINE] [extra asv run options...]
#
# MACHINE as in tools/asv_record.sh (default: derived, plus the sweep size). Environment:
#   GRADMEM_ASV_SIZE, GRADMEM_ASV_*   what the sweep measures (benchmarks/common.py)
#   GRADMEM_CI_GATE                   options for tools/asv_gate.py (e.g. "--kinds memory")
# Writes out/ci-sweep.jsonl (the sweep's records), out/ci-gate.txt (the gate's verdict) and
# the site (asv.conf.json's html_dir, out/asv-site; comparison page in comparison/).
# Exit 0: recorded, published, nothing worsened (or no ancestor has results on this
# machine yet: this run is the next one's baseline). 1: the gate found a regression; the
# metric and the cell of each are listed (and, on GitHub Actions, annotated), and the site
# is still published. 2: a step could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
export GRADMEM_ASV_SIZE=${GRADMEM_ASV_SIZE:-small}
name=
if [[ $# -gt 0 && $1 != -* ]]; then name=$1; shift; fi
machine=$(.venv/bin/python tools/asv_machine.py ${name:+--machine "$name"} --suffix "$GRADMEM_ASV_SIZE") || exit 2
head=$(git rev-parse HEAD)
mkdir -p out
sweep=${GRADMEM_ASV_RECORDS:-$PWD/out/ci-sweep.jsonl}
[[ -n ${GRADMEM_ASV_RECORDS:-} ]] || rm -f "$sweep"

echo "== record ${head:0:8} on $machine at $GRADMEM_ASV_SIZE"
if ! GRADMEM_ASV_KEEP=$sweep tools/asv_record.sh "$machine" "$@"; then
    echo "error: asv run failed (above); nothing gated or published" >&2
    exit 2
fi

echo "== gate"
baseline=
for commit in $(git rev-list --first-parent "$head~1" 2>/dev/null); do
    if compgen -G "results/$machine/${commit:0:8}-*.json" >/dev/null; then baseline=$commit; break; fi
done
if [[ -z $baseline ]]; then
    echo "gate: no ancestor of ${head:0:8} has results on $machine: nothing to compare" \
         "(first run on this machine; this run is the next one's baseline)" | tee out/ci-gate.txt
    gate=0
else
    # shellcheck disable=SC2086  # GRADMEM_CI_GATE is a list of options
    .venv/bin/python tools/asv_gate.py --machine "$machine" --base "$baseline" ${GRADMEM_CI_GATE:-} 2>&1 \
        | tee out/ci-gate.txt
    gate=${PIPESTATUS[0]}
fi

echo "== publish"
if ! .venv/bin/python tools/asv_site.py publish --comparison "$sweep"; then
    echo "error: publishing the site failed (above)" >&2
    exit 2
fi

if [[ $gate == 1 ]]; then
    echo "== FAILED: figures worse than ${baseline:0:8} on $machine (metric(cell): before -> after):"
    grep '^WORSE' out/ci-gate.txt
    if [[ ${GITHUB_ACTIONS:-} == true ]]; then
        grep '^WORSE' out/ci-gate.txt | sed 's/^/::error title=asv gate (regression)::/'
    fi
fi
exit "$gate"
