"""The weights a view stores: the rule that keeps them, and their encoding.

Rule: in each row (one query of one head), the weights `>= threshold`,
and of those at most the `top_k` largest (all when `top_k` is None);
padded queries and keys keep nothing. Kept weights are rounded to 3 decimals.

Encoding of one layer `(N, T, S)`, as little-endian uint16, deflated
(zlib) and base64-encoded: `counts` (N*T: the kept entries of each row,
head-major), then `keys` (the key index of each entry), then `values`
(`round(1000 * w)`), the entries in row order. The page inflates them
with the browser's `DecompressionStream("deflate")`.
"""

import base64
import zlib

import numpy as np

MAX_INDEX = 65535  # the largest key index a uint16 holds


def kept_entries(weights, threshold, top_k, query_mask, key_mask=None):
    """Boolean `(N, T, S)`: which weights the rule keeps (none of a padded
    query or key)."""
    keep = (weights >= threshold) & (weights > 0)
    keep &= np.asarray(query_mask, bool)[None, :, None]
    if key_mask is not None:
        keep &= np.asarray(key_mask, bool)[None, None, :]
    if top_k is not None and top_k < weights.shape[-1]:
        # The top_k largest of each row (ties broken by key order).
        order = np.argsort(-weights, axis=-1, kind="stable")[..., :top_k]
        top = np.zeros_like(keep)
        np.put_along_axis(top, order, True, axis=-1)
        keep &= top
    return keep


def encode_layer(weights, keep):
    """The base64 string of one layer's kept entries (see the module)."""
    if weights.shape[-1] - 1 > MAX_INDEX:
        raise ValueError(
            f"`attention` may hold at most {MAX_INDEX + 1} keys per layer in a "
            f"view. Received: weights of shape {weights.shape} (N, T, S)"
        )
    counts = keep.sum(axis=-1).reshape(-1)
    heads, rows, keys = np.nonzero(keep)  # row-major: the entries in row order
    values = np.rint(weights[heads, rows, keys] * 1000.0)
    blob = np.concatenate([counts, keys, values]).astype("<u2").tobytes()
    return base64.b64encode(zlib.compress(blob, 9)).decode("ascii")


def rule_text(threshold, top_k):
    """The rule as the view states it."""
    text = f"weights below {threshold:g} not drawn"
    if top_k is not None:
        text += f"; at most the {top_k} largest per query"
    return text + "; values rounded to 3 decimals"
