"""Key-value attention: `att((K, V), q) = sum_n softmax(s(k_n, q))_n v_n`."""

import keras
from keras import ops

from keras_attention.ops.softmax import PROBABILITIES
from keras_attention.validation import check_choice


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
    check_choice("probability", probability, sorted(PROBABILITIES))
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
