"""HierarchicalAttentionNetwork: padding at both levels, training, saving."""

import keras
import numpy as np
import pytest

import keras_attention as ka

VOCAB = 30


def _model(**kwargs):
    sizes = dict(embedding_dim=6, word_units=4, sentence_units=5, attention_units=7)
    return ka.models.HierarchicalAttentionNetwork(VOCAB, 3, **{**sizes, **kwargs})


@pytest.fixture
def tokens(rng):
    """(B, N, W) = (3, 4, 6): padded words, a padded sentence, a full row."""
    tokens = rng.integers(1, VOCAB, size=(3, 4, 6))
    tokens[0, 1, 4:] = 0  # right-padded sentence
    tokens[0, 2, :2] = 0  # left-padded sentence
    tokens[1, 3] = 0  # a padded sentence at the end
    tokens[1, 0] = 0  # and one at the start
    return tokens.astype("int32")


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_weights_are_distributions_over_the_real_tokens(tokens):
    result = _model().explain(tokens)
    words, sentences = _np(result.word_weights), _np(result.sentence_weights)
    real_words, real_sentences = tokens != 0, (tokens != 0).any(-1)
    assert np.all(words[~real_words] == 0)
    assert np.all(sentences[~real_sentences] == 0)
    np.testing.assert_allclose(words.sum(-1)[real_sentences], 1.0, atol=1e-5)
    np.testing.assert_allclose(sentences.sum(-1), 1.0, atol=1e-5)


def test_padding_changes_nothing_at_either_level(tokens):
    model = _model()
    base = _np(model(tokens))
    # More padded words in every sentence, and more padded sentences.
    wider = np.pad(tokens, [(0, 0), (0, 0), (0, 3)])
    longer = np.pad(tokens, [(0, 0), (2, 1), (0, 0)])
    np.testing.assert_allclose(_np(model(wider)), base, atol=1e-5)
    np.testing.assert_allclose(_np(model(longer)), base, atol=1e-5)
    # Whatever the padding embedding holds.
    table = _np(model.embedding.embeddings).copy()
    table[0] = 50.0
    model.embedding.embeddings.assign(table)
    np.testing.assert_allclose(_np(model(tokens)), base, atol=1e-5)
    # The check can fail: a real token does change the logits.
    changed = tokens.copy()
    changed[2, 0, 0] = changed[2, 0, 0] % (VOCAB - 1) + 1
    assert np.abs(_np(model(changed))[2] - base[2]).max() > 1e-6


def test_trains_compiled_and_reloads(rng, tmp_path):
    # The class is whether token 1 occurs anywhere in the document.
    x = rng.integers(2, VOCAB, size=(64, 3, 5)).astype("int32")
    x[::3, 1, 3:] = 0
    y = rng.integers(0, 2, size=64)
    for i in np.flatnonzero(y):
        x[i, rng.integers(0, 3), rng.integers(0, 3)] = 1
    model = _model(dropout=0.1, seed=1)
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=True)  # fmt: skip
    model.fit(x, y, epochs=30, batch_size=16, verbose=0)
    # The trained model's logits eagerly: a compiled `evaluate` or `predict`
    # would spend seconds compiling the program that `reloaded.predict`
    # compiles below.
    logits = _np(model(x))
    assert np.mean(logits.argmax(-1) == y) > 0.9
    path = tmp_path / "han.keras"
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(_np(reloaded.predict(x, verbose=0)), logits, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"word_units": 0}, "word_units=0"),
        ({"dropout": -0.1}, "dropout=-0.1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _model(**kwargs)


def test_tokens_must_be_documents():
    with pytest.raises(ValueError, match="tokens"):
        _model()(np.ones((2, 5), "int32"))
