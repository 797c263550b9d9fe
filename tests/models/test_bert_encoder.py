"""`BertEncoder` and `BertMaskedLM` against keras-hub's BERT (the same
config and weights, no download), with their padding, positions,
serialization, compiled fit and errors. The padding's gradients under a
compiled `fit` are checked with every model's in tests/test_implicit_masks.py."""

import warnings

import keras
import numpy as np
import pytest

import keras_attention as ka

VOCAB, LAYERS, HEADS, WIDTH, FF, MAX_LENGTH = 50, 2, 2, 8, 16, 12
PADDING = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], "int32")


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": np.where(PADDING, rng.integers(1, VOCAB, PADDING.shape), 0),
        "segment_ids": rng.integers(0, 2, PADDING.shape) * PADDING,
        "padding_mask": PADDING,
    }


def _encoder(**kwargs):
    arguments = dict(
        vocabulary_size=VOCAB, num_layers=LAYERS, num_heads=HEADS, hidden_dim=WIDTH,
        intermediate_dim=FF, max_sequence_length=MAX_LENGTH, dropout=0.0,
    )  # fmt: skip
    return ka.models.BertEncoder(**{**arguments, **kwargs})


def _hub_backbone():
    import keras_hub

    return keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=LAYERS, num_heads=HEADS, hidden_dim=WIDTH,
        intermediate_dim=FF, max_sequence_length=MAX_LENGTH,
    )  # fmt: skip


def _real(outputs):
    """The sequence output at real positions (padded ones are undefined in
    both libraries) and the pooled output."""
    sequence = np.asarray(outputs["sequence_output"])[PADDING.astype(bool)]
    return sequence, np.asarray(outputs["pooled_output"])


def test_equals_keras_hub_bert_with_the_same_weights():
    hub = _hub_backbone()
    ours = ka.models.BertEncoder.from_keras_hub(hub)
    inputs = _inputs()
    for actual, expected in zip(_real(ours(inputs)), _real(hub(inputs)), strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-5)
    # Back to keras-hub: the same outputs again, every weight carried.
    back = ours.to_keras_hub()
    for actual, expected in zip(_real(back(inputs)), _real(hub(inputs)), strict=True):
        np.testing.assert_allclose(actual, expected, atol=1e-5)
    assert back.count_params() == hub.count_params() == ours.count_params()


def test_a_fresh_encoder_converts_to_keras_hub_and_back():
    ours = _encoder()
    inputs = _inputs(1)
    expected = _real(ours(inputs))
    again = ka.models.BertEncoder.from_keras_hub(ours.to_keras_hub())
    for actual, want in zip(_real(again(inputs)), expected, strict=True):
        np.testing.assert_allclose(actual, want, atol=1e-5)


def test_masked_lm_equals_keras_hubs_and_is_tied():
    import keras_hub

    hub = _hub_backbone()
    hub_model = keras_hub.models.BertMaskedLM(hub, preprocessor=None)
    model = ka.models.BertMaskedLM(ka.models.BertEncoder.from_keras_hub(hub))
    model.build()
    model.masked_lm_head.set_weights(hub_model.masked_lm_head.get_weights())
    inputs = {**_inputs(), "mask_positions": np.array([[1, 5], [0, 3], [1, 1]])}
    logits = model(inputs)
    assert logits.dtype == "float32" and tuple(logits.shape) == (3, 2, VOCAB)
    np.testing.assert_allclose(logits, hub_model(inputs), atol=1e-5)
    # Tied: the only (V, D) or (D, V) weight is the token embedding.
    shaped = [w for w in model.weights if set(w.shape) == {VOCAB, WIDTH}]
    assert [w.path for w in shaped] == [model.encoder.token_embedding.embeddings.path]


def test_padding_changes_no_real_output_and_only_the_pad_tokens_logit():
    """New values in the padded positions' token and segment ids change
    no real position's output; garbage in the padding token's embedding row
    changes only that token's logit (the tied head reads the row as an
    output class)."""
    encoder = _encoder()
    model = ka.models.BertMaskedLM(encoder)
    inputs = {**_inputs(), "mask_positions": np.array([[1, 5], [0, 3], [1, 0]])}
    before_sequence = _real(encoder(_inputs()))
    before_logits = np.asarray(model(inputs))
    noisy = _inputs()
    rng = np.random.default_rng(7)
    noisy["token_ids"] = np.where(
        PADDING, noisy["token_ids"], rng.integers(1, VOCAB, PADDING.shape)
    )
    noisy["segment_ids"] = np.where(PADDING, noisy["segment_ids"], 1)
    for actual, want in zip(_real(encoder(noisy)), before_sequence, strict=True):
        np.testing.assert_allclose(actual, want, atol=1e-5)
    table = np.asarray(encoder.token_embedding.embeddings).copy()
    table[0] = 100.0 * rng.normal(size=WIDTH)
    encoder.token_embedding.embeddings.assign(table)
    after_logits = np.asarray(model(inputs))
    np.testing.assert_allclose(after_logits[..., 1:], before_logits[..., 1:], atol=1e-4)
    assert not np.allclose(after_logits[..., 0], before_logits[..., 0])


