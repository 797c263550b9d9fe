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
    kv = ops.cast(ops.stack([key, value], axis=1), cache.dtype)  # (B, 2, T, N, H)
    if key.shape[1] == 1:
        # One new token (a decoding step): selected in elementwise, not
        # written with an update. Under XLA the select fuses into the
        # attention's own pass over the cache and into `TransformerDecoder`'s
        # stack of the layers' caches (one elementwise pass), so no per-layer
        # cache is copied.
        here = ops.equal(ops.arange(ops.shape(cache)[2], dtype="int32"), index)
        cache = ops.where(here[None, None, :, None, None], kv, cache)
    else:
        cache = ops.slice_update(cache, [0, 0, index, 0, 0], kv)
    return cache, cache[:, 0], cache[:, 1]


def written_positions_mask(cache_length, index, new_length):
    """`(1, S_max)`: True at the cache positions written so far, those
    before `index + new_length` (the rest hold no key yet)."""
    written = ops.cast(index, "int32") + new_length
    return ops.less(ops.arange(cache_length, dtype="int32"), written)[None, :]
