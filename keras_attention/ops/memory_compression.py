"""Memory-compressed attention (Liu et al., 2018): which compressed slots a
query may read.

With a compression factor `f`, slot `j` summarises the keys at positions
`[j f, (j + 1) f)` (the last slot may be partial). The memory a query reads
is `[first key, slot 0, slot 1, ...]`: the uncompressed key at the first
real position, then the slots (`1 + ceil(S / f)` entries), as in
tensor2tensor's `multihead_self_attention_reduced`, which prepends the first
position "to make it attendable by everyone".

The rules, on absolute positions (query `i`, key `p`):

- a slot is real when it summarises at least one real (unpadded) key; its
  padded keys are zeroed before the compression (`pad_to_slots`), so a
  partly padded slot holds only real tokens and stays attendable;
- causally, query `i` reads slot `j` only once the slot is complete: its
  last position `(j + 1) f - 1` is `<= i`, whether that position holds a
  real key, padding or lies past the end of the sequence. A slot thus
  never mixes in a future key (a triangular mask over the slot axis would
  leak up to `f - 1` of them), and the output at `i` depends on the
  positions `<= i` alone, not on the sequence's length: a sequence and its
  prefixes agree, which is what makes cached generation equal the full
  pass. The keys of the slot that is not complete yet are read by the
  local layers of a decoder (`MemoryCompressedDecoder`), not here; a
  partial last slot is read by no causal query;
- the first key (at `p_0`, `first_key_position`) is read when `p_0 <= i`, so
  a real query of a causal self-attention always reads at least it, before
  its first slot completes;
- an explicit `attention_mask` `(B, T, S)` over the uncompressed keys lets
  query `i` read slot `j` only if it may see EVERY real key the slot
  summarises (reading a slot reads all its keys: one hidden key would leak
  into it), and the first key if it may see `p_0`.
"""

from keras import ops

from keras_attention.ops.boolean_masks import merge_masks


def num_memory_slots(length, factor):
    """`ceil(length / factor)`: the slots of a `length`-key sequence."""
    return (length + factor - 1) // factor


def _pad_axis(x, axis, factor, value):
    """`x` padded with `value` at the end of `axis` to a multiple of `factor`
    (works for a length unknown while tracing)."""
    length = ops.shape(x)[axis]
    shape = list(ops.shape(x))
    shape[axis] = factor - 1
    fill = ops.full(shape, value, dtype=x.dtype)
    padded = ops.concatenate([x, fill], axis=axis)
    stop = num_memory_slots(length, factor) * factor
    index = [slice(None)] * len(x.shape)
    index[axis] = slice(0, stop)
    return padded[tuple(index)]


def pad_to_slots(x, factor, mask=None):
    """The input of the compression: `(B, S, D)` -> `(B, ceil(S/f) f, D)`.

    Positions where `mask` `(B, S)` is False are set to zero, and zeros are
    appended up to a multiple of `factor`: a padded or missing position adds
    nothing but the convolution's bias to its slot.
    """
    if mask is not None:
        keep = ops.cast(mask, "bool")[:, :, None]  # (B, S, 1)
        x = ops.where(keep, x, ops.zeros_like(x))
    return _pad_axis(x, 1, factor, 0)


def slot_last_positions(key_length, factor, key_mask=None):
    """The last real position `c_j` of each slot: int32 `(B, S_c)` (`(1,
    S_c)` without `key_mask`), `-1` for a slot of padding only."""
    positions = ops.arange(key_length, dtype="int32")[None, :]  # (1, S)
    if key_mask is not None:
        positions = ops.where(ops.cast(key_mask, "bool"), positions, -1)  # (B, S)
    padded = _pad_axis(positions, 1, factor, -1)  # (B, S_c f)
    slots = ops.reshape(padded, (ops.shape(padded)[0], -1, factor))  # (B, S_c, f)
    return ops.max(slots, axis=-1)


def slot_end_positions(key_length, factor):
    """The last position `(j + 1) f - 1` of each slot, int32 `(1, S_c)`:
    the causal rule reads a slot from there on."""
    slots = ops.arange(num_memory_slots(key_length, factor), dtype="int32")
    return ((slots + 1) * factor - 1)[None, :]


def first_key_position(key_mask):
    """`(p_0, real)`: the first real position of each row of `key_mask`
    `(B, S)` (int32 `(B,)`), and whether the row has one (bool `(B,)`)."""
    key_mask = ops.cast(key_mask, "bool")
    first = ops.cast(ops.argmax(ops.cast(key_mask, "int32"), axis=1), "int32")
    return first, ops.any(key_mask, axis=1)


