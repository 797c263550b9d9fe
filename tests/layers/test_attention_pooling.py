"""AttentionPooling: the pooling of hierarchical attention networks."""

import attention_reference as ref
import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.testing import check_config_round_trip

B, T, D = 3, 6, 5


def pooling_reference(h, kernel, bias, context, mask=None):
    """Yang et al. (2016), eqs. (5)-(7): u_t = tanh(W h_t + b),
    alpha = softmax(u_t^T u_w), s = sum_t alpha_t h_t; K contexts."""
    u = np.tanh(h @ kernel + (0 if bias is None else bias))  # (B, T, U)
    scores = np.einsum("btu,uk->bkt", u, context)  # (B, K, T)
    alpha = ref.softmax(scores, None if mask is None else mask[:, None, :])
    return np.einsum("bkt,btd->bkd", alpha, h), alpha


def _weights(layer):
    bias = None if layer.bias is None else ref.to_np(layer.bias)
    return ref.to_np(layer.kernel), bias, ref.to_np(layer.context)


@pytest.fixture
def data(rng):
    mask = np.ones((B, T), bool)
    mask[1, 4:] = False  # right padding
    mask[2, :] = False  # nothing left: pools to zeros
    return rng.normal(size=(B, T, D)).astype("float32"), mask


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"units": 3}, {"units": 4, "use_bias": False}, {"num_contexts": 3}],
    ids=["default", "units", "no-bias", "three-contexts"],
)
def test_matches_the_formula(data, kwargs):
    h, mask = data
    layer = ka.layers.AttentionPooling(**kwargs)
    layer(h)
    if layer.bias is not None:  # zeros at first: make it count
        layer.bias.assign(np.linspace(-1, 1, layer.bias.shape[0]))
    output, weights = layer(h, mask=mask, return_attention_scores=True)
    expected, alpha = pooling_reference(h, *_weights(layer), mask)
    if layer.num_contexts == 1:
        expected, alpha = expected[:, 0], alpha[:, 0]
    np.testing.assert_allclose(ref.to_np(weights), alpha, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(output), expected, atol=1e-5)
    assert np.all(ref.to_np(output)[2] == 0)  # the fully masked row
    check_config_round_trip(layer, [h])


def test_keras_mask_is_used_and_padding_is_invisible(rng):
    tokens = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 2]])
    inputs = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
    pooled = ka.layers.AttentionPooling(units=3)(embedded)
    model = keras.Model(inputs, pooled)
    base = model.predict(tokens, verbose=0)
    # Whatever the padding embedding holds, nothing changes.
    embedding = model.layers[1]
    table = embedding.embeddings.numpy()
    table[0] = 100.0
    embedding.embeddings.assign(table)
    np.testing.assert_allclose(model.predict(tokens, verbose=0), base, atol=1e-6)


def test_trains_compiled(rng):
    x = rng.normal(size=(32, T, D)).astype("float32")
    y = x[:, 2, :1]  # the answer sits at one position: attention must find it
    model = keras.Sequential(
        [keras.Input((T, D)), ka.layers.AttentionPooling(8), keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(0.02), "mse", jit_compile=True)
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=40, batch_size=8, verbose=0)
    assert model.evaluate(x, y, verbose=0) < 0.5 * before


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0}, "units=0"),
        ({"num_contexts": 0}, "num_contexts=0"),
        ({"dropout": 1.5}, "dropout=1.5"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ka.layers.AttentionPooling(**kwargs)


def test_bad_inputs(data):
    h, mask = data
    with pytest.raises(ValueError, match="inputs"):
        ka.layers.AttentionPooling()(h[0])
    with pytest.raises(ValueError, match="mask"):
        ka.layers.AttentionPooling()(h, mask=mask[:, :3])
