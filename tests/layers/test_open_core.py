"""The open attention core in the layers: RoPE, grouped-query attention and
modifiers on MultiHeadAttention, the blocks and the Transformer; the chunked
path skipping blocks; save/load, SavedModel export and compiled fit."""

import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention.ops.chunked.chunked_attention import chunked_attention

TF = keras.backend.backend() == "tensorflow"


# -- RoPE ----------------------------------------------------------------------


@pytest.mark.parametrize("scaling_factor", [1.0, 4.0])
def test_rotary_embedding_equals_keras_hub(scaling_factor):
    keras_hub = pytest.importorskip("keras_hub")
    x = np.random.default_rng(0).normal(size=(2, 9, 3, 8)).astype("float32")
    reference = keras_hub.layers.RotaryEmbedding(
        max_wavelength=500, scaling_factor=scaling_factor
    )(x, start_index=5)
    ours = ka.ops.rotary_embedding(
        x, 5 + np.arange(9), max_wavelength=500, scaling_factor=scaling_factor
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours), ops.convert_to_numpy(reference), atol=1e-5
    )


def test_rope_scores_depend_only_on_the_offset():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 1, 1, 16)).astype("float32")
    k = rng.normal(size=(1, 1, 1, 16)).astype("float32")

    def score(i, j):
        qi = ka.ops.rotary_embedding(q, np.array([i]))
        kj = ka.ops.rotary_embedding(k, np.array([j]))
        return float(ops.sum(qi * kj))

    for offset in (0, 3, -5, 40):
        values = [score(start + offset, start) for start in (0, 7, 100, 2048)]
        np.testing.assert_allclose(values, values[0], rtol=1e-4, atol=1e-4)
    assert abs(score(3, 0) - score(0, 0)) > 1e-3  # and it does depend on it


def test_rope_odd_head_size_is_refused():
    with pytest.raises(ValueError, match="even `key_dim`"):
        ka.layers.MultiHeadAttention(2, 5, rope_max_wavelength=10000)


# -- grouped-query attention -------------------------------------------------------


def test_grouped_query_layer_equals_repeated_heads():
    """A GQA layer equals a full MultiHeadAttention whose key/value kernels
    repeat the grouped ones."""
    x = np.random.default_rng(2).normal(size=(2, 6, 16)).astype("float32")
    gqa = ka.layers.MultiHeadAttention(4, 4, num_key_value_heads=2)
    full = ka.layers.MultiHeadAttention(4, 4)
    gqa(x, x), full(x, x)
    for name in ("query", "output"):
        getattr(full, f"_{name}_dense").set_weights(
            getattr(gqa, f"_{name}_dense").get_weights()
        )
    for name in ("key", "value"):
        kernel, bias = getattr(gqa, f"_{name}_dense").get_weights()
        assert kernel.shape == (16, 2, 4)
        getattr(full, f"_{name}_dense").set_weights(
            [np.repeat(kernel, 2, axis=1), np.repeat(bias, 2, axis=0)]
        )
    np.testing.assert_allclose(
        ops.convert_to_numpy(gqa(x, x, use_causal_mask=True)),
        ops.convert_to_numpy(full(x, x, use_causal_mask=True)),
        atol=1e-5,
    )


