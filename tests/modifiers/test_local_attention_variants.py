"""Local attention in blocks for long documents (Liu et al., 2018) as
`BlockLocal1D` masks, against masks written from tensor2tensor's code.

tensor2tensor (`tensor2tensor/layers/common_attention.py`, which the
paper's T-DMCA configuration `locm/redm/...` runs) has two masked variants:

- `local_mask_right`, `masked_local_attention_1d`: the length is padded to
  a multiple of `block_length` (a single block of the whole length when it
  is shorter than two blocks); the first query block attends to itself
  under a lower triangle, every later block to the concatenation
  `[previous block, own block]` under the band "key at or before the
  query" (`ones_matrix_band_part(block, 2 * block, -1, block)`).
- `local_within_block_mask_right`, `masked_within_block_local_attention_1d`
  (the paper's own description): the padded length is cut into blocks and
  each block attends to itself under a lower triangle.

The references below rebuild those masks block by block, padding
included, and the tests check that `BlockLocal1D(b, b)` and
`BlockLocal1D(b, 0)` give them, that attention with them equals a NumPy
softmax over the mask on the dense and chunked paths (outputs and
gradients), and that the chunked path visits O(blocks) key blocks.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention.ops.chunked.chunked_attention import chunked_attention
from keras_attention.testing import input_gradients

TF = keras.backend.backend() == "tensorflow"


# -- tensor2tensor's masks, block by block ---------------------------------------


def _band(rows, cols, num_lower, num_upper):
    """`tf.linalg.band_part` of ones: `-num_lower <= j - i <= num_upper`,
    a negative bound meaning unlimited."""
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    lower = (num_lower < 0) | (i - j <= num_lower)
    upper = (num_upper < 0) | (j - i <= num_upper)
    return lower & upper


def _padded(length, block):
    return -(-length // block) * block


def t2t_local_mask_right(length, block_length):
    """`(L_pad, L_pad)` bool of `masked_local_attention_1d`, before the
    output is cut back to `length` (the padded rows and columns kept, so
    that a test can check the padding changes nothing)."""
    if length < 2 * block_length:  # "then we use only one block"
        block_length = length
    padded = _padded(length, block_length)
    mask = np.zeros((padded, padded), bool)
    # The first query block: attention_bias_lower_triangle(block_length).
    mask[:block_length, :block_length] = _band(block_length, block_length, -1, 0)
    # Every later block against [previous block, own block].
    local = _band(block_length, 2 * block_length, -1, block_length)
    for b in range(1, padded // block_length):
        rows = slice(b * block_length, (b + 1) * block_length)
        mask[rows, (b - 1) * block_length : (b + 1) * block_length] = local
    return mask


def t2t_within_block_mask_right(length, block_length):
    """`(L_pad, L_pad)` bool of `masked_within_block_local_attention_1d`."""
    padded = _padded(length, block_length)
    mask = np.zeros((padded, padded), bool)
    triangle = _band(block_length, block_length, -1, 0)
    for b in range(padded // block_length):
        block = slice(b * block_length, (b + 1) * block_length)
        mask[block, block] = triangle
    return mask


VARIANTS = {
    # name: (the modifier for a block size, tensor2tensor's padded mask)
    "local_mask_right": (lambda b: km.BlockLocal1D(b, b), t2t_local_mask_right),
    "within_block": (lambda b: km.BlockLocal1D(b, 0), t2t_within_block_mask_right),
}
# (block, length): shorter than a block, shorter than two (tensor2tensor's
# single-block case), exactly two, padded, a multiple, the guide's picture.
SIZES = [(4, 3), (4, 7), (4, 8), (4, 13), (4, 16), (6, 24), (5, 23)]


def _grid(modifier, length):
    """The modifier evaluated on every (query, key) pair: `(L, L)` bool."""
    positions = ops.arange(length, dtype="int32")
    indices = ka.ops.position_indices(1, 1, positions, positions)
    return ops.convert_to_numpy(ops.cast(modifier(*indices), "bool"))[0, 0]


@pytest.mark.parametrize("block, length", SIZES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_block_local_1d_is_tensor2tensors_mask(variant, block, length):
    make, reference = VARIANTS[variant]
    padded = reference(length, block)
    # Padding the length to a block multiple adds no key a real query sees.
    assert not padded[:length, length:].any()
    np.testing.assert_array_equal(_grid(make(block), length), padded[:length, :length])


@pytest.mark.parametrize("block", [4, 6, 256])
def test_local_mask_right_below_two_blocks_is_full_causal_attention(block):
    """tensor2tensor's single-block rule needs no special case: below two
    blocks, `BlockLocal1D(b, b)` already sees every earlier key."""
    for length in (block, 2 * block - 1):
        causal = np.tril(np.ones((length, length), bool))
        np.testing.assert_array_equal(
            _grid(km.BlockLocal1D(block, block), length), causal
        )
        np.testing.assert_array_equal(t2t_local_mask_right(length, block), causal)


def test_local_mask_right_from_two_blocks_on_sees_the_whole_previous_block():
    """Block 256 at length 2048 (tensor2tensor's `attention_loc_block_length`
    default): query 700 (block 2) sees keys 256..700, query 256 sees 0..256."""
    mask = _grid(km.BlockLocal1D(256, 256), 2048)
    np.testing.assert_array_equal(np.flatnonzero(mask[700]), np.arange(256, 701))
    np.testing.assert_array_equal(np.flatnonzero(mask[256]), np.arange(257))
    np.testing.assert_array_equal(np.flatnonzero(mask[255]), np.arange(256))
    np.testing.assert_array_equal(mask, t2t_local_mask_right(2048, 256))


# -- attention with the masks against NumPy ------------------------------------------

B, N, H = 2, 2, 8


def _inputs(length, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, proj = (
        rng.normal(size=(B, length, N, H)).astype("float32") for _ in range(4)
    )
    return q, k, v, proj


def np_attention_and_gradients(q, k, v, proj, mask):
    """Softmax attention over `mask` `(T, S)` in float64, and the gradients
    of `sum(output * proj)` with respect to q, k, v (by hand)."""
    q, k, v, proj = (x.astype("float64") for x in (q, k, v, proj))
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("btnh,bsnh->bnts", q, k) * scale
    scores = np.where(mask, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)  # (B, N, T, S)
    out = np.einsum("bnts,bsnh->btnh", p, v)
    d_out = proj
    d_v = np.einsum("bnts,btnh->bsnh", p, d_out)
    d_p = np.einsum("btnh,bsnh->bnts", d_out, v)
    d_s = p * (d_p - (d_p * p).sum(-1, keepdims=True)) * scale
    d_q = np.einsum("bnts,bsnh->btnh", d_s, k)
    d_k = np.einsum("bnts,btnh->bsnh", d_s, q)
    return out, (d_q, d_k, d_v)


def _attend(impl, modifier, chunks=None):
    """`(q, k, v) -> output` on one path; `chunks`: the chunked path's
    `(query, key)` block sizes instead of the modifier's own grid."""
    if chunks is not None:
        return lambda q, k, v: chunked_attention(
            q,
            k,
            v,
            mask_modifier=modifier,
            query_chunk_size=chunks[0],
            key_chunk_size=chunks[1],
        )

    def attend(q, k, v):
        out, _ = ka.ops.multi_head_attention(
            q, k, v, attention_impl=impl, mask_modifier=modifier
        )
        return out

    return attend


