import importlib.util
import json
import pathlib

import numpy as np
import pytest

SCRIPT = (
    pathlib.Path(__file__).parents[2] / "examples" / "structured" / "pointer_sort.py"
)


def _load():
    spec = importlib.util.spec_from_file_location("pointer_sort", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(
    reason="the script feeds tf.data, decodes in tf.function and exports a SavedModel"
)
def test_smoke_run(tmp_path):
    argv = [
        "--n", "4", "--units", "8", "--epochs", "1", "--steps-per-epoch", "3",
        "--batch-size", "8", "--test-size", "40", "--beam-width", "2",
        "--verbose", "0", "--output-dir", str(tmp_path),
    ]  # fmt: skip
    metrics = _load().main(argv)
    for key in ("greedy_accuracy", "beam2_accuracy"):
        assert 0.0 <= metrics[key] <= 1.0
    assert metrics["saved_model_matches"] is True
    assert metrics["train_sequences"] == 24
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["greedy_accuracy"] == metrics["greedy_accuracy"]
    for name in ("pointer_sort.keras", "pointers.png", "decoder/saved_model.pb"):
        assert (tmp_path / name).is_file(), name
    assert np.isfinite(metrics["final_loss"])
