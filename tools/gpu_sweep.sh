#!/usr/bin/env bash
# The CUDA comparison on a machine with an NVIDIA GPU, run with the frameworks that
# machine already has (its own CUDA builds of torch, JAX, CuPy, ...):
#
#   tools/gpu_sweep.sh [--budget SECONDS] [--resume] [OUT_DIR]     # default out/gpu
#
# 1. installs gradmem, without its dependencies, into a directory of its own
#    (GRADMEM_HOST_SITE, default build/host-site) with the host's Python ($PYTHON,
#    default python3, 3.11 or newer). Nothing is installed into, upgraded in or removed
#    from the host's environment: its frameworks are what runs, and each record carries
#    their exact versions (and torch's CUDA/cuDNN build, JAX's device kind);
# 2. runs the CUDA sweep: every built-in workload x every framework, eager and
#    compiled, sizes small then paper -> OUT_DIR/cuda.jsonl (a framework the host lacks,
#    TensorFlow on most GPU images, is an `unavailable` record with the reason; a cell
#    that fails is a record with its status, and the sweep goes on). Memory passes run
#    side by side (a CUDA one only once NVML is seen to answer per process), each time
#    pass measures alone (harness run --schedule parallel; docs/gpu.md);
# 3. writes the comparison page OUT_DIR/report/index.html (opens from disk).
#
# --budget SECONDS: the whole script (install, sweep, page) within SECONDS of wall
# time: the sweep gets what is left after the install, less REPORT_RESERVE_S for the
# page; it runs every workload at small in every row, eager, then compiled, then paper,
# prints at its start what it expects to fit, starts a cell only if it is expected to
# end in time, and says how many cells are left (harness run --budget). --resume goes
# on where a previous call into the same OUT_DIR stopped (harness run --resume): run
# it again, with a budget, until it says nothing is left.
#
# GRADMEM_GPU_SWEEP_ARGS replaces the sweep's selection (default
# "--size small,paper --mode eager,compiled"), e.g. "--size small --framework torch".
# Each call writes where its time went, pass by pass, to OUT_DIR/schedule-N.jsonl.
# Without an NVIDIA GPU it stops with exit 2 (GRADMEM_ALLOW_NO_GPU=1 runs anyway: every
# cell is then `unavailable`, which is how the tests exercise this script on CPU hosts).
# docs/gpu.md says what the figures mean and how to add them to the asv history.
set -euo pipefail
started=$SECONDS
repo=$(cd "$(dirname "$0")/.." && pwd)
budget= resume= out=
die() { echo "gpu_sweep: $*" >&2; exit 2; }
while (($#)); do
    case $1 in
        --budget) (($# >= 2)) || die "--budget needs a number of seconds"; budget=$2; shift 2 ;;
        --budget=*) budget=${1#--budget=}; shift ;;
        --resume) resume=--resume; shift ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        -*) die "unknown option '$1' (valid: --budget SECONDS, --resume, OUT_DIR)" ;;
        *) [[ -z $out ]] || die "one OUT_DIR only (got '$out' and '$1')"; out=$1; shift ;;
    esac
done
if [[ -n $budget ]] && ! [[ $budget =~ ^[0-9]+([.][0-9]+)?$ && $budget != 0 && $budget != 0.0 ]]; then
    die "--budget '$budget': a positive number of seconds, e.g. --budget 480"
fi
out=${out:-out/gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
site=${GRADMEM_HOST_SITE:-$repo/build/host-site}
selection=${GRADMEM_GPU_SWEEP_ARGS:---size small,paper --mode eager,compiled}
# seconds kept back from the sweep for writing the page (a few seconds for ~100 records)
REPORT_RESERVE_S=${REPORT_RESERVE_S:-10}

command -v "$python" >/dev/null 2>&1 || die "no Python at '$python' (set PYTHON=/path/to/python3)"
# an absolute path (not resolved: a venv's python is a link that must stay one), since
# the commands below run from OUT_DIR
[[ $python == */* ]] && python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$("$python" -V 2>&1) is too old: gradmem needs Python 3.11 or newer"
"$python" -c 'import numpy' 2>/dev/null \
    || die "the host Python ($python) has no NumPy, which gradmem needs: $python -m pip install numpy"
if [[ -z ${GRADMEM_ALLOW_NO_GPU:-} ]] && ! compgen -G '/dev/nvidia[0-9]*' >/dev/null \
    && ! compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null; then
    die "no NVIDIA GPU here (no /dev/nvidia* device node): this script measures CUDA cells; for CPU figures run 'make run'"
fi

# gradmem alone, as a real install (its own wheel build), into its own directory, anew
# each call (a few seconds). --no-build-isolation first: a GPU host is often offline and
# has setuptools; else pip builds in isolation, which needs the package index.
rm -rf "$site"
install=("$python" -m pip install --quiet --no-deps --no-compile --disable-pip-version-check
         --no-warn-script-location --target "$site")
if ! "${install[@]}" --no-build-isolation "$repo" 2>"$out/install.log"; then
    "${install[@]}" "$repo" 2>>"$out/install.log" \
        || die "installing gradmem into $site failed (see $out/install.log; it needs setuptools>=68 or the package index)"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
echo "gpu_sweep: gradmem installed into $site in $((SECONDS - started)) s"

budget_args=()
if [[ -n $budget ]]; then
    left=$("$python" -c "import sys; print(max(1.0, float(sys.argv[1]) - $((SECONDS - started)) - $REPORT_RESERVE_S))" "$budget")
    budget_args=(--budget "$left")
    echo "gpu_sweep: budget ${budget} s: ${left} s for the sweep (${REPORT_RESERVE_S} s kept for the page)"
fi
n=1
while [[ -e $out/schedule-$n.jsonl ]]; do n=$((n + 1)); done

# Run from OUT_DIR, so the installed copy is the one imported (not the checkout's).
cd "$out"
# A sweep whose cells failed (exit 3: none measured, 4: some; harness/sweep/outcome.py)
# still gets its page, and this script then exits with the sweep's status.
status=0
# shellcheck disable=SC2086  # the selection is a list of options
"$python" -m harness run --device cuda --workload all --framework all $selection --schedule parallel \
    "${budget_args[@]}" $resume --schedule-log "$out/schedule-$n.jsonl" --out "$out/cuda.jsonl" || status=$?
case $status in 0|3|4) ;; *) exit "$status" ;; esac
if [[ ! -s $out/cuda.jsonl ]]; then  # a budget too small for any cell
    echo "gpu_sweep: no records yet (no page); $((SECONDS - started)) s in all"
    exit "$status"
fi
"$python" -m harness report "$out/cuda.jsonl" --out "$out/report" --title "gradmem CUDA comparison"
echo "records: $out/cuda.jsonl; page: $out/report/index.html; $((SECONDS - started)) s in all"
exit "$status"
