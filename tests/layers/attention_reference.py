"""Independent numpy references of the attention maths, for the layer tests."""

import numpy as np
from keras import ops


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x)).astype("float64")


def softmax(logits, mask=None):
    """Masked softmax over the last axis; fully masked rows give zeros."""
    x = np.asarray(logits, "float64")
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    if mask is not None:
        e = e * mask
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def attend(logits, value, mask=None):
    """`(sum_s softmax(logits)_ts v_s, weights)` for `(B, T, S)` logits."""
    weights = softmax(logits, mask)
    return np.einsum("bts,bsd->btd", weights, value), weights


def dot(query, key):
    return np.einsum("btd,bsd->bts", query, key)


def scaled_dot(query, key):
    return dot(query, key) / np.sqrt(key.shape[-1])


def additive(query, key, key_kernel, query_kernel, v):
    """`v^T tanh(W k + U q)`."""
    hidden = (key @ key_kernel)[:, None] + (query @ query_kernel)[:, :, None]
    return np.tanh(hidden) @ v
