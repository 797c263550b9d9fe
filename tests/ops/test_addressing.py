"""NTM addressing (Graves et al., 2014, §3) against NumPy written out by hand."""

import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention.ops import address
from keras_attention.ops import circular_shift
from keras_attention.ops import content_weights
from keras_attention.ops import cosine_similarity
from keras_attention.ops import interpolate
from keras_attention.ops import read_memory
from keras_attention.ops import sharpen
from keras_attention.ops import write_memory
from keras_attention.testing import input_gradients

B, H, N, M = 2, 3, 7, 5

# --- the reference: loops over batch, head and location, float64 ----------


def np_content(memory, key, beta):
    out = np.zeros((B, H, N))
    for b in range(B):
        for h in range(H):
            k = key[b, h]
            sim = np.array(
                [
                    k
                    @ memory[b, i]
                    / (
                        (np.linalg.norm(k) + 1e-8)
                        * (np.linalg.norm(memory[b, i]) + 1e-8)
                    )
                    for i in range(N)
                ]
            )
            e = np.exp(beta[b, h] * sim)
            out[b, h] = e / e.sum()
    return out


def np_interpolate(wc, prev, g):
    return g[..., None] * wc + (1 - g[..., None]) * prev


def np_shift(w, s):
    radius = s.shape[-1] // 2
    out = np.zeros_like(w)
    for b in range(B):
        for h in range(H):
            for i in range(N):
                # w~(i) = sum_j w(j) s(i - j), the offset i - j in -R..R mod N
                for j in range(N):
                    for k in range(s.shape[-1]):
                        if (i - j - (k - radius)) % N == 0:
                            out[b, h, i] += w[b, h, j] * s[b, h, k]
    return out


def np_sharpen(w, gamma):
    p = w ** gamma[..., None]
    return p / p.sum(-1, keepdims=True)


def _distribution(rng, *shape):
    x = rng.random(shape) + 0.05
    return x / x.sum(-1, keepdims=True)


@pytest.fixture
def heads(rng):
    return {
        "memory": rng.normal(size=(B, N, M)),
        "previous": _distribution(rng, B, H, N),
        "key": rng.normal(size=(B, H, M)),
        "strength": rng.random((B, H)) * 5 + 0.1,
        "gate": rng.random((B, H)),
        "shift": _distribution(rng, B, H, 3),
        "sharpness": 1 + rng.random((B, H)) * 3,
    }


def _np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float64")


def _f32(x):
    return np.asarray(x, "float32")


def test_content_weights(heads):
    expected = np_content(heads["memory"], heads["key"], heads["strength"])
    actual = content_weights(
        *map(_f32, (heads["memory"], heads["key"], heads["strength"]))
    )
    np.testing.assert_allclose(_np(actual), expected, atol=1e-5)


def test_content_score_is_the_cosine_score(heads):
    """One cosine: the Cosine score object and the content addressing agree."""
    key, memory = _f32(heads["key"]), _f32(heads["memory"])
    score = ka.scores.Cosine(beta=2.5)
    np.testing.assert_allclose(
        _np(score(key, memory)), 2.5 * _np(cosine_similarity(key, memory)), atol=1e-6
    )
    beta = np.full((B, H), 2.5, "float32")
    expected = np.exp(_np(score(key, memory)))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(
        _np(content_weights(memory, key, beta)), expected, atol=1e-6
    )


def test_interpolate(heads, rng):
    wc = _distribution(rng, B, H, N)
    expected = np_interpolate(wc, heads["previous"], heads["gate"])
    actual = interpolate(_f32(wc), _f32(heads["previous"]), _f32(heads["gate"]))
    np.testing.assert_allclose(_np(actual), expected, atol=1e-6)


@pytest.mark.parametrize("width", [1, 3, 5])
def test_circular_shift(rng, width):
    w, s = _distribution(rng, B, H, N), _distribution(rng, B, H, width)
    np.testing.assert_allclose(
        _np(circular_shift(_f32(w), _f32(s))), np_shift(w, s), atol=1e-6
    )


def test_circular_shift_moves_a_one_hot_focus_and_wraps():
    w = np.zeros((1, 1, N), "float32")
    w[..., N - 1] = 1.0  # focus on the last row
    forward = np.array([[[0.0, 0.0, 1.0]]], "float32")  # offset +1
    backward = np.array([[[1.0, 0.0, 0.0]]], "float32")  # offset -1
    np.testing.assert_array_equal(_np(circular_shift(w, forward))[0, 0], np.eye(N)[0])
    np.testing.assert_array_equal(
        _np(circular_shift(w, backward))[0, 0], np.eye(N)[N - 2]
    )


def test_circular_shift_needs_an_odd_static_width():
    with pytest.raises(ValueError, match="Received: shift.shape=\\(2, 3, 2\\)"):
        circular_shift(np.ones((2, 3, N), "float32"), np.ones((2, 3, 2), "float32"))


