"""Exact memory-efficient attention: chunks, an online softmax, recomputation.

`softmax(Q K^T * scale) V` without ever holding the `(T, S)` matrix: queries
are processed in chunks of `query_chunk_size`, and for each chunk the keys in
chunks of `key_chunk_size`, keeping a running maximum `m`, a running sum `total`
and an unnormalised output (the online softmax of Milakov & Gimelshein, 2018;
Rabe & Staats, 2021; FlashAttention, Dao et al., 2022). The backward pass
recomputes each block's probabilities from the saved log-sum-exp instead of
storing them, so memory is O(T + S) per head, not O(T S).

Masks: a key padding mask `(B, S)` and the causal mask (with an offset for
cached decoding), which stay O(L), and an explicit boolean `(B, T, S)` mask,
which costs T S bytes (a quarter of one float32 `(T, S)` matrix per example,
never multiplied by the heads). With a causal mask, blocks entirely above the
diagonal are skipped in both passes.

Attention dropout is applied to the normalised weights, as in the dense path
and FlashAttention: the keep mask of every block is recomputed in the
backward pass from a counter-based hash of (seed, batch, head, query
position, key position) (`dropout_keep_mask`), so it costs no memory and does
not depend on the chunk sizes. Keras' random ops cannot be used here: their
TensorFlow backend takes no seed tensor, and the forward and backward passes
must draw the very same mask without storing it.
"""

import math

from keras import ops

from keras_attention.ops.loops import sequential_fori_loop
from keras_attention.ops.loops import sequential_map
from keras_attention.ops.softmax import MASK_VALUE

# The `lowbias32` integer finaliser (C. Wellons, "Prospecting for hash
# functions", 2018): full avalanche, two multiplications.
_MIX_1 = 0x7FEB352D
_MIX_2 = 0x846CA68B
_GOLDEN = 0x9E3779B9


