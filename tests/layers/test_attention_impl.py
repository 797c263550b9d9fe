"""`attention_impl`: the chunked path equals the dense one inside the layers."""

import functools
import importlib

import keras
import numpy as np
import pytest

try:
    import tensorflow as tf
except ImportError:  # a JAX-only machine: the tf_only tests skip
    tf = None

import keras_attention as ka
from keras_attention.ops.chunked_attention import chunked_attention

# `keras_attention.ops.attention` is also the name of a function.
attention_module = importlib.import_module("keras_attention.ops.attention")

B, T, S, D, N, H = 2, 11, 7, 12, 3, 4


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Several (ragged) blocks even at these tiny lengths."""
    monkeypatch.setattr(
        attention_module,
        "chunked_attention",
        functools.partial(chunked_attention, query_chunk_size=4, key_chunk_size=3),
    )


def _pair(cls, *args, **kwargs):
    dense = cls(*args, attention_impl="dense", **kwargs)
    chunked = cls(*args, attention_impl="chunked", **kwargs)
    return dense, chunked


def _value_and_grads(layer, inputs, kwargs, mode):
    def run(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = layer(*inputs, **kwargs)
            loss = tf.reduce_sum(out * tf.cos(out))  # a non-trivial upstream
        grads = tape.gradient(loss, [*inputs, *layer.trainable_weights])
        return [out, *grads]

    if mode != "eager":
        run = tf.function(run, jit_compile=mode == "xla")
    return [np.asarray(x) for x in run(*inputs)]


def _padding(length, real):
    mask = np.ones((B, length), bool)
    mask[1, real:] = False
    return mask


@pytest.mark.tf_only  # GradientTape and tf.function modes
@pytest.mark.parametrize(
    "causal, padded, mode",
    [(False, True, "eager"), (True, False, "graph"), (True, True, "xla")],
)
def test_self_attention_chunked_equals_dense(causal, padded, mode):
    x = tf.constant(np.random.default_rng(0).normal(size=(B, T, D)), "float32")
    dense, chunked = _pair(ka.layers.MultiHeadSelfAttention, N, H)
    dense.build(x.shape)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    kwargs = dict(use_causal_mask=causal)
    if padded:
        kwargs["query_mask"] = _padding(T, 6)
    want = _value_and_grads(dense, [x], kwargs, mode)
    got = _value_and_grads(chunked, [x], kwargs, mode)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.tf_only  # GradientTape and tf.function modes
@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_cross_attention_chunked_equals_dense_t_ne_s(mode):
    rng = np.random.default_rng(1)
    query = tf.constant(rng.normal(size=(B, T, D)), "float32")
    value = tf.constant(rng.normal(size=(B, S, 5)), "float32")
    dense, chunked = _pair(ka.layers.MultiHeadAttention, N, H, value_dim=2)
    dense.build(query.shape, value.shape)
    chunked.build(query.shape, value.shape)
    chunked.set_weights(dense.get_weights())
    kwargs = dict(query_mask=_padding(T, 8), value_mask=_padding(S, 4))
    want = _value_and_grads(dense, [query, value], kwargs, mode)
    got = _value_and_grads(chunked, [query, value], kwargs, mode)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.tf_only  # GradientTape and tf.function modes
def test_cached_decoding_chunked_equals_dense():
    x = tf.constant(np.random.default_rng(2).normal(size=(B, 3, D)), "float32")
    dense, chunked = _pair(ka.layers.MultiHeadSelfAttention, N, H)
    dense.build(x.shape)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    cache = tf.zeros((B, 2, 8, N, H))

    @tf.function(jit_compile=True)
    def step(layer, tokens, cache, index):
        return layer(tokens, use_causal_mask=True, cache=cache, cache_index=index)

    want_cache = got_cache = cache
    for index, (start, stop) in enumerate([(0, 2), (2, 3)]):
        want, want_cache = step(dense, x[:, start:stop], want_cache, start)
        got, got_cache = step(chunked, x[:, start:stop], got_cache, start)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=index)
    np.testing.assert_allclose(got_cache, want_cache, rtol=1e-6)


def test_auto_switches_at_the_threshold(monkeypatch):
    calls = []
    real = attention_module.chunked_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(attention_module, "chunked_attention", spy)
    monkeypatch.setattr(attention_module, "CHUNKED_MIN_SIZE", T * T)
    layer = ka.layers.MultiHeadSelfAttention(N, H)
    x = np.random.default_rng(3).normal(size=(B, T, D)).astype("float32")
    layer(x)
    assert len(calls) == 1  # T * T >= threshold: chunked
    layer(x[:, :-1])
    assert len(calls) == 1  # below the threshold: dense
    _, weights = layer(x, return_attention_scores=True)
    assert len(calls) == 1 and weights.shape == (B, N, T, T)  # weights: dense
    layer(x, attention_mask=np.ones((B, T, T), bool))
    assert len(calls) == 1  # explicit mask: dense
    dropping = ka.layers.MultiHeadSelfAttention(N, H, attention_dropout=0.5, seed=1)
    dropping(x, training=True)
    assert len(calls) == 1  # attention dropout while training: dense
    dropping(x, training=False)
    assert len(calls) == 2


def test_choose_attention_impl():
    choose = ka.ops.choose_attention_impl
    big = 2048
    assert choose("auto", big, big) == "chunked"
    assert choose("auto", big, big - 1) == "dense"
    assert choose("auto", None, big) == "dense"
    assert choose("auto", big, big, return_weights=True) == "dense"
    assert choose("dense", big, big) == "dense"
    assert choose("chunked", 1, 1) == "chunked"


@pytest.mark.parametrize(
    "kwargs, layer_kwargs, match",
    [
        (dict(return_attention_scores=True), {}, "return_attention_scores"),
        (dict(attention_mask=np.ones((1, 4, 4), bool)), {}, "attention_mask"),
        (dict(training=True), dict(attention_dropout=0.1), "attention_dropout"),
    ],
)
def test_chunked_unsupported_raises(kwargs, layer_kwargs, match):
    layer = ka.layers.MultiHeadSelfAttention(
        2, 4, attention_impl="chunked", **layer_kwargs
    )
    x = np.zeros((1, 4, 8), "float32")
    with pytest.raises(ValueError, match=match):
        layer(x, **kwargs)


def test_bad_attention_impl_raises():
    with pytest.raises(ValueError, match="attention_impl='flash'"):
        ka.layers.MultiHeadAttention(2, 4, attention_impl="flash")
    with pytest.raises(ValueError, match="attention_impl"):
        ka.layers.TransformerEncoderBlock(2, 8, attention_impl="Dense")


@pytest.mark.parametrize(
    "layer",
    [
        ka.layers.MultiHeadAttention(2, 4, attention_impl="chunked"),
        ka.layers.MultiHeadSelfAttention(2, 4, attention_impl="dense"),
        ka.layers.TransformerEncoderBlock(2, 8, attention_impl="chunked"),
        ka.layers.TransformerDecoderBlock(2, 8, attention_impl="chunked"),
        ka.layers.TransformerEncoder(2, 2, 8, attention_impl="chunked"),
        ka.layers.TransformerDecoder(2, 2, 8, attention_impl="dense"),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.attention_impl == layer.attention_impl
    assert clone.get_config() == config


def test_encoder_stack_chunked_equals_dense():
    x = np.random.default_rng(4).normal(size=(B, T, 8)).astype("float32")
    mask = np.asarray(_padding(T, 5))
    kwargs = dict(num_layers=2, num_heads=2, intermediate_dim=16, dropout=0.0)
    dense = ka.layers.TransformerEncoder(**kwargs, attention_impl="dense")
    chunked = ka.layers.TransformerEncoder(**kwargs, attention_impl="chunked")
    want = dense(x, padding_mask=mask)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    got = chunked(x, padding_mask=mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # The sublayers really use the forced implementation.
    assert chunked.blocks[0].self_attention.attention_impl == "chunked"
    assert keras.ops.all(keras.ops.isfinite(got))
