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

import keras
from keras import ops

from keras_attention.ops import modifiers as mods
from keras_attention.ops.autodiff import hoist_parameters
from keras_attention.ops.autodiff import linearize
from keras_attention.ops.autodiff import unrecorded
from keras_attention.ops.hashing import GOLDEN
from keras_attention.ops.hashing import mix32
from keras_attention.ops.loops import sequential_fori_loop
from keras_attention.ops.loops import sequential_map
from keras_attention.ops.loops import tensorflow_xla_context
from keras_attention.ops.softmax import MASK_VALUE

# The block size when none is given. Measured (benchmarks/RESULTS.md,
# 2026-12-01; forward+backward, B=1, 8 heads, key_dim 64, 2-core CPU):
# TensorFlow under XLA runs 256-blocks faster than 512-blocks (causal,
# L=8192: 2.2-2.6 s vs 3.1 s; L=16384: 9.8 s vs 10.8 s; non-causal L=4096:
# 1.03 s vs 1.25 s), while TensorFlow's graph mode (one kernel per op, so 4x
# the blocks cost 4x the per-op overhead) and JAX are faster with 512
# (graph, causal L=8192: 3.8 s vs 3.0 s; JAX: 3.5 s vs 3.1 s).
DEFAULT_CHUNK_SIZE = 512
TENSORFLOW_XLA_CHUNK_SIZE = 256
# From `LONG_CONTEXT_LENGTH` positions on, a single sequence (B=1) under
# TensorFlow's XLA on a CPU takes 2048-blocks: the products of larger
# blocks run nearer the matmul rate, and the diagonal blocks' wasted half
# is a small share of a long causal sequence. Measured
# (benchmarks/RESULTS.md, "2026-12-02, 16:20-18:30 UTC"; causal
# forward+backward, B=1, 8 heads, key_dim 64, Intel VM with 2 vCPUs):
# L=32768 22.3 s against 30.4 s with 256-blocks, L=65536 84.5-92.7 s
# against 115.2 s. Peak RSS grows by 0.3-0.5 GiB (2.27 against 1.77 GiB at
# L=32768, 2.88 against 2.59 at L=65536), which is why L=16384 keeps
# 256-blocks (1024-blocks there: 6.3 s against 8.7, but 1.68 GiB against
# 1.37, past the benchmark's 1.5 GiB target). A batch multiplies the
# blocks' size and was not measured, so it keeps 256-blocks too.
LONG_CONTEXT_LENGTH = 32768
TENSORFLOW_XLA_LONG_CHUNK_SIZE = 2048


def default_chunk_size(batch=None, lengths=()):
    """The block size `chunked_attention` takes when none is given, for a
    batch of this size and sequences of these static lengths (`None` when
    unknown)."""
    if not tensorflow_xla_context():
        return DEFAULT_CHUNK_SIZE
    return tensorflow_xla_chunk_size(batch, lengths, on_cpu=_compiled_on_cpu())


def tensorflow_xla_chunk_size(batch, lengths, on_cpu=True):
    """The default block size under TensorFlow's XLA (see
    `LONG_CONTEXT_LENGTH`); unknown sizes count as short."""
    known = [x for x in lengths if isinstance(x, int)]
    if on_cpu and batch == 1 and known and max(known) >= LONG_CONTEXT_LENGTH:
        return TENSORFLOW_XLA_LONG_CHUNK_SIZE
    return TENSORFLOW_XLA_CHUNK_SIZE


def sum_over_queries(scores, x):
    """`einsum("bnqk,bnqh->bnkh", scores, x)`: a block's dK or dV.

    Under TensorFlow's XLA it is taken as `x^T scores` and the small
    `(B, N, H, k)` result transposed, the form XLA's CPU dot runs faster
    (`keras_attention.ops.attention._sum_over_queries` has the numbers).
    """
    if not tensorflow_xla_context():
        return ops.einsum("bnqk,bnqh->bnkh", scores, x)
    return ops.transpose(ops.einsum("bnqh,bnqk->bnhk", x, scores), (0, 1, 3, 2))


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
    rows = mix32(
        ops.bitwise_xor(
            mix32(_u32(example_head) + seed[0]), _u32(query_positions)[:, None]
        )
    )  # (B, N, q, 1)
    cols = mix32(
        _u32(key_positions) * ops.convert_to_tensor(GOLDEN, "uint32") + seed[1]
    )  # (k,)
    bits = ops.right_shift(mix32(ops.bitwise_xor(rows, cols)), 8)  # 24 bits
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
    score_modifier=None,
    mask_modifier=None,
    query_chunk_size=None,
    key_chunk_size=None,
):
    """Exact attention in O(L) memory, forward and backward.

    On a CPU, under TensorFlow's XLA or JAX, the heads may be attended in
    groups, one after another, so that each block fits the cache
    (`_head_groups`); the result is the same.

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
            `keras_attention.ops.modifiers`); its gradients, also into the
            parameters it closes over, are taken in the backward pass.
        mask_modifier: `None` or `f(batch, head, query, key) -> bool`;
            key blocks outside its `key_range` are never visited, and
            blocks it rules out entirely are skipped.
        query_chunk_size, key_chunk_size: block sizes; any lengths work
            (the last block is padded and masked). `None`: the mask
            modifier's `chunk_size` when it has one (block-local masks align
            the blocks with theirs, e.g. `BlockLocal2D`), else
            `default_chunk_size()`: 256 when TensorFlow compiles with XLA
            (2048 on a CPU for one sequence of `LONG_CONTEXT_LENGTH`
            positions or more), 512 otherwise (measured, see
            `DEFAULT_CHUNK_SIZE`).

    Returns:
        `(B, T, N, Hv)` in the dtype of `value`. A query that sees no key
        gets zeros, as in `masked_softmax`.
    """
    dropout_rate = _check_dropout(dropout_rate, dropout_seed)
    preferred = getattr(mask_modifier, "chunk_size", None) or default_chunk_size(
        query.shape[0], (query.shape[1], key.shape[1])
    )
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    blocks = dict(
        key_mask=key_mask,
        causal=causal,
        offset=causal_offset,
        attention_mask=attention_mask,
        sliding_window=sliding_window,
        mask_modifier=mask_modifier,
        cq=_chunk_size(query_chunk_size or preferred, query.shape[1]),
        ck=_chunk_size(key_chunk_size or preferred, key.shape[1]),
    )
    attend = functools.partial(
        _attention,
        scale=scale,
        dropout=(dropout_rate, dropout_seed),
        score_modifier=score_modifier,
    )
    groups = _head_groups(query, blocks, dropout_rate)
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


