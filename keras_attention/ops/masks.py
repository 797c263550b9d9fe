"""Boolean attention masks. Convention everywhere: True = may attend."""

import keras
import numpy as np
from keras import ops


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


def _static_shape(x):
    return tuple(getattr(x, "shape", ()))


def check_mask(name, mask, expected=None):
    """Check a mask's dtype and static shape (no data is read: free in a loop).

    Raises a TypeError unless the mask is boolean or integer (0/1): a float
    mask is refused because it is ambiguous, an additive mask (0 = attend,
    -inf = hide) would silently mean the opposite once cast to bool. Raises
    a ValueError unless its static shape has the rank of `expected` and
    broadcasts to it (`None` entries of either are not checked).
    """
    dtype = getattr(mask, "dtype", None)
    dtype = np.asarray(mask).dtype if dtype is None else dtype
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype != "bool" and "int" not in dtype:
        raise TypeError(
            f"`{name}` must be boolean (True = may attend) or integer 0/1; a "
            "float mask is ambiguous (additive masks use 0 for 'attend'). "
            f"Received: {name}.dtype={dtype}"
        )
    if expected is None:
        return
    shape = _static_shape(mask)
    if len(shape) != len(expected):
        raise ValueError(
            f"`{name}` must have rank {len(expected)} (shape {expected}). "
            f"Received: {name}.shape={shape}"
        )
    for got, want in zip(shape, expected, strict=True):
        if got is not None and want is not None and got not in (1, want):
            raise ValueError(
                f"`{name}` must have shape {expected} (or broadcast to it). "
                f"Received: {name}.shape={shape}"
            )


def compute_attention_mask(
    query,
    value,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    causal_offset=0,
):
    """Combine every mask source into one boolean mask `(B, T, S)`, or `None`.

    Args:
        query: tensor `(B, T, ...)`.
        value: tensor `(B, S, ...)`.
        query_mask: `(B, T)`; padded queries attend to nothing (their
            output is zero).
        value_mask, key_mask: `(B, S)`; padded keys receive zero weight
            from every query.
        attention_mask: `(B, T, S)`, any pattern.
        use_causal_mask: add the causal mask (query `i` sees `j <= i`).
        causal_offset: absolute position of the first query (for cached
            decoding).
    """
    q_shape = _static_shape(query)
    v_shape = _static_shape(value)
    batch = q_shape[0] if q_shape else None
    t, s = q_shape[1], v_shape[1]
    mask = None
    if query_mask is not None:
        check_mask("query_mask", query_mask, (batch, t))
        mask = ops.cast(query_mask, "bool")[:, :, None]
    for name, m in (("value_mask", value_mask), ("key_mask", key_mask)):
        if m is not None:
            check_mask(name, m, (batch, s))
            mask = merge_masks(mask, ops.cast(m, "bool")[:, None, :])
    if attention_mask is not None:
        check_mask("attention_mask", attention_mask, (batch, t, s))
        mask = merge_masks(mask, attention_mask)
    if use_causal_mask:
        q_len = ops.shape(query)[1]
        v_len = ops.shape(value)[1]
        mask = merge_masks(mask, causal_mask(q_len, v_len, causal_offset)[None])
    return mask


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