PATHS = {
    "dense": ("dense", None),
    "chunked": ("chunked", None),  # the modifier's grid: blocks of `block`
    "chunked_misaligned": ("chunked", (3, 5)),  # blocks across its blocks
}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("block, length", [(4, 13), (4, 7)])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attention_matches_numpy_with_tensor2tensors_mask(variant, block, length, path):
    make, reference = VARIANTS[variant]
    mask = reference(length, block)[:length, :length]
    q, k, v, proj = _inputs(length)
    expected, expected_grads = np_attention_and_gradients(q, k, v, proj, mask)
    attend = _attend(PATHS[path][0], make(block), PATHS[path][1])
    np.testing.assert_allclose(
        ops.convert_to_numpy(attend(q, k, v)), expected, atol=1e-5
    )
    grads = input_gradients(lambda *x: ops.sum(attend(*x) * proj), [q, k, v])
    for got, want in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(ops.convert_to_numpy(got), want, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compiled_chunked_path_matches_numpy(variant, jit):
    make, reference = VARIANTS[variant]
    block, length = 4, 13
    mask = reference(length, block)[:length, :length]
    q, k, v, proj = _inputs(length, seed=1)
    expected, _ = np_attention_and_gradients(q, k, v, proj, mask)
    got = jit(_attend("chunked", make(block)))(q, k, v)
    np.testing.assert_allclose(ops.convert_to_numpy(got), expected, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_decoder_block_output_depends_only_on_the_keys_of_the_mask(variant):
    """In a `TransformerDecoderBlock`, output t has a gradient with respect
    to input s exactly where tensor2tensor's mask lets t see s."""
    make, reference = VARIANTS[variant]
    block, length = 4, 13
    mask = reference(length, block)[:length, :length]
    layer = ka.layers.TransformerDecoderBlock(
        num_heads=2, intermediate_dim=16, mask_modifier=make(block)
    )
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, length, 8)).astype("float32")
    readout = rng.normal(size=(8,)).astype("float32")  # a LayerNorm's sum is flat
    layer(x)
    for t in (0, 3, 4, 7, 8, 12):
        (grad,) = input_gradients(lambda v, t=t: ops.sum(layer(v)[:, t] * readout), [x])
        touched = np.abs(ops.convert_to_numpy(grad)[0]).sum(-1) > 0  # (L,)
        np.testing.assert_array_equal(touched, mask[t])


