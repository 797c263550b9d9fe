"""Image Transformer's local attention: `BlockLocal2D` and `BlockLocal1D` in
the attention layers against masks built by hand in NumPy, on the dense and
chunked paths, and causal by gradient."""

import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention.testing import input_gradients

HEIGHT, WIDTH = 6, 8  # a 6 x 8 image, 48 pixels in raster order
LENGTH = HEIGHT * WIDTH


def local_2d_reference(height, width, block, flange, causal=True):
    """`(L, L)` bool, built pixel by pixel from the paper's description: the
    query block of pixel q, extended by `flange` rows above (and below when
    not causal) and `flange` columns left and right; in raster order no
    later pixel when causal."""
    (bh, bw), (fh, fw) = block, flange
    mask = np.zeros((height * width, height * width), bool)
    for q in range(height * width):
        q_row, q_col = divmod(q, width)
        top = (q_row // bh) * bh - fh
        bottom = (q_row // bh) * bh + bh + (0 if causal else fh)
        left = (q_col // bw) * bw - fw
        right = (q_col // bw) * bw + bw + fw
        for k in range(height * width):
            k_row, k_col = divmod(k, width)
            if causal and k > q:
                continue
            mask[q, k] = top <= k_row < bottom and left <= k_col < right
    return mask


def local_1d_reference(length, block, flange, causal=True):
    """`(L, L)` bool: query q of block b sees `[b * block - flange, q]`
    (causal) or `[b * block - flange, (b + 1) * block + flange)`."""
    mask = np.zeros((length, length), bool)
    for q in range(length):
        start = (q // block) * block - flange
        stop = q + 1 if causal else (q // block + 1) * block + flange
        mask[q, max(start, 0) : max(stop, 0)] = True
    return mask


def _grid(modifier, length):
    q = ops.arange(length, dtype="int32")[None, None, :, None]
    k = ops.arange(length, dtype="int32")[None, None, None, :]
    return ops.convert_to_numpy(ops.cast(modifier(0, 0, q, k), "bool"))[0, 0]


CASES_2D = [((2, 4), (2, 2)), ((3, 8), (1, 0)), ((1, 3), (0, 1))]
CASES_1D = [(8, 8), (5, 3), (16, 0)]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block, flange", CASES_1D)
def test_block_local_1d_equals_the_numpy_reference(block, flange, causal):
    modifier = km.BlockLocal1D(block, flange, causal=causal)
    expected = local_1d_reference(LENGTH, block, flange, causal)
    np.testing.assert_array_equal(_grid(modifier, LENGTH), expected)
    # The key range of every query block holds all the keys it sees.
    for start in range(0, LENGTH, block):
        stop = min(start + block, LENGTH)
        lo, hi = (int(v) for v in modifier.key_range(start, stop))
        seen = np.flatnonzero(expected[start:stop].any(0))
        assert lo <= seen.min() and seen.max() < hi


@pytest.mark.parametrize("block, flange", CASES_2D)
def test_block_local_2d_equals_the_numpy_reference(block, flange):
    modifier = km.BlockLocal2D(WIDTH, block, flange)
    expected = local_2d_reference(HEIGHT, WIDTH, block, flange)
    np.testing.assert_array_equal(_grid(modifier, LENGTH), expected)
    assert modifier.chunk_size == block[0] * WIDTH


def _modifiers():
    cases = [
        (km.BlockLocal2D(WIDTH, b, f), local_2d_reference(HEIGHT, WIDTH, b, f))
        for b, f in CASES_2D
    ]
    cases += [
        (km.BlockLocal1D(b, f), local_1d_reference(LENGTH, b, f)) for b, f in CASES_1D
    ]
    return cases


@pytest.mark.parametrize("impl", ["dense", "chunked"])
@pytest.mark.parametrize("case", range(len(CASES_2D) + len(CASES_1D)))
def test_local_attention_equals_full_attention_with_the_mask_by_hand(impl, case):
    """The modifier on the dense path, and on the chunked path that skips
    the blocks it hides, equals full attention given the NumPy mask."""
    modifier, mask = _modifiers()[case]
    x = np.random.default_rng(case).normal(size=(2, LENGTH, 16)).astype("float32")
    local = ka.layers.MultiHeadSelfAttention(
        2, 8, mask_modifier=modifier, attention_impl=impl
    )
    full = ka.layers.MultiHeadSelfAttention(2, 8, attention_impl="dense")
    full.build(x.shape)
    local.build(x.shape)
    local.set_weights(full.get_weights())
    expected = full(x, attention_mask=mask)
    np.testing.assert_allclose(
        ops.convert_to_numpy(local(x, use_causal_mask=True)),
        ops.convert_to_numpy(expected),
        atol=2e-5,
    )

    # And the layer's gradients agree too (the chunked backward pass).
    def loss(layer, **kwargs):
        return lambda v: ops.sum(ops.sin(layer(v, **kwargs)))

    (expected_grad,) = input_gradients(loss(full, attention_mask=mask), [x])
    (grad,) = input_gradients(loss(local, use_causal_mask=True), [x])
    np.testing.assert_allclose(
        ops.convert_to_numpy(grad), ops.convert_to_numpy(expected_grad), atol=5e-5
    )


@pytest.mark.parametrize("impl", ["dense", "chunked"])
def test_local_2d_block_is_causal_by_gradient(impl):
    """Output pixel t of a decoder block has zero gradient with respect to
    every input pixel after t and every pixel its memory block leaves out,
    and a nonzero one for the pixels it sees."""
    block, flange = (2, 4), (2, 2)
    mask = local_2d_reference(HEIGHT, WIDTH, block, flange)
    layer = ka.layers.TransformerDecoderBlock(
        num_heads=2,
        intermediate_dim=16,
        mask_modifier=km.BlockLocal2D(WIDTH, block, flange),
        attention_impl=impl,
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, LENGTH, 8)).astype("float32")
    # A random read-out: the plain sum of a LayerNorm output is constant.
    readout = rng.normal(size=(8,)).astype("float32")
    for t in (0, 9, 21, 30, LENGTH - 1):
        (grad,) = input_gradients(lambda v, t=t: ops.sum(layer(v)[:, t] * readout), [x])
        touched = np.abs(ops.convert_to_numpy(grad)[0]).sum(-1) > 0  # (L,)
        np.testing.assert_array_equal(touched, mask[t])


IMAGE_BLOCKS = {
    "local_2d": ((2, 4), (2, 2), local_2d_reference(HEIGHT, WIDTH, (2, 4), (2, 2))),
    "local_1d": (8, 5, local_1d_reference(LENGTH, 8, 5)),
    "full": (None, None, np.tril(np.ones((LENGTH, LENGTH), bool))),
}


@pytest.mark.parametrize("impl", ["dense", "chunked"])
@pytest.mark.parametrize("name", sorted(IMAGE_BLOCKS))
def test_image_transformer_block_equals_a_decoder_block_with_the_mask(name, impl):
    """ImageTransformerBlock on `(B, H, W, D)` is a decoder block over the
    raster order given the NumPy mask."""
    query_block, memory_flange, mask = IMAGE_BLOCKS[name]
    x = np.random.default_rng(1).normal(size=(2, HEIGHT, WIDTH, 8)).astype("float32")
    layer = ka.layers.ImageTransformerBlock(
        num_heads=2,
        intermediate_dim=16,
        query_block=query_block,
        memory_flange=memory_flange,
        attention_impl=impl,
    )
    output = ops.convert_to_numpy(layer(x))
    reference = ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    flat = x.reshape(2, LENGTH, 8)
    reference(flat)
    reference.set_weights(layer.get_weights())
    expected = reference(flat, decoder_attention_mask=mask, use_causal_mask=False)
    np.testing.assert_allclose(
        output.reshape(2, LENGTH, 8), ops.convert_to_numpy(expected), atol=3e-5
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(query_block="2d"), "query_block"),
        (dict(query_block=(2, 0)), "query_block"),
        (dict(query_block=4, memory_flange=(2, 2)), "memory_flange"),
        (dict(query_block=(2, 2), memory_flange=3), "memory_flange"),
        (dict(mask_modifier=km.CausalMask()), "mask_modifier"),
        (dict(num_heads=0), "num_heads"),
    ],
)
def test_image_transformer_block_bad_arguments(kwargs, match):
    arguments = dict(num_heads=2, intermediate_dim=8)
    with pytest.raises((ValueError, TypeError), match=match):
        ka.layers.ImageTransformerBlock(**{**arguments, **kwargs})


def test_image_transformer_block_needs_an_image():
    layer = ka.layers.ImageTransformerBlock(num_heads=2, intermediate_dim=8)
    with pytest.raises(ValueError, match="inputs"):
        layer(np.zeros((2, 6, 8), "float32"))