@pytest.mark.parametrize("position_encoding", ["rope", "alibi"])
def test_positions_inside_the_attention_have_no_length_limit(position_encoding):
    encoder = _encoder(position_encoding=position_encoding)
    tokens = np.random.default_rng(0).integers(1, VOCAB, (2, 3 * MAX_LENGTH))
    outputs = encoder(tokens)
    assert tuple(outputs["sequence_output"].shape) == (2, 3 * MAX_LENGTH, WIDTH)
    assert encoder.position_embedding is None
    # Positions matter: without them, permuting the tokens would permute the
    # outputs (weights scaled up: BERT's initial ones give near-zero scores).
    encoder.set_weights([10.0 * w for w in encoder.get_weights()])
    outputs = encoder(tokens)
    order = np.random.default_rng(1).permutation(3 * MAX_LENGTH)
    permuted = np.asarray(encoder(tokens[:, order])["sequence_output"])
    difference = np.abs(permuted - np.asarray(outputs["sequence_output"])[:, order])
    assert difference.max() > 1e-4
    with pytest.raises(ValueError, match="sequence_length"):
        _encoder()(tokens)  # the learned table has MAX_LENGTH rows


def test_pre_ln_and_chunked_attention():
    """`normalize_first` adds the stack's final norm; `attention_impl`
    reaches every block and gives the dense path's outputs."""
    inputs = _inputs()
    dense = _encoder(normalize_first=True, attention_impl="dense")
    chunked = _encoder(normalize_first=True, attention_impl="chunked")
    dense(inputs)
    chunked(inputs)
    chunked.set_weights(dense.get_weights())
    assert dense.encoder.final_norm is not None
    assert {b.attention_impl for b in chunked.encoder.blocks} == {"chunked"}
    for actual, want in zip(_real(chunked(inputs)), _real(dense(inputs)), strict=True):
        np.testing.assert_allclose(actual, want, atol=1e-5)


def test_token_ids_alone_mean_every_token_is_real():
    encoder = _encoder()
    tokens = _inputs()["token_ids"]
    everything = {"token_ids": tokens, "padding_mask": np.ones_like(tokens)}
    for actual, want in zip(
        (encoder(tokens)["sequence_output"], encoder(tokens)["pooled_output"]),
        (encoder(everything)["sequence_output"], encoder(everything)["pooled_output"]),
        strict=True,
    ):
        np.testing.assert_allclose(actual, want, atol=1e-6)


def test_keras_file_round_trip(tmp_path):
    model = ka.models.BertMaskedLM(_encoder(position_encoding="alibi"))
    inputs = {**_inputs(), "mask_positions": np.array([[1, 5], [0, 3], [1, 0]])}
    expected = np.asarray(model(inputs))
    model.save(tmp_path / "bert.keras")
    loaded = keras.saving.load_model(tmp_path / "bert.keras")
    assert isinstance(loaded.encoder, ka.models.BertEncoder)
    assert loaded.encoder.position_encoding == "alibi"
    np.testing.assert_allclose(loaded(inputs), expected, atol=1e-6)


def test_compiled_fit_learns_the_masked_tokens():
    """`fit(jit_compile=True)` on one batch: the masked-LM loss falls."""
    keras.utils.set_random_seed(0)
    model = ka.models.BertMaskedLM(_encoder(num_layers=1))
    inputs = {**_inputs(), "mask_positions": np.array([[1, 5], [0, 3], [1, 0]])}
    labels = np.take_along_axis(inputs["token_ids"], inputs["mask_positions"], 1)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    with warnings.catch_warnings():  # TensorFlow's: the pooler is not used,
        warnings.filterwarnings("ignore", "Gradients do not exist")  # as in keras-hub
        history = model.fit(inputs, labels, batch_size=3, epochs=30, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]


def test_lora_trains_only_the_attention_projections_low_rank_factors():
    encoder = _encoder()
    inputs = _inputs()
    expected = _real(encoder(inputs))
    encoder.enable_lora(2)
    trainable = {w.path.split("/")[-1] for w in encoder.trainable_weights}
    assert trainable == {"lora_kernel_a", "lora_kernel_b", "bias"}
    # B starts at zero: the same outputs until it trains.
    for actual, want in zip(_real(encoder(inputs)), expected, strict=True):
        np.testing.assert_allclose(actual, want, atol=1e-6)
    per_block = WIDTH * 2 + 2 * 3 * WIDTH + 3 * WIDTH  # A, B, the fused Q/K/V bias
    count = sum(int(np.prod(w.shape)) for w in encoder.trainable_weights)
    assert count == LAYERS * per_block


def test_bad_arguments_and_inputs():
    with pytest.raises(ValueError, match="position_encoding"):
        _encoder(position_encoding="sinusoidal")
    with pytest.raises(ValueError, match="hidden_dim"):
        _encoder(hidden_dim=7)
    with pytest.raises(ValueError, match="num_segments"):
        _encoder(num_segments=0)
    with pytest.raises(ValueError, match="token_ids"):
        _encoder()({"tokens": np.ones((1, 3), "int32")})
    with pytest.raises(ValueError, match="normalize_first"):
        _encoder(normalize_first=True).to_keras_hub()
    with pytest.raises(ValueError, match="position_encoding"):
        ka.models.BertEncoder.from_keras_hub(_hub_backbone(), position_encoding="rope")
    with pytest.raises(TypeError, match="BertEncoder"):
        ka.models.BertMaskedLM(keras.layers.Dense(3))
    with pytest.raises(ValueError, match="mask_positions"):
        ka.models.BertMaskedLM(_encoder())(_inputs())
