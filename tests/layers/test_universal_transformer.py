"""UniversalTransformerEncoder / UniversalTransformerDecoder.

The recurrence is checked against a loop written here from the paper's
equations that calls the layer's own shared block (itself tested against
NumPy in test_transformer_blocks.py) and does the halting in NumPy; the
generic checks (config, save/load, mixed precision, XLA fit, masks) are in
the every-layer harnesses.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing

L = ka.layers


def _np(x):
    return np.asarray(ops.convert_to_numpy(x), "float64")


def _sinusoid(positions, width):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    i = np.arange(width)
    angles = np.asarray(positions, "float64")[:, None] / 10000 ** ((i - i % 2) / width)
    return np.where(i % 2 == 0, np.sin(angles), np.cos(angles))  # (P, D)


def reference(layer, x, real, block_step):
    """The UT of Dehghani et al. with Graves' ACT, step by step; a halted
    position's state is copied on (`layer.freeze_halted`) or transformed on.

    `block_step(s)` applies the layer's shared block; the halting unit's
    weights are read from the layer; all the rest is NumPy.
    """
    b, t, d = x.shape
    positions = _sinusoid(np.arange(t), d)[None]  # P, (1, T, D)
    timesteps = _sinusoid(np.arange(layer.max_steps), d)  # S^n, (M, D)
    state = x.astype("float64")
    if not layer.halting:
        for n in range(layer.max_steps):
            state = _np(
                block_step((state + positions + timesteps[n]).astype("float32"))
            )
        return state, np.where(real, layer.max_steps, 0), np.zeros((b, t))
    kernel, bias = (_np(w) for w in layer.halting_unit.weights)
    total = np.zeros((b, t))
    halted = ~real
    output = np.zeros((b, t, d))
    steps = np.zeros((b, t))
    remainders = np.zeros((b, t))
    for n in range(layer.max_steps):
        new = _np(block_step((state + positions + timesteps[n]).astype("float32")))
        h = 1 / (1 + np.exp(-(new @ kernel + bias)[..., 0]))  # (B, T)
        last = n == layer.max_steps - 1
        if not layer.freeze_halted:  # tensor2tensor: every state goes on
            state = new.copy()
        for i in range(b):
            for j in range(t):
                if halted[i, j]:
                    continue
                steps[i, j] += 1
                state[i, j] = new[i, j]
                if total[i, j] + h[i, j] >= layer.halting_threshold or last:
                    remainders[i, j] = 1 - total[i, j]
                    output[i, j] += remainders[i, j] * new[i, j]
                    halted[i, j] = True
                else:
                    total[i, j] += h[i, j]
                    output[i, j] += h[i, j] * new[i, j]
    return output, steps, remainders


def _encoder(**kwargs):
    kwargs = {"num_heads": 2, "intermediate_dim": 8, "max_steps": 4, **kwargs}
    return L.UniversalTransformerEncoder(**kwargs)


def _encoder_block_step(layer, real):
    return lambda s: layer.block(s, padding_mask=real)


@pytest.mark.parametrize(
    "normalize_first, freeze_halted", [(False, True), (True, True), (True, False)]
)
def test_encoder_with_act_matches_the_step_by_step_reference(
    rng, normalize_first, freeze_halted
):
    x = rng.normal(size=(2, 6, 4)).astype("float32")
    real = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], bool)
    layer = _encoder(
        normalize_first=normalize_first,
        ponder_cost_weight=0.05,
        freeze_halted=freeze_halted,
    )
    layer(x)
    kernel, bias = layer.halting_unit.weights
    kernel.assign(6.0 * kernel)  # h spread widely: N varies
    bias.assign([-1.0])
    output, halting = layer(x, padding_mask=real, return_halting=True)
    expected, steps, remainders = reference(
        layer, x, real, _encoder_block_step(layer, real)
    )
    if normalize_first:
        expected = _np(layer.final_norm(expected.astype("float32")))
    np.testing.assert_allclose(_np(output)[real], expected[real], atol=2e-5)
    np.testing.assert_array_equal(_np(halting["steps"]), steps)
    np.testing.assert_allclose(_np(halting["remainders"]), remainders, atol=1e-6)
    # Halting varies across positions here (else the test proves little).
    assert len(np.unique(steps[real])) > 1
    if not freeze_halted:  # the two semantics differ here
        frozen = L.UniversalTransformerEncoder.from_config(
            {**layer.get_config(), "freeze_halted": True}
        )
        frozen(x)
        frozen.set_weights(layer.get_weights())
        other = _np(frozen(x, padding_mask=real))
        assert np.abs(other[real] - _np(output)[real]).max() > 1e-3
    (loss,) = layer.losses
    np.testing.assert_allclose(
        float(loss), 0.05 * (steps + remainders)[real].mean(), rtol=1e-5
    )


def test_without_halting_the_block_is_applied_max_steps_times(rng):
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    real = np.ones((2, 5), bool)
    layer = _encoder(halting=False, max_steps=3)
    output, halting = layer(x, return_halting=True)
    expected, steps, _ = reference(layer, x, real, _encoder_block_step(layer, real))
    np.testing.assert_allclose(_np(output), expected, atol=2e-5)
    np.testing.assert_array_equal(_np(halting["steps"]), steps)
    assert layer.halting_unit is None and not layer.losses
    # One block's weights, however many steps.
    assert len(layer.weights) == len(layer.block.weights)


def test_a_halted_position_stops_changing(rng):
    """More steps allowed change nothing for a position that halted on its
    own before the last step: its output and state are frozen."""
    x = rng.normal(size=(2, 6, 4)).astype("float32")
    short = _encoder(max_steps=3)
    short(x)
    short.halting_unit.weights[1].assign([0.2])  # h about 0.5: halts at 2-3
    config = short.get_config()
    long = L.UniversalTransformerEncoder.from_config({**config, "max_steps": 8})
    long(x)
    long.set_weights(short.get_weights())
    out_short, halting = short(x, return_halting=True)
    out_long = long(x)
    early = _np(halting["steps"]) < 3
    assert early.any()
    np.testing.assert_allclose(_np(out_long)[early], _np(out_short)[early], atol=1e-5)


def test_padding_changes_no_real_position_and_costs_nothing(rng):
    layer = _encoder()
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    testing.check_padding_invariance(layer, x, mask_argument="padding_mask")
    real = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    garbage = np.where(real[..., None], x, 1e3 * rng.normal(size=x.shape))
    out, halting = layer(x, padding_mask=real, return_halting=True)
    cost = float(layer.losses[0])
    out_garbage = layer(garbage.astype("float32"), padding_mask=real)
    np.testing.assert_allclose(_np(out_garbage)[real], _np(out)[real], atol=1e-5)
    assert float(layer.losses[0]) == pytest.approx(cost, rel=1e-6)
    assert np.all(_np(out)[~real] == 0) and np.all(_np(halting["steps"])[~real] == 0)


def test_keras_mask_flows_in_and_out():
    tokens = np.array([[3, 4, 5, 0, 0], [1, 2, 0, 0, 0]])
    embedding = keras.layers.Embedding(8, 4, mask_zero=True)
    layer = _encoder()
    x = embedding(tokens)
    implicit = layer(x)
    explicit = layer(x, padding_mask=tokens != 0)
    np.testing.assert_array_equal(_np(implicit), _np(explicit))
    np.testing.assert_array_equal(_np(layer.compute_mask(x, tokens != 0)), tokens != 0)


def _decoder(**kwargs):
    kwargs = {"num_heads": 2, "intermediate_dim": 8, "max_steps": 4, **kwargs}
    return L.UniversalTransformerDecoder(**kwargs)


@pytest.mark.parametrize("halting", [True, False])
def test_decoder_matches_the_reference(rng, halting):
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    enc = rng.normal(size=(2, 3, 6)).astype("float32")
    real = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    enc_real = np.array([[1, 1, 1], [1, 1, 0]], bool)
    layer = _decoder(halting=halting)
    kwargs = dict(decoder_padding_mask=real, encoder_padding_mask=enc_real)
    output, halting_info = layer(x, enc, **kwargs, return_halting=True)

    def block_step(s):
        return layer.block(s, enc, **kwargs)

    expected, steps, _ = reference(layer, x, real, block_step)
    np.testing.assert_allclose(_np(output)[real], expected[real], atol=2e-5)
    np.testing.assert_array_equal(_np(halting_info["steps"]), steps)


@pytest.mark.parametrize("with_encoder", [True, False])
def test_decoder_is_causal_and_padding_invariant(rng, with_encoder):
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    enc = rng.normal(size=(2, 3, 4)).astype("float32")
    inputs = [x, enc] if with_encoder else [x]
    testing.check_causality(_decoder(), inputs)
    layer = _decoder()
    if with_encoder:
        testing.check_padding_invariance(
            layer, x, enc, mask_argument="encoder_padding_mask"
        )
    else:
        testing.check_padding_invariance(layer, x, mask_argument="decoder_padding_mask")


def _decode_one_at_a_time(layer, x, enc, jit):
    """Outputs and steps of the decoder fed one position per call through its
    cache, each call compiled with XLA."""
    b, t = x.shape[:2]
    heads, width = layer.num_heads, x.shape[-1]
    cache = ops.zeros((b, layer.max_steps, 2, t, heads, width // heads))

    def step(token, enc, cache, index):
        args = (token,) if enc is None else (token, enc)
        return layer(
            *args,
            self_attention_cache=cache,
            self_attention_cache_update_index=index,
            return_halting=True,
        )

    step = jit(step)
    outputs, steps = [], []
    for i in range(t):
        index = ops.convert_to_tensor(i, "int32")  # traced once, not per value
        output, halting, cache = step(x[:, i : i + 1], enc, cache, index)
        outputs.append(_np(output))
        steps.append(_np(halting["steps"]))
    return np.concatenate(outputs, 1), np.concatenate(steps, 1)


@pytest.mark.parametrize(
    "halting, freeze_halted", [(True, True), (True, False), (False, True)]
)
@pytest.mark.parametrize("with_encoder", [True, False])
def test_cached_decoding_equals_the_full_pass(
    rng, jit, halting, freeze_halted, with_encoder
):
    """Token by token through the per-step cache (compiled) = one call on
    the whole sequence, with positions halting after different steps."""
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    enc = rng.normal(size=(2, 3, 6)).astype("float32") if with_encoder else None
    args = (x,) if enc is None else (x, enc)
    layer = _decoder(halting=halting, freeze_halted=freeze_halted)
    layer(*args)
    if halting:
        kernel, bias = layer.halting_unit.weights
        kernel.assign(3.0 * kernel)
        bias.assign([0.0])
    full, info = layer(*args, return_halting=True)
    outputs, steps = _decode_one_at_a_time(layer, x, enc, jit)
    np.testing.assert_allclose(outputs, _np(full), atol=1e-5)
    np.testing.assert_array_equal(steps, _np(info["steps"]))
    if halting:
        assert len(np.unique(steps)) > 1


def test_compiled_decoding_loop_writes_only_the_new_entries(optimized_hlo):
    """As `TransformerDecoder`: each step's keys and values go into the
    loop-carried cache in place, with no copy of the whole cache or of one
    step's slice of it."""
    batch, length, width = 2, 6, 4
    layer = _decoder()
    layer.build((batch, 1, width))
    heads = layer.num_heads

    def generate(x):
        def body(index, carry):
            x, cache = carry
            y, cache = layer(
                x, self_attention_cache=cache, self_attention_cache_update_index=index
            )
            return ops.tanh(y), cache

        cache = ops.zeros((batch, layer.max_steps, 2, length, heads, width // heads))
        return ops.fori_loop(0, length, body, (x, cache))

    hlo = optimized_hlo(generate, ops.ones((batch, 1, width)))
    h = width // heads
    whole = f"f32[{batch},{layer.max_steps},2,{length},{heads},{h}]"
    one_step = f"= f32[{batch},1,2,{length},{heads},{h}]"
    assert "while" in hlo and whole in hlo
    copies = [
        line
        for line in hlo.splitlines()
        if (whole in line and " copy(" in line)
        or (one_step in line and (" copy(" in line or " fusion(" in line))
    ]
    assert not copies, "\n".join(copies)


def test_decoder_cache_arguments_are_checked(rng):
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    layer = _decoder()
    layer(x)
    with pytest.raises(ValueError, match="max_steps=4.*shape=\\(2, 3, 2, 3, 2, 2\\)"):
        layer(
            x[:, :1],
            self_attention_cache=ops.zeros((2, 3, 2, 3, 2, 2)),
            self_attention_cache_update_index=0,
        )
    with pytest.raises(ValueError, match="`self_attention_cache` must have shape"):
        layer(
            x[:, :1],
            self_attention_cache=ops.zeros((2, 4, 2, 3, 1, 4)),
            self_attention_cache_update_index=0,
        )
    with pytest.raises(ValueError, match="needs a `self_attention_cache`"):
        layer(x[:, :1], self_attention_cache_update_index=0)


def test_decoder_without_cross_attention_refuses_an_encoder_and_vice_versa(rng):
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    only = _decoder()
    only(x)
    with pytest.raises(ValueError, match="cross-attention"):
        only(x, x)
    cross = _decoder()
    cross(x, x)
    with pytest.raises(ValueError, match="encoder_sequence"):
        cross(x)


def test_ponder_cost_is_in_the_compiled_fit_loss(rng):
    """`model.evaluate` (compiled with XLA) reports task loss + tau * mean(N + R)."""
    x = rng.normal(size=(4, 5, 4)).astype("float32")
    y = rng.normal(size=(4, 5, 4)).astype("float32")
    layer = _encoder(ponder_cost_weight=0.5, max_steps=2)
    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    output, halting = layer(x, return_halting=True)
    ponder = _np(halting["steps"] + halting["remainders"]).mean()
    mse = np.mean((_np(output) - y) ** 2)
    loss = model.evaluate(x, y, batch_size=4, verbose=0)
    np.testing.assert_allclose(loss, mse + 0.5 * ponder, rtol=1e-5)
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


@pytest.mark.large
def test_seq2seq_model_trains_under_xla(rng):
    """As `models.Transformer`: embedded source and target with padding id
    0, a UT encoder, a UT decoder attending to it, logits; `fit` with
    `jit_compile=True` lowers the loss."""
    vocab, width = 11, 8
    source = keras.Input((6,), dtype="int32")
    target = keras.Input((5,), dtype="int32")
    enc = keras.layers.Embedding(vocab, width, mask_zero=True)(source)
    enc = _encoder(max_steps=3)(enc)
    dec = keras.layers.Embedding(vocab, width, mask_zero=True)(target)
    dec = _decoder(max_steps=3)(dec, enc)
    model = keras.Model([source, target], keras.layers.Dense(vocab)(dec))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    src = rng.integers(1, vocab, size=(16, 6))
    src[:, 4:] = 0
    tgt = np.concatenate([np.ones((16, 1), int), src[:, :4]], 1)  # copy task
    history = model.fit([src, tgt], src[:, :5], batch_size=8, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"max_steps": 0}, "max_steps"),
        ({"halting_threshold": 0.0}, "halting_threshold"),
        ({"halting_threshold": 1.5}, "halting_threshold"),
        ({"ponder_cost_weight": -0.1}, "ponder_cost_weight"),
        ({"halting": "yes"}, "halting"),
        ({"freeze_halted": 1}, "freeze_halted"),
        ({"dropout": 1.0}, "dropout"),
        ({"num_heads": 0}, "num_heads"),
    ],
)
def test_bad_arguments_are_named(kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        _encoder(**kwargs)


def test_num_heads_must_divide_the_width(rng):
    with pytest.raises(ValueError, match="num_heads"):
        _encoder(num_heads=3)(rng.normal(size=(2, 3, 4)).astype("float32"))
