"""`attention_impl="fused"` (`keras.ops.dot_product_attention`, Keras' own
composition on a CPU) equals the dense path: outputs and gradients."""

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import testing

B, T, S, N, H = 2, 5, 7, 4, 8


def _qkv(t_len=T, s_len=S, kv_heads=N, value_dim=H, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(B, t_len, N, H)).astype("float32"),
        rng.normal(size=(B, s_len, kv_heads, H)).astype("float32"),
        rng.normal(size=(B, s_len, kv_heads, value_dim)).astype("float32"),
    )


def _padding(length, real):
    """`(B, length)`: row 1 padded from `real` on (row 0 unpadded)."""
    mask = np.ones((B, length), bool)
    mask[1, real:] = False
    return mask


def _value_and_grads(impl, inputs, kwargs, compile=None):
    """Output and gradients of `sum(out * cos(out))` w.r.t. q, k, v."""

    def forward(q, k, v):
        out, _ = ka.ops.multi_head_attention(q, k, v, attention_impl=impl, **kwargs)
        return out

    def run(q, k, v):
        def loss(q, k, v):
            out = forward(q, k, v)
            return keras.ops.sum(out * keras.ops.cos(out))

        return [forward(q, k, v), *testing.input_gradients(loss, [q, k, v])]

    if compile is None and keras.backend.backend() == "jax":
        import jax

        compile = jax.jit  # eager JAX compiles op by op: slower than once
    if compile is not None:
        run = compile(run)
    return [np.asarray(x) for x in run(*inputs)]


def _assert_same(got, want):
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"item {i}")


