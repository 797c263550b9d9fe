"""Generic checks for every public layer of the Transformer stack.

Config round trip, `.keras` save/load, SavedModel export, mixed precision
and `jit_compile=True` fit, each on a tiny model built around the layer.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka

B, T, S, D = 2, 5, 4, 8


def _sequence_model(make_output, two_inputs=False):
    x = keras.Input((T, D), name="x")
    inputs = [x]
    if two_inputs:
        inputs.append(keras.Input((S, D + 2), name="y"))
    return keras.Model(inputs, make_output(*inputs))


def _mha():
    layer = ka.layers.MultiHeadAttention(2, 3, output_shape=D, name="layer")
    return _sequence_model(lambda x, y: layer(x, y), two_inputs=True), layer


def _mhsa():
    layer = ka.layers.MultiHeadSelfAttention(2, 3, name="layer")
    return _sequence_model(lambda x: layer(x, use_causal_mask=True)), layer


def _sinusoidal():
    layer = ka.layers.SinusoidalPositionEncoding(name="layer")
    dense = keras.layers.Dense(D)  # something to train
    return _sequence_model(lambda x: dense(x) + layer(x)), layer


def _position_embedding():
    layer = ka.layers.PositionEmbedding(16, name="layer")
    return _sequence_model(lambda x: x + layer(x)), layer


def _encoder_block():
    layer = ka.layers.TransformerEncoderBlock(
        num_heads=2, intermediate_dim=16, dropout=0.0, name="layer"
    )
    return _sequence_model(lambda x: layer(x)), layer


def _decoder_block():
    layer = ka.layers.TransformerDecoderBlock(
        num_heads=2,
        intermediate_dim=16,
        dropout=0.0,
        normalize_first=True,
        name="layer",
    )
    return _sequence_model(lambda x, y: layer(x, y), two_inputs=True), layer


def _encoder():
    layer = ka.layers.TransformerEncoder(
        2,
        num_heads=2,
        intermediate_dim=16,
        dropout=0.0,
        normalize_first=True,
        name="layer",
    )
    return _sequence_model(lambda x: layer(x)), layer


def _decoder():
    layer = ka.layers.TransformerDecoder(
        2, num_heads=2, intermediate_dim=16, dropout=0.0, name="layer"
    )
    return _sequence_model(lambda x, y: layer(x, y), two_inputs=True), layer


def _transformer():
    model = ka.Transformer(
        11,
        13,
        hidden_dim=D,
        num_heads=2,
        intermediate_dim=16,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        tie_weights=True,
        position_encoding="learned",
        max_length=8,
    )
    model(_inputs(model))
    return model, model


FACTORIES = {
    "multi_head_attention": _mha,
    "multi_head_self_attention": _mhsa,
    "sinusoidal_position_encoding": _sinusoidal,
    "position_embedding": _position_embedding,
    "transformer_encoder_block": _encoder_block,
    "transformer_decoder_block": _decoder_block,
    "transformer_encoder": _encoder,
    "transformer_decoder": _decoder,
    "transformer": _transformer,
}


def _inputs(model, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    if isinstance(model, ka.Transformer):
        src = rng.integers(1, 11, size=(B, S))
        src[0, -1] = 0
        return {
            "encoder_tokens": src.astype("int32"),
            "decoder_tokens": rng.integers(1, 13, size=(B, T)).astype("int32"),
        }
    return [
        (scale * rng.normal(size=(B,) + tuple(i.shape[1:]))).astype("float32")
        for i in model.inputs
    ]


def _targets(model, seed=1):
    rng = np.random.default_rng(seed)
    if isinstance(model, ka.Transformer):
        return rng.integers(0, 13, size=(B, T))
    return rng.normal(size=(B, T, D)).astype("float32")


def _numpy(x):
    return ops.convert_to_numpy(x)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_config_round_trip_and_keras_save_load(name, tmp_path):
    model, layer = FACTORIES[name]()
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config
    inputs = _inputs(model)
    expected = _numpy(model(inputs))
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(_numpy(restored(inputs)), expected)


@pytest.mark.tf_only
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_saved_model_export_serves_identical_outputs(name, tmp_path):
    import tensorflow as tf

    model, _ = FACTORIES[name]()
    inputs = _inputs(model)
    expected = _numpy(model(inputs))
    path = str(tmp_path / "exported")
    if isinstance(model, ka.Transformer):
        spec = {k: tf.TensorSpec((None, None), tf.int32, name=k) for k in inputs}
        model.export(path, input_signature=[spec], verbose=False)
    else:
        model.export(path, verbose=False)
    loaded = tf.saved_model.load(path)  # keep a reference: it owns the variables
    served = loaded.serve(inputs)
    np.testing.assert_allclose(_numpy(served), expected, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_mixed_precision_is_finite_on_large_inputs(name, policy):
    keras.config.set_dtype_policy(policy)
    model, _ = FACTORIES[name]()
    output = model(_inputs(model, scale=1e3))
    output = _numpy(ops.cast(output, "float32"))
    assert np.isfinite(output).all()


# XLA-compiling a whole stack takes 20-50 s on 2 shared cores, a block 8-11
# s; `make test` compiles the fit of each block and stack already in
# tests/test_implicit_masks.py (with padding masks) and test_transformer.py.
SLOW_TO_COMPILE = {
    "transformer_encoder_block",
    "transformer_decoder_block",
    "transformer_encoder",
    "transformer_decoder",
    "transformer",
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.large) if n in SLOW_TO_COMPILE else n
        for n in sorted(FACTORIES)
    ],
)
def test_jit_compiled_fit(name):
    model, _ = FACTORIES[name]()
    transformer = isinstance(model, ka.Transformer)
    model.compile(
        optimizer="adam",
        loss=(
            keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            if transformer
            else "mse"
        ),
        jit_compile=True,
    )
    before = [v.numpy().copy() for v in model.trainable_variables]
    history = model.fit(
        _inputs(model), _targets(model), batch_size=B, epochs=2, verbose=0
    )
    assert np.isfinite(history.history["loss"]).all()
    after = [v.numpy() for v in model.trainable_variables]
    changed = [not np.array_equal(a, b) for a, b in zip(after, before, strict=True)]
    assert any(changed) or not model.trainable_variables
