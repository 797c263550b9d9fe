import importlib.util
import json
import math
import pathlib

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "char_lstmn.py"


def _load():
    spec = importlib.util.spec_from_file_location("char_lstmn", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


char_lstmn = _load()


@pytest.mark.parametrize("kind", ["lstmn", "lstm"])
def test_parameter_count_is_the_built_models(kind):
    for units, embedding_dim, vocabulary in [(8, 5, 11), (13, 4, 7)]:
        model = char_lstmn.build_model(kind, units, embedding_dim, vocabulary)
        tokens = np.zeros((2, 9), "int32")
        assert tuple(model(tokens).shape) == (2, 9, vocabulary)
        expected = char_lstmn.parameter_count(kind, units, embedding_dim, vocabulary)
        assert model.count_params() == expected


def test_the_lstm_width_matches_the_weights_within_one_percent():
    # The defaults: LSTMN(128) over 64-wide embeddings of 65 characters.
    units = char_lstmn.matched_lstm_units(128, 64, 65)
    lstmn = char_lstmn.parameter_count("lstmn", 128, 64, 65)
    lstm = char_lstmn.parameter_count("lstm", units, 64, 65)
    assert (units, lstmn, lstm) == (156, 152_449, 152_269)
    assert abs(lstm / lstmn - 1) < 0.01
    for width in (units - 1, units + 1):  # the nearest count of all widths
        other = char_lstmn.parameter_count("lstm", width, 64, 65)
        assert abs(other - lstmn) > abs(lstm - lstmn)
    with pytest.raises(ValueError, match="kind"):
        char_lstmn.parameter_count("gru", 8, 4, 5)


def test_comparison_at_equal_iterations_and_equal_time():
    results = {
        "lstmn": {"curve": {"iteration": [10, 20, 30], "seconds": [50.0, 90.0, 130.0],
                            "val_bpc": [3.0, 2.5, 2.2]}},
        "lstm": {"curve": {"iteration": [10, 20, 30], "seconds": [20.0, 40.0, 60.0],
                           "val_bpc": [3.1, 2.7, 2.4]}},
    }  # fmt: skip
    comparison = char_lstmn.compare(results)
    assert comparison["iteration"] == 30
    assert comparison["at_iteration"] == {"lstmn": 2.2, "lstm": 2.4}
    assert comparison["seconds"] == 60.0  # when the LSTM finished
    assert comparison["at_seconds"] == {
        "lstmn": (10, 50.0, 3.0),
        "lstm": (30, 60.0, 2.4),
    }
    assert char_lstmn.point_at(results["lstmn"]["curve"], 49.0) is None
    # An LSTM run on (--lstm-iterations) to the LSTMN's time.
    lstm = results["lstm"]["curve"]
    lstm.update(iteration=[10, 20, 30, 40, 50, 60, 70],
                seconds=[20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0],
                val_bpc=[3.1, 2.7, 2.4, 2.3, 2.2, 2.1, 2.0])  # fmt: skip
    comparison = char_lstmn.compare(results)
    assert comparison["iteration"] == 30 and comparison["seconds"] == 130.0
    assert comparison["at_iteration"] == {"lstmn": 2.2, "lstm": 2.4}
    assert comparison["at_seconds"] == {
        "lstmn": (30, 130.0, 2.2),
        "lstm": (60, 120.0, 2.1),
    }


def test_bpc_curve_sums_the_training_seconds():
    rows = [{"epoch": "0", "loss": "2.0", "val_loss": "2.5", "seconds": "30.5"},
            {"epoch": "1", "loss": "1.0", "val_loss": "1.5", "seconds": "10.0"}]  # fmt: skip
    curve = char_lstmn.bpc_curve(rows, steps=50)
    assert curve["iteration"] == [50, 100]
    assert curve["seconds"] == [30.5, 40.5]
    np.testing.assert_allclose(curve["val_bpc"], [2.5 / math.log(2), 1.5 / math.log(2)])
    np.testing.assert_allclose(curve["loss_bpc"], [2 / math.log(2), 1 / math.log(2)])


@pytest.fixture
def text_dir(tmp_path):
    """A small synthetic text: verses of a few words, in a random order."""
    rng = np.random.default_rng(0)
    words = ["to be", "or not", "that is", "the question"]
    lines = [
        f"{rng.choice(['ANNA', 'BEN'])}:\n" + " ".join(rng.choice(words, 6)) + ".\n"
        for _ in range(300)
    ]
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "input.txt").write_text("\n".join(lines))
    return directory


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data")
def test_smoke_run(tmp_path, text_dir):
    out = tmp_path / "out"
    argv = [
        "--data-dir", str(text_dir), "--no-check-hash", "--output-dir", str(out),
        "--units", "8", "--embedding-dim", "8", "--context", "12",
        "--batch-size", "8", "--iterations", "40", "--eval-interval", "20",
        "--lr", "1e-2", "--lstm-iterations", "60",
    ]  # fmt: skip
    summary = char_lstmn.main(argv)
    results, comparison = summary["models"], summary["comparison"]
    assert list(results) == ["lstmn", "lstm"]
    vocabulary = len(set((text_dir / "input.txt").read_text()))
    for name, result in results.items():
        curve = result["curve"]
        assert curve["iteration"] == [20, 40, 60][: 3 if name == "lstm" else 2]
        assert curve["seconds"][0] < curve["seconds"][1]
        assert curve["val_bpc"][-1] < curve["val_bpc"][0] < math.log2(vocabulary), name
        assert result["parameters"] == char_lstmn.parameter_count(
            name, result["config"]["units"], 8, vocabulary
        )
    assert comparison["iteration"] == 40
    table = (out / "results.md").read_text()
    assert "| `lstmn` | 8 |" in table and "same time" in table
    assert (out / "val_bpc.png").stat().st_size > 10_000
    saved = json.loads((out / "results.json").read_text())
    assert (
        saved["results"]["matched_weights"]["lstmn"] == results["lstmn"]["parameters"]
    )
    assert saved["provenance"]["script"] == "examples/nlp/char_lstmn.py"
    # Run again: the trained models are reloaded, not trained again.
    again = char_lstmn.main(argv)["models"]
    assert again["lstmn"]["curve"] == results["lstmn"]["curve"]
    with pytest.raises(ValueError, match="other settings"):
        char_lstmn.main([*argv, "--lr", "3e-3"])
