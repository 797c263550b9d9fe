"""The Multi30k translation examples: data, subwords, batches, loss,
schedule, detokenization, and (large) end-to-end smoke runs with export,
reload in a fresh process and resuming from `BackupAndRestore`.

No network and no `../shared`: the tests write a small parallel corpus.
"""

import gzip
import importlib.util
import json
import os
import pathlib
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.tf_only  # tf.data, tensorflow-text, SavedModel

NLP = pathlib.Path(__file__).parents[2] / "examples" / "nlp"


def load(name):
    """The example module, imported once (the scripts import `nmt_common`)."""
    if str(NLP) not in sys.path:
        sys.path.insert(0, str(NLP))
    return importlib.import_module(name)


ANIMALS = ["dog", "cat", "horse", "bird", "child", "man", "woman", "girl"]
TIERE = ["Hund", "Katze", "Pferd", "Vogel", "Kind", "Mann", "Frau", "Mädchen"]
PLACES = ["park", "street", "beach", "field", "house", "garden"]
ORTE = ["Park", "Straße", "Strand", "Feld", "Haus", "Garten"]
VERBS = ["runs", "sleeps", "plays", "sits", "jumps"]
VERBEN = ["rennt", "schläft", "spielt", "sitzt", "springt"]


def corpus(count, seed=0):
    """A toy but real-looking parallel corpus (en, de)."""
    rng = np.random.default_rng(seed)
    en, de = [], []
    for _ in range(count):
        a, p, v = rng.integers(len(ANIMALS)), rng.integers(len(PLACES)), rng.integers(5)
        en.append(f"A {ANIMALS[a]} {VERBS[v]} in the {PLACES[p]}.")
        de.append(f"Ein {TIERE[a]} {VERBEN[v]} im {ORTE[p]}.")
    return en, de


def write(path, lines, compress=True):
    data = "\n".join(lines) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data, encoding="utf-8")


@pytest.fixture
def data_dir(tmp_path):
    directory = tmp_path / "multi30k"
    directory.mkdir()
    for split, count in (("train", 240), ("val", 24)):
        en, de = corpus(count, seed=0 if split == "train" else 1)
        en[3], de[3] = "", ""  # an empty pair
        de[5] = "   "  # one side empty
        write(directory / f"{split}.en.gz", en)
        write(directory / f"{split}.de.gz", de)
    return directory


def test_reads_local_files_and_drops_empty_pairs(data_dir):
    nmt = load("nmt_common")
    sources, targets, dropped = nmt.load_multi30k(
        "de", "en", "train", str(data_dir), check_hashes=False
    )
    en, de = corpus(240)
    keep = [i for i in range(240) if i not in (3, 5)]
    assert dropped == 2
    assert sources == [de[i] for i in keep]
    assert targets == [en[i] for i in keep]


def test_uncompressed_files_are_accepted(tmp_path):
    nmt = load("nmt_common")
    en, de = corpus(10)
    write(tmp_path / "val.en", en, compress=False)
    write(tmp_path / "val.de", de, compress=False)
    sources, targets, dropped = nmt.load_multi30k("en", "de", "val", str(tmp_path))
    assert (sources, targets, dropped) == (en, de, 0)


def test_checksum_mismatch_is_a_clear_error(data_dir):
    nmt = load("nmt_common")
    with pytest.raises(ValueError, match="Checksum mismatch") as error:
        nmt.load_multi30k("de", "en", "train", str(data_dir))  # hashes checked
    message = str(error.value)
    assert "train.de.gz" in message
    assert nmt.MULTI30K_SHA256["train.de.gz"] in message
    assert nmt.sha256(str(data_dir / "train.de.gz")) in message


def test_misaligned_files_are_a_clear_error(tmp_path):
    nmt = load("nmt_common")
    en, de = corpus(10)
    write(tmp_path / "val.en.gz", en)
    write(tmp_path / "val.de.gz", de[:9])
    with pytest.raises(ValueError, match="same number of lines") as error:
        nmt.load_multi30k("de", "en", "val", str(tmp_path), check_hashes=False)
    assert "with 9 lines" in str(error.value) and "with 10 lines" in str(error.value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(source="de", target="de"), "must differ"),
        (dict(source="fr", target="en"), "source='fr'"),
        (dict(split="test"), "split='test'"),
    ],
)
def test_bad_arguments(data_dir, kwargs, match):
    nmt = load("nmt_common")
    arguments = dict(source="de", target="en", split="train")
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        nmt.load_multi30k(**arguments, data_dir=str(data_dir), check_hashes=False)


