"""The forward and backward loops of the chunked path, block by block.

`Kernel.forward` runs the online softmax over the key blocks of each query
block and keeps the log-sum-exp; `Kernel.backward` (key-block major) and
`Kernel.backward_by_query` (query-block major, for banded masks) recompute
each block's probabilities from it. The grid and its masks come from
`blocks.Blocks`; the maths is FlashAttention's (Dao et al., 2022),
described in `keras_attention.ops.chunked.chunked_attention`.
"""

from keras import ops

from keras_attention.ops.chunked.autodiff import linearize
from keras_attention.ops.chunked.blocks import to_blocks
from keras_attention.ops.hashing import dropout_keep_mask
from keras_attention.ops.loops import sequential_fori_loop
from keras_attention.ops.loops import sequential_map
from keras_attention.ops.loops import tensorflow_xla_context
from keras_attention.ops.softmax import MASK_VALUE


def sum_over_queries(scores, x):
    """`einsum("bnqk,bnqh->bnkh", scores, x)`: a block's dK or dV.

    Under TensorFlow's XLA it is taken as `x^T scores` and the small
    `(B, N, H, k)` result transposed, the form XLA's CPU dot runs faster
    (`keras_attention.ops.dense.dot_product_attention._sum_over_queries`
    has the numbers).
    """
    if not tensorflow_xla_context():
        return ops.einsum("bnqk,bnqh->bnkh", scores, x)
    return ops.transpose(ops.einsum("bnqh,bnqk->bnhk", x, scores), (0, 1, 3, 2))


def _when(condition, update, carry):
    """`update(carry)` where `condition`, else `carry`: one branch runs."""
    return ops.cond(condition, lambda: update(carry), lambda: carry)


