import importlib.util
import json
import math
import pathlib
import re

import keras
import numpy as np
import pytest
from keras import ops

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "char_lm.py"


def _load():
    spec = importlib.util.spec_from_file_location("char_lm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


char_lm = _load()


@pytest.fixture
def text_dir(tmp_path):
    """A small synthetic text: verses of a few words, in a random order."""
    rng = np.random.default_rng(0)
    words = ["to be", "or not", "that is", "the question", "whether"]
    lines = [
        f"{rng.choice(['ANNA', 'BEN'])}:\n" + " ".join(rng.choice(words, 6)) + ".\n"
        for _ in range(400)
    ]
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "input.txt").write_text("\n".join(lines))
    return directory


def test_strided_windows_cover_the_split_and_shift_by_one():
    ids = np.arange(23, dtype="int32")
    x, y = char_lm.strided_windows(ids, 5)
    assert x.shape == y.shape == (4, 5)  # (23 - 1) // 5 windows
    np.testing.assert_array_equal(x.ravel(), ids[:20])
    np.testing.assert_array_equal(y, x + 1)


def test_uniform_logits_give_log_vocabulary_at_every_position():
    vocabulary = 7
    model = keras.Sequential(
        [keras.layers.Embedding(vocabulary, vocabulary, embeddings_initializer="zeros")]
    )
    ids = np.random.default_rng(0).integers(0, vocabulary, 200).astype("int32")
    losses = char_lm.position_losses(model, ids, 16, eval_tokens=48)
    assert losses.shape == (16,)
    np.testing.assert_allclose(losses, math.log(vocabulary), rtol=1e-6)


@pytest.mark.tf_only(reason="generation is compiled with tf.function")
def test_sliding_window_generation_continues_past_the_context():
    """A stand-in model that predicts "next id" at every position: the draw
    must read the logits at the newest character, also once the window is
    full and slides."""
    vocabulary, context = 50, 4

    def model(window, training=False):  # (B, T) -> (B, T, V)
        return 1e4 * ops.one_hot((window + 1) % vocabulary, vocabulary)

    tokens = char_lm.generate(
        model, [3, 4, 5], length=9, context=context, temperature=1.0, seed=0,
        num_samples=2,
    )  # fmt: skip
    np.testing.assert_array_equal(tokens, [list(range(6, 15))] * 2)


def test_attention_views_of_a_validation_snippet(tmp_path):
    """`save_attention_views` (what `main` writes per method): a head view
    and a model view of a tiny `CharTransformer` over the first characters
    of the validation ids, from `collect_attention`, one layer per block,
    the characters shown (newline and space as visible marks); the pages
    load nothing."""
    chars = ["\n", " ", "a", "b", "c"]
    ids = np.array([2, 3, 1, 4, 0, 2, 2, 3, 1, 4], "int32")
    model = char_lm.CharTransformer(len(chars), "rope", 2, 2, 16, seed=0)
    model(ids[None, :8])  # build
    paths = char_lm.save_attention_views(model, ids, chars, 6, tmp_path)
    assert [p.name for p in paths] == [
        "attention_head_view.html",
        "attention_model_view.html",
    ]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
        payload = json.loads(
            re.search(r"id='ka-data'>(.*?)</script>", text, re.S).group(1)
        )
        assert payload["tokens"] == [["a", "b", "\u2423", "c", "\u23ce", "a"]]
        assert [layer["name"] for layer in payload["layers"]] == [
            "decoder/block_0/self_attention",
            "decoder/block_1/self_attention",
        ]
    assert payload["kind"] == "model"


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data and compiles with tf.function")
def test_smoke_run(tmp_path, text_dir):
    out = tmp_path / "out"
    # Width 8: the run is mostly XLA compilation, about a tenth shorter for
    # this width than for 16.
    argv = [
        "--data-dir", str(text_dir), "--no-check-hash", "--output-dir", str(out),
        "--positions", "learned", "alibi", "--num-layers", "1", "--num-heads", "2",
        "--hidden-dim", "8", "--context", "16", "--batch-size", "8",
        "--iterations", "60", "--eval-interval", "20", "--warmup-iters", "5",
        "--lr", "3e-3", "--eval-lengths", "16", "32", "--sample-length", "40",
        "--num-samples", "1", "--prompt", "ANNA:",
    ]  # fmt: skip
    summary = char_lm.main(argv)
    results = summary["results"]
    assert list(results) == ["learned", "alibi"]
    vocabulary = len(set((text_dir / "input.txt").read_text()))
    for name, result in results.items():
        curve = result["curve"]
        assert curve["iteration"] == [20, 40, 60]
        assert np.all(np.isfinite(curve["loss"] + curve["val_loss"])), name
        assert curve["loss"][-1] < curve["loss"][0], name
        assert curve["val_loss"][-1] < curve["val_loss"][0], name
        losses = [result["val_loss"][n] for n in ("16", "32")]
        assert all(0 < v < math.log(vocabulary) for v in losses), name
        # The loss at the training length is the last validation of `fit`.
        assert math.isclose(losses[0], curve["val_loss"][-1], rel_tol=1e-3), name
        assert np.isfinite(result["past_context_loss"])
        assert len(result["position_loss"]) == 32
        assert result["samples"][0].startswith("ANNA:")
        assert len(result["samples"][0]) == len("ANNA:") + 40
    table = (out / "results.md").read_text()
    assert "| `alibi` |" in table and "positions 16-31 of L=32" in table
    assert (out / "val_loss.png").stat().st_size > 10_000
    assert "===== learned =====\nANNA:" in (out / "samples.txt").read_text()
    saved = json.loads((out / "results.json").read_text())
    assert saved["results"]["alibi"]["val_loss"] == results["alibi"]["val_loss"]

    # Run again: the trained models are reloaded, not trained again, and
    # give the same losses; other settings in the same directory are refused.
    again = char_lm.main(argv)["results"]
    for name in results:
        assert again[name]["curve"] == results[name]["curve"]
        np.testing.assert_allclose(
            list(again[name]["val_loss"].values()),
            list(results[name]["val_loss"].values()),
            rtol=1e-5,
        )
    with pytest.raises(ValueError, match="other settings"):
        char_lm.main([*argv, "--iterations", "40"])


class _Killed(RuntimeError):
    pass


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data and compiles with tf.function")
def test_a_killed_run_resumes_where_it_stopped(tmp_path, text_dir, monkeypatch):
    argv = [
        "--data-dir", str(text_dir), "--no-check-hash",
        "--output-dir", str(tmp_path), "--positions", "rope", "--num-layers", "1",
        "--num-heads", "2", "--hidden-dim", "8", "--context", "8",
        "--batch-size", "4", "--iterations", "30", "--eval-interval", "10",
        "--eval-lengths", "8", "--sample-length", "5", "--num-samples", "1",
    ]  # fmt: skip
    backup = keras.callbacks.BackupAndRestore
    end_of_epoch = backup.on_epoch_end

    def killed_after_two(self, epoch, logs=None):
        end_of_epoch(self, epoch, logs)  # the backup is written
        if epoch == 1:
            raise _Killed

    monkeypatch.setattr(backup, "on_epoch_end", killed_after_two)
    with pytest.raises(_Killed):
        char_lm.main(argv)
    assert (tmp_path / "rope" / "backup").is_dir()
    monkeypatch.setattr(backup, "on_epoch_end", end_of_epoch)
    result = char_lm.main(argv)["results"]["rope"]
    assert result["epochs_this_call"] == 1  # only the third interval ran again
    assert result["curve"]["iteration"] == [10, 20, 30]
    assert not (tmp_path / "rope" / "backup").exists()