def test_missing_file_names_the_directory(tmp_path):
    nmt = load("nmt_common")
    with pytest.raises(ValueError, match="must contain `train.de.gz`"):
        nmt.load_multi30k("de", "en", "train", str(tmp_path), check_hashes=False)


@pytest.fixture
def tokenizers(data_dir, tmp_path):
    nmt = load("nmt_common")
    sources, targets, _ = nmt.load_multi30k(
        "de", "en", "train", str(data_dir), check_hashes=False
    )
    return (
        nmt,
        sources,
        targets,
        [
            nmt.load_or_train_tokenizer(str(tmp_path / f"spm.{lang}.model"), lines, 40)
            for lang, lines in (("de", sources), ("en", targets))
        ],
    )


def test_unreachable_vocabulary_size_is_a_clear_error(tmp_path):
    nmt = load("nmt_common")
    with pytest.raises(ValueError, match="vocabulary_size=5000"):
        nmt.load_or_train_tokenizer(str(tmp_path / "x.model"), corpus(10)[0], 5000)
    assert not (tmp_path / "x.model").exists()


def test_tokenizer_is_saved_and_reused(tokenizers, tmp_path):
    nmt, sources, _, (source_tokenizer, _) = tokenizers
    path = tmp_path / "spm.de.model"
    assert path.exists()
    before = path.read_bytes()
    again = nmt.load_or_train_tokenizer(str(path), ["other text"] * 5, 40)
    assert path.read_bytes() == before
    ids = nmt.encode_source(again, sources[:4], 64)
    assert (
        ids.to_list() == nmt.encode_source(source_tokenizer, sources[:4], 64).to_list()
    )


def test_batches_are_bucketed_shifted_and_weighted(tokenizers):
    nmt, sources, targets, toks = tokenizers
    with pytest.raises(ValueError, match="max_length=2"):
        nmt.prepare_pairs(toks, sources, targets, 2)
    max_length = 30
    source_ids, target_ids, dropped = nmt.prepare_pairs(
        toks, sources, targets, max_length
    )
    assert dropped == sum(
        1
        for s, t in zip(
            nmt.encode_source(toks[0], sources, 100).to_list(),
            nmt.encode_target(toks[1], targets).to_list(),
            strict=True,
        )
        if len(s) > max_length or len(t) - 1 > max_length
    )
    for row in source_ids.to_list():
        assert row[-1] == nmt.EOS_ID and len(row) <= max_length
    for row in target_ids.to_list():
        assert row[0] == nmt.BOS_ID and row[-1] == nmt.EOS_ID
    dataset = nmt.make_dataset(source_ids, target_ids, 128, max_length, seed=0)
    assert len(dataset) == sum(1 for _ in dataset)
    bounds = nmt.bucket_boundaries(max_length)
    seen = 0
    for inputs, labels, weights in dataset:
        source = inputs["encoder_tokens"].numpy()
        decoder = inputs["decoder_tokens"].numpy()
        labels, weights = labels.numpy(), weights.numpy()
        assert source.shape[1] in bounds and decoder.shape == labels.shape
        assert source.shape[1] == decoder.shape[1]  # padded to the same bound
        assert source.shape[0] <= 128 // source.shape[1]
        # Labels are the decoder inputs shifted by one; weights mark real tokens.
        np.testing.assert_array_equal(
            decoder[:, 1:], labels[:, :-1] * (decoder[:, 1:] > 0)
        )
        np.testing.assert_array_equal(weights, labels != nmt.PAD_ID)
        assert (decoder[:, 0] == nmt.BOS_ID).all()
        seen += len(source)
    assert 0 < seen <= int(source_ids.nrows())


def test_detokenization_matches_sentencepiece(tokenizers):
    nmt, _, targets, toks = tokenizers
    import tensorflow as tf

    translator = nmt.Translator(None, toks, 64, 64)
    ids = nmt.encode_target(toks[1], targets[:50]).to_tensor()
    ours = [s.decode() for s in translator.detokenize(ids).numpy()]
    kept = tf.ragged.boolean_mask(ids, ids > nmt.EOS_ID)
    reference = nmt.in_graph(toks[1].detokenize, kept).numpy()
    assert ours == [s.decode() for s in reference]
    assert ours[:10] == targets[:10]  # lossless on in-vocabulary text