# -- the chunked path visits O(blocks) key blocks -----------------------------------


def _ticking(calls, name):
    """`tick(x) -> x` that appends `name` to `calls` each time it runs
    (in a compiled loop too)."""
    if TF:
        import tensorflow as tf

        def record():
            calls.append(name)
            return True

        def tick(x):
            ran = tf.reshape(tf.py_function(record, [], tf.bool), [])
            return tf.where(ran, x, x)

        return tick
    import jax

    def tick(x):
        jax.debug.callback(lambda: calls.append(name))
        return x

    return tick


class _CountedBlockLocal1D(km.BlockLocal1D):
    """`BlockLocal1D` that counts its evaluations: once per key block the
    chunked path loops over (is the block visible?), once more per block it
    computes (the block's mask)."""

    def __init__(self, calls, *args):
        super().__init__(*args)
        self.tick = _ticking(calls, "mask")

    def __call__(self, batch, head, query, key):
        return self.tick(super().__call__(batch, head, query, key))


@pytest.mark.parametrize(
    "variant, blocks_visited",
    [("local_mask_right", 2 * 8 - 1), ("within_block", 8)],
)
def test_chunked_path_visits_a_band_of_blocks_at_length_2048(variant, blocks_visited):
    """Block 256 at length 2048: 8 query blocks. `local_mask_right` computes
    the diagonal and the 7 blocks below it, the within-block variant the 8
    diagonal blocks, against 36 for full causal attention; the attention
    planner picks the chunked path for this length by itself."""
    modifier, reference = VARIANTS[variant]
    length = 2048
    q, k, v, _ = _inputs(length, seed=3)
    q, k, v = (x[:1, :, :1] for x in (q, k, v))  # one example, one head
    calls = []
    flange = modifier(256).memory_flange
    mask_modifier = _CountedBlockLocal1D(calls, 256, flange)
    tick = _ticking(calls, "score")

    def run(q, k, v):
        out, _ = ka.ops.multi_head_attention(
            q,
            k,
            v,
            score_modifier=lambda score, *indices: tick(score),
            mask_modifier=mask_modifier,
        )
        return out

    with ka.ops.recording_attention_plans() as plans:
        if TF:
            import tensorflow as tf

            out = tf.function(run)(q, k, v)
        else:
            out = run(q, k, v)
            import jax

            jax.effects_barrier()
    assert [plan.impl for plan in plans] == ["chunked"]
    # Each block computed runs the score modifier once...
    assert calls.count("score") == blocks_visited
    # ... and the loop went over no other key block.
    assert calls.count("mask") == 2 * blocks_visited
    assert blocks_visited < 8 * 9 // 2  # full causal attention: 36 blocks
    expected, _ = np_attention_and_gradients(
        q, k, v, np.zeros_like(q), reference(length, 256)
    )
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, atol=1e-5)
