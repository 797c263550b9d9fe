"""The dense path: multi-head scaled dot-product attention with its weights.

`softmax(Q K^T / sqrt(H)) V` with this package's float32 softmax, masks and
modifiers, holding the `(B, N, T, S)` weights: the only path that can
return them, and the one cached decoding takes (one query per head,
`_single_query_attention`). Without weights, dropout or modifiers, a
backward pass written by hand (`_softmax_attention`) saves memory traffic.
"""

import math

import keras
from keras import ops

from keras_attention.ops import modifier_calls
from keras_attention.ops.boolean_masks import merge_masks
from keras_attention.ops.loops import tensorflow_xla_context
from keras_attention.ops.softmax import masked_softmax


def dot_product_attention(
    query,
    key,
    value,
    mask=None,
    scale=None,
    dropout_rate=0.0,
    seed=None,
    training=False,
    return_weights=True,
    score_modifier=None,
    mask_modifier=None,
    query_offset=0,
):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017).

    `softmax(Q K^T / sqrt(H)) V`, head by head.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, G, H)`: `G = N` heads, or `G` dividing `N` for grouped-
            query attention (Ainslie et al., 2023; `G = 1` is multi-query
            attention): query head `n` attends with key/value head
            `n // (N / G)`.
        value: `(B, S, G, Hv)`.
        mask: boolean, broadcastable to `(B, N, T, S)`; a `(B, T, S)` mask
            must be expanded by the caller (`mask[:, None]`).
        scale: multiplier of the logits; `1 / sqrt(H)` when `None`.
        dropout_rate, seed, training: attention dropout on the weights.
        return_weights: `False` returns `None` for the weights and, without
            active dropout or modifiers, takes a backward pass written by
            hand (the same gradients, less memory traffic).
        score_modifier, mask_modifier: see `keras_attention.ops.modifier_calls`;
            they see query positions `query_offset + [0, T)` and key
            positions `[0, S)`.
        query_offset: absolute position of the first query (the cache
            index while decoding).

    float16 inputs are multiplied in float32, so that activations of large
    magnitude cannot overflow in `Q K^T` before the float32 softmax;
    bfloat16 (float32's range) stays in low precision. The output has the
    dtype of `value`.

    Returns:
        `(output, weights)`: `(B, T, N, Hv)` and the float32 softmax
        weights `(B, N, T, S)` before dropout, as
        `keras.layers.MultiHeadAttention` returns them (or `None`, see
        `return_weights`).
    """
    _check_mask_rank(mask)
    groups = check_key_value_heads(query, key, value)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    query, key = _widen_float16(query, key)
    query = query * ops.cast(scale, query.dtype)
    modifiers = dict(score_modifier=score_modifier, mask_modifier=mask_modifier)
    modifiers["query_offset"] = query_offset
    if query.shape[1] == 1:
        return _single_query_attention(
            query,
            key,
            value,
            mask,
            (dropout_rate, seed, training),
            modifiers,
            return_weights,
        )
    key, value = (
        repeat_key_value_heads(key, groups),
        repeat_key_value_heads(value, groups),
    )
    plain = score_modifier is None and mask_modifier is None
    if plain and not return_weights and not (training and dropout_rate > 0):
        return _softmax_attention(query, key, value, mask), None
    logits = _logits(query, key)  # (B, N, T, S)
    weights = _modified_softmax(logits, mask, **modifiers)
    used = _dropout(weights, dropout_rate, seed, training)
    output = _weighted_values(ops.cast(used, value.dtype), value)
    return output, weights


def _check_mask_rank(mask):
    if mask is not None and len(mask.shape) not in (2, 4):
        # A (B, T, S) mask would broadcast as (1, B, T, S): batch against heads.
        raise ValueError(
            "`mask` must have rank 4, broadcastable to (B, N, T, S), or rank 2 "
            "(T, S); expand a (B, T, S) mask with `mask[:, None]`. "
            f"Received: mask.shape={tuple(mask.shape)}"
        )


def _widen_float16(query, key):
    """float16 tops out at 65504: large activations overflow in Q K^T
    itself, before the float32 softmax could help. bfloat16 has the
    float32 range and stays in low precision."""
    dtypes = {keras.backend.standardize_dtype(x.dtype) for x in (query, key)}
    if "float16" in dtypes:
        return ops.cast(query, "float32"), ops.cast(key, "float32")
    return query, key


def _logits(query, key):
    """`einsum("btnh,bsnh->bnts")`; under TensorFlow's XLA with the key's
    gradient taken the fast way round (`_sum_over_queries`)."""
    return _product(
        "btnh,bsnh->bnts",
        "bnts,bsnh->btnh",
        lambda q, d_logits: _sum_over_queries(d_logits, q),
        query,
        key,
    )


def _weighted_values(weights, value):
    """`einsum("bnts,bsnh->btnh")`; under TensorFlow's XLA with the value's
    gradient taken the fast way round (`_sum_over_queries`)."""
    return _product(
        "bnts,bsnh->btnh",
        "btnh,bsnh->bnts",
        _sum_over_queries,
        weights,
        value,
    )


def _product(forward, first_gradient, second_gradient, a, b):
    """`einsum(forward, a, b)`; under TensorFlow's XLA with a gradient
    written by hand: `einsum(first_gradient, d, b)` for `a` and
    `second_gradient(a, d)` for `b`."""
    if not tensorflow_xla_context():
        return ops.einsum(forward, a, b)

    @ops.custom_gradient
    def product(x, y):
        def grad(*args, upstream=None):
            d = args[0] if upstream is None else upstream
            return ops.einsum(first_gradient, d, y), second_gradient(x, d)

        return ops.einsum(forward, x, y), grad

    return product(a, b)


def _modified_softmax(logits, mask, score_modifier, mask_modifier, query_offset):
    """`masked_softmax` of float32 logits `(B, N, T, S)` after the modifiers."""
    logits = ops.cast(logits, "float32")
    q_len, s_len = ops.shape(logits)[2], ops.shape(logits)[3]
    q_pos = ops.cast(query_offset, "int32") + ops.arange(q_len, dtype="int32")
    logits, extra = modifier_calls.modify(
        logits,
        score_modifier,
        mask_modifier,
        q_pos,
        ops.arange(s_len, dtype="int32"),
    )
    return masked_softmax(logits, merge_masks(mask, extra))


def _single_query_attention(
    query, key, value, mask, dropout, modifiers, return_weights
):
    """One query per head, as in every step of cached decoding.

    Two matrix-vector products, bound by reading K and V. Under
    TensorFlow's XLA, as multiply-and-sum, they are one fused pass over K
    and V each (straight out of a cache buffer), where an einsum would
    first copy both into the batched-matmul layout. Under JAX (0.10 on a
    CPU) XLA hands such multiply-and-sums to YNNPACK fusions that took
    twice the time of the einsums. With grouped key/value heads the query
    heads are grouped (two batched products), so the smaller cache is
    never repeated. Measured (benchmarks/RESULTS.md, 2026-12-02 14:00,
    "The JAX backend"): greedy generation of 128 tokens, 4 layers, batch 1
    and 16, on TensorFlow 0.108 s and 0.427 s multiply-and-sum against
    0.121 s and 0.604 s einsum; on JAX 0.247 s and 0.623 s against 0.114 s
    and 0.627 s.
    """
    batch, heads, head_dim = ops.shape(query)[0], query.shape[2], query.shape[3]
    groups = key.shape[2]
    if groups < heads or keras.backend.backend() == "jax":
        # Batched matrix products over the G cached heads (G = N on JAX).
        # (With grouped heads, XLA on CPU materialises a broadcast multiply-and-sum at the size
        # of all N query heads, which reads as much as an ungrouped cache;
        # benchmarks/RESULTS.md, "Open attention core".)
        q = ops.reshape(query, (batch, groups, heads // groups, head_dim))
        logits = ops.einsum("bgrh,bsgh->bgrs", q, key)  # (B, G, N/G, S)
        logits = ops.reshape(logits, (batch, heads, 1, -1))  # (B, N, 1, S)
        weights = _modified_softmax(logits, mask, **modifiers)
        used = _dropout(weights, *dropout)
        used = ops.reshape(used, (batch, groups, heads // groups, -1))
        output = ops.einsum("bgrs,bsgh->bgrh", ops.cast(used, value.dtype), value)
        output = ops.reshape(output, (batch, 1, heads, value.shape[-1]))
        return output, (weights if return_weights else None)
    logits = ops.sum(query * key, axis=-1)  # (B, S, N)
    logits = ops.transpose(logits, (0, 2, 1))[:, :, None, :]  # (B, N, 1, S)
    weights = _modified_softmax(logits, mask, **modifiers)
    used = _dropout(weights, *dropout)
    per_key = ops.transpose(used[:, :, 0, :], (0, 2, 1))[..., None]  # (B, S, N, 1)
    output = ops.sum(
        ops.cast(per_key, value.dtype) * value, axis=1, keepdims=True
    )  # (B, 1, N, Hv)
    return output, (weights if return_weights else None)


def check_key_value_heads(query, key, value):
    """`N / G`, the query heads per key/value head; ValueError unless the
    `G` key/value heads divide the `N` query heads."""
    heads, groups = query.shape[2], key.shape[2]
    if value.shape[2] != groups or heads % groups:
        raise ValueError(
            "The key/value heads must be equal in `key` and `value` and divide "
            "the query heads. Received: query.shape="
            f"{tuple(query.shape)}, key.shape={tuple(key.shape)}, "
            f"value.shape={tuple(value.shape)}"
        )
    return heads // groups


def repeat_key_value_heads(x, repeats):
    """`(B, S, G, H)` -> `(B, S, G * repeats, H)`, each head repeated in place
    (query head `n` uses key/value head `n // repeats`)."""
    return x if repeats == 1 else ops.repeat(x, repeats, axis=2)


def _dropout(weights, rate, seed, training):
    if training and rate > 0:
        return keras.random.dropout(weights, rate, seed=seed)
    return weights


def _is_float16(dtype):
    return keras.backend.standardize_dtype(dtype) == "float16"


def _softmax_attention(query, key, value, mask):
    """`softmax(Q K^T) V` (Q already scaled) with a hand-written backward.

    The same forward as autodiff's; the backward uses the FlashAttention
    identity `rowsum(dW * W) = rowsum(dO * O)`, so the softmax gradient
    `W * (dW - delta)` takes `delta` from the small `(B, T, N, H)` tensors
    instead of a product and a reduction over the `(B, N, T, S)` ones: two
    passes over the largest tensor fewer each step, in graph mode where every
    op is a pass of its own (benchmarks/RESULTS.md, section 1).
    """

    @ops.custom_gradient
    def attend(q, k, v):
        logits = ops.einsum("btnh,bsnh->bnts", q, k)  # (B, N, T, S)
        weights = masked_softmax(logits, mask)  # float32
        output = ops.einsum("bnts,bsnh->btnh", ops.cast(weights, v.dtype), v)

        def grad(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream  # (B, T, N, Hv)
            # In float16 these products overflowed on inputs of magnitude
            # 1e4 (tests/test_every_layer.py, mixed_float16) where autodiff
            # through the same formula stayed finite: multiply in float32,
            # as the forward pass does for Q K^T.
            wide = "float32" if _is_float16(v.dtype) else v.dtype
            d_out_w, v_w = ops.cast(d_out, wide), ops.cast(v, wide)
            d_v = _sum_over_queries(ops.cast(weights, wide), d_out_w)
            d_weights = ops.einsum("btnh,bsnh->bnts", d_out_w, v_w)
            delta = ops.sum(
                ops.cast(d_out, "float32") * ops.cast(output, "float32"), axis=-1
            )  # (B, T, N)
            delta = ops.transpose(delta, (0, 2, 1))[..., None]  # (B, N, T, 1)
            d_logits = weights * (ops.cast(d_weights, "float32") - delta)
            d_logits = ops.cast(d_logits, q.dtype)
            d_q = ops.einsum("bnts,bsnh->btnh", d_logits, k)
            d_k = _sum_over_queries(d_logits, q)
            return d_q, d_k, ops.cast(d_v, v.dtype)

        return output, grad

    return attend(query, key, value)


def _sum_over_queries(scores, x):
    """`einsum("bnts,btnh->bsnh", scores, x)`: the key-side gradients (of
    `_softmax_attention`, `_logits` and `_weighted_values`).

    The product sums over the first dimension of each `(T, S)` matrix.
    TensorFlow's XLA on a CPU runs such a batched product at 40-60 GFLOP/s
    where the same product with the sum over the last dimension runs at
    65-95 (`(64, L, L)` by `(64, L, 64)`, L = 512: 43 ms against 33 ms;
    L = 1024: 210 against 91 ms). Under TensorFlow's XLA the product is
    taken the fast way round, `x^T scores` `(B, N, H, S)`, and the small result is
    transposed. In graph mode (oneDNN) and under JAX's XLA the transposed
    form did not pay (the layer: 1.00-1.06x Keras' time in graph mode
    against 0.91-1.02x; JAX, the attention alone: 2-6% slower), so they keep
    the einsum (benchmarks/RESULTS.md, "the key-side gradients").
    """
    if not tensorflow_xla_context():
        return ops.einsum("bnts,btnh->bsnh", scores, x)
    return ops.transpose(ops.einsum("btnh,bnts->bnhs", x, scores), (0, 3, 1, 2))
