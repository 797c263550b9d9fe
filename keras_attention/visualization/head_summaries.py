"""`head_summaries`: entropy and mean attended distance of each head."""

from typing import Any
from typing import NamedTuple

import numpy as np


class HeadSummaries(NamedTuple):
    """Per head, averaged over the real queries: `entropy` (nats) and
    `distance` (mean `|t - s|`, NaN when queries and keys differ)."""

    entropy: Any
    distance: Any


def head_summaries(weights, query_mask=None):
    """Entropy and mean attended distance of each head, to read a model by.

    A head whose rows have a low entropy attends to few keys; a head whose
    mean attended distance is small looks at its neighbours (a "local"
    head), a large one across the sequence. For query `t` of head `n`,
    with weights `p[s]` over the keys:

    - entropy: `-sum_s p[s] log p[s]` (nats; `0 log 0 = 0`): 0 for a head
      that looks at one key, `log S` for a uniform one;
    - distance: `sum_s p[s] |t - s|`, positions counted in the sequence
      (self-attention only: NaN when `T != S`).

    Each is averaged over the real queries (`query_mask` True), and over
    the batch for `(B, N, T, S)` weights.

    Args:
        weights: `(N, T, S)` or `(B, N, T, S)` attention weights.
        query_mask: boolean `(T,)` or `(B, T)`, True = a real query;
            `None`: all are.

    Returns:
        A `HeadSummaries(entropy, distance)` of two float64 `(N,)` arrays.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import head_summaries
    >>> weights = np.array([[[1.0, 0.0], [0.0, 1.0]],   # head 0: each its own
    ...                     [[0.5, 0.5], [0.5, 0.5]]])  # head 1: uniform
    >>> summary = head_summaries(weights)
    >>> np.round(summary.entropy, 3).tolist(), summary.distance.tolist()
    ([0.0, 0.693], [0.0, 0.5])
    """
    weights = np.asarray(weights, dtype="float64")
    if weights.ndim not in (3, 4):
        raise ValueError(
            "`weights` must have rank 3 (N, T, S) or 4 (B, N, T, S). "
            f"Received: weights.shape={weights.shape}"
        )
    if weights.ndim == 3:
        weights = weights[None]
        query_mask = None if query_mask is None else np.asarray(query_mask)[None]
    batch, _, queries, keys = weights.shape
    if query_mask is None:
        query_mask = np.ones((batch, queries), bool)
    query_mask = np.asarray(query_mask, bool)
    if query_mask.shape != (batch, queries):
        raise ValueError(
            f"`query_mask` must have one entry per query {(batch, queries)}. "
            f"Received: query_mask.shape={query_mask.shape}"
        )
    logs = np.log(np.where(weights > 0, weights, 1.0))
    entropy = -(weights * logs).sum(-1)  # (B, N, T)
    count = max(int(query_mask.sum()), 1)
    real = query_mask[:, None, :]  # (B, 1, T)
    mean_entropy = np.where(real, entropy, 0.0).sum((0, 2)) / count
    if queries != keys:
        return HeadSummaries(mean_entropy, np.full(weights.shape[1], np.nan))
    positions = np.arange(queries)
    gaps = np.abs(positions[:, None] - positions[None, :])  # (T, S)
    distance = (weights * gaps).sum(-1)  # (B, N, T)
    mean_distance = np.where(real, distance, 0.0).sum((0, 2)) / count
    return HeadSummaries(mean_entropy, mean_distance)
