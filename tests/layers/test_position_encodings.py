import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import PositionEmbedding
from keras_attention.layers import SinusoidalPositionEncoding

try:
    import tensorflow as tf
except ImportError:  # a JAX-only machine: the tf_only tests skip
    tf = None


def _paper(pos, k, d, base=10000.0):
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    i = k // 2
    angle = pos / base ** (2 * i / d)
    return np.sin(angle) if k % 2 == 0 else np.cos(angle)


@pytest.mark.parametrize("d", [8, 7])
def test_sinusoidal_values_follow_the_paper(d):
    pe = SinusoidalPositionEncoding()(np.zeros((1, 60, d), "float32"))
    pe = ops.convert_to_numpy(pe)[0]
    for pos, k in [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (5, 2),
        (5, 3),
        (17, 6),
        (59, d - 1),
    ]:
        np.testing.assert_allclose(pe[pos, k], _paper(pos, k, d), atol=1e-5)
    assert pe.shape == (60, d)


def test_sinusoidal_custom_wavelength_and_batch_broadcast():
    x = np.zeros((3, 5, 4), "float32")
    pe = ops.convert_to_numpy(SinusoidalPositionEncoding(max_wavelength=100)(x))
    assert pe.shape == (3, 5, 4)
    np.testing.assert_allclose(pe[2, 4, 3], _paper(4, 3, 4, 100.0), atol=1e-6)
    np.testing.assert_array_equal(pe[0], pe[2])


@pytest.mark.parametrize(
    "layer_fn",
    [lambda: SinusoidalPositionEncoding(), lambda: PositionEmbedding(64)],
    ids=["sinusoidal", "learned"],
)
def test_start_index_gives_the_slice_of_a_longer_encoding(layer_fn):
    layer = layer_fn()
    full = ops.convert_to_numpy(layer(np.zeros((2, 40, 6), "float32")))
    for k, n in [(0, 3), (7, 1), (13, 20)]:
        part = layer(np.zeros((2, n, 6), "float32"), start_index=k)
        np.testing.assert_allclose(part, full[:, k : k + n], atol=1e-6)
    # A per-example start (B,).
    part = layer(np.zeros((2, 2, 6), "float32"), start_index=np.array([3, 9]))
    np.testing.assert_allclose(part[0], full[0, 3:5], atol=1e-6)
    np.testing.assert_allclose(part[1], full[1, 9:11], atol=1e-6)


@pytest.mark.tf_only
@pytest.mark.parametrize(
    "layer_fn",
    [lambda: SinusoidalPositionEncoding(), lambda: PositionEmbedding(64)],
    ids=["sinusoidal", "learned"],
)
def test_traced_start_index_compiles_once(layer_fn):
    layer = layer_fn()
    x = np.zeros((1, 1, 4), "float32")
    layer(x)
    traces = []

    @tf.function(jit_compile=True)
    def step(start):
        traces.append(1)
        return layer(x, start_index=start)

    outputs = [ops.convert_to_numpy(step(tf.constant(t))) for t in range(5)]
    assert len(traces) == 1
    full = ops.convert_to_numpy(layer(np.zeros((1, 5, 4), "float32")))
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, atol=1e-6)


def test_sinusoidal_any_length_and_dtype():
    keras.config.set_dtype_policy("mixed_float16")
    layer = SinusoidalPositionEncoding()
    pe = layer(np.zeros((1, 3000, 8), "float16"))
    assert pe.dtype == "float16" and pe.shape == (1, 3000, 8)
    assert np.isfinite(ops.convert_to_numpy(pe)).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="`sequence_length`"):
        PositionEmbedding(0)
    with pytest.raises(ValueError, match="`max_wavelength`"):
        SinusoidalPositionEncoding(max_wavelength=0)
    with pytest.raises(ValueError, match="`inputs`"):
        PositionEmbedding(4)(np.zeros((1, 5, 2), "float32"))
    with pytest.raises(ValueError, match="`inputs`"):
        SinusoidalPositionEncoding()(np.zeros((5, 2), "float32"))