def test_sharpen(heads, rng):
    w = _distribution(rng, B, H, N)
    expected = np_sharpen(w, heads["sharpness"])
    np.testing.assert_allclose(
        _np(sharpen(_f32(w), _f32(heads["sharpness"]))), expected, atol=1e-6
    )


def test_address_composes_the_four_steps(heads):
    h = heads
    expected = np_content(h["memory"], h["key"], h["strength"])
    expected = np_interpolate(expected, h["previous"], h["gate"])
    expected = np_shift(expected, h["shift"])
    expected = np_sharpen(expected, h["sharpness"])
    actual = address(**{name: _f32(value) for name, value in h.items()})
    np.testing.assert_allclose(_np(actual), expected, atol=1e-5)


def test_weights_are_distributions_even_at_extremes(rng):
    """Zero previous weights, saturated gates, huge strength and sharpness:
    non-negative, rows sum to 1, finite gradients."""
    memory = _f32(rng.normal(size=(B, N, M)))
    memory[0, 3] = 0.0  # a zero row: cosine 0, not NaN
    args = {
        "previous": np.zeros((B, H, N), "float32"),
        "key": _f32(rng.normal(size=(B, H, M))),
        "strength": np.full((B, H), 1e3, "float32"),
        "gate": np.array([[0.0, 1.0, 0.5]] * B, "float32"),
        "shift": np.tile(np.array([0.0, 1.0, 0.0], "float32"), (B, H, 1)),
        "sharpness": np.full((B, H), 50.0, "float32"),
    }
    w = _np(address(memory, **args))
    assert np.all(np.isfinite(w)) and np.all(w >= 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    # gate 0 with an all-zero previous weighting: the sharpened zero vector
    # is uniform, not NaN.
    np.testing.assert_allclose(w[:, 0], 1.0 / N, atol=1e-6)

    names = list(args)
    grads = input_gradients(
        lambda *xs: ops.sum(address(memory, **dict(zip(names, xs, strict=True))) ** 2),
        [args[n] for n in names],
    )
    for name, g in zip(names, grads, strict=True):
        assert np.all(np.isfinite(_np(g))), name


def test_read_memory(rng):
    memory, w = rng.normal(size=(B, N, M)), _distribution(rng, B, H, N)
    expected = np.zeros((B, H, M))
    for b in range(B):
        for h in range(H):
            expected[b, h] = sum(w[b, h, i] * memory[b, i] for i in range(N))
    np.testing.assert_allclose(
        _np(read_memory(_f32(memory), _f32(w))), expected, atol=1e-5
    )


def test_write_memory_erases_then_adds(rng):
    memory = rng.normal(size=(B, N, M))
    w = _distribution(rng, B, 2, N)
    erase, add = rng.random((B, 2, M)), rng.normal(size=(B, 2, M))
    expected = memory.copy()
    for b in range(B):
        for i in range(N):
            for h in range(2):
                expected[b, i] *= 1 - w[b, h, i] * erase[b, h]
            for h in range(2):
                expected[b, i] += w[b, h, i] * add[b, h]
    actual = write_memory(*map(_f32, (memory, w, erase, add)))
    np.testing.assert_allclose(_np(actual), expected, atol=1e-5)


def test_a_focused_write_replaces_one_row_exactly():
    memory = np.arange(N * M, dtype="float32").reshape(1, N, M)
    w = np.eye(N, dtype="float32")[None, 2:3]  # (1, 1, N): row 2
    erase = np.ones((1, 1, M), "float32")
    add = np.full((1, 1, M), 7.0, "float32")
    new = _np(write_memory(memory, w, erase, add))
    expected = memory.astype("float64").copy()
    expected[0, 2] = 7.0
    np.testing.assert_array_equal(new, expected)


def test_zero_key_and_zero_memory_row_have_finite_gradients(rng):
    """An untrained controller can emit an exactly zero key (zero input,
    state and biases): its similarity is 0 and the gradients stay finite."""
    memory = _f32(rng.normal(size=(B, N, M)))
    memory[:, 2] = 0.0
    key = _f32(rng.normal(size=(B, H, M)))
    key[0, 1] = 0.0
    strength = np.full((B, H), 2.0, "float32")
    np.testing.assert_array_equal(_np(cosine_similarity(key, memory))[0, 1], 0.0)
    np.testing.assert_array_equal(_np(cosine_similarity(key, memory))[:, :, 2], 0.0)
    target = _f32(rng.random((B, H, N)))
    grads = input_gradients(
        lambda m, k: ops.sum(content_weights(m, k, strength) * target), [memory, key]
    )
    for g in grads:
        assert np.all(np.isfinite(_np(g)))
