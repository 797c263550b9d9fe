"""Boolean attention masks. Convention everywhere: True = may attend."""

from keras import ops

from keras_attention.validation import check_attention_mask
from keras_attention.validation import check_mask


def padding_mask(lengths, max_length):
    """Mask of shape `(B, max_length)` that is True for the first `lengths[b]`.

    Args:
        lengths: int tensor `(B,)`, the valid length of each sequence.
        max_length: int, the padded length.
    """
    positions = ops.arange(max_length, dtype="int32")
    return ops.less(positions[None, :], ops.cast(lengths, "int32")[:, None])


def causal_mask(query_length, key_length=None, offset=0):
    """Lower-triangular mask `(T, S)`: query `i` sees keys `j <= offset + i`.

    `offset` is the absolute position of the first query, so that a block of
    queries decoded after `offset` cached tokens still sees exactly its past.
    """
    if key_length is None:
        key_length = query_length
    rows = ops.arange(query_length, dtype="int32")[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length, dtype="int32")[None, :]
    return ops.greater_equal(rows, cols)


def band_mask(query_length, key_length, window, offset=0):
    """Local band `(T, S)`: query `i` sees keys `|j - (offset + i)| <= window`.

    This is the local-m window of Luong et al. (2015), centred on the
    monotonic alignment `p_t = t`.
    """
    rows = ops.arange(query_length, dtype="int32")[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length, dtype="int32")[None, :]
    return ops.less_equal(ops.abs(rows - cols), window)


def merge_masks(*masks):
    """Logical AND of broadcastable boolean masks; `None` entries are skipped.

    Returns `None` when every mask is `None`.
    """
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result


def sliding_window_mask(query_length, key_length, window, offset=0):
    """Band `(T, S)`: query `i` sees keys `|j - (offset + i)| < window`.

    `keras.layers.MultiHeadAttention`'s `sliding_window` (a symmetric band
    of width `2 * window - 1`); with a causal mask it is the causal sliding
    window of Mistral or Longformer's local attention.
    """
    rows = ops.arange(query_length, dtype="int32")[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length, dtype="int32")[None, :]
    return ops.less(ops.abs(rows - cols), window)


def compute_attention_mask(
    query,
    value,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    causal_offset=0,
    sliding_window=None,
    num_heads=None,
    validate=True,
):
    """Combine every mask source into one boolean mask, or `None`.

    Args:
        query: tensor `(B, T, ...)`.
        value: tensor `(B, S, ...)`.
        query_mask: `(B, T)`; padded queries attend to nothing (their
            output is zero).
        value_mask, key_mask: `(B, S)`; padded keys receive zero weight
            from every query.
        attention_mask: any pattern, `(T, S)`, `(B, T, S)` or, with
            `num_heads` given, per head `(B, N, T, S)`; dimensions of size
            1 broadcast.
        use_causal_mask: add the causal mask (query `i` sees `j <= i`).
        causal_offset: absolute position of the first query (for cached
            decoding); it offsets the sliding window too.
        sliding_window: `None` or an int `w`: query `i` sees keys
            `|j - i| < w` (see `sliding_window_mask`).
        num_heads: allows a per-head `attention_mask`.
        validate: check the masks (`check_attention_masks`); callers that
            checked them already, under their own argument names, pass
            `False` so that each argument is checked once.

    Returns:
        A mask broadcastable to `(B, T, S)`, or to `(B, N, T, S)` when
        `attention_mask` has rank 4.
    """
    if validate:
        check_attention_masks(
            query, value, query_mask, value_mask, key_mask, attention_mask, num_heads
        )
    mask = None
    if query_mask is not None:
        mask = ops.cast(query_mask, "bool")[:, :, None]
    for m in (value_mask, key_mask):
        if m is not None:
            mask = merge_masks(mask, ops.cast(m, "bool")[:, None, :])
    q_len, v_len = ops.shape(query)[1], ops.shape(value)[1]
    if use_causal_mask:
        mask = merge_masks(mask, causal_mask(q_len, v_len, causal_offset)[None])
    if sliding_window is not None:
        band = sliding_window_mask(q_len, v_len, sliding_window, causal_offset)
        mask = merge_masks(mask, band[None])
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if len(attention_mask.shape) == 4 and mask is not None:
            mask = mask[:, None]  # (B, 1, T, S): the same for every head
        mask = merge_masks(mask, attention_mask)
    return mask


def check_attention_masks(
    query,
    value,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    num_heads=None,
):
    """Check the masks of an attention call (dtype and static shape) under
    the names of `compute_attention_mask`'s arguments."""
    batch, t, s = query.shape[0], query.shape[1], value.shape[1]
    if query_mask is not None:
        check_mask("query_mask", query_mask, (batch, t))
    for name, m in (("value_mask", value_mask), ("key_mask", key_mask)):
        if m is not None:
            check_mask(name, m, (batch, s))
    if attention_mask is not None:
        check_attention_mask("attention_mask", attention_mask, batch, num_heads, t, s)


def pointer_step_mask(chosen, end_position=None):
    """Positions a pointer decoder may point to, from those already chosen.

    Args:
        chosen: `(..., T_in)`, True (or non-zero) where the position was
            already pointed to.
        end_position: optional index of an "end of output" position. It may
            be chosen like any other; once it has been chosen, it is the only
            allowed position, so finished sequences keep pointing to it with
            probability 1 (log-probability 0): they add nothing to a loss or
            to a beam score.

    Returns:
        bool `(..., T_in)`, True = may point there.
    """
    chosen = ops.cast(chosen, "bool")
    allowed = ops.logical_not(chosen)
    if end_position is None:
        return allowed
    num_positions = ops.shape(chosen)[-1]
    is_end = ops.equal(ops.arange(num_positions, dtype="int32"), end_position)
    ended = chosen[..., end_position : end_position + 1]
    return ops.where(ended, is_end, allowed)


def chosen_positions_mask(pointers, num_positions, end_position=None):
    """Mask `(B, T_out, T_in)` of positions not yet pointed to before step t.

    For a pointer network decoding `pointers (B, T_out)` (indices into the
    `T_in` inputs), step `t` may point to position `j` only if `j` is not in
    `pointers[:, :t]`. Built as an exclusive cumulative sum of one-hots, so it
    works with teacher forcing in one pass. With `end_position`, see
    `pointer_step_mask`: after the end position, only it is allowed.
    """
    one_hot = ops.one_hot(ops.cast(pointers, "int32"), num_positions)  # (B, To, Ti)
    taken = ops.cumsum(one_hot, axis=1) - one_hot  # chosen strictly before t
    return pointer_step_mask(ops.greater(taken, 0), end_position)