def test_grouped_query_cache_holds_only_key_value_heads():
    decoder = ka.layers.TransformerDecoder(
        1, num_heads=8, intermediate_dim=32, num_key_value_heads=2
    )
    x = np.random.default_rng(3).normal(size=(2, 5, 32)).astype("float32")
    full = decoder(x)
    cache = decoder.init_cache(2, 5)
    assert tuple(cache.shape) == (2, 1, 2, 5, 2, 4)
    steps = []
    for i in range(5):
        y, cache = decoder(x[:, i : i + 1], cache=cache, cache_update_index=i)
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(
        np.concatenate(steps, axis=1), ops.convert_to_numpy(full), atol=1e-5
    )
    with pytest.raises(ValueError, match="num_key_value_heads"):
        decoder(x[:, :1], cache=ops.zeros((2, 1, 2, 5, 8, 4)), cache_update_index=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_key_value_heads=3), "must divide `num_heads`"),
        (dict(num_key_value_heads=0), "num_key_value_heads"),
        (dict(score_modifier="alibi"), "score_modifier"),
        (dict(mask_modifier=3), "mask_modifier"),
        (dict(rope_scaling_factor=0), "rope_scaling_factor"),
    ],
)
def test_bad_open_core_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ka.layers.MultiHeadAttention(4, 4, **kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        ka.layers.TransformerEncoderBlock(num_heads=4, intermediate_dim=8, **kwargs)


def test_keras_conversions_refuse_what_keras_cannot_hold():
    x = np.ones((1, 3, 8), "float32")
    layer = ka.layers.MultiHeadAttention(2, 4, score_modifier=km.ALiBi(2))
    layer(x, x)
    with pytest.raises(ValueError, match="cannot be converted"):
        layer.to_keras()
    block = ka.layers.TransformerEncoderBlock(
        num_heads=2, intermediate_dim=8, rope_max_wavelength=100
    )
    block(x)
    with pytest.raises(ValueError, match="cannot be converted"):
        block.to_keras_hub()


# -- the chunked path skips blocks ---------------------------------------------


def _counting(calls):
    """A score modifier that leaves the score unchanged and counts its
    executions (one per computed block on the chunked path)."""
    if TF:
        import tensorflow as tf

        def tick():
            calls.append(1)
            return np.float32(0.0)

        def modifier(score, batch, head, query, key):
            zero = tf.reshape(tf.py_function(tick, [], tf.float32), [])
            return score + zero

        return modifier
    import jax

    def modifier(score, batch, head, query, key):
        jax.debug.callback(lambda: calls.append(1))
        return score

    return modifier


def _visible_blocks(mask, length, chunk):
    """Blocks `(i, j)` where the NumPy mask `(T, S)` has a visible pair,
    counting only blocks at or below the causal diagonal."""
    n = length // chunk
    return sum(
        mask[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk].any()
        for i in range(n)
        for j in range(n)
    )


@pytest.mark.parametrize(
    "name, mask_modifier, np_mask",
    [
        ("causal", km.CausalMask(), lambda q, k: q >= k),
        ("window", km.SlidingWindow(8), lambda q, k: (q >= k) & (q - k < 8)),
        (
            "window_with_sink",
            km.AttentionSinks(1, km.SlidingWindow(8)),
            lambda q, k: ((q >= k) & (q - k < 8)) | ((k < 1) & (q >= k)),
        ),
    ],
)
def test_chunked_path_computes_only_visible_blocks(name, mask_modifier, np_mask):
    length, chunk = 64, 8
    q = np.random.default_rng(4).normal(size=(1, length, 2, 8)).astype("float32")
    calls = []

    def run(q):
        return chunked_attention(
            q,
            q,
            q,
            score_modifier=_counting(calls),
            mask_modifier=mask_modifier,
            query_chunk_size=chunk,
            key_chunk_size=chunk,
        )

    if TF:
        import tensorflow as tf

        out = tf.function(run)(q)
    else:
        out = run(q)
        import jax

        jax.effects_barrier()
    positions = np.arange(length)
    expected = _visible_blocks(
        np_mask(positions[:, None], positions[None]), length, chunk
    )
    assert len(calls) == expected
    assert expected <= 36  # full causal attention has 36 blocks
    if name == "window":
        assert expected == 15  # 8 diagonal blocks and 7 below them
    reference, _ = ka.ops.multi_head_attention(
        q, q, q, attention_impl="dense", mask_modifier=mask_modifier
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), ops.convert_to_numpy(reference), atol=2e-5
    )


# -- every variant: save/load, export, compiled fit with implicit masks ------------

VARIANTS = {
    "rope": dict(rope_max_wavelength=10000),
    "gqa": dict(num_key_value_heads=1),
    "alibi_window": dict(score_modifier=km.ALiBi(2), mask_modifier=km.SlidingWindow(3)),
    "t5_bias": dict(
        score_modifier=km.RelativePositionBias(
            2, bidirectional=False, embeddings_initializer="random_normal"
        )
    ),
    "soft_cap_prefix": dict(
        score_modifier=km.SoftCap(5.0), mask_modifier=km.PrefixLM(2)
    ),
    "sinks": dict(mask_modifier=km.AttentionSinks(1, km.SlidingWindow(2))),
    "block_local_2d": dict(mask_modifier=km.BlockLocal2D(3, (1, 3), (1, 0))),
}