def test_smoothed_crossentropy_matches_the_formula():
    nmt = load("nmt_common")
    import keras

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype("float32")
    labels = np.array([[1, 4, 0], [2, 0, 0]])
    weights = (labels != 0).astype("float32")
    loss = nmt.SmoothedCrossentropy(0.1)(labels, logits, sample_weight=weights)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    per_token = 0.9 * nll + 0.1 * -log_p.mean(-1)
    expected = (per_token * weights).sum() / weights.sum()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # The same as Keras' dense label smoothing on one-hot labels.
    dense = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1,
                                                 reduction=None)  # fmt: skip
    per_token_keras = dense(np.eye(5)[labels], logits)
    np.testing.assert_allclose(per_token_keras, per_token, rtol=1e-5)
    with pytest.raises(ValueError, match="label_smoothing=1.5"):
        nmt.SmoothedCrossentropy(1.5)


def test_inverse_sqrt_schedule_follows_the_paper():
    script = load("nmt_transformer")
    schedule = script.InverseSqrtSchedule(256, warmup_steps=100, scale=2.0)
    for step in (0, 49, 99, 100, 400, 10000):
        s = step + 1
        expected = 2.0 * 256**-0.5 * min(s**-0.5, s * 100**-1.5)
        np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6)
    config = schedule.get_config()
    assert script.InverseSqrtSchedule(**config).get_config() == config


def test_bleu_scores():
    nmt = load("nmt_common")
    refs = ["A dog runs in the park.", "Two men sit on a bench."]
    perfect = nmt.bleu_scores(refs, refs)
    assert perfect["bleu"] == pytest.approx(100) and perfect["chrf"] == pytest.approx(
        100
    )
    lower = nmt.bleu_scores([r.lower() for r in refs], refs)
    assert lower["bleu_lowercase"] == pytest.approx(100)
    assert lower["bleu"] < 100


def test_help_documents_every_flag(capsys):
    for name, flags in (
        ("nmt_transformer", ("--hidden-dim", "--num-heads", "--warmup-steps")),
        (
            "nmt_rnn_attention",
            (
                "--attention",
                "--local-p",
                "--units",
                "--embedding-dim",
                "--decoder",
                "--compare-decoders",
            ),  # fmt: skip
        ),
    ):
        script = load(name)
        with pytest.raises(SystemExit):
            script.parse_args(["--help"])
        text = capsys.readouterr().out
        for flag in flags + ("--source", "--target", "--data-dir", "--evaluate",
                             "--translate", "--beams", "--smoke", "--output-dir"):  # fmt: skip
            assert flag in text, (name, flag)


def test_smoke_keeps_explicit_flags():
    script = load("nmt_transformer")
    args = script.parse_args(["--smoke", "--epochs", "3"])
    assert args.epochs == 3 and args.hidden_dim == 32
    with pytest.raises(ValueError, match="--beams"):
        script.parse_args(["--beams", "0"])


def test_bfloat16_policy_builds_a_mixed_model_in_graph_mode():
    """`--dtype-policy mixed_bfloat16`: bfloat16 compute, float32 weights,
    float32 softmax statistics in the loss; XLA off on a CPU (it computes
    bfloat16 dots in float32) unless asked for."""
    script = load("nmt_transformer")
    args = script.parse_args(["--smoke", "--dtype-policy", "mixed_bfloat16"])
    assert args.jit_compile is False
    again = ["--smoke", "--dtype-policy", "mixed_bfloat16", "--jit-compile"]
    assert script.parse_args(again).jit_compile is True
    assert script.parse_args(["--smoke"]).jit_compile is None
    model, _, _ = script.build(args, 40, 50, steps_per_epoch=1)
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert {w.dtype for w in model.weights} == {"float32"}
    logits = model((np.ones((2, 5), "int32"), np.ones((2, 4), "int32")))
    layers = list(model._flatten_layers(include_self=False))
    assert layers and {layer.compute_dtype for layer in layers} == {"bfloat16"}
    assert logits.shape == (2, 4, 50)
    loss = sys.modules["nmt_common"].SmoothedCrossentropy()(
        np.ones((2, 4), "int32"), logits
    )
    assert loss.dtype == "float32" and np.isfinite(float(loss))


