#!/usr/bin/env bash
# keras-attention on a GPU machine that has JAX but not TensorFlow, and no
# package registry (issue 6, "GPU"). In one run, within 8 minutes (each
# stage under its own `timeout`: 130 + 180 + 140 s at most, plus the
# install):
#
#   0. installs keras and those of its dependencies the machine lacks from
#      local wheels ($WHEELS, default .whl/; `make gpu-wheels` fetches them
#      on a machine with a registry) into $SITE, put first on PYTHONPATH;
#   1. runs the backend-agnostic layer tests with KERAS_BACKEND=jax
#      (tests/ops tests/layers tests/test_scores.py, not `large`), float32
#      matmuls at full precision for them (JAX_DEFAULT_MATMUL_PRECISION);
#   2. benchmarks/gpu_check.py --sections layers: MultiHeadSelfAttention
#      (auto) vs keras.layers.MultiHeadAttention vs keras.ops.
#      dot_product_attention, forward+backward, L = 1k-32k, bfloat16 and
#      float32, as ratios and as TFLOP/s against a bfloat16 matmul timed in
#      the same run, with whether cuDNN's fused attention ran;
#   3. benchmarks/gpu_check.py --sections fit: one epoch of the Multi30k
#      Transformer under model.fit per attention path (a fresh process
#      each): tokens/s, peak GPU memory, loss. It reads .gpu/multi30k_de_en.npz
#      (`make gpu-bundle`, carried with the working tree).
#
# Usage (from anywhere; arguments go to both gpu_check.py runs):
#   benchmarks/gpu_check.sh                 # the GPU run
#   benchmarks/gpu_check.sh --smoke         # tiny sizes: works on a CPU
# Environment (defaults):
#   PYTHON=python3  WHEELS=.whl  SITE=/tmp/keras-attention-site
#   OUT=outputs/gpu_check   (summary.md; gpu_check_layers.md/.json,
#                            gpu_check_fit.md/.json; tests.log, layers.log,
#                            fit.log, install.log)
#   GPU_CHECK_TESTS="tests/ops tests/layers tests/test_scores.py"
#   PYTEST_ARGS="-q -p no:cacheprovider"   TEST_WORKERS=8 (pytest-xdist; 0: off)
#   TEST_TIMEOUT=130  BENCH_TIMEOUT=180  FIT_TIMEOUT=140 (seconds; each
#   gpu_check.py run gets --budget-s 40 s below its timeout, after which
#   rows not started are reported as skipped, and --time-limit-s 8 s below,
#   by which a fit path's process is ended; arguments given to this script
#   come later and win)
#   SKIP_TESTS=0  SKIP_LAYERS=0  SKIP_FIT=0   (1: skip that stage)
# Exit status: 0 when every stage that ran passed (tests, and every row of
# both reports).

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
WHEELS="$(abspath "${WHEELS:-$ROOT/.whl}")"
SITE="$(abspath "${SITE:-/tmp/keras-attention-site}")"
OUT="$(abspath "${OUT:-$ROOT/outputs/gpu_check}")"
GPU_CHECK_TESTS="${GPU_CHECK_TESTS:-tests/ops tests/layers tests/test_scores.py}"
PYTEST_ARGS="${PYTEST_ARGS:--q -p no:cacheprovider}"
TEST_WORKERS="${TEST_WORKERS:-8}"
TEST_TIMEOUT="${TEST_TIMEOUT:-130}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-180}"
FIT_TIMEOUT="${FIT_TIMEOUT:-140}"
SKIP_TESTS="${SKIP_TESTS:-0}"
SKIP_LAYERS="${SKIP_LAYERS:-0}"
SKIP_FIT="${SKIP_FIT:-0}"

mkdir -p "$OUT" || exit 2
cd "$ROOT" || exit 2
SUMMARY="$OUT/summary.md"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
die() { note "gpu_check: FAILED: $*"; exit 2; }

export KERAS_BACKEND=jax
export TF_CPP_MIN_LOG_LEVEL=2
export PYTHONUNBUFFERED=1
# Several test workers share one GPU: allocate on demand, not 75% each.
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"

with_timeout() {  # with_timeout SECONDS command...
    local seconds="$1"
    shift
    if command -v timeout >/dev/null; then
        timeout --kill-after=10 "$seconds" "$@"
    else
        "$@"
    fi
}

# -- 1. wheels -----------------------------------------------------------------
command -v "$PYTHON" >/dev/null || die "no Python at PYTHON=$PYTHON"
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
todo=()
declare -A seen=()
for wheel in "${wheels[@]}"; do
    # Distribution name as in the file name: keras-3.15.1-py3-none-any.whl.
    name="$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]-' '[:lower:]_')"
    if [ -n "${seen[$name]:-}" ]; then
        die "two wheels of $name in $WHEELS; keep one version"
    fi
    seen[$name]=1
    # keras: always ours; any other: only where the machine lacks it.
    if [ "$name" != keras ] && "$PYTHON" -c \
        'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' \
        "$name" >/dev/null 2>&1; then
        echo "have $name: skipping its wheel" >>"$OUT/install.log"
    else
        todo+=("$wheel")
    fi
