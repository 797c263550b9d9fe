"""Local attention with predictive alignment (Luong et al., 2015, "local-p").

The decoder predicts where in the source it is looking,

    p_t = S * sigmoid(v_p^T tanh(W_p h_t)),

attends with the ordinary score over the window `[p_t - D, p_t + D]` only,
and favours the keys near `p_t` with a Gaussian:

    a_t(s) = softmax_{s in window}(score(h_t, h_s)) * exp(-(s - p_t)^2 / (2 sigma^2)),
    sigma = D / 2.

As in the paper, the weights are not renormalised after the Gaussian (they
sum to less than 1). `S` is the source length of each example: with a key
mask, the number of valid keys, and `s` counts valid keys only, so left
and right padding give the same result.
"""

from keras import ops

from keras_attention.ops.boolean_masks import merge_masks
from keras_attention.ops.softmax import masked_softmax


def source_positions(key_mask, key_length):
    """Position `s` of each key among the valid keys, float32 `(B, S)` (or
    `(1, S)` without a mask), and the source length `(B, 1)` (or a scalar).

    Padded keys get the position of the last valid key before them; they
    are masked anyway.
    """
    if key_mask is None:
        positions = ops.arange(key_length, dtype="float32")[None, :]
        return positions, ops.cast(key_length, "float32")
    valid = ops.cast(key_mask, "float32")  # (B, S)
    positions = ops.cumsum(valid, axis=-1) - 1.0
    return positions, ops.sum(valid, axis=-1, keepdims=True)


def predicted_positions(alignment_logits, source_length):
    """`p_t = S * sigmoid(logit)`: `(B, T)` float32, in `[0, S]`."""
    return source_length * ops.sigmoid(ops.cast(alignment_logits, "float32"))


def local_predictive_weights(scores, predicted, key_positions, window, mask=None):
    """Local-p attention weights `(B, T, S)`, float32.

    Args:
        scores: `(B, T, S)`, the score of every query against every key.
        predicted: `(B, T)`, the predicted positions `p_t`.
        key_positions: `(B, S)` or `(1, S)`, the position `s` of each key
            (`source_positions`).
        window: the half-width `D`; `sigma = D / 2`.
        mask: boolean, broadcastable to `(B, T, S)`, True = may attend.

    Returns:
        The softmax of the scores over the keys with `|s - p_t| <= D`
        (and `mask`), times the Gaussian `exp(-(s - p_t)^2 / (2 sigma^2))`.
        A query whose window holds no key gets zeros.
    """
    distance = key_positions[:, None, :] - predicted[:, :, None]  # (B, T, S)
    inside = ops.less_equal(ops.abs(distance), float(window))
    weights = masked_softmax(scores, merge_masks(mask, inside))
    sigma = window / 2.0
    return weights * ops.exp(-ops.square(distance) / (2.0 * sigma**2))
