"""The key/value cache of autoregressive decoding.

A cache is one fixed-size tensor `(B, 2, S_max, N, H)`: the projected keys
(`cache[:, 0]`) and values (`cache[:, 1]`) of every position, the layout of
`keras_hub.layers.CachedMultiHeadAttention`. Writing keeps its shape, so a
generation loop compiles once under XLA.
"""

from keras import ops


def update_cache(cache, key, value, index):
    """Write new keys/values at positions `[index, index + T)`.

    Args:
        cache: `(B, 2, S_max, N, H)`.
        key, value: the new tokens' projections, `(B, T, N, H)`.
        index: int or traced int scalar, the position of the first new token.

    Returns:
        `(cache, keys, values)`: the updated cache and its two halves
        `(B, S_max, N, H)`.
    """
    index = ops.cast(index, "int32")
    kv = cache_entries(cache, key, value)  # (B, 2, T, N, H)
    if key.shape[1] == 1:
        # One new token (a decoding step): selected in elementwise, not
        # written with an update. Under XLA the select fuses into the
        # attention's own pass over the cache, so no per-layer cache is
        # copied as long as nothing else reads the updated cache:
        # `TransformerDecoder` writes `cache_entries` (not slices of this)
        # into its stack's cache with `write_cache_entries`.
        here = ops.equal(ops.arange(ops.shape(cache)[2], dtype="int32"), index)
        cache = ops.where(here[None, None, :, None, None], kv, cache)
    else:
        cache = ops.slice_update(cache, [0, 0, index, 0, 0], kv)
    return cache, cache[:, 0], cache[:, 1]


def cache_entries(cache, key, value):
    """The new keys and values as a cache holds them: `(B, 2, T, N, H)` in
    the cache's dtype (what `update_cache` writes at `index`)."""
    return ops.cast(ops.stack([key, value], axis=1), cache.dtype)


def written_positions_mask(cache_length, index, new_length):
    """`(1, S_max)`: True at the cache positions written so far, those
    before `index + new_length` (the rest hold no key yet)."""
    written = ops.cast(index, "int32") + new_length
    return ops.less(ops.arange(cache_length, dtype="int32"), written)[None, :]


def write_cache_entries(cache, entries, index, after):
    """Write `entries` into `cache` at `index` along axis 3, in place under
    XLA.

    Args:
        cache: a stack's cache `(B, L, 2, S_max, N, H)`.
        entries: the new keys and values of every layer, `(B, L, 2, T, N, H)`.
        index: int or traced int scalar, the position of the first entry.
        after: a tensor computed from every read of the old cache (the
            stack's output): the write is ordered after it.

    Returns:
        The updated cache.

    Under XLA a loop-carried cache is updated in place only if every read
    of its old value is ordered before the write. Nothing orders the last
    layer's reads before a write whose operands come from the projections
    alone, so XLA's copy insertion would copy the whole cache at every step
    to keep the old value readable. The write's index is therefore made to
    depend on `after`: `minimum(index, S_max + isnan(sum(after)))` is
    `index` (an index is at most `S_max`) but is not known until `after`
    is. An optimisation barrier would say this more directly, but
    TensorFlow's XLA bridge removes barriers before copy insertion runs.
    Measured at batch 16 (benchmarks/RESULTS.md, section 4): 5.9 -> 4.9 ms
    per decoding step.
    """
    index = ops.cast(index, "int32")
    unknown = ops.cast(ops.isnan(ops.sum(ops.cast(after, "float32"))), "int32")
    index = ops.minimum(index, ops.shape(cache)[3] + unknown)
    zero = ops.zeros((), "int32")
    entries = ops.cast(entries, cache.dtype)
    return ops.slice_update(cache, [zero, zero, zero, index, zero, zero], entries)
