import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import MultiHeadAttention
from keras_attention.layers import MultiHeadSelfAttention
from keras_attention.testing import input_gradients

B, T, S, D, N, H = 2, 4, 6, 8, 2, 3


def _inputs(rng, t=T, s=S):
    query = rng.normal(size=(B, t, D)).astype("float32")
    value = rng.normal(size=(B, s, D + 2)).astype("float32")
    return query, value


def _np(x):
    return ops.convert_to_numpy(x)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_matches_keras_multi_head_attention_with_its_weights(rng, causal, padded):
    query, value = _inputs(rng, t=S if causal else T)
    key = rng.normal(size=(B, S, D + 1)).astype("float32")
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H)
    ref(query, value, key)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    layer(query, value, key)
    layer.set_weights(ref.get_weights())  # the same layout, no conversion
    value_mask = np.ones((B, S), bool)
    if padded:
        value_mask[0, -2:] = False
    kwargs = dict(use_causal_mask=causal, return_attention_scores=True)
    if padded:
        kwargs["value_mask"] = value_mask
    out, w = layer(query, value, key, **kwargs)
    out_ref, w_ref = ref(query, value, key, **kwargs)
    assert w.shape == (B, N, query.shape[1], S)
    np.testing.assert_allclose(out, out_ref, atol=1e-5)
    np.testing.assert_allclose(w, w_ref, atol=1e-6)
    if padded:
        np.testing.assert_array_equal(_np(w)[0, :, :, -2:], 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(value_dim=5, use_bias=False),
        dict(output_shape=(3, 4), use_gate=True),
        dict(sliding_window=2),
    ],
)
@pytest.mark.parametrize("impl", ["chunked", "fused"])
def test_weights_convert_both_ways_with_keras(rng, kwargs, impl):
    query, value = _inputs(rng)
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H, **kwargs)
    _keras_output(ref, query, value)  # builds it
    ours = MultiHeadAttention.from_keras(ref, attention_impl=impl)
    assert ours.attention_impl == impl
    np.testing.assert_allclose(
        ours(query, value), _keras_output(ref, query, value), atol=1e-5
    )
    back = ours.to_keras()
    assert type(back) is keras.layers.MultiHeadAttention
    np.testing.assert_allclose(
        _keras_output(back, query, value), ours(query, value), atol=1e-5
    )


def _keras_output(layer, query, value):
    """Keras' output through its einsum path: on JAX, its fused path
    (`jax.nn.dot_product_attention`) fails when `value_dim != key_dim`."""
    return layer(query, value, return_attention_scores=True)[0]


def test_self_attention_from_keras_weights(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    mask = np.ones((B, T), bool)
    mask[1, -1] = False
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H, use_gate=True)
    ref(x, x)
    layer = MultiHeadSelfAttention.from_multi_head_attention(ref)
    assert len(layer.trainable_weights) == 6  # qkv, gate, output: kernel + bias
    out = layer(x, query_mask=mask, use_causal_mask=True)
    out_ref = ref(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)
    # Keras gives a fully masked (padded) query uniform weights, we give it
    # zeros: compare the real positions only.
    np.testing.assert_allclose(_np(out)[mask], _np(out_ref)[mask], atol=1e-5)


def test_symbolic_and_eager_shapes_agree_when_lengths_differ(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, output_shape=5)
    out, w = layer(query, value, return_attention_scores=True)
    q_in = keras.Input((T, D))
    v_in = keras.Input((S, D + 2))
    out_s, w_s = layer(q_in, v_in, return_attention_scores=True)
    assert tuple(out.shape) == (B, T, 5) and tuple(out_s.shape) == (None, T, 5)
    assert tuple(w.shape) == (B, N, T, S) and tuple(w_s.shape) == (None, N, T, S)
    out_v, w_v = layer.compute_output_spec(q_in, v_in, return_attention_scores=True)
    assert tuple(w_v.shape) == (None, N, T, S) and w_v.dtype == "float32"


def test_output_spec_tells_the_truth_under_mixed_precision(rng):
    layer = MultiHeadAttention(num_heads=N, key_dim=H, dtype="mixed_float16")
    q_in, v_in = keras.Input((T, D)), keras.Input((S, D))
    cache = keras.Input((2, S, N, H), dtype="float16")
    out, w, c = layer.compute_output_spec(
        q_in, v_in, return_attention_scores=True, cache=cache, cache_update_index=0
    )
    eager = layer(
        *_inputs(rng, s=S)[:1],
        rng.normal(size=(B, S, D)).astype("float32"),
        return_attention_scores=True,
    )
    assert (out.dtype, w.dtype, c.dtype) == ("float16", "float32", "float16")
    assert eager[0].dtype == "float16" and eager[1].dtype == "float32"
    assert tuple(c.shape) == (None, 2, S, N, H)


