import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import TransformerDecoder
from keras_attention.layers import TransformerDecoderBlock
from keras_attention.layers import TransformerEncoder
from keras_attention.layers import TransformerEncoderBlock
from keras_attention.testing import input_gradients

B, T, S, D, N, F = 2, 5, 6, 8, 2, 16


def _jacobian_blocks(fn, x):
    """|d out_t / d in_u| summed over batch and features: (T, T).

    Row t is the gradient of a random projection of output t (random so that
    no contributions cancel), on any backend.
    """
    weights = np.random.default_rng(1).normal(size=(x.shape[0], x.shape[-1]))
    weights = ops.convert_to_tensor(weights.astype("float32"))
    rows = []
    for t in range(x.shape[1]):
        (grad,) = input_gradients(lambda v, t=t: ops.sum(fn(v)[:, t] * weights), [x])
        rows.append(np.abs(ops.convert_to_numpy(grad)).sum(axis=(0, 2)))
    return np.stack(rows)


@pytest.mark.parametrize("with_encoder", [False, True])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_block_is_causal(rng, with_encoder, normalize_first):
    x = rng.normal(size=(B, T, D)).astype("float32")
    enc = rng.normal(size=(B, S, D)).astype("float32") if with_encoder else None
    block = TransformerDecoderBlock(
        num_heads=N, intermediate_dim=F, dropout=0.0, normalize_first=normalize_first
    )
    influence = _jacobian_blocks(lambda v: block(v, enc), x)
    np.testing.assert_array_equal(np.triu(influence, k=1), 0.0)
    assert (np.diag(influence) > 0).all() and influence[-1, 0] > 0


