"""`benchmarks/gpu_check.py` (and `.sh`) at tiny sizes on the CPU under JAX.

The driver always measures under JAX, so it runs in a child process with
`KERAS_BACKEND=jax` whatever backend this suite runs on; skipped where JAX
is not installed.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DRIVER = ROOT / "benchmarks" / "gpu_check.py"
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
# Smallest sizes that still give two ragged-free key blocks per row.
TINY = ["--lengths", "64", "--chunk-sizes", "32", "--rounds", "1"]
TINY += ["--matmul-size", "64", "--dtype", "float32", "--budget-s", "1e6"]


def _env(**extra):
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env.pop("OUT", None)
    env.update(extra)
    return env


def _check_report(path):
    text = path.read_text()
    data = json.loads(path.with_suffix(".json").read_text())
    rows = {(r["impl"], r["kind"]): r for r in data["rows"]}
    assert set(rows) == {
        (impl, kind)
        for impl in ("dense", "chunked-32", "keras")
        for kind in ("fwd", "fwd+bwd")
    }, text
    for (impl, kind), row in rows.items():
        assert "error" not in row, (impl, kind, row)
        assert row["tflops"] > 0 and len(row["seconds"]) == 1
        if impl != "dense":
            # float32: the chunked and Keras paths agree with the dense one.
            assert float(row["rel_err"]) < 1e-4, (impl, kind, row["rel_err"])
    assert data["meta"]["matmul"]["tflops_median"] > 0
    assert text.count("\n| 64 |") == 6, text
    assert "0 candidate(s) failed, 0 skipped" in text


def test_driver_smoke_run(tmp_path):
    pytest.importorskip("jax")
    output = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(DRIVER), "--smoke", *TINY, "--output", str(output)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| L | impl | pass |" in result.stdout
    _check_report(output)


@pytest.mark.large
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_shell_script_smoke_run(tmp_path):
    """The whole script, with a one-file test run and no wheels to install."""
    pytest.importorskip("jax")
    result = subprocess.run(
        ["bash", str(SCRIPT), "--smoke", *TINY],
        env=_env(
            PYTHON=sys.executable,
            OUT=str(tmp_path),
            WHEELS=str(tmp_path / "no-wheels"),
            GPU_CHECK_TESTS="tests/test_scores.py",
            PYTEST_ARGS="-q -x -p no:cacheprovider -k dot",
            TEST_WORKERS="0",
            TEST_TIMEOUT="800",
            BENCH_TIMEOUT="800",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _check_report(tmp_path / "gpu_check.md")
    summary = (tmp_path / "summary.md").read_text()
    assert "tests: passed" in summary and "benchmark: ok" in summary, summary


def test_driver_rejects_bad_sizes():
    pytest.importorskip("jax")
    result = subprocess.run(
        [sys.executable, str(DRIVER), "--rounds", "0"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "--rounds must be" in result.stderr