# On a CPU (TensorFlow's XLA, JAX) the heads are attended in groups whose
# block tensors `(B, heads, cq, ck)` hold at most this many float32 values
# (1 MiB). Measured (benchmarks/RESULTS.md, 2026-12-02; causal
# forward+backward, 2-core CPU with 2 MiB of L2), time against one group of
# all 8 heads: TensorFlow's XLA with 256-blocks, B=1, two groups of 4 heads
# 0.88-0.93x at L=4096-16384, groups of 2 heads 1.27x (more blocks, each
# too small); B=4, one head per group 0.94x. JAX with 512-blocks, one head
# per group: B=1 0.88-0.93x at L=4096-8192, B=4 0.79x.
CPU_BLOCK_VALUES = 256 * 1024


def _head_groups(query, blocks, dropout_rate):
    """Slices of the head axis to attend one after another: one slice (all
    heads) unless the work runs on a CPU under XLA or JAX, the batch size is
    static, there is no dropout (its keep mask hashes the head's index
    within the call) and no explicit `attention_mask` (each group would
    chunk its own copy, `T S` bytes each). Modifiers see the heads' absolute
    indices (`_Blocks.indices`)."""
    heads, batch = query.shape[2], query.shape[0]
    if (
        not _compiled_on_cpu()
        or not isinstance(batch, int)
        or dropout_rate > 0
        or blocks["attention_mask"] is not None
    ):
        return [slice(None)]
    count = -(-heads // heads_per_group(batch, blocks["cq"], blocks["ck"], heads))
    bounds = [heads * g // count for g in range(count + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def heads_per_group(batch, cq, ck, heads):
    """The most heads a group holds on a CPU: its block tensors
    `(batch, heads, cq, ck)` stay within `CPU_BLOCK_VALUES` values (one
    head at least)."""
    block = max(batch * cq * ck, 1)  # values per head
    return min(heads, max(CPU_BLOCK_VALUES // block, 1))


def _compiled_on_cpu():
    """TensorFlow tracing for XLA, or JAX, with no accelerator in sight: the
    head groups are a measure of a CPU's cache (a GPU wants all heads in one
    kernel)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.default_backend() == "cpu"
    if not tensorflow_xla_context():
        return False
    import tensorflow as tf

    return not any(tf.config.list_logical_devices(kind) for kind in ("GPU", "TPU"))


def _attention(query, key, value, blocks, scale, dropout, score_modifier):
    """`chunked_attention` of all the heads of `query`, `key` and `value`;
    `blocks`: the arguments of `_Blocks`, `dropout`: `(rate, seed)`."""
    blocks = _Blocks(query, key, **blocks)
    score_fn, params = _score_function(score_modifier, blocks)
    kernel = _Kernel(blocks, *dropout)

    @ops.custom_gradient
    def _attend(q_in, k_in, v_in, *param_values):
        score = None if score_fn is None else _bind(score_fn, param_values)
        # A score modifier may read variables the backward differentiates:
        # those reads must stay recorded (see `unrecorded`).
        quiet = unrecorded() if score_fn is None else contextlib.nullcontext()
        with quiet:
            qb, _ = _chunks(ops.cast(q_in, "float32") * scale, blocks.cq)
            kb, _ = _chunks(ops.cast(k_in, "float32"), blocks.ck)  # (nk, B, N, ck, H)
            vb, _ = _chunks(ops.cast(v_in, "float32"), blocks.ck)
            out_b, lse_b = kernel.forward(qb, kb, vb, score)
            output = _unchunk(out_b, blocks.t_len)

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
                ops.cast(_unchunk(dq_b, t_len) * scale, q_in.dtype),
                ops.cast(_unchunk(dk_b, s_len), k_in.dtype),
                ops.cast(_unchunk(dv_b, s_len), v_in.dtype),
                *d_extra[: len(param_values)],
            )
            if variables:
                return grads, list(d_extra[len(param_values) :])
            return grads

        return output, grad

    return ops.cast(_attend(query, key, value, *params), value.dtype)


def _chunk_size(size, length):
    """The block size: `size`, or a shorter static length. Unknown lengths
    (`None`, or JAX's symbolic dimensions while a functional model infers
    its shapes) keep `size`."""
    return int(min(size, length)) if isinstance(length, int) else int(size)


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


class _Blocks:
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


def _when(condition, update, carry):
    """`update(carry)` where `condition`, else `carry`: one branch runs."""
    return ops.cond(condition, lambda: update(carry), lambda: carry)


class _Kernel:
    """The forward and backward block loops over a `_Blocks` grid."""

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
    d_out_b, _ = _chunks(ops.cast(d_out, "float32"), blocks.cq)  # (nq, B, N, cq, Hv)
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
    key blocks in their band (`_Blocks.key_chunks`): O(L w) block visits for
    a window of width w, where `_Kernel.backward` visits every block below
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