def _mix(x):
    """A uint32 -> uint32 bijection with good avalanche."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, ops.convert_to_tensor(_MIX_1, "uint32"))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, ops.convert_to_tensor(_MIX_2, "uint32"))
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def _u32(x):
    return ops.cast(x, "uint32")


def dropout_keep_mask(seed, batch, heads, query_positions, key_positions, rate):
    """The attention-dropout keep mask of a block, `(B, N, q, k)` boolean.

    A pure function of the absolute coordinates, so any block of the
    `(B, N, T, S)` weights can be (re)drawn on its own and the chunked
    forward and backward passes agree, whatever the chunk sizes:
    `keep[b, n, i, j] = hash(seed, b, n, i, j) >= rate` with the hash uniform
    on 24 bits, i.e. each weight is kept with probability `1 - rate` up to
    2^-24.

    Args:
        seed: int tensor `(2,)` (a draw of `keras.random.randint`).
        batch: the batch size B.
        heads: the number of heads N.
        query_positions: int32 `(q,)`, absolute query positions.
        key_positions: int32 `(k,)`, absolute key positions.
        rate: the dropout rate, a Python float in `[0, 1)`.
    """
    seed = _u32(seed)
    example_head = ops.reshape(
        ops.arange(batch, dtype="int32")[:, None] * heads
        + ops.arange(heads, dtype="int32")[None, :],
        (batch, heads, 1, 1),
    )
    rows = _mix(
        ops.bitwise_xor(
            _mix(_u32(example_head) + seed[0]), _u32(query_positions)[:, None]
        )
    )  # (B, N, q, 1)
    cols = _mix(
        _u32(key_positions) * ops.convert_to_tensor(_GOLDEN, "uint32") + seed[1]
    )  # (k,)
    bits = ops.right_shift(_mix(ops.bitwise_xor(rows, cols)), 8)  # 24 bits
    threshold = int(round(rate * (1 << 24)))
    return ops.greater_equal(ops.cast(bits, "int32"), threshold)


def _chunks(x, size):
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


def _unchunk(x, length):
    """Inverse of `_chunks`: `(C, B, N, size, H)` -> `(B, length, N, H)`."""
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


def chunked_attention(
    query,
    key,
    value,
    key_mask=None,
    causal=False,
    causal_offset=0,
    attention_mask=None,
    sliding_window=None,
    scale=None,
    dropout_rate=0.0,
    dropout_seed=None,
    query_chunk_size=512,
    key_chunk_size=512,
):
    """Exact attention in O(L) memory, forward and backward.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, N, H)`.
        value: `(B, S, N, Hv)`.
        key_mask: boolean `(B, S)`, True = may attend (padding mask).
        causal: query `i` sees keys `j <= causal_offset + i`.
        causal_offset: absolute position of the first query.
        attention_mask: boolean `(B, T, S)` or per head `(B, N, T, S)`
            (any dimension but T and S may be 1), True = may attend; any
            pattern.
        sliding_window: `None` or an int `w`: query `i` sees keys
            `|j - (causal_offset + i)| < w`.
        scale: multiplier of the logits, `1 / sqrt(H)` when `None`.
        dropout_rate: attention dropout on the normalised weights (kept
            weights are scaled by `1 / (1 - rate)`); 0 disables it. Callers
            pass 0 outside training.
        dropout_seed: int tensor `(2,)` that, with the coordinates, fixes
            the dropout mask (`dropout_keep_mask`); needed when
            `dropout_rate > 0`.
        query_chunk_size, key_chunk_size: block sizes; any lengths work
            (the last block is padded and masked).

    Returns:
        `(B, T, N, Hv)` in the dtype of `value`. A query that sees no key
        gets zeros, as in `masked_softmax`.
    """
    dropout_rate = float(dropout_rate)
    if not 0.0 <= dropout_rate < 1.0:
        raise ValueError(
            f"`dropout_rate` must be in [0, 1). Received: dropout_rate={dropout_rate}"
        )
    if dropout_rate > 0 and dropout_seed is None:
        raise ValueError(
            "`dropout_seed` (an int tensor of shape (2,)) is needed when "
            f"dropout_rate > 0. Received: dropout_rate={dropout_rate}, "
            "dropout_seed=None"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    out_dtype = value.dtype
    t_len = ops.shape(query)[1]
    s_len = ops.shape(key)[1]
    batch = ops.shape(key)[0]
    cq = int(min(query_chunk_size, query.shape[1] or query_chunk_size))
    ck = int(min(key_chunk_size, key.shape[1] or key_chunk_size))
    if key_mask is None:
        key_mask = ops.ones((batch, s_len), dtype="bool")
    offset = ops.cast(causal_offset, "int32")

    n_q = (t_len + cq - 1) // cq
    n_k = (s_len + ck - 1) // ck
    valid = ops.pad(ops.cast(key_mask, "bool"), [[0, 0], [0, n_k * ck - s_len]])
    valid = ops.transpose(ops.reshape(valid, (batch, n_k, ck)), (1, 0, 2))
    explicit = None
    if attention_mask is not None:
        explicit = _chunk_mask(attention_mask, batch, t_len, s_len, cq, ck)
    keep_scale = 1.0 / (1.0 - dropout_rate)

    def positions(i, j):
        q_pos = i * cq + ops.arange(cq, dtype="int32")
        k_pos = j * ck + ops.arange(ck, dtype="int32")
        return q_pos, k_pos

    def block_mask(i, j):
        """`(B, 1, cq, ck)` boolean mask of query chunk i against key chunk j."""
        mask = ops.take(valid, j, axis=0)[:, None, None, :]
        if causal or sliding_window is not None:
            q_pos, k_pos = positions(i, j)
            distance = (offset + q_pos)[:, None] - k_pos[None, :]  # (cq, ck)
        if causal:
            mask = ops.logical_and(mask, (distance >= 0)[None, None])
        if sliding_window is not None:
            band = ops.abs(distance) < sliding_window
            mask = ops.logical_and(mask, band[None, None])
        if explicit is not None:
            block = ops.take(ops.take(explicit, i, axis=0), j, axis=0)
            mask = ops.logical_and(mask, block)  # (B', N', cq, ck)
        return mask

    def dropout_factor(i, j, heads):
        """`(B, N, cq, ck)` float32: 0 where dropped, 1 / (1 - rate) kept."""
        q_pos, k_pos = positions(i, j)
        keep = dropout_keep_mask(dropout_seed, batch, heads, q_pos, k_pos, dropout_rate)
        return ops.cast(keep, "float32") * keep_scale

    def key_chunks_for(i):
        """Key chunks that query chunk i can see at all (causal skips)."""
        if not causal:
            return n_k
        last_query = offset + (i + 1) * cq - 1
        return ops.clip(last_query // ck + 1, 0, n_k)

    def query_chunks_from(j):
        """First query chunk that can see key chunk j (causal skips)."""
        if not causal:
            return 0
        return ops.clip((j * ck - offset) // cq, 0, n_q)

    def logits_and_mask(q_i, kb, i, j):
        k_j = ops.take(kb, j, axis=0)
        logits = ops.einsum("bnqh,bnkh->bnqk", q_i, k_j)  # (B, N, cq, ck)
        mask = block_mask(i, j)
        return ops.where(mask, logits, MASK_VALUE), mask

    def forward(qb, kb, vb):
        def one_query_chunk(args):
            i, q_i = args
            m0 = ops.full(
                (batch, q_i.shape[1], cq), MASK_VALUE, "float32"
            )  # (B, N, cq)
            l0 = ops.zeros_like(m0)
            acc0 = ops.zeros((batch, q_i.shape[1], cq, vb.shape[-1]), "float32")

            def body(j, carry):
                m, total, acc = carry
                logits, mask = logits_and_mask(q_i, kb, i, j)
                m_new = ops.maximum(m, ops.max(logits, axis=-1))
                p = ops.exp(logits - m_new[..., None]) * ops.cast(mask, "float32")
                correction = ops.exp(m - m_new)
                # The normaliser sums every weight; dropout only removes
                # weights from the output.
                total = total * correction + ops.sum(p, axis=-1)
                if dropout_rate > 0:
                    p = p * dropout_factor(i, j, q_i.shape[1])
                v_j = ops.take(vb, j, axis=0)
                acc = acc * correction[..., None] + ops.einsum(
                    "bnqk,bnkh->bnqh", p, v_j
                )
                return m_new, total, acc

            m, total, acc = sequential_fori_loop(
                0, key_chunks_for(i), body, (m0, l0, acc0)
            )
            safe_l = ops.maximum(total, 1e-30)
            out = acc / safe_l[..., None]  # (B, N, cq, Hv)
            lse = m + ops.log(safe_l)  # (B, N, cq)
            return out, lse

        indices = ops.arange(n_q, dtype="int32")
        return sequential_map(one_query_chunk, (indices, qb))

    def backward(qb, kb, vb, out_b, lse_b, d_out):
        """One pass over the blocks (FlashAttention-2 style).

        Key blocks outside, query blocks inside: each visible block's
        probabilities are recomputed once and give its share of dV, dK and
        dQ (dQ accumulates into a full-size O(T) buffer), 5 block matmuls
        instead of the 7 of a separate dQ pass and dK/dV pass.
        """
        d_out_b, _ = _chunks(ops.cast(d_out, "float32"), cq)  # (nq, B, N, cq, Hv)
        # D_i = rowsum(dO * O): the softmax Jacobian's correction term.
        delta_b = ops.sum(d_out_b * out_b, axis=-1)  # (nq, B, N, cq)

        def key_block(j, dq_b):
            k_j = ops.take(kb, j, axis=0)  # (B, N, ck, H)
            v_j = ops.take(vb, j, axis=0)

            def body(i, carry):
                dq_b, dk, dv = carry
                q_i = ops.take(qb, i, axis=0)
                do_i = ops.take(d_out_b, i, axis=0)
                logits, mask = logits_and_mask(q_i, kb, i, j)
                lse_i = ops.take(lse_b, i, axis=0)
                p = ops.exp(logits - lse_i[..., None]) * ops.cast(mask, "float32")
                dp = ops.einsum("bnqh,bnkh->bnqk", do_i, v_j)
                if dropout_rate > 0:
                    # O = (P * Z) V: dV = (P * Z)^T dO and dP = Z * dO V^T;
                    # delta = rowsum(dO * O) still equals rowsum(dP * P).
                    z = dropout_factor(i, j, q_i.shape[1])
                    dv = dv + ops.einsum("bnqk,bnqh->bnkh", p * z, do_i)
                    dp = dp * z
                else:
                    dv = dv + ops.einsum("bnqk,bnqh->bnkh", p, do_i)
                ds = p * (dp - ops.take(delta_b, i, axis=0)[..., None])
                dk = dk + ops.einsum("bnqk,bnqh->bnkh", ds, q_i)
                dq_i = ops.take(dq_b, i, axis=0) + ops.einsum(
                    "bnqk,bnkh->bnqh", ds, k_j
                )
                dq_b = ops.slice_update(dq_b, [i, 0, 0, 0, 0], dq_i[None])
                return dq_b, dk, dv

            init = (dq_b, ops.zeros_like(k_j), ops.zeros_like(v_j))
            return sequential_fori_loop(query_chunks_from(j), n_q, body, init)

        def outer(j, carry):
            dq_b, dk_b, dv_b = carry
            dq_b, dk, dv = key_block(j, dq_b)
            dk_b = ops.slice_update(dk_b, [j, 0, 0, 0, 0], dk[None])
            dv_b = ops.slice_update(dv_b, [j, 0, 0, 0, 0], dv[None])
            return dq_b, dk_b, dv_b

        # The zero gradient buffers are made to depend on `delta`: XLA
        # otherwise allocates them at the start of the whole program, where
        # they live alongside the forward pass' activations and the upstream
        # gradient (3 extra (L, D) buffers at the peak; 0.09 GiB at
        # L=16384, D=512). `x * 0` is not folded for floats (NaN * 0 = NaN),
        # which is also the right answer when `delta` is not finite.
        zero = ops.min(delta_b) * 0.0
        init = tuple(ops.zeros_like(x) + zero for x in (qb, kb, vb))
        return sequential_fori_loop(0, n_k, outer, init)

    @ops.custom_gradient
    def _attend(q_in, k_in, v_in):
        qb, _ = _chunks(ops.cast(q_in, "float32") * scale, cq)  # (nq, B, N, cq, H)
        kb, _ = _chunks(ops.cast(k_in, "float32"), ck)  # (nk, B, N, ck, H)
        vb, _ = _chunks(ops.cast(v_in, "float32"), ck)
        out_b, lse_b = forward(qb, kb, vb)
        output = _unchunk(out_b, t_len)

        def grad(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream
            dq_b, dk_b, dv_b = backward(qb, kb, vb, out_b, lse_b, d_out)
            dq = _unchunk(dq_b, t_len) * scale
            dk = _unchunk(dk_b, s_len)
            dv = _unchunk(dv_b, s_len)
            return (
                ops.cast(dq, q_in.dtype),
                ops.cast(dk, k_in.dtype),
                ops.cast(dv, v_in.dtype),
            )

        return output, grad

    return ops.cast(_attend(query, key, value), out_dtype)