CASES = {
    "self": dict(shapes=dict(t_len=T, s_len=T), kwargs={}),
    "cross-t-ne-s": dict(shapes={}, kwargs={}),
    "padding-both-sides": dict(
        shapes={},
        kwargs=dict(query_mask=_padding(T, 3), value_mask=_padding(S, 4)),
    ),
    "causal-square": dict(
        shapes=dict(t_len=T, s_len=T),
        kwargs=dict(use_causal_mask=True, query_mask=_padding(T, 4)),
    ),
    "causal-cache-offset": dict(
        shapes=dict(t_len=3, s_len=S),
        kwargs=dict(use_causal_mask=True, causal_offset=2, key_mask=_padding(S, 5)),
    ),
    "gqa": dict(shapes=dict(kv_heads=2), kwargs=dict(value_mask=_padding(S, 3))),
    "mqa-causal": dict(
        shapes=dict(t_len=T, s_len=T, kv_heads=1), kwargs=dict(use_causal_mask=True)
    ),
    "value-dim-ne-key-dim": dict(
        shapes=dict(value_dim=5), kwargs=dict(value_mask=_padding(S, 6))
    ),
    "attention-mask-per-head": dict(
        shapes={},
        kwargs=dict(attention_mask=np.random.default_rng(1).random((B, N, T, S)) < 0.7),
    ),
    "sliding-window": dict(
        shapes=dict(t_len=T, s_len=T),
        kwargs=dict(sliding_window=2, use_causal_mask=True),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_equals_dense(case):
    shapes, kwargs = CASES[case]["shapes"], CASES[case]["kwargs"]
    inputs = _qkv(**shapes)
    want = _value_and_grads("dense", inputs, kwargs)
    got = _value_and_grads("fused", inputs, kwargs)
    assert len(got) == 4
    _assert_same(got, want)


def test_fused_equals_dense_compiled(jit):
    inputs = _qkv(t_len=T, s_len=T, kv_heads=2)
    kwargs = dict(use_causal_mask=True, query_mask=_padding(T, 3))
    want = _value_and_grads("dense", inputs, kwargs, compile=jit)
    _assert_same(_value_and_grads("fused", inputs, kwargs, compile=jit), want)


MODIFIERS = {
    "alibi": lambda: dict(score_modifier=ka.modifiers.ALiBi(N)),
    "alibi-symmetric+soft-chain": lambda: dict(
        score_modifier=ka.modifiers.ScoreChain(
            [ka.modifiers.ALiBi(N, symmetric=True), ka.modifiers.ALiBi(N)]
        )
    ),
    "causal-mask": lambda: dict(mask_modifier=ka.modifiers.CausalMask()),
    "sliding-window-with-sinks": lambda: dict(
        mask_modifier=ka.modifiers.AttentionSinks(1, ka.modifiers.SlidingWindow(2))
    ),
    "prefix-lm": lambda: dict(mask_modifier=ka.modifiers.PrefixLM(2)),
    "block-local-1d": lambda: dict(
        mask_modifier=ka.modifiers.BlockLocal1D(query_block=2, memory_flange=1)
    ),
    "block-local-2d": lambda: dict(
        mask_modifier=ka.modifiers.BlockLocal2D(3, (1, 2), (1, 1), causal=False)
    ),
    "segments": lambda: dict(
        mask_modifier=ka.modifiers.SegmentMask(
            np.array([[0, 0, 1, 1, 1, 2], [0, 1, 1, 1, 2, 2]], "int32")
        )
    ),
}


@pytest.mark.parametrize("name", sorted(MODIFIERS))
def test_fused_equals_dense_with_modifiers(name):
    inputs = _qkv(t_len=6, s_len=6, kv_heads=2, seed=2)
    kwargs = MODIFIERS[name]()
    want = _value_and_grads("dense", inputs, kwargs)
    _assert_same(_value_and_grads("fused", inputs, kwargs), want)


def test_learned_relative_bias_trains_the_same_through_the_fused_path():
    """T5's bias table gets the dense path's gradient through the kernel's
    `bias` (layers, so that the table is a tracked weight)."""
    x = np.random.default_rng(3).normal(size=(B, 6, 16)).astype("float32")

    def make(impl):
        keras.utils.set_random_seed(4)
        bias = ka.modifiers.RelativePositionBias(
            num_heads=N, embeddings_initializer="random_normal"
        )
        layer = ka.layers.MultiHeadSelfAttention(
            N, H, attention_impl=impl, score_modifier=bias
        )
        layer.build(x.shape)
        return layer

    dense, fused = make("dense"), make("fused")
    fused.set_weights(dense.get_weights())

    def grads(layer):
        weights = [w.value for w in layer.trainable_weights]

        def loss(*values):
            out, _ = layer.stateless_call(list(values), [], x, use_causal_mask=True)
            return keras.ops.sum(keras.ops.sin(out))

        def run(*values):
            return testing.input_gradients(loss, values)

        if keras.backend.backend() == "jax":
            import jax

            run = jax.jit(run)
        return run(*weights)

    want, got = grads(dense), grads(fused)
    table = [i for i, w in enumerate(dense.trainable_weights) if "table" in w.path]
    assert table and np.abs(np.asarray(got[table[0]])).max() > 0
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_padded_queries_are_exactly_zero_and_masked_rows_finite():
    q, k, v = _qkv()
    query_mask = _padding(T, 2)
    attention_mask = np.ones((B, T, S), bool)
    attention_mask[0, 1] = False  # a real query that sees no key
    kwargs = dict(query_mask=query_mask, attention_mask=attention_mask)
    got = _value_and_grads("fused", (q, k, v), kwargs)
    out = got[0]
    np.testing.assert_array_equal(out[1, 2:], 0.0)  # padded queries
    np.testing.assert_array_equal(out[0, 1], 0.0)  # sees nothing
    assert all(np.isfinite(x).all() for x in got)
    assert np.abs(out[0, 0]).max() > 0
    # Garbage in padded keys and queries changes nothing at real positions.
    value_mask = _padding(S, 4)
    kwargs = dict(query_mask=query_mask, value_mask=value_mask)
    before = _value_and_grads("fused", (q, k, v), kwargs)[0]
    k2, v2 = k.copy(), v.copy()
    k2[1, 4:], v2[1, 4:] = 1e4, -1e4
    q2 = q.copy()
    q2[1, 2:] = 1e4
    after = _value_and_grads("fused", (q2, k2, v2), kwargs)
    np.testing.assert_allclose(after[0], before, atol=1e-6)
    # ...and no gradient reaches them.
    d_q, d_k, d_v = after[1:]
    np.testing.assert_array_equal(d_q[1, 2:], 0.0)
    np.testing.assert_array_equal(d_k[1, 4:], 0.0)
    np.testing.assert_array_equal(d_v[1, 4:], 0.0)


def test_cached_single_query_decoding_equals_dense(jit):
    """Step-wise decoding with a cache: one query at a time, causal from
    the cache index, through the layer on both paths."""
    x = np.random.default_rng(5).normal(size=(B, 4, 16)).astype("float32")
    layers = {}
    for impl in ("dense", "fused"):
        layers[impl] = ka.layers.MultiHeadSelfAttention(
            N, H, num_key_value_heads=2, attention_impl=impl
        )
        layers[impl].build(x.shape)
    layers["fused"].set_weights(layers["dense"].get_weights())

    def decode(layer):
        @jit
        def step(token, cache, index):
            return layer(
                token, use_causal_mask=True, cache=cache, cache_update_index=index
            )

        cache = np.zeros((B, 2, 6, 2, H), "float32")
        outputs = []
        for index in range(4):
            out, cache = step(x[:, index : index + 1], cache, index)
            outputs.append(np.asarray(out))
        return np.concatenate(outputs, axis=1), np.asarray(cache)

    (want, want_cache), (got, got_cache) = (
        decode(layers["dense"]),
        decode(layers["fused"]),
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_cache, want_cache, rtol=1e-6)


def test_float16_inputs_stay_finite_without_a_kernel():
    """The composition would multiply float16 in float16 (`Q K^T` of these
    inputs, ~8e4, overflows there); with no kernel the fused path computes
    float16 inputs in float32, as the dense path does. (The softmax is
    saturated here: the gradients are rounding noise on both paths, so
    only their finiteness is compared.)"""
    q, k, v = (x * 100.0 for x in _qkv())
    kwargs = dict(value_mask=_padding(S, 4))
    half = [x.astype("float16") for x in (q, k, v)]
    want = _value_and_grads("dense", half, kwargs)
    got = _value_and_grads("fused", half, kwargs)
    assert got[0].dtype == np.float16
    assert all(np.isfinite(x.astype("float32")).all() for x in got)
    np.testing.assert_allclose(
        got[0].astype("float32"), want[0].astype("float32"), rtol=1e-2, atol=1e-1
    )


def test_fused_refuses_what_it_cannot_compute():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="return_attention_scores=True"):
        ka.ops.multi_head_attention(
            q, k, v, attention_impl="fused", return_weights=True
        )
    with pytest.raises(ValueError, match="attention dropout is active"):
        ka.ops.multi_head_attention(
            q, k, v, attention_impl="fused", dropout_rate=0.1, training=True
        )
    with pytest.raises(ValueError, match="not an additive bias"):
        ka.ops.multi_head_attention(
            q, k, v, attention_impl="fused", score_modifier=ka.modifiers.SoftCap(5.0)
        )
    # Dropout configured but not training: the fused path runs.
    out, _ = ka.ops.multi_head_attention(
        q, k, v, attention_impl="fused", dropout_rate=0.1, training=False
    )
    assert out.shape == (B, T, N, H)
