import numpy as np
import pytest
from keras import ops

from keras_attention.ops import hardmax
from keras_attention.ops import masked_log_softmax
from keras_attention.ops import masked_softmax
from keras_attention.testing import input_gradients


def _np_masked_softmax(x, mask):
    x = np.where(mask, x.astype("float64"), -np.inf)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m) * mask
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


@pytest.fixture
def logits_and_mask(rng):
    logits = rng.normal(size=(2, 3, 5)).astype("float32") * 3
    mask = rng.random((2, 3, 5)) > 0.4
    mask[0, 1] = False  # a fully masked row
    mask[1, 2] = True  # a fully visible row
    return logits, mask


def test_masked_softmax_matches_reference(logits_and_mask):
    logits, mask = logits_and_mask
    weights = ops.convert_to_numpy(masked_softmax(logits, mask))
    np.testing.assert_allclose(weights, _np_masked_softmax(logits, mask), atol=1e-6)


def test_masked_softmax_sums_to_one_and_masked_weights_are_exactly_zero(
    logits_and_mask,
):
    logits, mask = logits_and_mask
    weights = ops.convert_to_numpy(masked_softmax(logits, mask))
    assert weights.dtype == np.float32
    assert np.all(weights[~mask] == 0.0)
    visible_rows = mask.any(-1)
    np.testing.assert_allclose(weights.sum(-1)[visible_rows], 1.0, rtol=1e-6)
    np.testing.assert_array_equal(weights[0, 1], np.zeros(5))


def test_masked_softmax_without_mask_is_softmax(rng):
    logits = rng.normal(size=(4, 6)).astype("float32")
    weights = ops.convert_to_numpy(masked_softmax(logits))
    np.testing.assert_allclose(
        weights, _np_masked_softmax(logits, np.ones_like(logits, bool)), atol=1e-6
    )


def test_masked_softmax_other_axis(rng):
    logits = rng.normal(size=(3, 4)).astype("float32")
    mask = rng.random((3, 4)) > 0.3
    mask[:, 0] = True
    weights = ops.convert_to_numpy(masked_softmax(logits, mask, axis=0))
    np.testing.assert_allclose(
        weights, _np_masked_softmax(logits.T, mask.T).T, atol=1e-6
    )


def test_fully_masked_row_has_zero_weights_and_finite_gradients(logits_and_mask):
    logits, mask = logits_and_mask
    upstream = np.random.default_rng(1).normal(size=logits.shape).astype("float32")

    def loss(x):
        return ops.sum(masked_softmax(x, mask) * upstream)

    (grad,) = input_gradients(loss, [logits])
    grad = ops.convert_to_numpy(grad)
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[0, 1], np.zeros(5))
    # Masked logits get no gradient; visible ones do.
    assert np.all(grad[~mask] == 0.0)
    assert np.any(grad[mask] != 0.0)


def test_masked_softmax_gradient_matches_reference(rng):
    logits = rng.normal(size=(2, 4)).astype("float32")
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 1]], bool)
    upstream = rng.normal(size=(2, 4)).astype("float32")
    (grad,) = input_gradients(
        lambda x: ops.sum(masked_softmax(x, mask) * upstream), [logits]
    )
    p = _np_masked_softmax(logits, mask)
    expected = p * (upstream - (p * upstream).sum(-1, keepdims=True))
    np.testing.assert_allclose(ops.convert_to_numpy(grad), expected, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_large_low_precision_logits_are_finite(dtype):
    logits = np.array([[1e4, -1e4, 5e3, 1e4 - 1.0]], "float32")
    mask = np.array([[True, True, False, True]])
    x = ops.cast(logits, dtype)
    weights = ops.convert_to_numpy(masked_softmax(x, mask))
    assert weights.dtype == np.float32
    assert np.all(np.isfinite(weights))
    assert weights[0, 2] == 0.0
    np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-6)
    (grad,) = input_gradients(lambda z: ops.sum(masked_softmax(z, mask)[:, 0]), [x])
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(grad, "float32"))))


def test_large_float32_logits_are_exact():
    logits = np.array([[1e30, 1e30, -1e30]], "float32")
    weights = ops.convert_to_numpy(masked_softmax(logits))
    np.testing.assert_allclose(weights, [[0.5, 0.5, 0.0]])


def test_masked_log_softmax_matches_log_of_softmax(logits_and_mask):
    logits, mask = logits_and_mask
    log_p = ops.convert_to_numpy(masked_log_softmax(logits, mask))
    assert np.all(np.isfinite(log_p))
    reference = _np_masked_softmax(logits, mask)
    visible = mask & mask.any(-1, keepdims=True)
    np.testing.assert_allclose(np.exp(log_p[visible]), reference[visible], rtol=1e-5)
    assert np.all(log_p[~mask] < -1e29)
    unmasked = ops.convert_to_numpy(masked_log_softmax(logits))
    np.testing.assert_allclose(
        np.exp(unmasked),
        _np_masked_softmax(logits, np.ones_like(mask)),
        rtol=1e-5,
    )


def test_masked_log_softmax_gradient_is_finite_for_fully_masked_rows(
    logits_and_mask,
):
    logits, mask = logits_and_mask
    targets = _np_masked_softmax(logits, mask).astype("float32")
    (grad,) = input_gradients(
        lambda x: -ops.sum(targets * masked_log_softmax(x, mask)), [logits]
    )
    assert np.all(np.isfinite(ops.convert_to_numpy(grad)))


def test_hardmax_is_one_hot_on_best_visible_key(logits_and_mask):
    logits, mask = logits_and_mask
    weights = ops.convert_to_numpy(hardmax(logits, mask))
    masked = np.where(mask, logits, -np.inf)
    for b in range(2):
        for t in range(3):
            if not mask[b, t].any():
                np.testing.assert_array_equal(weights[b, t], np.zeros(5))
                continue
            expected = np.zeros(5)
            expected[np.argmax(masked[b, t])] = 1.0
            np.testing.assert_array_equal(weights[b, t], expected)


def test_hardmax_passes_the_softmax_gradient(logits_and_mask):
    logits, mask = logits_and_mask
    upstream = np.random.default_rng(2).normal(size=logits.shape).astype("float32")
    (hard_grad,) = input_gradients(
        lambda x: ops.sum(hardmax(x, mask) * upstream), [logits]
    )
    (soft_grad,) = input_gradients(
        lambda x: ops.sum(masked_softmax(x, mask) * upstream), [logits]
    )
    hard_grad = ops.convert_to_numpy(hard_grad)
    assert np.all(np.isfinite(hard_grad))
    assert np.any(hard_grad != 0.0)
    np.testing.assert_allclose(hard_grad, ops.convert_to_numpy(soft_grad), atol=1e-6)
