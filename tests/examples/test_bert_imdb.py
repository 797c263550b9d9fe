"""The BERT pre-training example: word pieces, windows, masking, the
schedule, and (large) the whole script on synthetic reviews with its
SavedModel served by the TF1 loader and a resumed rerun."""

import importlib
import pathlib
import sys

import keras
import numpy as np
import pytest
from synthetic_imdb import write_reviews

pytestmark = pytest.mark.tf_only(reason="tf.data, tensorflow-text, SavedModel")

NLP = pathlib.Path(__file__).parents[2] / "examples" / "nlp"


def load():
    if str(NLP) not in sys.path:
        sys.path.insert(0, str(NLP))
    return importlib.import_module("bert_imdb")


@pytest.fixture
def data_dir(tmp_path):
    return write_reviews(tmp_path / "imdb", 120, phrases=4)


def test_windows_cut_every_piece_into_cls_sep_frames():
    script = load()
    rows = [np.arange(10, 17, dtype="int32"), np.array([20], "int32")]
    out = script.windows(rows, 5)  # 3 pieces per window
    cls, sep, pad = script.CLS, script.SEP, script.PAD
    assert out.tolist() == [
        [cls, 10, 11, 12, sep], [cls, 13, 14, 15, sep],
        [cls, 16, sep, pad, pad], [cls, 20, sep, pad, pad],
    ]  # fmt: skip
    assert script.pack(rows, 4).tolist() == [[cls, 10, 11, sep], [cls, 20, sep, pad]]


def test_masking_never_picks_specials_and_labels_the_original_pieces():
    script = load()
    args = script.parse_args(["--smoke"])
    ids = script.windows([np.arange(5, 60, dtype="int32")] * 8, args.sequence_length)
    inputs, labels, weights = script.masked_examples(script.mask_generator(args), ids)
    positions = np.asarray(inputs["mask_positions"])
    chosen = np.take_along_axis(ids, positions, 1)
    real = np.asarray(weights) > 0
    assert real.any()
    assert np.all(chosen[real] >= 5)  # never [PAD], [CLS] or [SEP]
    np.testing.assert_array_equal(np.asarray(labels)[real], chosen[real])
    np.testing.assert_array_equal(inputs["padding_mask"], ids != script.PAD)


def test_warm_up_then_linear_decay():
    script = load()
    schedule = script.learning_rate(1e-3, 10, 110)
    values = [float(schedule(s)) for s in (0, 5, 10, 60, 110)]
    np.testing.assert_allclose(values, [0.0, 5e-4, 1e-3, 5e-4, 0.0], atol=1e-9)
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    assert float(again(60)) == pytest.approx(5e-4)


def test_bad_flags():
    script = load()
    with pytest.raises(SystemExit):
        script.parse_args(["--pretrain-steps", "10", "--eval-every", "3"])
    with pytest.raises(SystemExit):
        script.parse_args(["--sequence-length", "2"])


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
def test_smoke_run_pretrains_fine_tunes_serves_and_resumes(data_dir, tmp_path):
    script = load()
    out = tmp_path / "out"
    argv = ["--smoke", "--data-dir", str(data_dir), "--no-check-hash",
            "--output-dir", str(out)]  # fmt: skip
    results = script.main(argv)
    assert set(results["models"]) == {"pretrained", "scratch", "lora"}
    for record in results["models"].values():  # every one of the 120 scored
        assert record["test_accuracy"] * 120 == pytest.approx(
            round(record["test_accuracy"] * 120), abs=1e-6
        )
    lora, full = (
        results["models"][m]["trainable_weights"] for m in ("lora", "scratch")
    )
    assert 0 < lora < full
    log = results["pretraining"]["log"]
    assert [int(r["epoch"]) for r in log] == [0, 1] and "val_accuracy" in log[0]
    assert (out / "vocab.txt").exists() and (
        out / "saved_model" / "saved_model.pb"
    ).exists()
    # The attention of one review: the picture, and the view with its pieces.
    assert (out / "attention.png").stat().st_size > 10_000
    view = (out / "attention_view.html").read_text()
    assert "[CLS]" in view and "[SEP]" in view and "layer_0" in view
    # Rerunning the command reads the finished pre-training and models back.
    again = script.main(argv)
    assert again["models"]["pretrained"]["test_accuracy"] == pytest.approx(
        results["models"]["pretrained"]["test_accuracy"]
    )
    assert again["pretraining"]["log"] == log
