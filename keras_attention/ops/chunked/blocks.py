"""The block grid of the chunked path: chunking, masks, skipped blocks.

`Blocks` says, for query block `i` and key block `j` of
`keras_attention.ops.chunked.chunked_attention`, which positions they cover, which
keys each query may see (padding, causal, window, explicit mask, mask
modifier) and which blocks can be skipped or computed without a mask;
`to_blocks` / `from_blocks` move between `(B, L, N, H)` tensors and their
blocks. The kernels (`kernel.py`) only read it.
"""

from keras import ops

from keras_attention.ops import modifier_calls as mods


def to_blocks(x, size):
    """`(B, L, N, H)` -> `(L_pad / size, B, N, size, H)`, zero padded.

    Heads go before positions once, here, so that every block product below
    is a plain batched matmul over `(B, N)` with no per-block transpose.
    """
    length = ops.shape(x)[1]
    count = (length + size - 1) // size
    pad = count * size - length
    x = ops.pad(x, [[0, 0], [0, pad], [0, 0], [0, 0]])
    x = ops.reshape(x, (ops.shape(x)[0], count, size, x.shape[2], x.shape[3]))
    return ops.transpose(x, (1, 0, 3, 2, 4)), count


def from_blocks(x, length):
    """Inverse of `to_blocks`: `(C, B, N, size, H)` -> `(B, length, N, H)`."""
    x = ops.transpose(x, (1, 0, 3, 2, 4))  # (B, C, size, N, H)
    shape = ops.shape(x)
    x = ops.reshape(x, (shape[0], shape[1] * shape[2], x.shape[3], x.shape[4]))
    return x[:, :length]


def _chunk_mask(mask, batch, t_len, s_len, cq, ck):
    """`(B', [N',] T, S)` -> `(nq, nk, B', N', cq, ck)`, padding False.

    One copy of the caller's mask, in the order the blocks are visited.
    """
    mask = ops.cast(mask, "bool")
    if len(mask.shape) == 3:
        mask = mask[:, None]  # the same for every head
    lead = (mask.shape[0] or batch, mask.shape[1] or 1)
    mask = ops.broadcast_to(mask, lead + (t_len, s_len))
    n_q = (t_len + cq - 1) // cq
    n_k = (s_len + ck - 1) // ck
    pad = [[0, 0], [0, 0], [0, n_q * cq - t_len], [0, n_k * ck - s_len]]
    mask = ops.reshape(ops.pad(mask, pad), lead + (n_q, cq, n_k, ck))
    return ops.transpose(mask, (2, 4, 0, 1, 3, 5))


