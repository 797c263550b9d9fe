import importlib.util
import json
import math
import pathlib

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "reasoning" / "ntm_copy.py"


def _load():
    spec = importlib.util.spec_from_file_location("ntm_copy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ntm_copy = _load()


def test_copy_batch_layout():
    rng = np.random.default_rng(0)
    x, y = ntm_copy.copy_batch(rng, 3, 4, bits=5)
    assert x.shape == y.shape == (3, 9, 6)
    np.testing.assert_array_equal(x[:, 4, -1], 1.0)  # the delimiter
    assert np.all(x[:, 5:] == 0) and np.all(x[:, :4, -1] == 0)
    np.testing.assert_array_equal(y[:, 5:, :-1], x[:, :4, :-1])  # copied
    np.testing.assert_array_equal(y[:, :, -1], [[0] * 5 + [1] * 4] * 3)  # weights
    assert np.all(y[:, :5, :-1] == 0)


def test_loss_and_metrics_per_sequence():
    """Logits of 0 cost 1 bit per output bit; confident right answers cost
    nothing and make no errors; flipped ones make every bit wrong."""
    rng = np.random.default_rng(0)
    _, y = ntm_copy.copy_batch(rng, 2, 3, bits=4)
    zero = np.zeros(y[..., :-1].shape, "float32")
    np.testing.assert_allclose(
        np.asarray(ntm_copy.bits_per_sequence(y, zero)), 3 * 4, rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(ntm_copy.copy_loss(y, zero)), 3 * 4 * math.log(2), rtol=1e-6
    )
    right = 20 * (2 * y[..., :-1] - 1)
    assert np.all(np.asarray(ntm_copy.bits_per_sequence(y, right)) < 1e-6)
    np.testing.assert_array_equal(np.asarray(ntm_copy.bit_errors(y, right)), 0)
    np.testing.assert_array_equal(np.asarray(ntm_copy.bit_errors(y, -right)), 12)


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
def test_smoke_run(tmp_path):
    out = tmp_path / "out"
    summary = ntm_copy.main(["--smoke", "--output-dir", str(out)])
    for name in ("results.json", "results.md", "learning_curves.png",
                 "generalisation.png", "weightings.png"):  # fmt: skip
        assert (out / name).stat().st_size > 100, name
    results = json.loads((out / "results.json").read_text())["results"]
    assert set(results) == {"ntm", "lstm"}
    for record in summary["results"].values():
        assert len(record["curve"]["sequences"]) == 2  # 2 epochs
        for test in record["test"].values():
            assert math.isfinite(test["bits_per_sequence"])


@pytest.mark.large
def test_a_second_run_reloads_instead_of_training(tmp_path):
    argv = ["--smoke", "--output-dir", str(tmp_path), "--models", "ntm"]
    first = ntm_copy.main(argv)
    log = (tmp_path / "ntm" / "log.csv").read_text()
    again = ntm_copy.main(argv)
    assert (tmp_path / "ntm" / "log.csv").read_text() == log  # not trained again
    assert again["results"]["ntm"]["test"] == first["results"]["ntm"]["test"]


@pytest.mark.parametrize("argv", [["--memory-size", "10"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit):
        ntm_copy.parse_args(argv)
