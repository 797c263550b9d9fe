"""`examples/nlp/translate_dates.py --strategy ...` end to end, in fresh processes.

The same tiny Transformer run (Adam with clipping, 2 epochs of 8 global
batches of 32) under the default strategy, `mirrored` over two logical CPU
devices and `multiworker` with two local worker processes must end with the
same weights and losses (`ATOL`: Adam divides by the root of its second
moment, which lets last-bit differences grow a little over 16 steps;
measured ~4e-6), and the distributed runs must export a working SavedModel
(the script checks the reloaded model against the trained one).
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from examples.common import compare_runs
from examples.common import local_workers

pytestmark = pytest.mark.tf_only

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "nlp" / "translate_dates.py"
TINY = ["--model", "transformer", "--num-train", "256", "--num-test", "32",
        "--epochs", "2", "--units", "16", "--num-heads", "2", "--num-layers", "1",
        "--plot-heads", "0"]  # fmt: skip
ATOL = 1e-4
TIMEOUT = 900  # per run: a safety net for a loaded machine


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _run(args, tmp_path, name):
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            *TINY,
            *args,
            "--output-dir",
            str(tmp_path / name),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stderr  # the status lines (`examples.common.cli.status`)


def test_help_lists_the_strategy_flags(capsys):
    spec = importlib.util.spec_from_file_location("translate_dates_help", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--strategy", "--devices", "--communication", "--jit-compile"):
        assert flag in text
    assert "{default,mirrored,multiworker}" in text


@pytest.mark.large
def test_default_mirrored_and_multiworker_runs_agree(tmp_path):
    _run(["--no-jit-compile", "--batch-size", "32", "--no-export"], tmp_path, "default")
    out = _run(["--strategy", "mirrored", "--devices", "2", "--batch-size", "16"],
               tmp_path, "mirrored")  # fmt: skip
    assert "MirroredStrategy with 2 replica(s)" in out
    assert "Global batch 32, 8 steps per epoch" in out
    assert "reloaded outputs match" in out
    codes = local_workers.run_workers(
        [sys.executable, str(SCRIPT), *TINY, "--strategy", "multiworker",
         "--batch-size", "16", "--output-dir", str(tmp_path / "multiworker")],
        count=2,
        timeout=TIMEOUT,
        log_dir=tmp_path,
        env=_env(),
    )  # fmt: skip
    logs = [(tmp_path / f"worker{i}.log").read_text() for i in (0, 1)]
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert "task worker:1 of 2 worker(s)" in logs[1]
    # The chief writes --output-dir; worker 1 wrote to a temp dir, removed.
    assert (tmp_path / "multiworker" / "saved_model" / "saved_model.pb").exists()
    match = re.search(r"Saved alignment heat-maps to (\S+)/alignments.png", logs[1])
    assert match and match.group(1) != str(tmp_path / "multiworker")
    assert not os.path.exists(match.group(1))
    reference = compare_runs.read_run(tmp_path / "default")
    for name in ("mirrored", "multiworker"):
        result = compare_runs.compare(reference, compare_runs.read_run(tmp_path / name))
        assert result["loss"] < ATOL and result["weights"] < ATOL, (name, result)
