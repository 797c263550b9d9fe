"""Key-value attention: `att((K, V), q) = sum_n softmax(s(k_n, q))_n v_n`."""

import math

import keras
from keras import ops

from keras_attention.ops.softmax import PROBABILITIES


def attention_weights(
    scores,
    mask=None,
    probability="softmax",
    dropout_rate=0.0,
    seed=None,
    training=False,
):
    """Turn raw scores `(..., T, S)` into attention weights over `S`.

    Args:
        scores: the score `s(k_n, q)` of every query against every key.
        mask: boolean, broadcastable to `scores`, True = may attend.
        probability: `"softmax"` or `"hardmax"` (one-hot forward pass,
            straight-through softmax gradient).
        dropout_rate: dropout applied to the weights while training (the
            weights reported back are the ones used).
        seed: a `keras.random.SeedGenerator` (or int) for the dropout.
        training: whether dropout is active.

    Returns:
        float32 weights of the same shape as `scores`.
    """
    if probability not in PROBABILITIES:
        raise ValueError(
            "`probability` must be one of "
            f"{sorted(PROBABILITIES)}. Received: probability={probability!r}"
        )
    weights = PROBABILITIES[probability](scores, mask)
    if training and dropout_rate > 0:
        weights = keras.random.dropout(weights, dropout_rate, seed=seed)
    return weights


def weighted_sum(weights, value):
    """`sum_n w_n v_n`: weights `(B, T, S)` times values `(B, S, D)`."""
    return ops.matmul(ops.cast(weights, value.dtype), value)


def attention(
    query,
    key,
    value,
    score_fn,
    mask=None,
    probability="softmax",
    dropout_rate=0.0,
    seed=None,
    training=False,
):
    """Soft (or hard) attention of queries over key-value pairs.

    Args:
        query: `(B, T, Dq)`.
        key: `(B, S, Dk)`.
        value: `(B, S, Dv)`.
        score_fn: callable `(query, key) -> (B, T, S)` scores.
        mask: boolean, broadcastable to `(B, T, S)`.

    Returns:
        `(output, weights)`: `(B, T, Dv)` and float32 `(B, T, S)`.
    """
    scores = score_fn(query, key)  # (B, T, S)
    weights = attention_weights(scores, mask, probability, dropout_rate, seed, training)
    return weighted_sum(weights, value), weights


def dot_product_attention(
    query,
    key,
    value,
    mask=None,
    scale=None,
    dropout_rate=0.0,
    seed=None,
    training=False,
):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017).

    `softmax(Q K^T / sqrt(H)) V`, head by head.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, N, H)`.
        value: `(B, S, N, Hv)`.
        mask: boolean, broadcastable to `(B, N, T, S)`; a `(B, T, S)` mask
            must be expanded by the caller (`mask[:, None]`).
        scale: multiplier of the logits; `1 / sqrt(H)` when `None`.

    float16 inputs are multiplied in float32, so that activations of large
    magnitude cannot overflow in `Q K^T` before the float32 softmax;
    bfloat16 (float32's range) stays in low precision. The output has the
    dtype of `value`.

    Returns:
        `(output, weights)`: `(B, T, N, Hv)` and float32 `(B, N, T, S)`.
    """
    if mask is not None and len(mask.shape) not in (2, 4):
        # A (B, T, S) mask would broadcast as (1, B, T, S): batch against heads.
        raise ValueError(
            "`mask` must have rank 4, broadcastable to (B, N, T, S), or rank 2 "
            "(T, S); expand a (B, T, S) mask with `mask[:, None]`. "
            f"Received: mask.shape={tuple(mask.shape)}"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    dtypes = {keras.backend.standardize_dtype(x.dtype) for x in (query, key)}
    if "float16" in dtypes:
        # float16 tops out at 65504: large activations overflow in Q K^T
        # itself, before the float32 softmax could help. bfloat16 has the
        # float32 range and stays in low precision.
        query, key = ops.cast(query, "float32"), ops.cast(key, "float32")
    query = query * ops.cast(scale, query.dtype)
    logits = ops.einsum("btnh,bsnh->bnts", query, key)  # (B, N, T, S)
    weights = attention_weights(logits, mask, "softmax", dropout_rate, seed, training)
    output = ops.einsum("bnts,bsnh->btnh", ops.cast(weights, value.dtype), value)
    return output, weights