class Kernel:
    """The forward and backward block loops over a `Blocks` grid."""

    def __init__(self, blocks, dropout_rate, dropout_seed):
        self.blocks = blocks
        self.rate, self.seed = dropout_rate, dropout_seed
        self.keep_scale = 1.0 / (1.0 - dropout_rate)

    def dropout_factor(self, i, j):
        """`(B, N, cq, ck)` float32: 0 where dropped, 1 / (1 - rate) kept."""
        b = self.blocks
        q_pos, k_pos = b.positions(i, j)
        q_pos = q_pos - b.offset  # the coordinates are relative to the call
        keep = dropout_keep_mask(self.seed, b.batch, b.heads, q_pos, k_pos, self.rate)
        return ops.cast(keep, "float32") * self.keep_scale

    def logits(self, q_i, k_j, i, j, score, masked):
        """Modified logits `(B, N, cq, ck)` and the block mask, applied
        (`masked`) or `None` (a block seen whole)."""
        logits = ops.einsum("bnqh,bnkh->bnqk", q_i, k_j)
        if score is not None:
            logits = score(logits, *self.blocks.indices(i, j))
        if not masked:
            return logits, None
        mask = self.blocks.mask(i, j)
        return ops.where(mask, logits, MASK_VALUE), mask

    def forward(self, qb, kb, vb, score):
        b = self.blocks

        def one_query_chunk(args):
            i, q_i = args
            m0 = ops.full((b.batch, b.heads, b.cq), MASK_VALUE, "float32")
            acc0 = ops.zeros((b.batch, b.heads, b.cq, vb.shape[-1]), "float32")
            init = (m0, ops.zeros_like(m0), acc0)

            def update(j, carry, masked=True):
                m, total, acc = carry
                k_j = ops.take(kb, j, axis=0)
                logits, mask = self.logits(q_i, k_j, i, j, score, masked)
                m_new = ops.maximum(m, ops.max(logits, axis=-1))
                p = ops.exp(logits - m_new[..., None])
                if masked:
                    p = p * ops.cast(mask, "float32")
                correction = ops.exp(m - m_new)
                # The normaliser sums every weight; dropout only removes
                # weights from the output.
                total = total * correction + ops.sum(p, axis=-1)
                if self.rate > 0:
                    p = p * self.dropout_factor(i, j)
                v_j = ops.take(vb, j, axis=0)
                acc = acc * correction[..., None] + ops.einsum(
                    "bnqk,bnkh->bnqh", p, v_j
                )
                return m_new, total, acc

            def body(j, carry):
                if b.mask_modifier is None:
                    return update(j, carry)
                return _when(b.visible(i, j), lambda c: update(j, c), carry)

            def whole(j, carry):
                return update(j, carry, masked=False)

            first, stop = b.key_chunks(i)
            if b.maskless:  # the blocks seen whole first, without a mask
                split = b.whole_key_chunks(i, first, stop)
                init, first = sequential_fori_loop(first, split, whole, init), split
            m, total, acc = sequential_fori_loop(first, stop, body, init)
            safe_l = ops.maximum(total, 1e-30)
            out = acc / safe_l[..., None]  # (B, N, cq, Hv)
            lse = m + ops.log(safe_l)  # (B, N, cq)
            return out, lse

        indices = ops.arange(b.n_q, dtype="int32")
        rows = (qb.shape[1], b.heads, b.cq)  # (B, N, cq)
        specs = ((rows + (vb.shape[-1],), "float32"), (rows, "float32"))
        return sequential_map(one_query_chunk, (indices, qb), specs)

    def block_gradients(self, i, j, tensors, score_fn, params, variables, masked=True):
        """Block (i, j)'s share `(dQ_i, dK_j, dV_j, d_extra)` of the
        gradients, `d_extra` for the modifier's parameters (`params`, then
        `variables`); `masked=False` for a block seen whole."""
        qb, k_j, v_j, d_out_b, lse_b, delta_b = tensors
        q_i = ops.take(qb, i, axis=0)
        do_i = ops.take(d_out_b, i, axis=0)
        raw = ops.einsum("bnqh,bnkh->bnqk", q_i, k_j)
        if score_fn is not None:
            indices = self.blocks.indices(i, j)
            logits, pullback = linearize(
                lambda s, *p: score_fn(s, *indices, *p), raw, params, variables
            )
        else:
            logits = raw
        if masked:
            mask = self.blocks.mask(i, j)
            logits = ops.where(mask, logits, MASK_VALUE)
        p = ops.exp(logits - ops.take(lse_b, i, axis=0)[..., None])
        if masked:
            p = p * ops.cast(mask, "float32")
        dp = ops.einsum("bnqh,bnkh->bnqk", do_i, v_j)
        if self.rate > 0:
            # O = (P * Z) V: dV = (P * Z)^T dO and dP = Z * dO V^T;
            # delta = rowsum(dO * O) still equals rowsum(dP * P).
            z = self.dropout_factor(i, j)
            dv = sum_over_queries(p * z, do_i)
            dp = dp * z
        else:
            dv = sum_over_queries(p, do_i)
        ds = p * (dp - ops.take(delta_b, i, axis=0)[..., None])
        d_extra = []
        if score_fn is not None:
            ds, d_params, d_vars = pullback(ds)
            d_extra = [*d_params, *d_vars]
        dk = sum_over_queries(ds, q_i)
        dq = ops.einsum("bnqk,bnkh->bnqh", ds, k_j)
        return dq, dk, dv, d_extra

    def visible_block_gradients(self, i, j, tensors, extra, *args):
        """`block_gradients`, or zeros when the block is not visible.

        Only these block-sized tensors pass through the `cond`: the
        full-size gradient buffers are updated outside it, since XLA copies
        a buffer that a conditional returns (an O(L) copy per block, which
        made banded attention twice as slow per block as full causal).
        """
        if not self.blocks.test_each:
            return self.block_gradients(i, j, tensors, *args)
        qb, k_j, v_j = tensors[:3]

        def zeros():
            return (
                ops.zeros_like(ops.take(qb, i, axis=0)),
                ops.zeros_like(k_j),
                ops.zeros_like(v_j),
                [ops.zeros_like(x) for x in extra],
            )

        return ops.cond(
            self.blocks.visible(i, j),
            lambda: self.block_gradients(i, j, tensors, *args),
            zeros,
        )

    def backward_by_query(self, *args):
        return _backward_by_query(self, *args)

    def backward(self, qb, kb, vb, saved, score_fn, params, variables):
        """One pass over the blocks (FlashAttention-2 style).

        Key blocks outside, query blocks inside: each visible block's
        probabilities are recomputed once and give its share of dV, dK and
        dQ (dQ accumulates into a full-size O(T) buffer), 5 block matmuls
        instead of the 7 of a separate dQ pass and dK/dV pass. The score
        modifier's gradients go to `params` (JAX: the values it closes
        over, hoisted) and `variables` (TensorFlow: the variables it reads).
        """
        b, lse_b = self.blocks, saved[1]
        d_out_b, delta_b, zero, d_extra0 = _backward_inputs(saved, b, params, variables)

        def key_block(j, dq_b, d_extra):
            k_j, v_j = ops.take(kb, j, axis=0), ops.take(vb, j, axis=0)
            tensors = (qb, k_j, v_j, d_out_b, lse_b, delta_b)

            def body(i, carry, masked=True):
                dq_b, dk, dv, d_extra = carry
                dq, dk_i, dv_i, d_ex = self.visible_block_gradients(
                    i, j, tensors, d_extra, score_fn, params, variables, masked
                )
                dq_b = _add_block(dq_b, i, dq)
                return dq_b, dk + dk_i, dv + dv_i, _add(d_extra, d_ex)

            init = (dq_b, ops.zeros_like(k_j), ops.zeros_like(v_j), d_extra)
            first = b.query_chunks_from(j)
            if not b.maskless:
                return sequential_fori_loop(first, b.n_q, body, init)

            # The blocks with a mask first, then those seen whole.
            def whole(i, carry):
                return body(i, carry, masked=False)

            split = b.whole_query_chunks_from(j, first)
            carry = sequential_fori_loop(first, split, body, init)
            return sequential_fori_loop(split, b.n_q, whole, carry)

        def outer(j, carry):
            dq_b, dk_b, dv_b, d_extra = carry
            dq_b, dk, dv, d_extra = key_block(j, dq_b, d_extra)
            dk_b = ops.slice_update(dk_b, [j, 0, 0, 0, 0], dk[None])
            dv_b = ops.slice_update(dv_b, [j, 0, 0, 0, 0], dv[None])
            return dq_b, dk_b, dv_b, d_extra

        init = tuple(ops.zeros_like(x) + zero for x in (qb, kb, vb))
        return sequential_fori_loop(0, b.n_k, outer, (*init, d_extra0))


