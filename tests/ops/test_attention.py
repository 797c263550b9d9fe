import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.ops import attention
from keras_attention.ops import attention_weights
from keras_attention.ops import dot_product_attention
from keras_attention.ops import weighted_sum
from keras_attention.testing import input_gradients


def _np_softmax(x, mask=None):
    x = x.astype("float64")
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    m = np.max(x, -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    if mask is not None:
        e = e * mask
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _dot_score(query, key):
    return ops.matmul(query, ops.swapaxes(key, -1, -2))


def test_attention_matches_reference(rng):
    b, t, s, d, dv = 2, 3, 5, 4, 6
    q = rng.normal(size=(b, t, d)).astype("float32")
    k = rng.normal(size=(b, s, d)).astype("float32")
    v = rng.normal(size=(b, s, dv)).astype("float32")
    mask = rng.random((b, t, s)) > 0.3
    mask[1, 0] = False
    out, weights = attention(q, k, v, _dot_score, mask=mask)
    ref_w = _np_softmax(np.einsum("btd,bsd->bts", q, k), mask)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_w, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(out), np.einsum("bts,bsd->btd", ref_w, v), atol=1e-5
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(out)[1, 0], np.zeros(dv))


def test_attention_hardmax_selects_one_value(rng):
    q = rng.normal(size=(1, 2, 3)).astype("float32")
    k = rng.normal(size=(1, 4, 3)).astype("float32")
    v = rng.normal(size=(1, 4, 2)).astype("float32")
    out, weights = attention(q, k, v, _dot_score, probability="hardmax")
    best = np.argmax(np.einsum("btd,bsd->bts", q, k), -1)
    np.testing.assert_allclose(ops.convert_to_numpy(out)[0], v[0, best[0]], atol=1e-6)
    assert set(np.unique(ops.convert_to_numpy(weights))) <= {0.0, 1.0}


def test_attention_weights_rejects_unknown_probability():
    with pytest.raises(ValueError, match=r"probability='sparsemax'"):
        attention_weights(np.zeros((1, 2, 3), "float32"), probability="sparsemax")


def test_attention_weights_dropout_only_when_training(rng):
    scores = rng.normal(size=(2, 3, 50)).astype("float32")
    clean = ops.convert_to_numpy(attention_weights(scores))
    not_training = attention_weights(scores, dropout_rate=0.5, seed=1, training=False)
    np.testing.assert_array_equal(ops.convert_to_numpy(not_training), clean)
    dropped = ops.convert_to_numpy(
        attention_weights(scores, dropout_rate=0.5, seed=1, training=True)
    )
    zeroed = dropped == 0
    assert 0.2 < zeroed.mean() < 0.8
    np.testing.assert_allclose(dropped[~zeroed], clean[~zeroed] / 0.5, rtol=1e-5)


def test_weighted_sum_casts_weights_to_value_dtype(rng):
    weights = _np_softmax(rng.normal(size=(2, 3, 4))).astype("float32")
    value = ops.cast(rng.normal(size=(2, 4, 5)), "float16")
    out = weighted_sum(weights, value)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"


def _np_mha(q, k, v, mask=None, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q.astype("float64"), k) * scale
    w = _np_softmax(logits, mask)
    return np.einsum("bnts,bsnh->btnh", w, v), w


