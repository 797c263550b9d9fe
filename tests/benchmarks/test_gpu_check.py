"""`benchmarks/gpu_check.py` (and `.sh`, `gpu_bundle.py`) at tiny sizes on
the CPU under JAX.

The driver always measures under JAX, so it runs in a child process with
`KERAS_BACKEND=jax` whatever backend this suite runs on; skipped where JAX
is not installed. The fit section reads a synthetic bundle (`--bundle
synthetic`): no network, no `../shared`, no `.gpu/`.
"""

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[2]
DRIVER = ROOT / "benchmarks" / "gpu_check.py"
FIT = ROOT / "benchmarks" / "gpu_fit.py"  # the fit section, imported by DRIVER
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
BUNDLER = ROOT / "benchmarks" / "gpu_bundle.py"
# One shape, one round; the fit section on random pairs, 3 steps each.
TINY = ["--shapes", "1,64,2,16", "--dtypes", "float32", "--rounds", "1"]
TINY += ["--matmul-size", "64", "--budget-s", "1e6", "--bundle", "synthetic"]
PATHS = ("fused", "dense", "chunked")


def _env(**extra):
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env.pop("OUT", None)
    env.update(extra)
    return env


def _fit_module():
    """gpu_fit.py imported (at the top it imports only the standard library
    and gpu_common.py, which needs no more; jax, keras and numpy
    inside their functions)."""
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location("gpu_fit", FIT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:  # gpu_check.py sets KERAS_BACKEND=jax for itself: not for this suite
        os.environ.clear()
        os.environ.update(saved)
    return module


def _check_layers(path):
    text = path.read_text()
    data = json.loads(path.with_suffix(".json").read_text())
    rows = {r["candidate"]: r for r in data["rows"] if r["section"] == "layers"}
    assert set(rows) == {"ours", "keras", "op"}, text
    for name, row in rows.items():
        assert "error" not in row, (name, row)
        assert (row["batch"], row["length"], row["heads"], row["key_dim"]) == (
            1,
            64,
            2,
            16,
        )
        assert row["tflops"] > 0 and len(row["seconds"]) == 1 and row["repeats"] >= 1
        assert row["fused"] is False and row["fmha_calls"] == 0  # a CPU: no cuDNN
        assert row["compile_s"] > 0
    assert rows["keras"]["ratio_to_keras"] == pytest.approx(1.0)
    assert rows["ours"]["ratio_to_keras"] > 0
    # A CPU, a short sequence: "auto" takes the dense path.
    assert rows["ours"]["plans"] == ["dense/dense"]
    # With Keras' weights, ours computes Keras' function (float32).
    assert rows["ours"]["dx_rel_err"] < 1e-4
    # The layers count their projections, the op does not.
    assert rows["ours"]["flops"] == rows["keras"]["flops"] > rows["op"]["flops"]
    assert data["meta"]["matmul"]["tflops_median"] > 0
    assert text.count("\n| float32 | 1 | 64 | 2 | 16 |") == 3, text
    assert "no shape where both layers ran cuDNN" in text


def _check_fit(path, paths=PATHS):
    text = path.read_text()
    data = json.loads(path.with_suffix(".json").read_text())
    rows = {r["path"]: r for r in data["rows"] if r["section"] == "fit"}
    assert set(rows) == set(paths), text
    losses = []
    for name, row in rows.items():
        assert "error" not in row, (name, row)
        assert row["steps"] == 3 and row["timed_steps"] == 2, row
        assert row["tokens_per_s"] > 0 and row["epoch_s"] > 0
        assert row["peak_bytes"] is None  # a CPU reports no memory stats
        assert row["loss_finite"]
        kernel = {"fused": "composition"}.get(name, name)
        # Encoder self-, decoder self- and cross-attention of the 1+1 layers.
        assert row["plans"] == [f"{name}/{kernel}"] * 3, row["plans"]
        losses.append(row["loss"])
    # The same seed and batches: every path trains alike.
    assert max(losses) - min(losses) < 1e-3, losses
    assert data["meta"]["bundle"]["path"] == "synthetic"
    assert "| fused |" in text
    assert ("Losses across paths" in text) == (len(paths) > 1)


# The whole driver end to end (~20 s): in the large set, which .ci/run runs.
@pytest.mark.large
def test_driver_smoke_run(tmp_path):
    """Both sections; the fit on the fused path only (each path is a child
    process of its own; the large test below runs all three)."""
    pytest.importorskip("jax")
    output = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(DRIVER), "--smoke", *TINY, "--fit-paths", "fused"]
        + ["--output", str(output)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| dtype | B | L | N | H | candidate |" in result.stdout
    assert "| path | tokens/s |" in result.stdout
    _check_layers(output)
    _check_fit(output, paths=("fused",))
    text = output.read_text()
    assert "0 row(s) failed, 0 skipped" in text
    assert "benchmarks/gpu_check.py --smoke" in text  # the command line


def test_driver_reports_skipped_rows(tmp_path):
    """Past --budget-s nothing more starts: rows skipped, exit status 1."""
    pytest.importorskip("jax")
    output = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(DRIVER), "--smoke", *TINY, "--budget-s", "0"]
        + ["--output", str(output)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    data = json.loads(output.with_suffix(".json").read_text())
    assert len(data["rows"]) == 6  # three candidates, three paths
    assert all(r["error"].startswith("skipped") for r in data["rows"])
    assert "0 row(s) failed, 6 skipped" in output.read_text()


def test_fit_batches_of_synthetic_bundle():
    gpu_fit = _fit_module()
    bundle = gpu_fit.synthetic_bundle()
    bounds = [16, 32, 64]
    batches, warm, left_out = gpu_fit.plan_fit_batches(bundle, bounds, 512, 0)
    assert warm == 3 and left_out == 0
    # The first batch of each shape comes first.
    assert sorted(b[0]["encoder_tokens"].shape[1] for b in batches[:warm]) == bounds
    rows = 0
    for inputs, labels, weights in batches:
        source, decoder = inputs["encoder_tokens"], inputs["decoder_tokens"]
        bound = source.shape[1]
        assert bound in bounds and decoder.shape == labels.shape == source.shape
        assert len(source) == 512 // bound  # full batches only
        # Teacher forcing: the labels are the decoder tokens shifted left.
        np.testing.assert_array_equal(labels[:, :-1], decoder[:, 1:])
        np.testing.assert_array_equal(weights, labels != 0)
        assert (decoder[:, 0] == 2).all()  # BOS
        rows += len(source)
    # Each bucket drops at most one partial batch.
    assert len(bundle["source_lengths"]) - rows < sum(512 // b for b in bounds)


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
            FIT_TIMEOUT="800",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _check_layers(tmp_path / "gpu_check_layers.md")
    _check_fit(tmp_path / "gpu_check_fit.md")
    summary = (tmp_path / "summary.md").read_text()
    assert "tests: passed" in summary, summary
    assert "layers: ok" in summary and "fit: ok" in summary, summary
    for log in ("tests.log", "layers.log", "fit.log", "install.log"):
        assert (tmp_path / log).exists(), log


def test_driver_rejects_bad_arguments():
    pytest.importorskip("jax")
    for argv, message in (
        (["--rounds", "0"], "--rounds must be"),
        (["--shapes", "1,2,3"], "a shape is B,L,N,H"),
        (["--fit-buckets", "15"], "--fit-buckets must be even"),
    ):
        result = subprocess.run(
            [sys.executable, str(DRIVER), *argv],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2 and message in result.stderr, (argv, result)


def test_bundle_from_a_tiny_corpus(tmp_path):
    """gpu_bundle.py (TensorFlow, keras-hub) on a made-up parallel corpus,
    read back by gpu_fit.py's loader (numpy only)."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras_hub")
    rng = np.random.default_rng(0)
    letters = list("abcdefghijklmnopqrstuvwxyzäöü")
    words = {
        lang: ["".join(rng.choice(letters, rng.integers(2, 8))) for _ in range(80)]
        for lang in ("de", "en")
    }
    for lang, pieces in words.items():
        lines = [" ".join(rng.choice(pieces, rng.integers(2, 12))) for _ in range(300)]
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    output = tmp_path / "out" / "bundle.npz"
    vocab = 40
    argv = ["--data-dir", str(tmp_path), "--no-check-hashes", "--max-length", "10"]
    argv += ["--vocabulary-size", str(vocab), "--output", str(output)]
    result = subprocess.run(
        [sys.executable, str(BUNDLER), *argv],
        env=_env(KERAS_BACKEND="tensorflow"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / f"spm.de.{vocab}.model").exists()
    bundle = _fit_module().load_bundle(str(output))
    assert bundle["source_ids"].dtype == np.int16
    assert bundle["source_vocabulary_size"] == bundle["target_vocabulary_size"] == vocab
    provenance = bundle["provenance"]
    pairs = provenance["pairs"]
    assert pairs + provenance["dropped_long"] == 300
    assert len(bundle["source_lengths"]) == len(bundle["target_lengths"]) == pairs
    assert bundle["source_lengths"].sum() == len(bundle["source_ids"])
    assert bundle["target_lengths"].max() - 1 <= 10
    assert set(provenance["files"]) == {"train.de.gz", "train.en.gz"}
    ends = np.cumsum(bundle["target_lengths"]) - 1
    assert (bundle["target_ids"][ends] == 3).all()  # EOS ends every target