def _backward_inputs(saved, blocks, params, variables):
    """`(dO blocks, delta blocks, zero, zero parameter gradients)`."""
    out_b, _, d_out = saved
    d_out_b, _ = to_blocks(ops.cast(d_out, "float32"), blocks.cq)  # (nq, B, N, cq, Hv)
    # D_i = rowsum(dO * O): the softmax Jacobian's correction term.
    delta_b = ops.sum(d_out_b * out_b, axis=-1)  # (nq, B, N, cq)
    # The zero gradient buffers are made to depend on `delta`: XLA
    # otherwise allocates them at the start of the whole program, where
    # they live alongside the forward pass' activations and the upstream
    # gradient (3 extra (L, D) buffers at the peak; 0.09 GiB at
    # L=16384, D=512). `x * 0` is not folded for floats (NaN * 0 = NaN),
    # which is also the right answer when `delta` is not finite.
    zero = ops.min(delta_b) * 0.0
    d_extra0 = [
        ops.zeros(tuple(x.shape), "float32") + zero for x in [*params, *variables]
    ]
    return d_out_b, delta_b, zero, d_extra0


def _backward_by_query(kernel, qb, kb, vb, saved, score_fn, params, variables):
    """The backward pass with query blocks outside and, inside, only the
    key blocks in their band (`Blocks.key_chunks`): O(L w) block visits for
    a window of width w, where `Kernel.backward` visits every block below
    the diagonal. dQ_i accumulates in the inner loop's carry, dK and dV
    into full-size O(S) buffers. About 9% slower than `backward` for full
    causal attention (benchmarks/RESULTS.md), so it is used for banded
    masks only."""
    b, lse_b = kernel.blocks, saved[1]
    d_out_b, delta_b, zero, d_extra0 = _backward_inputs(saved, b, params, variables)

    def query_block(i, carry):
        def body(j, carry):
            dq_i, dk_b, dv_b, d_extra = carry
            k_j, v_j = ops.take(kb, j, axis=0), ops.take(vb, j, axis=0)
            tensors = (qb, k_j, v_j, d_out_b, lse_b, delta_b)
            dq, dk, dv, d_ex = kernel.visible_block_gradients(
                i, j, tensors, d_extra, score_fn, params, variables
            )
            dk_b = _add_block(dk_b, j, dk)
            dv_b = _add_block(dv_b, j, dv)
            return dq_i + dq, dk_b, dv_b, _add(d_extra, d_ex)

        dq_b, dk_b, dv_b, d_extra = carry
        first, stop = b.key_chunks(i)
        dq_i = ops.zeros_like(ops.take(qb, i, axis=0)) + zero
        dq_i, dk_b, dv_b, d_extra = sequential_fori_loop(
            first, stop, body, (dq_i, dk_b, dv_b, d_extra)
        )
        dq_b = ops.slice_update(dq_b, [i, 0, 0, 0, 0], dq_i[None])
        return dq_b, dk_b, dv_b, d_extra

    init = tuple(ops.zeros_like(x) + zero for x in (qb, kb, vb))
    return sequential_fori_loop(0, b.n_q, query_block, (*init, d_extra0))


def _add_block(buffer, index, increment):
    """`buffer[index] += increment` on a `(C, ...)` block buffer."""
    total = ops.take(buffer, index, axis=0) + increment
    return ops.slice_update(buffer, [index] + [0] * len(increment.shape), total[None])


def _add(totals, increments):
    return [t + ops.cast(d, t.dtype) for t, d in zip(totals, increments, strict=True)]