def _grad_of_output_wrt_input(fn, x, t_out):
    (grad,) = input_gradients(lambda v: ops.sum(fn(v)[:, t_out]), [x])
    return _np(grad)


def test_causal_self_attention_output_does_not_depend_on_future(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    for t in range(T):
        grad = _grad_of_output_wrt_input(lambda v: layer(v, use_causal_mask=True), x, t)
        np.testing.assert_array_equal(grad[:, t + 1 :], 0.0)
        assert np.abs(grad[:, : t + 1]).sum() > 0


def test_masked_garbage_keys_change_nothing(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    out = layer(query, value)
    garbage = 1e3 * rng.normal(size=(B, 3, D + 2)).astype("float32")
    longer = np.concatenate([value, garbage], axis=1)
    mask = np.concatenate([np.ones((B, S), bool), np.zeros((B, 3), bool)], 1)
    out_long = layer(query, longer, value_mask=mask)
    np.testing.assert_allclose(out_long, out, atol=1e-5)


@pytest.mark.parametrize("impl", ["dense", "chunked"])
def test_attention_mask_shapes_are_equivalent(rng, impl):
    """`(T, S)`, `(B, T, S)` and `(B, N, T, S)` masks (bool, int or 0/1
    float, as Keras accepts them) give the same output."""
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, attention_impl=impl)
    pattern = rng.random((T, S)) > 0.4
    pattern[:, 0] = True
    expected = layer(query, value, attention_mask=np.broadcast_to(pattern, (B, T, S)))
    for mask in (
        pattern,
        pattern.astype("float32"),
        np.broadcast_to(pattern, (B, N, T, S)).astype("int32"),
        np.broadcast_to(pattern, (1, 1, T, S)),
    ):
        np.testing.assert_allclose(
            layer(query, value, attention_mask=mask), expected, atol=1e-5
        )


@pytest.mark.parametrize("impl", ["dense", "chunked"])
def test_per_head_masks_mask_each_head(rng, impl):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, attention_impl="dense")
    head_masks = rng.random((B, N, T, S)) > 0.5
    head_masks[..., 0] = True
    _, w = layer(query, value, attention_mask=head_masks, return_attention_scores=True)
    np.testing.assert_array_equal(_np(w)[~head_masks], 0.0)
    layer.attention_impl = impl
    per_head = layer(query, value, attention_mask=head_masks)
    # Reference: each head alone with its own mask, through the ops.
    q = _np(layer._query_dense(query))
    k = _np(layer._key_dense(value))
    v = _np(layer._value_dense(value))
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(H)
    logits = np.where(head_masks, logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    heads = np.einsum("bnts,bsnh->btnh", probs, v)
    expected = _np(layer._output_dense(heads.astype("float32")))
    np.testing.assert_allclose(per_head, expected, atol=1e-5)


def test_additive_masks_are_refused(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    additive = np.where(rng.random((B, T, S)) > 0.5, 0.0, -1e9).astype("float32")
    with pytest.raises(ValueError, match="attention_mask.*additive"):
        layer(query, value, attention_mask=additive)


@pytest.mark.parametrize("impl", ["dense", "chunked"])
@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_matches_numpy(rng, impl, causal):
    x = rng.normal(size=(B, 7, D)).astype("float32")
    layer = MultiHeadSelfAttention(
        num_heads=N, key_dim=H, sliding_window=3, attention_impl=impl
    )
    out = layer(x, use_causal_mask=causal)
    i, j = np.arange(7)[:, None], np.arange(7)[None, :]
    band = np.abs(i - j) < 3
    if causal:
        band &= j <= i
    plain = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    plain(x)
    plain.set_weights(layer.get_weights())
    np.testing.assert_allclose(out, plain(x, attention_mask=band), atol=1e-5)


def test_cached_self_attention_equals_full_pass(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H, sliding_window=2)
    full = _np(layer(x, use_causal_mask=True))
    cache = ops.zeros((B, 2, T + 2, N, H))
    steps = []
    # One token at a time, then the first two tokens as one block.
    for t in range(T):
        y, cache = layer(
            x[:, t : t + 1], use_causal_mask=True, cache=cache, cache_update_index=t
        )
        steps.append(_np(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    block_cache = ops.zeros((B, 2, T, N, H))
    y, _ = layer(
        x[:, :2], cache=block_cache, cache_update_index=0, use_causal_mask=True
    )
    np.testing.assert_allclose(y, full[:, :2], atol=1e-5)
    # Without the causal flag, unwritten cache positions are still hidden.
    y, _ = layer(x[:, :1], cache=ops.zeros((B, 2, T, N, H)), cache_update_index=0)
    np.testing.assert_allclose(y, full[:, :1], atol=1e-5)


def test_static_cross_attention_cache_equals_uncached(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    mask = np.ones((B, S), bool)
    mask[0, -1] = False
    out = layer(query, value, value_mask=mask)
    cache = layer.compute_cache(value)
    out_cached, same_cache = layer(query, None, cache=cache, value_mask=mask)
    np.testing.assert_allclose(out_cached, out, atol=1e-6)
    assert same_cache is cache
    # Written with cache_update_index (keras-hub's way of filling it once).
    written, filled = layer(
        query, value, cache=ops.zeros_like(cache), cache_update_index=0
    )
    np.testing.assert_allclose(filled, cache, atol=1e-6)
    np.testing.assert_allclose(written, layer(query, value), atol=1e-6)


def test_dropout_is_on_the_attention_weights_as_in_keras(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, dropout=0.5, seed=1)
    a, w_a = layer(query, value, training=True, return_attention_scores=True)
    b = layer(query, value, training=True)
    c, w_c = layer(query, value, training=False, return_attention_scores=True)
    assert not np.allclose(a, b)
    np.testing.assert_allclose(c, layer(query, value), atol=0)
    # The weights are returned before dropout, as Keras returns them.
    np.testing.assert_allclose(w_a, w_c, atol=1e-6)
    # Dropping every weight leaves the output projection's bias alone.
    drop_all = MultiHeadAttention(num_heads=N, key_dim=H, dropout=0.99999)
    out = drop_all(query, value, training=True)
    bias = _np(drop_all._output_dense.bias)
    np.testing.assert_allclose(out, np.broadcast_to(bias, out.shape), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_heads=0, key_dim=4), "num_heads"),
        (dict(num_heads=-1, key_dim=4), "num_heads"),
        (dict(num_heads=2, key_dim=0), "key_dim"),
        (dict(num_heads=2, key_dim=4, dropout=1.5), "dropout"),
        (dict(num_heads=2, key_dim=4, attention_impl="flash"), "attention_impl"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    for cls in (MultiHeadAttention, MultiHeadSelfAttention):
        with pytest.raises(ValueError, match=f"`{name}`"):
            cls(**kwargs)


@pytest.mark.parametrize("name", ["attention_dropout", "output_dim"])
def test_arguments_of_0_1_are_refused_with_advice(name):
    with pytest.raises(TypeError, match=f"`{name}`.*0.2.0"):
        MultiHeadAttention(num_heads=2, key_dim=4, **{name: 2})


def test_bad_call_arguments(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    layer(query, value)
    with pytest.raises(ValueError, match="`query`"):
        layer(query[..., :-1], value)
    with pytest.raises(ValueError, match="`key`.*`value`"):
        layer(query, value, key=value[:, :-1])
    with pytest.raises(ValueError, match="`cache`"):
        layer(query, None, cache=ops.zeros((B, 2, S, N + 1, H)))
    self_attn = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    x = query
    self_attn(x)
    with pytest.raises(ValueError, match="`cache`"):
        self_attn(x, cache=ops.zeros((B, 2, S, N, H + 1)), cache_update_index=0)
    with pytest.raises(ValueError, match="`cache_update_index`"):
        self_attn(x, cache=ops.zeros((B, 2, S, N, H)))
    with pytest.raises(ValueError, match="`attention_axes`"):
        MultiHeadSelfAttention(num_heads=N, key_dim=H, attention_axes=(1,))


def test_self_attention_with_a_value_dim_of_its_own(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H, value_dim=5)
    ref = MultiHeadAttention(num_heads=N, key_dim=H, value_dim=5)
    ref(x, x)
    fused = MultiHeadSelfAttention.from_multi_head_attention(ref)
    assert fused.qkv_dense.kernel.shape == (D, N * (2 * H + 5))
    np.testing.assert_allclose(fused(x), ref(x, x), atol=1e-5)
    assert layer(x).shape == (B, T, D)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_finite_on_large_inputs(rng, policy):
    keras.config.set_dtype_policy(policy)
    x = (300.0 * rng.normal(size=(B, T, D))).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    y, w = layer(x, use_causal_mask=True, return_attention_scores=True)
    assert y.dtype == policy.split("_")[1] and w.dtype == "float32"
    assert np.isfinite(_np(ops.cast(y, "float32"))).all()
    np.testing.assert_allclose(_np(ops.sum(w, -1)), 1.0, atol=1e-5)


def test_high_dimensional_attention_runs_keras_computation(rng):
    """attention_axes over two axes of a rank-4 input: Keras' own maths."""
    x = rng.normal(size=(B, 3, 4, D)).astype("float32")
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H, attention_axes=(1, 2))
    ref(x, x)
    ours = MultiHeadAttention.from_keras(ref)
    out, w = ours(x, x, return_attention_scores=True)
    out_ref, w_ref = ref(x, x, return_attention_scores=True)
    np.testing.assert_allclose(out, out_ref, atol=1e-5)
    np.testing.assert_allclose(w, w_ref, atol=1e-6)
    with pytest.raises(ValueError, match="cache"):
        ours(x, x, cache=ops.zeros((B, 2, 3, N, H)), cache_update_index=0)