done
if [ ${#todo[@]} -gt 0 ]; then
    echo "installing ${#todo[@]} wheel(s) into $SITE: ${todo[*]##*/}"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target "$SITE" "${todo[@]}" \
        >>"$OUT/install.log" 2>&1 ||
        die "pip install of the wheels in $WHEELS (see $OUT/install.log)"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "no wheels to install from $WHEELS: using what $PYTHON has"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

# Every import the run needs, with the missing ones named.
"$PYTHON" - >>"$OUT/install.log" 2>&1 <<'EOF'
import importlib.metadata as md
import re
import sys

missing = []
for module in ("jax", "keras", "numpy", "pytest"):
    try:
        __import__(module)
    except ImportError as exc:
        missing.append(f"{module} ({exc})")
if "keras" not in " ".join(missing):
    for req in md.requires("keras") or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0]
        try:
            md.version(name)
        except md.PackageNotFoundError:
            missing.append(f"{name} (needed by keras)")
if missing:
    print("missing: " + ", ".join(missing))
    sys.exit(1)
import jax
import keras

import keras_attention

print(
    f"python {sys.version.split()[0]} at {sys.executable}; jax {jax.__version__} "
    f"on {jax.devices()}; keras {keras.__version__} from {keras.__file__} "
    f"(backend {keras.backend.backend()}); keras_attention from "
    f"{keras_attention.__file__}"
)
EOF
status=$?
tail -n 1 "$OUT/install.log"
if [ $status -ne 0 ]; then
    die "$(tail -n 1 "$OUT/install.log"); add their wheels to $WHEELS (make gpu-wheels)"
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L >>"$OUT/install.log" 2>&1

# -- 1. tests ------------------------------------------------------------------
tests_ok=1
if [ "$SKIP_TESTS" = 1 ]; then
    note "tests: skipped (SKIP_TESTS=1)"
else
    workers=()
    if [ "$TEST_WORKERS" != 0 ] && "$PYTHON" -c 'import xdist' 2>/dev/null; then
        workers=(-n "$TEST_WORKERS")
    fi
    echo "== tests: $GPU_CHECK_TESTS (timeout ${TEST_TIMEOUT} s)"
    # The tests compare float32 results with numpy at tight tolerances: no
    # TF32 for them (only for them: the benchmarks keep JAX's default).
    # shellcheck disable=SC2086  # word splitting of the lists is intended
    JAX_DEFAULT_MATMUL_PRECISION="${JAX_DEFAULT_MATMUL_PRECISION:-highest}" \
        with_timeout "$TEST_TIMEOUT" "$PYTHON" -m pytest $GPU_CHECK_TESTS \
        $PYTEST_ARGS "${workers[@]}" 2>&1 | tee "$OUT/tests.log" | tail -n 15
    rc=${PIPESTATUS[0]}
    last="$(grep -E '(passed|failed|error|no tests ran)' "$OUT/tests.log" | tail -n 1)"
    if [ "$rc" = 0 ]; then
        note "tests: passed ($last)"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        tests_ok=0
        note "tests: TIMED OUT after ${TEST_TIMEOUT} s (see tests.log)"
    else
        tests_ok=0
        note "tests: FAILED, pytest exit $rc ($last; see tests.log)"
    fi
fi

# -- 2. and 3. the two gpu_check.py sections ------------------------------------
run_section() {  # run_section NAME TIMEOUT [args...]
    local name="$1" seconds="$2"
    shift 2
    local report="$OUT/gpu_check_$name.md"
    echo "== gpu_check.py --sections $name (timeout ${seconds} s)"
    with_timeout "$seconds" "$PYTHON" benchmarks/gpu_check.py --sections "$name" \
        --budget-s "$((seconds > 80 ? seconds - 40 : seconds / 2))" \
        --time-limit-s "$((seconds > 20 ? seconds - 8 : seconds))" \
        --output "$report" "$@" 2>"$OUT/$name.log"
    local rc=$?
    if [ "$rc" = 0 ]; then
        note "$name: ok ($report)"
        return 0
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        note "$name: TIMED OUT after ${seconds} s (rows so far in $report)"
    elif [ "$rc" = 1 ]; then
        note "$name: a row failed or was skipped (see $report and $name.log)"
    else
        note "$name: FAILED, exit $rc (see $name.log: $(tail -n 1 "$OUT/$name.log"))"
    fi
    return 1
}

layers_ok=1
if [ "$SKIP_LAYERS" = 1 ]; then
    note "layers: skipped (SKIP_LAYERS=1)"
else
    run_section layers "$BENCH_TIMEOUT" "$@" || layers_ok=0
fi
fit_ok=1
if [ "$SKIP_FIT" = 1 ]; then
    note "fit: skipped (SKIP_FIT=1)"
else
    run_section fit "$FIT_TIMEOUT" "$@" || fit_ok=0
fi

[ "$tests_ok" = 1 ] && [ "$layers_ok" = 1 ] && [ "$fit_ok" = 1 ]
