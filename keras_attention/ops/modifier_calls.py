"""Score and mask modifiers: the open end of the attention functions.

After FlexAttention (PyTorch, 2024). A **score modifier** rewrites each
scaled logit from its position,

    score_modifier(score, batch, head, query, key) -> score

and a **mask modifier** says which keys each query may see,

    mask_modifier(batch, head, query, key) -> bool (True = may attend).

`batch`, `head`, `query` and `key` are int32 index tensors that broadcast
against the scores `(B, N, T, S)`: `(B, 1, 1, 1)`, `(1, N, 1, 1)`,
`(1, 1, T, 1)` and `(1, 1, 1, S)`. `query` and `key` are *absolute*
positions: with a key/value cache the first query sits at the cache index,
so a causal mask modifier `query >= key` is aligned bottom-right. The
dense, the chunked and the single-query decoding paths call the modifiers
the same way (the chunked path one block at a time, on block-shaped
indices), so any modifier works on every path, with its gradients.

A mask modifier may also offer `key_range(query_start, query_stop)`: a
conservative interval `[lo, hi)` of keys that queries in
`[query_start, query_stop)` can see. The chunked path then only visits the
key blocks in that interval (a sliding window of width `w` costs O(L w),
not O(L^2)) and, inside it, skips every block the mask rules out entirely.

Built-in modifiers are in `keras_attention.modifiers`.
"""

import math

from keras import ops


def position_indices(batch_size, num_heads, query_positions, key_positions):
    """`(batch, head, query, key)` int32 indices that broadcast to
    `(B, N, T, S)`, from absolute positions `(T,)` and `(S,)`."""
    batch = ops.reshape(ops.arange(batch_size, dtype="int32"), (-1, 1, 1, 1))
    head = ops.reshape(ops.arange(num_heads, dtype="int32"), (1, -1, 1, 1))
    query = ops.reshape(ops.cast(query_positions, "int32"), (1, 1, -1, 1))
    key = ops.reshape(ops.cast(key_positions, "int32"), (1, 1, 1, -1))
    return batch, head, query, key


def modify(scores, score_modifier, mask_modifier, query_positions, key_positions):
    """`(scores, mask)` for float32 scores `(B, N, T, S)`: the scores after
    `score_modifier` and the boolean mask of `mask_modifier` (broadcastable
    to the scores), either left as is / `None` when not given."""
    if score_modifier is None and mask_modifier is None:
        return scores, None
    indices = position_indices(
        ops.shape(scores)[0], scores.shape[1], query_positions, key_positions
    )
    if score_modifier is not None:
        scores = score_modifier(scores, *indices)
    mask = None
    if mask_modifier is not None:
        mask = ops.cast(mask_modifier(*indices), "bool")
    return scores, mask


def key_range(mask_modifier, query_start, query_stop):
    """`(lo, hi)` int32 scalars: keys queries `[query_start, query_stop)`
    may see, from the modifier's `key_range`; `None` when it has none."""
    bounds = getattr(mask_modifier, "key_range", None)
    if bounds is None:
        return None
    result = bounds(query_start, query_stop)
    if result is None:
        return None
    lo, hi = result
    return ops.cast(lo, "int32"), ops.cast(hi, "int32")


# -- the maths of the built-in biases ---------------------------------------


def alibi_slopes(num_heads):
    """ALiBi's head slopes (Press et al., 2022), a Python list of floats.

    For `N` a power of two, the geometric sequence `2^(-8 i / N)`,
    `i = 1..N`. Otherwise the slopes of the closest lower power of two `P`,
    followed by every other slope of `2P` (`2^(-4 (2 i - 1) / P)`), as in the
    paper's reference code.
    """

    def power_of_two(n):
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    lower = 2 ** int(math.floor(math.log2(num_heads)))
    if lower == num_heads:
        return power_of_two(num_heads)
    extra = power_of_two(2 * lower)[0::2][: num_heads - lower]
    return power_of_two(lower) + extra


def relative_position_bucket(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    """T5's bucket of each relative position `key - query` (Raffel et al.,
    2020): exact buckets for the `num_buckets / 2` nearest distances (per
    direction when `bidirectional`), then logarithmically wider buckets up
    to `max_distance`, beyond which distances share the last bucket.
    Without `bidirectional`, keys after the query all fall in bucket 0.

    Returns int32 buckets in `[0, num_buckets)`, the shape of the input.
    """
    relative_position = ops.cast(relative_position, "int32")
    bucket = ops.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = ops.where(relative_position > 0, num_buckets, 0)
        distance = ops.abs(relative_position)
    else:
        distance = ops.maximum(-relative_position, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    scaled = ops.log(
        ops.maximum(ops.cast(distance, "float32"), 1.0) / max_exact
    ) / math.log(max_distance / max_exact)
    large = max_exact + ops.cast(scaled * (num_buckets - max_exact), "int32")
    large = ops.minimum(large, num_buckets - 1)
    return bucket + ops.where(is_small, distance, large)
