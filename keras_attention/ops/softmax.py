"""The one masked softmax (and its hard, straight-through sibling)."""

from keras import ops

# The one masking constant of the package: a finite stand-in for -inf.
# exp() of it underflows to exactly 0 in float32, gradients through `where`
# stay finite (unlike with a real -inf), and sums of a few thousand of them
# (dead beams' scores) stay far from float32's -3.4e38.
MASK_VALUE = -1e30


def masked_logits(logits, mask=None):
    """`logits` cast to float32 with masked entries set to a huge negative."""
    logits = ops.cast(logits, "float32")
    if mask is None:
        return logits
    return ops.where(ops.cast(mask, "bool"), logits, MASK_VALUE)


def masked_softmax(logits, mask=None, axis=-1):
    """Softmax over `axis` that honours a boolean mask (True = keep).

    Computed in float32 whatever the dtype of `logits`, so float16 logits of
    any magnitude cannot overflow; the result is float32 (callers cast).
    Masked entries are exactly 0 and a fully masked row is all zeros (not
    NaN, not uniform), with finite gradients.
    """
    # `ops.softmax` is one fused kernel forward and backward (a hand-written
    # max/exp/sum/divide chain costs four passes over the (T, S) tensor each
    # way in graph mode). Masked entries are -1e30 below the row maximum, so
    # their exp() is exactly 0 whenever the row keeps one entry; a fully
    # masked row (uniform after the softmax) is zeroed by `keep`.
    x = masked_logits(logits, mask)
    if x.shape[axis] == 1:  # ops.softmax warns on a size-1 axis
        weights = ops.ones_like(x)
    else:
        weights = ops.softmax(x, axis=axis)
    if mask is not None:
        mask = ops.cast(mask, "bool")
        keep = ops.any(mask, axis=axis, keepdims=True)  # (..., 1)
        weights = weights * ops.cast(keep, "float32")
    return weights


def masked_log_softmax(logits, mask=None, axis=-1):
    """Log of `masked_softmax`; masked entries get a large finite negative.

    Returning a finite value (not -inf) keeps `0 * log p` terms of a loss, and
    their gradients, free of NaN.
    """
    x = masked_logits(logits, mask)
    x = x - ops.stop_gradient(ops.max(x, axis=axis, keepdims=True))
    if mask is not None:
        mask_f = ops.cast(mask, "float32")
        total = ops.sum(ops.exp(x) * mask_f, axis=axis, keepdims=True)
        out = x - ops.log(ops.maximum(total, 1e-30))
        return ops.where(ops.cast(mask, "bool"), out, MASK_VALUE)
    return x - ops.log(ops.sum(ops.exp(x), axis=axis, keepdims=True))


def hardmax(logits, mask=None, axis=-1):
    """One-hot arg-max in the forward pass, softmax gradient in the backward.

    Hard (stochastic-free) attention with the straight-through estimator
    (Bengio et al., 2013): `y = soft + stop_gradient(onehot - soft)`.
    A fully masked row is all zeros.
    """
    soft = masked_softmax(logits, mask, axis=axis)
    x = masked_logits(logits, mask)
    depth = ops.shape(x)[axis]
    hard = ops.one_hot(ops.argmax(x, axis=axis), depth, axis=axis, dtype="float32")
    if mask is not None:
        hard = hard * ops.cast(ops.any(mask, axis=axis, keepdims=True), "float32")
    return soft + ops.stop_gradient(hard - soft)


PROBABILITIES = {"softmax": masked_softmax, "hardmax": hardmax}