def gather_positions(x, positions):
    """`x[b, positions[b]]` kept as a length-1 axis: `(B, S, ...)` ->
    `(B, 1, ...)`."""
    index = ops.reshape(positions, (-1,) + (1,) * (len(x.shape) - 1))
    index = ops.broadcast_to(index, (ops.shape(x)[0], 1, *ops.shape(x)[2:]))
    return ops.take_along_axis(x, ops.cast(index, "int32"), axis=1)


def _compress_attention_mask(attention_mask, key_real, factor):
    """`(B, T, S)` over keys -> `(B, T, S_c)`: a slot is visible when every
    real key it summarises is."""
    hidden = ops.logical_and(key_real[:, None, :], ops.logical_not(attention_mask))
    hidden = _pad_axis(hidden, 2, factor, False)  # (B, T, S_c f)
    shape = ops.shape(hidden)
    hidden = ops.reshape(hidden, (shape[0], shape[1], -1, factor))  # (B, T, S_c, f)
    return ops.logical_not(ops.any(hidden, axis=-1))


def _memory_visibility(allowed, key_mask, first, factor):
    """`allowed` `(B, T, S)` over the keys -> `(B, T, 1 + S_c)` over the
    memory: the first key as `allowed` at `p_0`, a slot when every real key
    it summarises is allowed."""
    shape = ops.shape(allowed)
    index = ops.broadcast_to(first[:, None, None], (shape[0], shape[1], 1))
    sees_first = ops.take_along_axis(allowed, index, axis=2)  # (B, T, 1)
    slots = _compress_attention_mask(allowed, key_mask, factor)  # (B, T, S_c)
    return ops.concatenate([sees_first, slots], axis=2)


def _batch_size(key_mask, query_mask, attention_mask):
    """The batch size of the first mask with a batch axis, else 1."""
    for m in (key_mask, query_mask):
        if m is not None:
            return ops.shape(m)[0]
    if attention_mask is not None and len(attention_mask.shape) == 3:
        return ops.shape(attention_mask)[0]
    return 1


def memory_compression_mask(
    query_length,
    key_length,
    factor,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    batch_size=None,
    query_offset=0,
):
    """Which entries of the compressed memory each query may read.

    Args:
        query_length: `T`.
        key_length: `S`, the uncompressed key length.
        factor: the compression factor `f`.
        key_mask: `(B, S)`, True = a real key.
        query_mask: `(B, T)`; a padded query reads nothing.
        attention_mask: `(T, S)` or `(B, T, S)` over the uncompressed keys.
        use_causal_mask: query `i` reads a slot once its last position
            `(j + 1) f - 1` is `<= i` (the slot is complete), and the first
            key once its position is `<= i`.
        batch_size: `B`, which every mask broadcasts to; by default the
            batch size of the first mask that has a batch axis (1 if none).
        query_offset: int or traced int scalar, the absolute position of
            the first query (a cached decoding step's update index); the
            causal rule compares absolute positions.

    Returns:
        bool `(B, T, 1 + ceil(S / f))`: the first key, then the slots.
    """
    batch = batch_size
    if batch is None:
        batch = _batch_size(key_mask, query_mask, attention_mask)
    if key_mask is None:
        key_mask = ops.ones((1, key_length), dtype="bool")
    key_mask = ops.broadcast_to(ops.cast(key_mask, "bool"), (batch, key_length))
    last = slot_last_positions(key_length, factor, key_mask)  # (B, S_c)
    first, has_first = first_key_position(key_mask)  # (B,), (B,)
    real = ops.concatenate([has_first[:, None], last >= 0], axis=1)
    mask = ops.broadcast_to(real[:, None, :], (batch, query_length, ops.shape(real)[1]))
    if use_causal_mask:
        ends = slot_end_positions(key_length, factor)  # (1, S_c)
        ends = ops.broadcast_to(ends, ops.shape(last))
        reach = ops.concatenate([first[:, None], ends], axis=1)  # (B, 1 + S_c)
        rows = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")
        mask = ops.logical_and(mask, reach[:, None, :] <= rows[None, :, None])
    if attention_mask is not None:
        allowed = ops.broadcast_to(
            ops.cast(attention_mask, "bool"), (batch, query_length, key_length)
        )  # (B, T, S)
        mask = ops.logical_and(
            mask, _memory_visibility(allowed, key_mask, first, factor)
        )
    if query_mask is not None:
        mask = merge_masks(mask, ops.cast(query_mask, "bool")[:, :, None])
    return mask