class Blocks:
    """The block grid: sizes, masks and which blocks can be skipped.

    Query chunk `i` covers absolute positions `offset + i * cq + [0, cq)`,
    key chunk `j` positions `j * ck + [0, ck)`.
    """

    def __init__(
        self,
        query,
        key,
        key_mask,
        causal,
        offset,
        attention_mask,
        sliding_window,
        mask_modifier,
        cq,
        ck,
        head_offset=0,
    ):
        self.cq, self.ck = cq, ck
        self.head_offset = head_offset  # of the first head, in a group
        self.t_len, self.s_len = ops.shape(query)[1], ops.shape(key)[1]
        self.batch, self.heads = ops.shape(key)[0], query.shape[2]
        self.n_q = (self.t_len + cq - 1) // cq
        self.n_k = (self.s_len + ck - 1) // ck
        self.causal, self.window = causal, sliding_window
        self.mask_modifier = mask_modifier
        self.offset = ops.cast(offset, "int32")
        # Only the causal mask and the padding of the last key chunk: the
        # blocks they leave whole are computed without a mask.
        self.maskless = all(
            x is None for x in (key_mask, attention_mask, sliding_window, mask_modifier)
        )
        if key_mask is None:
            key_mask = ops.ones((self.batch, self.s_len), dtype="bool")
        pad = [[0, 0], [0, self.n_k * ck - self.s_len]]
        valid = ops.pad(ops.cast(key_mask, "bool"), pad)
        valid = ops.reshape(valid, (self.batch, self.n_k, ck))
        self.valid = ops.transpose(valid, (1, 0, 2))  # (nk, B, ck)
        self.explicit = None
        if attention_mask is not None:
            self.explicit = _chunk_mask(
                attention_mask, self.batch, self.t_len, self.s_len, cq, ck
            )
        # Blocks inside the key range may still be empty: test each one.
        self.test_each = mask_modifier is not None or sliding_window is not None
        # Each query block sees a band of key blocks (a window, or a mask
        # modifier whose `key_range` is a band: `banded`): the
        # backward pass then loops over query blocks and their band, as
        # the forward does, instead of over every key block's queries.
        self.banded = sliding_window is not None or bool(
            getattr(mask_modifier, "banded", False)
        )

    def positions(self, i, j):
        """Absolute query positions `(cq,)` and key positions `(ck,)`."""
        q_pos = self.offset + i * self.cq + ops.arange(self.cq, dtype="int32")
        k_pos = j * self.ck + ops.arange(self.ck, dtype="int32")
        return q_pos, k_pos

    def indices(self, i, j):
        """`(batch, head, query, key)` indices of block `(i, j)`; heads
        numbered from `head_offset`."""
        batch, head, query, key = mods.position_indices(
            self.batch, self.heads, *self.positions(i, j)
        )
        return batch, head + self.head_offset, query, key

    def mask(self, i, j):
        """`(B', N', cq, ck)` boolean mask of query chunk i against key chunk j."""
        mask = ops.take(self.valid, j, axis=0)[:, None, None, :]
        q_pos, k_pos = self.positions(i, j)
        distance = q_pos[:, None] - k_pos[None, :]  # (cq, ck)
        if self.causal:
            mask = ops.logical_and(mask, (distance >= 0)[None, None])
        if self.window is not None:
            band = ops.abs(distance) < self.window
            mask = ops.logical_and(mask, band[None, None])
        if self.explicit is not None:
            block = ops.take(ops.take(self.explicit, i, axis=0), j, axis=0)
            mask = ops.logical_and(mask, block)  # (B', N', cq, ck)
        if self.mask_modifier is not None:
            allowed = ops.cast(self.mask_modifier(*self.indices(i, j)), "bool")
            mask = ops.logical_and(mask, allowed)
        return mask

    def key_chunks(self, i):
        """`(first, stop)`: the key chunks query chunk i may see at all,
        from the causal mask, the window and the modifier's `key_range`."""
        q_start = self.offset + i * self.cq
        q_stop = q_start + self.cq
        lo = ops.zeros((), "int32")
        hi = ops.cast(self.s_len, "int32")
        if self.causal:
            hi = ops.minimum(hi, q_stop)
        if self.window is not None:
            lo = ops.maximum(lo, q_start - self.window + 1)
            hi = ops.minimum(hi, q_stop + self.window - 1)
        bounds = mods.key_range(self.mask_modifier, q_start, q_stop)
        if bounds is not None:
            lo, hi = ops.maximum(lo, bounds[0]), ops.minimum(hi, bounds[1])
        first = ops.clip(lo // self.ck, 0, self.n_k)
        stop = ops.clip((hi + self.ck - 1) // self.ck, first, self.n_k)
        return first, stop

    def whole_key_chunks(self, i, first, stop):
        """`split` in `[first, stop]`: every query of chunk i sees every key
        of chunks `[first, split)`, so those blocks need no mask (when
        `maskless`)."""
        whole = ops.convert_to_tensor(self.s_len // self.ck, "int32")  # unpadded
        if self.causal:
            whole = ops.minimum(whole, (self.offset + i * self.cq + 1) // self.ck)
        return ops.clip(whole, first, stop)

    def whole_query_chunks_from(self, j, first):
        """`split` in `[first, n_q]`: query chunks `[split, n_q)` see every
        key of chunk j, so those blocks need no mask (when `maskless`)."""
        n_q = ops.convert_to_tensor(self.n_q, "int32")
        split = ops.convert_to_tensor(first, "int32")
        if self.causal:
            last_key = (j + 1) * self.ck - 1
            split = ops.maximum(
                split, (last_key - self.offset + self.cq - 1) // self.cq
            )
        padded = (j + 1) * self.ck > self.s_len
        return ops.where(padded, n_q, ops.clip(split, first, n_q))

    def query_chunks_from(self, j):
        """First query chunk that can see key chunk j (causal skips)."""
        if not self.causal:
            return 0
        return ops.clip((j * self.ck - self.offset) // self.cq, 0, self.n_q)

    def visible(self, i, j):
        """Scalar bool: some query of chunk i may see some key of chunk j."""
        first, stop = self.key_chunks(i)
        inside = ops.logical_and(j >= first, j < stop)
        if self.mask_modifier is None:
            return inside
        return ops.logical_and(inside, ops.any(self.mask(i, j)))
