#!/usr/bin/env bash
# The CUDA grid on a GPU host, sized to its time, with a summary of where the time went.
#
#   tools/gpu_check.sh --prepare     # here, with the package index: the wheels to carry
#   tools/gpu_check.sh [OUT_DIR]     # on the GPU host (default $OUT/gpu, else out/gpu-check)
#
# --prepare downloads, without dependencies, the pure-Python framework wheels a GPU host
# usually lacks (tinygrad, at the version of this checkout's .venv) into build/gpu-wheels/
# (git-ignored: carry that folder to the host beside the checkout).
#
# On the GPU host it
# 1. unpacks every wheel in build/gpu-wheels/ into build/gpu-extra/ (on PYTHONPATH for
#    the sweep; the host's own environment is not touched) and, when tinygrad is there
#    and no `clang` is, points CC at gcc: tinygrad checks for a C compiler at start-up,
#    and its CUDA device compiles with NVRTC, not with it;
# 2. runs tools/gpu_sweep.sh --budget $GRADMEM_GPU_BUDGET (default 420 s) into OUT_DIR
#    (records, page, schedule logs; its output in OUT_DIR/gpu_sweep.log);
# 3. writes OUT_DIR/wall.txt: the script's wall time, the cells by status, mean walls per
#    framework/mode/size, how the CUDA memory passes ran, the slowest passes
#    (tools/gpu_wall_summary.py).
# Run it again with GRADMEM_GPU_RESUME=1 to go on where the budget stopped it.
# GRADMEM_GPU_WHEELS and GRADMEM_GPU_EXTRA move the two folders; PYTHON and
# GRADMEM_GPU_SWEEP_ARGS go to tools/gpu_sweep.sh.
# GRADMEM_ALLOW_NO_GPU=1 runs it without a GPU (every cell `unavailable`: the tests).
set -euo pipefail
started=$SECONDS
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
wheels=${GRADMEM_GPU_WHEELS:-$repo/build/gpu-wheels}
extra=${GRADMEM_GPU_EXTRA:-$repo/build/gpu-extra}

if [[ ${1:-} == --prepare ]]; then
    venv_python=${VENV_PYTHON:-$repo/.venv/bin/python}
    [[ -x $venv_python ]] || venv_python=$python
    version=$("$venv_python" -c 'import importlib.metadata as m; print(m.version("tinygrad"))')
    mkdir -p "$wheels"
    "$venv_python" -m pip download --quiet --no-deps "tinygrad==$version" -d "$wheels"
    ls -l "$wheels"
    echo "gpu_check: carry build/gpu-wheels to the GPU host (e.g. the device tool's carry: [\"build/gpu-wheels\"])"
    exit 0
fi

out=${1:-${OUT:+$OUT/gpu}}
out=${out:-out/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)

rm -rf "$extra"
mkdir -p "$extra"
shopt -s nullglob
for wheel in "$wheels"/*.whl; do
    # a wheel is a zip file; pure-Python ones unpack to an importable tree
    "$python" -m zipfile -e "$wheel" "$extra"
    echo "gpu_check: $(basename "$wheel") unpacked into $extra"
done
shopt -u nullglob
export PYTHONPATH="$extra${PYTHONPATH:+:$PYTHONPATH}"
if [[ -d $extra/tinygrad && -z ${CC:-} ]] && ! command -v clang >/dev/null 2>&1; then
    for compiler in gcc cc /opt/gcc/bin/gcc; do
        if command -v "$compiler" >/dev/null 2>&1; then
            export CC=$(command -v "$compiler")
            echo "gpu_check: no clang here: CC=$CC for tinygrad's start-up check (its CUDA kernels go through NVRTC)"
            break
        fi
    done
fi

budget=${GRADMEM_GPU_BUDGET:-420}
resume=()
[[ -n ${GRADMEM_GPU_RESUME:-} ]] && resume=(--resume)
status=0
bash "$repo/tools/gpu_sweep.sh" --budget "$budget" "${resume[@]}" "$out" 2>&1 | tee -a "$out/gpu_sweep.log" \
    || status=${PIPESTATUS[0]}
wall=$((SECONDS - started))
{
    echo "tools/gpu_check.sh: budget $budget s, exit $status, $(date -u +%FT%TZ)"
    PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" "$repo/tools/gpu_wall_summary.py" "$out" --script-wall "$wall"
    grep -h "left for --resume\|expected to fit" "$out/gpu_sweep.log" | tail -n 2 || true
} > "$out/wall.txt" 2>&1 || true
cat "$out/wall.txt"
exit "$status"
