"""Distributed training on tf.distribute gives the single-device numbers.

Each distributed run happens in fresh processes started here, with a hard
timeout (logical CPU devices and multi-worker collectives must be set up
before TensorFlow initialises, which the pytest process already did):

- `MirroredStrategy` over two logical CPU devices, one process;
- `MultiWorkerMirroredStrategy`, two worker processes on 127.0.0.1 (free
  ports, one `TF_CONFIG` each).

Both train the models of `distributed_training.py` (a
`TransformerEncoderBlock` classifier with masked pooling, and a one-layer
`keras_attention.models.Transformer` with gradient clipping) for three
steps on global batches of 8, split 4 + 4. The single-device reference
trains here from the same initial weights on the same global batches; loss
after every step and final weights must agree to `ATOL` (the all-reduce
adds the two halves' gradients in another order than one device does:
measured differences are ~1e-7). The two workers must agree with each
other to `WORKER_ATOL`.
"""

import os
import pathlib
import subprocess
import sys
import time

import distributed_training as dt
import numpy as np
import pytest
import tensorflow as tf

from examples.common import local_workers

pytestmark = pytest.mark.tf_only

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = pathlib.Path(dt.__file__)
ATOL = 1e-5
WORKER_ATOL = 1e-6
TIMEOUT = 120  # seconds, per group of processes


def _env():
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _run(command, timeout=TIMEOUT):
    """Run a command to completion or kill it at `timeout`; fail with its log."""
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,  # kills the child when it runs over
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _reference(kind, initial_weights):
    return dt.train(kind, tf.distribute.get_strategy(), initial_weights)


def _assert_agree(distributed, reference, atol):
    np.testing.assert_allclose(distributed["losses"], reference["losses"], atol=atol)
    for got, want in zip(distributed["final"], reference["final"], strict=True):
        np.testing.assert_allclose(got, want, atol=atol)
    # The steps did move the weights, by far more than the tolerance.
    moved = max(
        np.max(np.abs(a - b))
        for a, b in zip(reference["final"], reference["initial"], strict=True)
    )
    assert moved > 100 * atol


# As below: the classifier repeats the Transformer's run (~11 s) as `large`.
@pytest.mark.parametrize(
    "kind", ["transformer", pytest.param("encoder", marks=pytest.mark.large)]
)
def test_mirrored_two_logical_cpus_match_single_device(kind, tmp_path):
    _run([sys.executable, str(SCRIPT), "--strategy", "mirrored", "--devices", "2",
          "--models", kind, "--out", str(tmp_path)])  # fmt: skip
    arrays = np.load(tmp_path / "mirrored_0.npz")
    assert int(arrays["replicas"]) == 2
    distributed = dt.from_arrays(arrays, kind)
    assert len(distributed["losses"]) == dt.STEPS
    _assert_agree(distributed, _reference(kind, distributed["initial"]), ATOL)


# Two worker processes end to end (~20 s each kind): in the large set, which
# .ci/run runs. The Transformer covers clipping, sparse embedding gradients
# and both attention masks; the classifier repeats the run.
@pytest.mark.large
@pytest.mark.parametrize("kind", ["transformer", "encoder"])
def test_multi_worker_two_processes_match_single_device(kind, tmp_path):
    start = time.monotonic()
    codes = local_workers.run_workers(
        [sys.executable, str(SCRIPT), "--strategy", "multiworker",
         "--communication", "ring", "--models", kind, "--out", str(tmp_path)],
        count=2,
        timeout=TIMEOUT,
        log_dir=tmp_path,
        env=_env(),
    )  # fmt: skip
    logs = "".join((tmp_path / f"worker{i}.log").read_text()[-2000:] for i in (0, 1))
    assert codes == [0, 0], logs
    assert time.monotonic() - start < TIMEOUT
    workers = [np.load(tmp_path / f"multiworker_{i}.npz") for i in (0, 1)]
    assert [int(w["replicas"]) for w in workers] == [2, 2]
    first, second = (dt.from_arrays(w, kind) for w in workers)
    # Both workers hold the same (synchronised) model after every step.
    _assert_agree(second, first, WORKER_ATOL)
    _assert_agree(first, _reference(kind, first["initial"]), ATOL)


def test_run_workers_kills_workers_at_the_timeout(tmp_path):
    # A worker that never finishes must not outlive the deadline.
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        local_workers.run_workers(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            count=2,
            timeout=1,
            log_dir=tmp_path,
        )
    assert time.monotonic() - start < 10


def test_run_workers_stops_peers_of_a_failed_worker(tmp_path):
    # Worker 0 fails; worker 1 would wait for it forever.
    code = (
        "import json, os, sys, time\n"
        "if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 0:\n"
        "    sys.exit(3)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    codes = local_workers.run_workers(
        [sys.executable, "-c", code], count=2, timeout=30, log_dir=tmp_path
    )
    assert codes[0] == 3 and codes[1] != 0
    assert time.monotonic() - start < 10