def test_encoder_block_ignores_masked_garbage(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    block = TransformerEncoderBlock(num_heads=N, intermediate_dim=F, dropout=0.0)
    out = ops.convert_to_numpy(block(x))
    garbage = 100 * rng.normal(size=(B, 3, D)).astype("float32")
    mask = np.concatenate([np.ones((B, T), bool), np.zeros((B, 3), bool)], 1)
    longer = block(np.concatenate([x, garbage], 1), padding_mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(longer)[:, :T], out, atol=1e-5)


def test_decoder_cross_attention_uses_the_encoder_padding_mask(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    enc = rng.normal(size=(B, S, D)).astype("float32")
    block = TransformerDecoderBlock(num_heads=N, intermediate_dim=F, dropout=0.0)
    out, w = block(x, enc, return_attention_scores=True)
    garbage = 100 * rng.normal(size=(B, 2, D)).astype("float32")
    mask = np.concatenate([np.ones((B, S), bool), np.zeros((B, 2), bool)], 1)
    longer, w_long = block(
        x,
        np.concatenate([enc, garbage], 1),
        encoder_padding_mask=mask,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(longer, out, atol=1e-5)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(w_long["cross_attention"])[..., S:], 0.0
    )
    assert tuple(w["cross_attention"].shape) == (B, N, T, S)
    assert tuple(w["self_attention"].shape) == (B, N, T, T)


def test_keras_masks_flow_into_both_attentions(rng):
    tokens = np.array([[3, 4, 5, 0, 0], [6, 7, 1, 2, 0]])
    src_tokens = np.array([[3, 4, 0, 0, 0, 0], [6, 7, 1, 2, 5, 0]])
    embed = keras.layers.Embedding(10, D, mask_zero=True)
    dec_in, enc_in = embed(tokens), embed(src_tokens)
    block = TransformerDecoderBlock(num_heads=N, intermediate_dim=F, dropout=0.0)
    implicit = block(dec_in, enc_in)
    explicit = block(
        ops.convert_to_tensor(ops.convert_to_numpy(dec_in)),
        ops.convert_to_tensor(ops.convert_to_numpy(enc_in)),
        decoder_padding_mask=tokens != 0,
        encoder_padding_mask=src_tokens != 0,
    )
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)
    unmasked = block(
        ops.convert_to_tensor(ops.convert_to_numpy(dec_in)),
        ops.convert_to_tensor(ops.convert_to_numpy(enc_in)),
    )
    assert not np.allclose(unmasked, explicit, atol=1e-3)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_cached_decoder_block_steps_equal_full_pass(rng, normalize_first):
    x = rng.normal(size=(B, T, D)).astype("float32")
    enc = rng.normal(size=(B, S, D)).astype("float32")
    enc_mask = np.ones((B, S), bool)
    enc_mask[0, -2:] = False
    block = TransformerDecoderBlock(
        num_heads=N, intermediate_dim=F, dropout=0.0, normalize_first=normalize_first
    )
    full = block(x, enc, encoder_padding_mask=enc_mask)
    cache = ops.zeros((B, 2, T + 3, N, D // N))
    cross = block.compute_cross_attention_cache(enc)
    steps = []
    for t in range(T):
        # keras-hub's convention: both caches come back, the cross one as read.
        y, cache, same_cross = block(
            x[:, t : t + 1],
            encoder_padding_mask=enc_mask,
            self_attention_cache=cache,
            self_attention_cache_update_index=t,
            cross_attention_cache=cross,
        )
        assert same_cross is cross
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def _train_losses(block_cls, normalize_first, seed=3, dropout=0.0, **call_kwargs):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((T, D))
    x = block_cls(
        num_heads=N,
        intermediate_dim=F,
        dropout=dropout,
        normalize_first=normalize_first,
        seed=seed,
    )(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", run_eagerly=True)
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(16, T, D)).astype("float32")
    ys = xs.sum(-1, keepdims=True) * 0.3
    history = model.fit(xs, ys, epochs=4, batch_size=8, verbose=0, shuffle=False)
    return history.history["loss"]


@pytest.mark.parametrize(
    "block_cls", [TransformerEncoderBlock, TransformerDecoderBlock]
)
@pytest.mark.parametrize("normalize_first", [False, True])
def test_both_norm_placements_train(block_cls, normalize_first):
    losses = _train_losses(block_cls, normalize_first)
    assert losses[-1] < 0.7 * losses[0]


def test_training_is_deterministic_given_a_seed():
    a = _train_losses(TransformerEncoderBlock, False, seed=5)
    b = _train_losses(TransformerEncoderBlock, False, seed=5)
    assert a == b


@pytest.mark.parametrize("cls", [TransformerEncoderBlock, TransformerDecoderBlock])
def test_bad_arguments(cls, rng):
    with pytest.raises(ValueError, match="`num_heads`"):
        cls(num_heads=0, intermediate_dim=F)
    with pytest.raises(ValueError, match="`intermediate_dim`"):
        cls(num_heads=N, intermediate_dim=-3)
    with pytest.raises(ValueError, match="`dropout`"):
        cls(num_heads=N, intermediate_dim=F, dropout=1.0)
    with pytest.raises(ValueError, match="`num_heads`=3"):
        cls(num_heads=3, intermediate_dim=F)(
            rng.normal(size=(B, T, D)).astype("float32")
        )


def test_decoder_block_bad_cache_and_missing_encoder(rng):
    x = rng.normal(size=(B, T, D)).astype("float32")
    enc = rng.normal(size=(B, S, D)).astype("float32")
    block = TransformerDecoderBlock(num_heads=N, intermediate_dim=F)
    block(x, enc)
    with pytest.raises(ValueError, match="`self_attention_cache`"):
        block(
            x[:, :1],
            enc,
            self_attention_cache=ops.zeros((B, 2, T, N + 1, D // N)),
            self_attention_cache_update_index=0,
        )
    with pytest.raises(ValueError, match="`encoder_sequence`"):
        block(x)
    decoder_only = TransformerDecoderBlock(num_heads=N, intermediate_dim=F)
    decoder_only(x)
    with pytest.raises(ValueError, match="without cross-attention"):
        decoder_only(x, enc)


@pytest.mark.parametrize(
    "cls, leading",
    [
        (TransformerEncoderBlock, ()),
        (TransformerDecoderBlock, ()),
        (TransformerEncoder, (2,)),
        (TransformerDecoder, (2,)),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_heads_and_width_are_keyword_only_as_keras_hub_orders_them_otherwise(
    cls, leading
):
    """keras-hub's `TransformerEncoder(64, 4)` is intermediate_dim=64,
    num_heads=4; a positional call here would have built num_heads=64,
    intermediate_dim=4, silently. It raises, naming the arguments, the
    rule, keras-hub's order and the values received."""
    with pytest.raises(TypeError) as error:
        cls(*leading, 64, 4)
    message = str(error.value)
    for part in ("`num_heads`", "`intermediate_dim`", "keyword only"):
        assert part in message
    assert "(intermediate_dim, num_heads" in message
    assert repr((*leading, 64, 4)) in message
    with pytest.raises(TypeError, match="keyword only"):
        cls(*leading, 64, intermediate_dim=4)
    layer = cls(*leading, num_heads=4, intermediate_dim=64)
    assert (layer.num_heads, layer.intermediate_dim) == (4, 64)
    copy = cls.from_config(layer.get_config())
    assert (copy.num_heads, copy.intermediate_dim) == (4, 64)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert (restored.num_heads, restored.intermediate_dim) == (4, 64)


def test_keyword_calls_mean_the_same_as_in_keras_hub():
    keras_hub = pytest.importorskip("keras_hub")
    kwargs = dict(intermediate_dim=64, num_heads=4)
    for ours, theirs in (
        (TransformerEncoderBlock, keras_hub.layers.TransformerEncoder),
        (TransformerDecoderBlock, keras_hub.layers.TransformerDecoder),
    ):
        config = theirs(**kwargs).get_config()
        layer = ours(**kwargs)
        assert layer.num_heads == config["num_heads"] == 4
        assert layer.intermediate_dim == config["intermediate_dim"] == 64
