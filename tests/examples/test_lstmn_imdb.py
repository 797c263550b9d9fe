import argparse
import importlib.util
import json
import pathlib

import numpy as np
import pytest
from synthetic_imdb import write_reviews

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "lstmn_imdb.py"


def _load():
    spec = importlib.util.spec_from_file_location("lstmn_imdb", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lstmn_imdb = _load()


def _args(**overrides):
    values = dict(vocabulary_size=50, embedding_dim=6, units=5, attention_units=4,
                  gru_units=3, dropout=0.5, seed=0, learning_rate=1e-3, epochs=1,
                  jit_compile=False)  # fmt: skip
    return argparse.Namespace(**{**values, **overrides})


def test_the_last_words_are_kept_and_moved_to_the_front():
    flat = np.array([[5, 6, 7, 8, 9, 0], [3, 4, 0, 0, 0, 0], [0] * 6], "int32")
    cut = lstmn_imdb.last_words(flat, 3)
    assert cut.dtype == flat.dtype
    assert cut.tolist() == [[7, 8, 9], [3, 4, 0], [0, 0, 0]]
    assert lstmn_imdb.last_words(flat, 8).tolist() == [
        [5, 6, 7, 8, 9, 0, 0, 0], [3, 4, 0, 0, 0, 0, 0, 0], [0] * 8,
    ]  # fmt: skip


def test_lstmn_and_lstm_differ_only_by_the_score():
    args = _args()
    tokens = np.array([[4, 9, 2, 0], [7, 0, 0, 0]], "int32")
    models = {
        name: lstmn_imdb.build_model(name, args, steps_per_epoch=3)
        for name in ("flat-lstmn", "flat-lstm", "flat-attention")
    }
    for model in models.values():
        assert tuple(model(tokens).shape) == (2, 2)
    lstmn, lstm = models["flat-lstmn"], models["flat-lstm"]
    assert lstmn.get_layer("lstmn").units == lstm.get_layer("lstm").units == 5
    d, u, a = 6, 5, 4  # W_x (D, A), W_h and W_h~ (U, A), v (A,)
    assert lstmn.count_params() - lstm.count_params() == d * a + 2 * u * a + a
    # flat-attention is han_imdb's flat baseline, --gru-units per direction.
    gru = models["flat-attention"].get_layer("bidirectional").forward_layer
    assert gru.units == 3


def test_the_intra_attention_picture_of_a_sentence(tmp_path):
    model = lstmn_imdb.build_model("flat-lstmn", _args(), steps_per_epoch=3)
    vocabulary = ["", "[UNK]"] + [f"w{i}" for i in range(2, 50)]
    path = tmp_path / "intra.png"
    weights = lstmn_imdb.save_intra_attention(
        model, np.array([7, 3, 12, 5, 0, 0]), vocabulary, str(path), "a title"
    )
    assert weights.shape == (4, 5)  # 4 words: the initial state, then 4 columns
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert weights[0, 0] == pytest.approx(1.0)  # word 1 reads the start alone
    assert np.all(np.triu(weights[:, 1:]) == 0)  # earlier words only, not itself
    assert path.stat().st_size > 5_000
    saved = json.loads((tmp_path / "intra.json").read_text())
    assert saved["words"] == ["w7", "w3", "w12", "w5"]
    assert saved["columns"][0] == "<start>"
    np.testing.assert_allclose(saved["weights"], weights, atol=1e-5)


def test_the_picture_takes_the_longest_sentence():
    doc = np.array([[4, 5, 0, 0], [6, 7, 8, 0], [0, 0, 0, 0], [9, 2, 3, 0]])
    assert lstmn_imdb.pick_sentence(doc).tolist() == [6, 7, 8]


@pytest.fixture
def data_dir(tmp_path):
    good, bad = ["a great film", "I loved it"], ["a dull film", "I hated it"]
    return write_reviews(tmp_path / "imdb", 60, suffix=".", good=good, bad=bad)


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script splits sentences with tensorflow_text")
def test_smoke_run(data_dir, tmp_path):
    out = tmp_path / "out"
    argv = ["--smoke", "--data-dir", str(data_dir), "--no-check-hash",
            "--output-dir", str(out), "--max-words", "6"]  # fmt: skip
    results = lstmn_imdb.main(argv)
    assert list(results) == ["flat-lstmn", "flat-lstm", "flat-attention"]
    for record in results.values():
        assert 0.0 <= record["test_accuracy"] <= 1.0
        assert record["steps_per_second"] > 0 and record["test_reviews"] == 60
    assert (out / "intra_attention.png").stat().st_size > 5_000
    words = json.loads((out / "intra_attention.json").read_text())["words"]
    assert 1 <= len(words) <= 8  # one sentence, at most --words of the smoke run
    table = (out / "results.md").read_text()
    assert "| flat-lstmn |" in table and "last 6 words" in table
    saved = json.loads((out / "results.json").read_text())
    assert saved["provenance"]["script"] == "examples/nlp/lstmn_imdb.py"
    # Finished models are reloaded, not trained again.
    again = lstmn_imdb.main([*argv, "--models", "flat-lstmn"])
    assert (
        again["flat-lstmn"]["test_accuracy"] == results["flat-lstmn"]["test_accuracy"]
    )