@pytest.mark.parametrize("scale", [None, 0.3])
def test_dot_product_attention_matches_reference(rng, scale):
    b, t, s, n, h = 2, 3, 4, 2, 5
    q = rng.normal(size=(b, t, n, h)).astype("float32")
    k = rng.normal(size=(b, s, n, h)).astype("float32")
    v = rng.normal(size=(b, s, n, 3)).astype("float32")
    mask = (rng.random((b, t, s)) > 0.3)[:, None]  # (B, 1, T, S)
    mask[0, 0, 2] = False
    out, weights = dot_product_attention(q, k, v, mask=mask, scale=scale)
    ref_out, ref_w = _np_mha(q, k, v, mask, scale)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_w, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    np.testing.assert_array_equal(ops.convert_to_numpy(out)[0, 2], 0.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dot_product_attention_large_low_precision_inputs_are_finite(rng, dtype):
    # |q . k| reaches ~1e5: beyond float16's range unless the logits are
    # computed in float32.
    q = rng.choice([-1.0, 1.0], size=(1, 3, 2, 8)) * 300.0
    k = rng.choice([-1.0, 1.0], size=(1, 4, 2, 8)) * 300.0
    v = rng.normal(size=(1, 4, 2, 8))
    q, k, v = (ops.cast(x, dtype) for x in (q, k, v))
    out, weights = dot_product_attention(q, k, v)
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(out, "float32"))))
    weights = ops.convert_to_numpy(weights)
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    # The true gradients are moderate (the loss is a mean), so they must
    # come back finite in the inputs' dtype.
    grads = input_gradients(
        lambda a, b_: ops.mean(ops.cast(dot_product_attention(a, b_, v)[0], "float32")),
        [q, k],
    )
    for g in grads:
        assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(g, "float32"))))


def test_dot_product_attention_rejects_ambiguous_rank_3_masks(rng):
    q = rng.normal(size=(2, 3, 2, 4)).astype("float32")
    with pytest.raises(ValueError, match=r"mask\[:, None\].*mask.shape=\(2, 3, 3\)"):
        dot_product_attention(q, q, q, mask=np.ones((2, 3, 3), bool))
    causal = np.tril(np.ones((3, 3), bool))  # (T, S) broadcasts fine
    out, weights = dot_product_attention(q, q, q, mask=causal)
    assert np.all(ops.convert_to_numpy(weights)[..., ~causal] == 0.0)


@pytest.mark.parametrize("t", [1, 3])  # 1: the single-query (decoding) form
def test_dot_product_attention_hand_written_backward_equals_autodiff(rng, t, jit):
    """`return_weights=False` takes a backward written by hand (and, for one
    query, a multiply-and-sum forward); outputs and gradients must equal
    autodiff through the plain formula, masks and fully masked rows too."""
    b, s, n, h = 2, 5, 2, 4
    q = rng.normal(size=(b, t, n, h)).astype("float32")
    k = rng.normal(size=(b, s, n, h)).astype("float32")
    v = rng.normal(size=(b, s, n, 3)).astype("float32")
    mask = rng.random((b, 1, t, s)) > 0.4
    mask[1, 0, 0] = False  # a query that sees nothing
    upstream = rng.normal(size=(b, t, n, 3)).astype("float32")

    def loss(return_weights):
        def fn(q, k, v):
            out, _ = dot_product_attention(
                q, k, v, mask=mask, return_weights=return_weights
            )
            return ops.sum(out * upstream)

        return fn

    fast = jit(lambda q, k, v: input_gradients(loss(False), [q, k, v]))(q, k, v)
    plain = input_gradients(loss(True), [q, k, v])
    for name, a, b_ in zip(("dq", "dk", "dv"), fast, plain, strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b_), atol=1e-5, err_msg=name
        )
    out, weights = dot_product_attention(q, k, v, mask=mask, return_weights=False)
    assert weights is None
    ref_out, _ = _np_mha(q, k, v, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    np.testing.assert_array_equal(ops.convert_to_numpy(out)[1, 0], 0.0)


def test_dot_product_attention_hand_written_backward_low_precision(rng):
    q = ops.cast(rng.choice([-1.0, 1.0], size=(1, 3, 2, 8)) * 300.0, "float16")
    v = ops.cast(rng.normal(size=(1, 4, 2, 8)), "float16")
    k = q[:, :1] * ops.ones((1, 4, 1, 1), "float16")
    grads = input_gradients(
        lambda a, b_: ops.mean(
            ops.cast(
                dot_product_attention(a, b_, v, return_weights=False)[0], "float32"
            )
        ),
        [q, k],
    )
    for g in grads:
        assert ops.convert_to_numpy(g).dtype == np.float16
        assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(g, "float32"))))