def _model(variant, impl="dense"):
    kwargs = {k: v for k, v in VARIANTS[variant].items()}
    for key in ("score_modifier", "mask_modifier"):
        if key in kwargs:  # a fresh modifier per model (layers own weights)
            kwargs[key] = keras.saving.deserialize_keras_object(
                keras.saving.serialize_keras_object(kwargs[key])
            )
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(30, 8, mask_zero=True)(tokens)
    x = ka.layers.TransformerDecoderBlock(
        num_heads=2, intermediate_dim=16, attention_impl=impl, **kwargs
    )(x)
    outputs = keras.layers.Dense(30)(x)
    return keras.Model(tokens, outputs)


def _tokens():
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 30, size=(8, 9))
    tokens[:3, 6:] = 0  # padding at the end of three rows
    return tokens


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_saves_loads_and_fits_compiled(variant, tmp_path):
    model = _model(variant)
    tokens = _tokens()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    history = model.fit(tokens, tokens, epochs=3, batch_size=4, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    expected = model.predict(tokens, verbose=0)
    np.testing.assert_allclose(ops.convert_to_numpy(model(tokens)), expected, atol=1e-4)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(tokens, verbose=0), expected, atol=1e-5)
    # Padding never leaks: garbage in the padding embedding changes no real
    # position.
    embedding = model.layers[1]
    table = ops.convert_to_numpy(embedding.embeddings).copy()
    table[0] = 100.0 * np.random.default_rng(6).normal(size=table.shape[1])
    embedding.embeddings.assign(table)
    real = tokens != 0
    np.testing.assert_allclose(
        model.predict(tokens, verbose=0)[real], expected[real], atol=1e-4
    )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_chunked_equals_dense_in_a_model(variant):
    dense = _model(variant, "dense")
    chunked = _model(variant, "chunked")
    tokens = _tokens()
    dense(tokens), chunked(tokens)
    chunked.set_weights(dense.get_weights())
    np.testing.assert_allclose(
        chunked.predict(tokens, verbose=0), dense.predict(tokens, verbose=0), atol=1e-4
    )


@pytest.mark.skipif(not TF, reason="SavedModel export is TensorFlow's")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_survives_saved_model_export(variant, tmp_path):
    import tensorflow as tf

    model = _model(variant)
    tokens = _tokens()
    expected = model.predict(tokens, verbose=0)
    path = os.path.join(tmp_path, "saved_model")
    model.export(path, verbose=False)
    reloaded = tf.saved_model.load(path)  # keep it alive: it owns the variables
    served = reloaded.serve(tf.constant(tokens, tf.int32))
    np.testing.assert_allclose(np.asarray(served), expected, atol=1e-5)


@pytest.mark.parametrize("position_encoding", ["rope", "alibi", "relative"])
def test_transformer_position_encodings_generate_like_the_full_pass(
    position_encoding,
):
    model = ka.Transformer(
        30,
        30,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        num_encoder_layers=1,
        num_decoder_layers=2,
        dropout=0.0,
        position_encoding=position_encoding,
    )
    src = np.array([[5, 6, 7, 0], [3, 4, 9, 8]])
    tokens = model.generate(src, max_length=6, start_id=1, end_id=None)
    # Teacher forcing the generated tokens gives the same arg-maxes.
    decoder_in = np.concatenate(
        [np.ones((2, 1), "int32"), ops.convert_to_numpy(tokens)[:, :-1]], axis=1
    )
    logits = model({"encoder_tokens": src, "decoder_tokens": decoder_in})
    np.testing.assert_array_equal(
        np.argmax(ops.convert_to_numpy(logits), -1), ops.convert_to_numpy(tokens)
    )


def test_learned_bias_inside_a_chain_is_tracked_and_trained():
    chain = km.ScoreChain(
        [km.RelativePositionBias(2, bidirectional=False), km.SoftCap(5.0)]
    )
    layer = ka.layers.MultiHeadSelfAttention(2, 4, score_modifier=chain)
    x = np.random.default_rng(8).normal(size=(2, 6, 8)).astype("float32")
    layer(x, use_causal_mask=True)
    tables = [w for w in layer.trainable_weights if "table" in w.path]
    assert len(tables) == 1 and tables[0].shape == (32, 2)
    inputs = keras.Input((6, 8))
    model = keras.Model(inputs, layer(inputs, use_causal_mask=True))
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    before = ops.convert_to_numpy(tables[0]).copy()
    model.fit(x, np.ones((2, 6, 8), "float32"), epochs=1, verbose=0)
    assert np.abs(ops.convert_to_numpy(tables[0]) - before).max() > 0
