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
diagonal are skipped in both passes; when the causal mask and the padding of
the last key block are the only masks, the blocks that every query of a
block sees whole (those below the diagonal) run without a mask.

Attention dropout is applied to the normalised weights, as in the dense path
and FlashAttention: the keep mask of every block is recomputed in the
backward pass from a counter-based hash of (seed, batch, head, query
position, key position) (`dropout_keep_mask`), so it costs no memory and does
not depend on the chunk sizes. Keras' random ops cannot be used here: their
TensorFlow backend takes no seed tensor, and the forward and backward passes
must draw the very same mask without storing it.
"""

import contextlib
import functools
import math

from keras import ops

from keras_attention.ops import modifier_calls as mods
from keras_attention.ops.chunked.autodiff import hoist_parameters
from keras_attention.ops.chunked.autodiff import unrecorded
from keras_attention.ops.chunked.block_plan import plan_blocks
from keras_attention.ops.chunked.blocks import Blocks
from keras_attention.ops.chunked.blocks import from_blocks
from keras_attention.ops.chunked.blocks import to_blocks
from keras_attention.ops.chunked.kernel import Kernel


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
    score_modifier=None,
    mask_modifier=None,
    query_chunk_size=None,
    key_chunk_size=None,
):
    """Exact attention in O(L) memory, forward and backward.

    Block sizes and head groups (heads attended one group after another on
    a CPU) come from `block_plan.plan_blocks`, whose docstring states the
    cost model; the result is the same whatever the plan.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, N, H)`.
        value: `(B, S, N, Hv)`.
        key_mask: boolean `(B, S)`, True = may attend (padding mask).
        causal: query `i` sees keys `j <= causal_offset + i`.
        causal_offset: absolute position of the first query (the cache
            index); the modifiers see query positions offset by it.
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
        score_modifier: `None` or `f(score, batch, head, query, key)`
            applied to every scaled logit, block by block (see
            `keras_attention.ops.modifier_calls`); its gradients, also into the
            parameters it closes over, are taken in the backward pass.
        mask_modifier: `None` or `f(batch, head, query, key) -> bool`;
            key blocks outside its `key_range` are never visited, and
            blocks it rules out entirely are skipped.
        query_chunk_size, key_chunk_size: block sizes; any lengths work
            (the last block is padded and masked). `None`: the mask
            modifier's `chunk_size` when it has one (e.g. `BlockLocal2D`),
            else `plan_blocks`' rule.

    Returns:
        `(B, T, N, Hv)` in the dtype of `value`. A query that sees no key
        gets zeros, as in `masked_softmax`.
    """
    dropout_rate = _check_dropout(dropout_rate, dropout_seed)
    plan = _plan(query, key, mask_modifier, (query_chunk_size, key_chunk_size))
    blocks = dict(
        key_mask=key_mask,
        causal=causal,
        offset=causal_offset,
        attention_mask=attention_mask,
        sliding_window=sliding_window,
        mask_modifier=mask_modifier,
        cq=plan.query_block,
        ck=plan.key_block,
    )
    attend = functools.partial(
        _attention,
        scale=1.0 / math.sqrt(query.shape[-1]) if scale is None else scale,
        dropout=(dropout_rate, dropout_seed),
        score_modifier=score_modifier,
    )
    groups = _head_groups(query, plan, blocks, dropout_rate)
    return _attend_in_groups(attend, groups, query, key, value, blocks)


def _attend_in_groups(attend, groups, query, key, value, blocks):
    """`attend` the heads group by group, one after another (`_head_groups`)."""
    if len(groups) == 1:
        return attend(query, key, value, blocks)
    outputs = [
        attend(
            query[:, :, heads],
            key[:, :, heads],
            value[:, :, heads],
            {**blocks, "head_offset": heads.start},
        )
        for heads in groups
    ]
    return ops.concatenate(outputs, axis=2)


def _plan(query, key, mask_modifier, chunk_sizes):
    """`plan_blocks` for these inputs: the caller's chunk sizes first, then
    the mask modifier's block grid (block-local masks align the blocks with
    theirs), then the planner's rule."""
    preferred = getattr(mask_modifier, "chunk_size", None)
    batch, t_len, heads, head_dim = query.shape
    return plan_blocks(
        batch,
        t_len,
        key.shape[1],
        heads,
        head_dim,
        "float32",  # the blocks are computed in float32
        block_sizes=tuple(size or preferred for size in chunk_sizes),
    )


def _head_groups(query, plan, blocks, dropout_rate):
    """Slices of the head axis to attend one after another
    (`plan.heads_per_group` at a time): one slice (all heads) when there is
    dropout (its keep mask hashes the head's index within the call) or an
    explicit `attention_mask` (each group would chunk its own copy, `T S`
    bytes each). Modifiers see the heads' absolute indices
    (`Blocks.indices`)."""
    heads = query.shape[2]
    if (
        plan.heads_per_group >= heads
        or dropout_rate > 0
        or blocks["attention_mask"] is not None
    ):
        return [slice(None)]
    count = -(-heads // plan.heads_per_group)
    bounds = [heads * g // count for g in range(count + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _attention(query, key, value, blocks, scale, dropout, score_modifier):
    """`chunked_attention` of all the heads of `query`, `key` and `value`;
    `blocks`: the arguments of `Blocks`, `dropout`: `(rate, seed)`."""
    blocks = Blocks(query, key, **blocks)
    score_fn, params = _score_function(score_modifier, blocks)
    kernel = Kernel(blocks, *dropout)

    @ops.custom_gradient
    def _attend(q_in, k_in, v_in, *param_values):
        score = None if score_fn is None else _bind(score_fn, param_values)
        # A score modifier may read variables the backward differentiates:
        # those reads must stay recorded (see `unrecorded`).
        quiet = unrecorded() if score_fn is None else contextlib.nullcontext()
        with quiet:
            qb, _ = to_blocks(ops.cast(q_in, "float32") * scale, blocks.cq)
            kb, _ = to_blocks(ops.cast(k_in, "float32"), blocks.ck)  # (nk, B, N, ck, H)
            vb, _ = to_blocks(ops.cast(v_in, "float32"), blocks.ck)
            out_b, lse_b = kernel.forward(qb, kb, vb, score)
            output = from_blocks(out_b, blocks.t_len)

        def grad(*args, upstream=None, variables=None):
            d_out = args[0] if upstream is None else upstream
            backward = kernel.backward_by_query if blocks.banded else kernel.backward
            dq_b, dk_b, dv_b, d_extra = backward(
                qb,
                kb,
                vb,
                (out_b, lse_b, d_out),
                score_fn,
                list(param_values),
                list(variables or ()),
            )
            # The lengths are read again here rather than taken from the
            # forward pass: inside a TensorFlow `cond` under XLA (the
            # run-time dense/chunked choice) a forward value reaches the
            # backward as a branch output, which XLA cannot use as a
            # static slice size; the shape of an input always can be.
            t_len, s_len = ops.shape(q_in)[1], ops.shape(k_in)[1]
            grads = (
                ops.cast(from_blocks(dq_b, t_len) * scale, q_in.dtype),
                ops.cast(from_blocks(dk_b, s_len), k_in.dtype),
                ops.cast(from_blocks(dv_b, s_len), v_in.dtype),
                *d_extra[: len(param_values)],
            )
            if variables:
                return grads, list(d_extra[len(param_values) :])
            return grads

        return output, grad

    return ops.cast(_attend(query, key, value, *params), value.dtype)


def _check_dropout(dropout_rate, dropout_seed):
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
    return dropout_rate


def _score_function(score_modifier, blocks):
    """`(fn(score, b, h, q, k, *params), params)`: the score modifier with the
    differentiable values it closes over made explicit (`hoist_parameters`);
    `(None, [])` without a modifier."""
    if score_modifier is None:
        return None, []
    example = (
        ops.zeros((blocks.batch, blocks.heads, blocks.cq, blocks.ck), "float32"),
        *mods.position_indices(
            blocks.batch,
            blocks.heads,
            ops.zeros((blocks.cq,), "int32"),
            ops.zeros((blocks.ck,), "int32"),
        ),
    )
    return hoist_parameters(score_modifier, *example)


def _bind(score_fn, param_values):
    return lambda score, *indices: score_fn(score, *indices, *param_values)
