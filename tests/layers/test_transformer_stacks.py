import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention.layers import TransformerDecoder
from keras_attention.layers import TransformerEncoder

B, T, S, D, N, F, L = 2, 5, 6, 8, 2, 16, 2


@pytest.mark.parametrize("with_encoder", [False, True])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_cached_decoder_stack_equals_full_pass(rng, with_encoder, normalize_first):
    x = rng.normal(size=(B, T, D)).astype("float32")
    enc = rng.normal(size=(B, S, D)).astype("float32") if with_encoder else None
    enc_mask = np.ones((B, S), bool)
    enc_mask[1, -3:] = False
    decoder = TransformerDecoder(
        L, num_heads=N, intermediate_dim=F, dropout=0.0, normalize_first=normalize_first
    )
    kwargs = dict(encoder_padding_mask=enc_mask) if with_encoder else {}
    full, w_full = decoder(x, enc, return_attention_scores=True, **kwargs)
    cache = decoder.init_cache(B, T)
    assert tuple(cache.shape) == (B, L, 2, T, N, D // N)
    cross = decoder.compute_cross_attention_cache(enc) if with_encoder else None
    steps, cross_w = [], []
    for t in range(T):
        y, w, cache = decoder(
            x[:, t : t + 1],
            cache=cache,
            cache_update_index=t,
            cross_attention_cache=cross,
            return_attention_scores=True,
            **kwargs,
        )
        steps.append(ops.convert_to_numpy(y))
        if with_encoder:
            cross_w.append(ops.convert_to_numpy(w["cross_attention"]))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    if with_encoder:
        np.testing.assert_allclose(
            np.concatenate(cross_w, 3), w_full["cross_attention"], atol=1e-6
        )
        assert tuple(w_full["cross_attention"].shape) == (B, L, N, T, S)


def test_encoder_stack_weights_and_final_norm(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    encoder = TransformerEncoder(
        L, num_heads=N, intermediate_dim=F, normalize_first=True, dropout=0.0
    )
    y, w = encoder(x, return_attention_scores=True)
    assert tuple(w.shape) == (B, L, N, T, T)
    y = ops.convert_to_numpy(y)
    # Pre-LN stacks end with a LayerNorm: zero mean, unit variance features.
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(-1), 1.0, atol=1e-2)


def test_stack_bad_arguments(rng):
    with pytest.raises(ValueError, match="`num_layers`"):
        TransformerDecoder(0, num_heads=N, intermediate_dim=F)
    with pytest.raises(ValueError, match="`num_heads`"):
        TransformerEncoder(2, num_heads=0, intermediate_dim=F)
    x = rng.normal(size=(B, T, D)).astype("float32")
    decoder = TransformerDecoder(L, num_heads=N, intermediate_dim=F)
    decoder(x)
    with pytest.raises(ValueError, match="`cache`"):
        decoder(
            x[:, :1], cache=ops.zeros((B, L + 1, 2, T, N, D // N)), cache_update_index=0
        )
    with pytest.raises(ValueError, match="`cache_update_index`"):
        decoder(x[:, :1], cache_update_index=0)
    with pytest.raises(ValueError, match="`decoder_sequence`"):
        TransformerDecoder(L, num_heads=3, intermediate_dim=F)(x)
    keras.backend.clear_session()


def test_summary_of_a_model_with_every_attention_layer():
    """`Model.summary` asks each layer for its output shape by build-shape
    keywords (`decoder_sequence_shape=...`)."""
    src = keras.Input((None,), dtype="int32")
    tgt = keras.Input((None,), dtype="int32")
    embed = keras.layers.Embedding(50, 16, mask_zero=True)
    x = ka.layers.TransformerEncoder(2, num_heads=2, intermediate_dim=8)(embed(src))
    x = ka.layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=8)(x)
    y = ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=8)(
        embed(tgt), x
    )
    y = ka.layers.TransformerDecoder(1, num_heads=2, intermediate_dim=8)(y, x)
    y = ka.layers.MultiHeadAttention(2, 4)(y, x)
    y = ka.layers.MultiHeadSelfAttention(2, 4)(y)
    lines = []
    keras.Model([src, tgt], y).summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "11,304" in text  # every weight counted
    model = ka.Transformer(20, 20, hidden_dim=16, num_heads=2, intermediate_dim=8)
    model.build()
    model.summary(print_fn=lines.append)


def test_cache_prefill_then_single_steps_equal_full_pass(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    decoder = TransformerDecoder(L, num_heads=N, intermediate_dim=F, dropout=0.0)
    full = ops.convert_to_numpy(decoder(x))
    cache = decoder.init_cache(B, T + 2)
    y, cache = decoder(x[:, :3], cache=cache, cache_update_index=0)
    steps = [ops.convert_to_numpy(y)]
    for t in range(3, T):
        y, cache = decoder(x[:, t : t + 1], cache=cache, cache_update_index=t)
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    cache = ops.convert_to_numpy(cache)
    np.testing.assert_array_equal(cache[:, :, :, T:], 0.0)  # never written
    # The first layer's keys in NumPy: post-LN, so its input is x; its
    # fused kernel is [W^Q | W^K | W^V].
    qkv = decoder.blocks[0]._self_attention_layer._qkv_dense
    kernel, bias = (ops.convert_to_numpy(w) for w in (qkv.kernel, qkv.bias))
    key = x @ kernel[:, D : 2 * D] + bias[D : 2 * D]
    np.testing.assert_allclose(
        cache[:, 0, 0, :T], key.reshape(B, T, N, D // N), atol=1e-5
    )


def test_compiled_decoding_loop_updates_the_cache_in_place(optimized_hlo):
    """Each step writes only the new keys and values: the optimised XLA
    program holds no copy of the whole cache (there used to be one or two
    per step, plus a rewrite of every entry), nor of one layer's cache (each
    layer's slice of the stack was copied out at every step while the new
    entries were read back out of the layers' updated caches)."""
    batch, steps = 4, 16
    decoder = TransformerDecoder(L, num_heads=N, intermediate_dim=F, dropout=0.0)
    decoder.build((batch, 1, D))

    def generate(x):
        def body(index, carry):
            x, cache = carry
            y, cache = decoder(x, cache=cache, cache_update_index=index)
            return ops.tanh(y), cache

        cache = decoder.init_cache(batch, steps)
        return ops.fori_loop(0, steps, body, (x, cache))

    hlo = optimized_hlo(generate, ops.ones((batch, 1, D)))
    shape = f"f32[{batch},{L},2,{steps},{N},{D // N}]"
    assert "while" in hlo and shape in hlo
    copies = [line for line in hlo.splitlines() if shape in line and " copy(" in line]
    assert not copies, "\n".join(copies)
    layer_shape = f"= f32[{batch},1,2,{steps},{N},{D // N}]"
    layer_copies = [
        line
        for line in hlo.splitlines()
        if layer_shape in line and (" copy(" in line or " fusion(" in line)
    ]
    assert not layer_copies, "\n".join(layer_copies)
