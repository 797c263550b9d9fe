import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import MultiHeadAttention
from keras_attention.layers import MultiHeadSelfAttention
from keras_attention.testing import input_gradients

B, T, S, D, N, H = 2, 4, 6, 8, 2, 3


def _keras_mha(query, value, **kwargs):
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H, **kwargs)
    ref(query, value)
    return ref


def _flat(weight, output=False):
    """Keras' (D, N, H) / (N, H) / (N, H, D) layouts -> ours (2-D, head-major)."""
    w = ops.convert_to_numpy(weight)
    if output:  # (N, H, D) -> (N * H, D)
        return w.reshape(-1, w.shape[-1])
    return w.reshape(w.shape[0], -1) if w.ndim == 3 else w.reshape(-1)


def _copy_from_keras(layer, ref):
    for name in ["query", "key", "value"]:
        dense = getattr(ref, f"_{name}_dense")
        getattr(layer, f"{name}_kernel").assign(_flat(dense.kernel))
        getattr(layer, f"{name}_bias").assign(_flat(dense.bias))
    layer.output_kernel.assign(_flat(ref._output_dense.kernel, output=True))
    layer.output_bias.assign(ref._output_dense.bias)


def _inputs(rng, t=T, s=S):
    query = rng.normal(size=(B, t, D)).astype("float32")
    value = rng.normal(size=(B, s, D + 2)).astype("float32")
    return query, value


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_matches_keras_multi_head_attention(rng, causal, padded):
    query, value = _inputs(rng, t=S if causal else T)
    key = rng.normal(size=(B, S, D + 1)).astype("float32")
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H)
    ref(query, value, key)
    layer = MultiHeadAttention(num_heads=N, key_dim=H)
    layer(query, value, key)
    _copy_from_keras(layer, ref)
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
        np.testing.assert_array_equal(ops.convert_to_numpy(w)[0, :, :, -2:], 0.0)


def test_self_attention_matches_keras_with_concatenated_kernels(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    mask = np.ones((B, T), bool)
    mask[1, -1] = False
    ref = keras.layers.MultiHeadAttention(num_heads=N, key_dim=H)
    ref(x, x)
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    layer(x)
    dense = [ref._query_dense, ref._key_dense, ref._value_dense]
    layer.qkv_kernel.assign(np.concatenate([_flat(d.kernel) for d in dense], axis=1))
    layer.qkv_bias.assign(np.concatenate([_flat(d.bias) for d in dense], axis=0))
    layer.output_kernel.assign(_flat(ref._output_dense.kernel, output=True))
    layer.output_bias.assign(ref._output_dense.bias)
    out = layer(x, query_mask=mask, use_causal_mask=True)
    out_ref = ref(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)
    # Keras gives a fully masked (padded) query uniform weights, we give it
    # zeros: compare the real positions only.
    np.testing.assert_allclose(
        ops.convert_to_numpy(out)[mask], ops.convert_to_numpy(out_ref)[mask], atol=1e-5
    )


def test_symbolic_and_eager_shapes_agree_when_lengths_differ(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, output_dim=5)
    out, w = layer(query, value, return_attention_scores=True)
    q_in = keras.Input((T, D))
    v_in = keras.Input((S, D + 2))
    out_s, w_s = layer(q_in, v_in, return_attention_scores=True)
    assert tuple(out.shape) == (B, T, 5) and tuple(out_s.shape) == (None, T, 5)
    assert tuple(w.shape) == (B, N, T, S) and tuple(w_s.shape) == (None, N, T, S)
    out_v, w_v = layer.compute_output_spec(q_in, v_in, return_attention_scores=True)
    assert tuple(w_v.shape) == (None, N, T, S)


def _grad_of_output_wrt_input(fn, x, t_out):
    (grad,) = input_gradients(lambda v: ops.sum(fn(v)[:, t_out]), [x])
    return ops.convert_to_numpy(grad)


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


def test_cached_self_attention_equals_full_pass(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    full = ops.convert_to_numpy(layer(x, use_causal_mask=True))
    cache = ops.zeros((B, 2, T + 2, N, H))
    steps = []
    # One token at a time, then the first two tokens as one block.
    for t in range(T):
        y, cache = layer(
            x[:, t : t + 1], use_causal_mask=True, cache=cache, cache_index=t
        )
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    block_cache = ops.zeros((B, 2, T, N, H))
    y, _ = layer(x[:, :2], cache=block_cache, cache_index=0, use_causal_mask=True)
    np.testing.assert_allclose(y, full[:, :2], atol=1e-5)
    # Without the causal flag, unwritten cache positions are still hidden.
    y, _ = layer(x[:, :1], cache=ops.zeros((B, 2, T, N, H)), cache_index=0)
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


def test_dropout_zero_is_deterministic_and_dropout_acts_in_training(rng):
    query, value = _inputs(rng)
    layer = MultiHeadAttention(num_heads=N, key_dim=H, dropout=0.5, seed=1)
    a = layer(query, value, training=True)
    b = layer(query, value, training=True)
    c = layer(query, value, training=False)
    assert not np.allclose(a, b)
    np.testing.assert_allclose(c, layer(query, value), atol=0)
    assert (ops.convert_to_numpy(a) == 0).any()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_heads=0, key_dim=4), "num_heads"),
        (dict(num_heads=-1, key_dim=4), "num_heads"),
        (dict(num_heads=2, key_dim=0), "key_dim"),
        (dict(num_heads=2, key_dim=4, dropout=1.5), "dropout"),
        (dict(num_heads=2, key_dim=4, attention_dropout=-0.1), "attention_dropout"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    for cls in (MultiHeadAttention, MultiHeadSelfAttention):
        with pytest.raises(ValueError, match=f"`{name}`"):
            cls(**kwargs)


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
        self_attn(x, cache=ops.zeros((B, 2, S, N, H + 1)), cache_index=0)
    with pytest.raises(ValueError, match="`cache_index`"):
        self_attn(x, cache=ops.zeros((B, 2, S, N, H)))
    with pytest.raises(ValueError, match="`value_dim`"):
        MultiHeadSelfAttention(num_heads=N, key_dim=H, value_dim=H + 1)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_finite_on_large_inputs(rng, policy):
    keras.config.set_dtype_policy(policy)
    x = (300.0 * rng.normal(size=(B, T, D))).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=N, key_dim=H)
    y, w = layer(x, use_causal_mask=True, return_attention_scores=True)
    assert y.dtype == policy.split("_")[1] and w.dtype == "float32"
    assert np.isfinite(ops.convert_to_numpy(ops.cast(y, "float32"))).all()
    np.testing.assert_allclose(ops.convert_to_numpy(ops.sum(w, -1)), 1.0, atol=1e-5)