@pytest.mark.parametrize("heads", [1, 2], ids=["rnn", "transformer"])
def test_attention_views_of_the_translations(heads, tmp_path):
    """`save_attention_views` (what `export` writes beside `attention.png`):
    per sentence an offline `alignment_view` whose matrices are the RNN's
    alignment, or the last layer's mean over heads then each head, with the
    subword labels; for several heads, the model view of every layer of the
    first sentence, queries labelled by the target, keys by the source."""
    common = load("nmt_transformer") and sys.modules["nmt_common"]
    rng = np.random.default_rng(0)
    rows = []
    for n, (source, target) in enumerate(
        [(["\u2581Ein", "\u2581Hund", "</s>"], ["<s>", "\u2581A", "\u2581dog", "</s>"]),
         (["\u2581Kind", "</s>"], ["<s>", "\u2581Child", "</s>"])]
    ):  # fmt: skip
        weights = rng.random((2, heads, len(target), len(source)))
        rows.append(
            (f"sentence {n}", source, target, weights / weights.sum(-1, keepdims=True))
        )
    paths = common.save_attention_views(rows, str(tmp_path))
    names = ["alignments_0.html", "alignments_1.html"]
    if heads > 1:
        names.append("cross_attention_model_view.html")
    assert [os.path.basename(p) for p in paths] == names
    text = (tmp_path / "alignments_1.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "https://" not in text
    payload = json.loads(text.split("id='ka-data'>")[1].split("</script>")[0])
    assert payload["sourceTokens"] == ["\u2581Kind", "</s>"]
    matrices = payload["matrices"]
    expected = ["alignment"] if heads == 1 else ["mean of 2 heads", "head 0", "head 1"]
    assert [m["name"] for m in matrices] == expected
    assert all(m["targetTokens"] == ["<s>", "\u2581Child", "</s>"] for m in matrices)
    if heads > 1:
        page = (tmp_path / "cross_attention_model_view.html").read_text(
            encoding="utf-8"
        )
        for token in ("\u2581Ein", "\u2581dog", "decoder_1_cross"):
            assert json.dumps(token) in page, token


@pytest.mark.large
@pytest.mark.parametrize(
    "name, flags",
    [("nmt_transformer", []), ("nmt_rnn_attention", []),
     ("nmt_rnn_attention", ["--attention", "luong", "--local-p", "2"]),
     ("nmt_rnn_attention", ["--decoder", "lstmn-shallow"]),
     ("nmt_rnn_attention", ["--decoder", "lstmn-deep"])],
    ids=["transformer", "rnn", "rnn-luong-local-p", "rnn-lstmn-shallow",
         "rnn-lstmn-deep"],
)  # fmt: skip
def test_smoke_run_exports_and_reloads(name, flags, data_dir, tmp_path):
    script = load(name)
    out = tmp_path / "out"
    results = script.main(["--smoke", "--source", "en", "--target", "de",
                           "--data-dir", str(data_dir), "--no-check-hashes",
                           "--vocabulary-size", "40", "--output-dir", str(out),
                           *flags])  # fmt: skip
    for label in ("greedy", "beam2"):
        assert 0 <= results[label]["bleu"] <= 100
    assert (out / "attention.png").stat().st_size > 0
    views = sorted(p.name for p in out.glob("*.html"))
    expected = [f"alignments_{i}.html" for i in range(3)]
    if name == "nmt_transformer":
        expected.insert(3, "cross_attention_model_view.html")
    assert sorted(views) == sorted(expected)
    # run() raises if the SavedModel, reloaded in a fresh process, disagrees.
    assert (out / "saved_model" / "saved_model.pb").exists()
    assert (out / "logs").is_dir() and (
        out / "checkpoints" / "last.weights.h5"
    ).exists()
    en, de = corpus(12, seed=5)
    write(tmp_path / "my.de", de, compress=False)
    write(tmp_path / "my.en", en, compress=False)
    # --evaluate uses the trained model and its saved flags (here en -> de).
    again = script.main(["--output-dir", str(out), "--beams", "1", "--evaluate",
                         str(tmp_path / "my.en"), str(tmp_path / "my.de")])  # fmt: skip
    assert again["direction"] == "en-de" and "train_seconds" not in again
    assert 0 <= again["greedy"]["bleu"] <= 100
    if "--decoder" in flags:
        # The saved flags rebuild the LSTMN model (not the default GRU), and
        # the reloaded weights translate the validation set as after training.
        assert again["parameters"] == results["parameters"]
        nmt = sys.modules["nmt_common"]
        de, en, _ = nmt.load_multi30k("de", "en", "val", str(data_dir), False)
        write(tmp_path / "val.de", de, compress=False)
        write(tmp_path / "val.en", en, compress=False)
        script.main(["--output-dir", str(out), "--beams", "1", "--evaluate",
                     str(tmp_path / "val.en"), str(tmp_path / "val.de")])  # fmt: skip
        reloaded = (out / "val.en.greedy.de").read_text(encoding="utf-8")
        assert reloaded == (out / "val.greedy.de").read_text(encoding="utf-8")


@pytest.mark.parametrize("decoder", ["gru", "lstmn-shallow", "lstmn-deep"])
def test_greedy_search_equals_the_teacher_forced_argmax(decoder):
    """The cached step-by-step search of each `--decoder` (the LSTMN's tapes
    sized by `get_initial_state(batch, max_length)`) picks, at every step up
    to the end token, the arg-max of the teacher-forced model fed its own
    tokens; beam search runs over the same state."""
    script = load("nmt_rnn_attention")
    nmt = sys.modules["nmt_common"]
    args = script.parse_args(["--smoke", "--decoder", decoder])
    model, _, search = script.build(args, 40, 50, steps_per_epoch=1)
    rng = np.random.default_rng(0)
    source = rng.integers(nmt.EOS_ID + 1, 40, size=(3, 7)).astype("int32")
    source[0, 5:] = nmt.PAD_ID  # padding
    length = 8
    ids, attention = search(source, 1, length)
    ids = np.asarray(ids)
    assert np.asarray(attention).shape == (3, 1, 1, length, 7)
    inputs = np.concatenate([np.full((3, 1), nmt.BOS_ID, "int32"), ids[:, :-1]], 1)
    logits = model({"encoder_tokens": source, "decoder_tokens": inputs})
    ended_before = np.cumsum(ids == nmt.EOS_ID, axis=1) - (ids == nmt.EOS_ID)
    real = ended_before == 0  # the tokens up to and with the end token
    assert real.sum() > 3
    np.testing.assert_array_equal(np.argmax(logits, -1)[real], ids[real])
    beams, _ = search(source, 3, length)
    assert np.asarray(beams).shape == (3, length)


def test_the_default_decoder_is_the_gru_model():
    """`--decoder gru` (the default) builds the BiGRU + GRU model as before
    the LSTMN decoders came: the same weights, in the same order."""
    script = load("nmt_rnn_attention")
    args = script.parse_args(["--smoke"])
    assert args.decoder == "gru" and "decoder" in script.ARCHITECTURE
    model, _, _ = script.build(args, 40, 50, steps_per_epoch=1)
    assert model.name == "rnn_bahdanau" and model.count_params() == 16306
    shapes = [tuple(w.shape) for w in model.weights]
    assert shapes[:2] == [(50, 16), (40, 16)]  # target, source embeddings
    names = [layer.name for layer in model.layers if layer.weights]
    assert names == ["target_embedding", "source_embedding", "encoder", "bridge",
                     "decoder", "deep_output", "readout"]  # fmt: skip


@pytest.mark.parametrize(
    "flags, match",
    [(["--decoder", "lstmn-deep", "--attention", "luong"], "do not apply"),
     (["--compare-decoders", "gru", "lstmn-deep", "--local-p", "2"], "do not apply"),
     (["--compare-decoders", "gru", "--evaluate", "a", "b"], "DIR/DECODER")],
)  # fmt: skip
def test_decoder_flags_that_do_not_fit(flags, match):
    script = load("nmt_rnn_attention")
    with pytest.raises(ValueError, match=match):
        script.parse_args(flags)


@pytest.mark.large
def test_compare_decoders_resumes_and_tabulates(data_dir, tmp_path):
    """`--compare-decoders` trains each decoder into its own directory and
    tabulates them; an interrupted comparison resumes where it stopped,
    a finished one is not trained again, and other flags are refused."""
    script = load("nmt_rnn_attention")
    nmt = sys.modules["nmt_common"]
    flags = ["--smoke", "--epochs", "2", "--data-dir", str(data_dir),
             "--no-check-hashes", "--vocabulary-size", "40", "--no-export",
             "--beams", "2", "--output-dir", str(tmp_path),
             "--compare-decoders", "gru", "lstmn-deep"]  # fmt: skip
    with pytest.raises(nmt.SimulatedInterruption):
        script.main(flags + ["--interrupt-after-epochs", "1"])
    results = script.main(flags)
    assert list(results) == ["gru", "lstmn-deep"]
    assert results["gru"]["epochs_run"] == [2]  # resumed
    assert results["lstmn-deep"]["epochs_run"] == [1, 2]
    assert results["lstmn-deep"]["parameters"] != results["gru"]["parameters"]
    table = (tmp_path / "results.md").read_text()
    for decoder in ("gru", "lstmn-deep"):
        assert (tmp_path / decoder / "model.weights.h5").exists()
        assert f"| {decoder} | {results[decoder]['parameters']:,} | 2 |" in table
    assert "beam 2 BLEU" in table
    again = script.main(flags)  # nothing left to train
    assert again == json.loads(json.dumps(results))
    with pytest.raises(ValueError, match="other settings"):
        script.main(flags + ["--units", "48"])


@pytest.mark.large
def test_training_resumes_after_an_interruption(data_dir, tmp_path):
    script = load("nmt_transformer")
    nmt = sys.modules["nmt_common"]
    flags = ["--smoke", "--epochs", "2", "--data-dir", str(data_dir),
             "--no-check-hashes", "--vocabulary-size", "40", "--no-export",
             "--beams", "1", "--output-dir", str(tmp_path)]  # fmt: skip
    with pytest.raises(nmt.SimulatedInterruption):
        script.main(flags + ["--interrupt-after-epochs", "1"])
    assert (tmp_path / "backup").is_dir()
    results = script.main(flags)
    assert results["epochs_run"] == [2]  # continued where it stopped
    # The optimizer state came back too: two epochs of steps in all.
    assert results["iterations"] == 2 * results["steps_per_epoch"] > 0
    assert not (tmp_path / "backup").exists()  # removed once training finished


# The Transformer's export repeats the RNN's check (~30 s) as `large`.
@pytest.mark.parametrize(
    "name",
    [pytest.param("nmt_transformer", marks=pytest.mark.large), "nmt_rnn_attention"],
)
def test_saved_model_serves_under_the_tf1_loader(name, tokenizers, tmp_path):
    """The SavedModel of `run` (`export_and_check`) serves under
    `tf.compat.v1.saved_model.loader.load` in a `tf.compat.v1.Session` (the
    graph-and-checkpoint path of TensorFlow Serving) as under
    `tf.saved_model.load`. An untrained `--smoke` model (beam search, as
    exported by `run`) is enough: the TF1 loader used to fail on its first
    variable read ("Read variable failure ... tf2xla conversion failed")."""
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    from examples.common.export import run_v1_signature

    nmt, sources, _, toks = tokenizers
    script = load(name)
    args = script.parse_args(["--smoke", "--vocabulary-size", "40"])
    _, _, search = script.build(args, *[t.vocabulary_size() for t in toks], 1)
    translator = nmt.Translator(search, toks, args.max_length, args.max_length + 8,
                                args.beams, nmt.bucket_boundaries(args.max_length,
                                                                  single=True))  # fmt: skip
    sentences = sources[:8]
    export_dir = str(tmp_path / "saved_model")
    # Raises unless the SavedModel, reloaded with tf.saved_model.load in a
    # fresh process, translates like the translator in memory.
    served = nmt.export_and_check(translator, export_dir, sentences)
    (outputs,) = run_v1_signature(export_dir, {"sentences": sentences}).values()
    assert [s.decode() for s in outputs] == served


@pytest.mark.large
def test_translate_writes_one_line_per_source_line_to_stdout(data_dir, tmp_path):
    """`--translate < src > hyp` is a filter: one line out per line in on
    standard output, every status line (the strategy, ...) on standard
    error. An untrained model (`--epochs 0`) is enough."""
    import subprocess

    script = load("nmt_transformer")
    out = tmp_path / "out"
    script.main(["--smoke", "--epochs", "0", "--source", "de", "--target", "en",
                 "--data-dir", str(data_dir), "--no-check-hashes", "--no-export",
                 "--vocabulary-size", "40", "--beams", "1",
                 "--output-dir", str(out)])  # fmt: skip
    _, sources = corpus(5, seed=7)
    sources.insert(2, "")  # an empty line is translated too (to a line)
    result = subprocess.run(
        [sys.executable, str(NLP / "nmt_transformer.py"), "--output-dir", str(out),
         "--beams", "1", "--translate"],
        input="\n".join(sources) + "\n", capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("\n") == len(sources), result.stdout
    assert "Strategy: _DefaultDistributionStrategy" in result.stderr
