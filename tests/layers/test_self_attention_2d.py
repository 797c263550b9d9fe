import keras
import numpy as np
import pytest

import keras_attention as ka


def _reference(layer, x):
    def conv(c, inp):
        kernel = np.array(c.kernel)[0, 0]  # (C_in, C_out)
        return inp @ kernel

    f, g, h = (conv(c, x) for c in (layer.query_conv, layer.key_conv, layer.value_conv))
    if layer.pool_keys:
        b, hh, ww, _ = g.shape

        def pool(a):
            return a.reshape(b, hh // 2, 2, ww // 2, 2, -1).max(axis=(2, 4))

        g, h = pool(g), pool(h)
    b = x.shape[0]
    f = f.reshape(b, -1, f.shape[-1])
    g = g.reshape(b, -1, g.shape[-1])
    h = h.reshape(b, -1, h.shape[-1])
    logits = f @ g.transpose(0, 2, 1)
    beta = np.exp(logits - logits.max(-1, keepdims=True))
    beta /= beta.sum(-1, keepdims=True)
    o = (beta @ h).reshape(*x.shape[:3], -1)
    o = conv(layer.output_conv, o)
    return float(np.array(layer.gamma)) * o + x, beta


@pytest.mark.parametrize("pool_keys", [True, False])
def test_matches_formula(rng, pool_keys):
    x = rng.normal(size=(2, 6, 4, 16)).astype("float32")
    layer = ka.layers.SelfAttention2D(pool_keys=pool_keys)
    layer.build(x.shape)
    layer.gamma.assign(0.7)
    y, beta = layer(x, return_attention_scores=True)
    want_y, want_beta = _reference(layer, x)
    keys = 6 * 4 // (4 if pool_keys else 1)
    assert beta.shape == (2, 24, keys)
    np.testing.assert_allclose(np.array(beta), want_beta, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(y), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(beta).sum(-1), 1.0, rtol=1e-5)


def test_identity_at_initialisation(rng):
    x = rng.normal(size=(2, 8, 8, 16)).astype("float32")
    layer = ka.layers.SelfAttention2D(use_spectral_norm=True)
    np.testing.assert_array_equal(np.array(layer(x, training=True)), x)
    assert float(np.array(layer.gamma)) == 0.0


def test_spectral_norm_wraps_every_convolution(rng):
    layer = ka.layers.SelfAttention2D(use_spectral_norm=True)
    layer.build((1, 4, 4, 16))
    for conv in (layer.query_conv, layer.key_conv, layer.value_conv, layer.output_conv):
        assert isinstance(conv, keras.layers.SpectralNormalization)


@pytest.mark.tf_only
def test_gamma_receives_gradient(rng):
    import tensorflow as tf

    x = rng.normal(size=(1, 4, 4, 8)).astype("float32")
    layer = ka.layers.SelfAttention2D(channels_reduction=2)
    with tf.GradientTape() as tape:
        y = layer(x)
        loss = tf.reduce_sum(y * y)
    grad = tape.gradient(loss, layer.gamma)
    assert abs(float(grad)) > 0.0


@pytest.mark.parametrize(
    "kwargs, shape, match",
    [
        ({"channels_reduction": 0}, None, "channels_reduction"),
        ({"channels_reduction": 32}, (1, 4, 4, 16), "channels_reduction"),
        ({}, (1, 5, 4, 16), "even height"),
        ({}, (1, 4, 16), "inputs"),
    ],
)
def test_bad_input(kwargs, shape, match):
    with pytest.raises(ValueError, match=match):
        layer = ka.layers.SelfAttention2D(**kwargs)
        layer(np.zeros(shape, "float32"))


_MEMORY_PROBE = """
import resource
import numpy as np
import tensorflow as tf
import keras_attention as ka

def run(side, batch):
    x = tf.constant(np.random.rand(batch, side, side, 64).astype("float32"))
    layer = ka.layers.SelfAttention2D(pool_keys=True)
    layer.build(x.shape)
    layer.gamma.assign(0.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x) ** 2)
    tape.gradient(loss, [x, *layer.trainable_weights])

run(8, 1)  # warm up: TensorFlow's own buffers
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run(64, 2)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""


@pytest.mark.tf_only
def test_memory_of_pooled_64x64x64_map_stays_under_documented_bound():
    """Forward + backward on (2, 64, 64, 64) with pooling: < 160 MiB/image."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    peak_mib = float(result.stdout.strip().splitlines()[-1])
    assert peak_mib < 2 * 160, f"peak increase {peak_mib:.0f} MiB for 2 images"
