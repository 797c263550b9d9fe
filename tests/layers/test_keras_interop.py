"""Drop-in use next to Keras and keras-hub: weight conversion both ways, LoRA,
int8 quantization (saved and reloaded) and dtype policy maps on the
attention layers, the blocks and the stacks."""

import keras
import numpy as np
import pytest

import keras_attention as ka

keras_hub = pytest.importorskip("keras_hub")

B, T, S, D, N, F = 2, 5, 4, 8, 2, 16


def _x(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def _np(x):
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("impl", ["dense", "fused"])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_encoder_block_converts_both_ways_with_keras_hub(rng, normalize_first, impl):
    x = _x(rng, B, T, D)
    mask = np.ones((B, T), bool)
    mask[1, -2:] = False
    hub = keras_hub.layers.TransformerEncoder(
        intermediate_dim=F, num_heads=N, normalize_first=normalize_first
    )
    hub(x)
    ours = ka.layers.TransformerEncoderBlock.from_keras_hub(hub, attention_impl=impl)
    # keras-hub gives padded queries uniform weights, we give them zeros:
    # compare the real positions.
    expected = _np(hub(x, padding_mask=mask))
    np.testing.assert_allclose(
        _np(ours(x, padding_mask=mask))[mask], expected[mask], atol=1e-5
    )
    back = ours.to_keras_hub()
    assert type(back) is keras_hub.layers.TransformerEncoder
    np.testing.assert_allclose(back(x, padding_mask=mask), expected, atol=1e-6)


@pytest.mark.parametrize("impl", ["auto", "fused"])
def test_decoder_block_converts_both_ways_with_keras_hub(rng, impl):
    x, enc = _x(rng, B, T, D), _x(rng, B, S, D)
    hub = keras_hub.layers.TransformerDecoder(intermediate_dim=F, num_heads=N)
    hub(x, enc)
    ours = ka.layers.TransformerDecoderBlock.from_keras_hub(hub, attention_impl=impl)
    assert ours.attention_impl == impl
    expected = _np(hub(x, enc))
    np.testing.assert_allclose(ours(x, enc), expected, atol=1e-5)
    np.testing.assert_allclose(ours.to_keras_hub()(x, enc), expected, atol=1e-6)
    decoder_only = keras_hub.layers.TransformerDecoder(intermediate_dim=F, num_heads=N)
    decoder_only(x)
    converted = ka.layers.TransformerDecoderBlock.from_keras_hub(
        decoder_only, attention_impl=impl
    )
    np.testing.assert_allclose(converted(x), decoder_only(x), atol=1e-5)


def test_to_keras_hub_refuses_a_separate_attention_dropout(rng):
    block = ka.layers.TransformerEncoderBlock(
        num_heads=N, intermediate_dim=F, dropout=0.1, attention_dropout=0.2
    )
    block(_x(rng, B, T, D))
    with pytest.raises(ValueError, match="attention_dropout=0.2"):
        block.to_keras_hub()


def test_fused_self_attention_converts_both_ways(rng):
    x = _x(rng, B, T, D)
    fused = ka.layers.MultiHeadSelfAttention(N, 3, value_dim=5, use_gate=True)
    fused(x)
    keras_layer = fused.to_multi_head_attention().to_keras()
    assert type(keras_layer) is keras.layers.MultiHeadAttention
    # Keras' einsum path: on JAX its fused path fails when value_dim != key_dim.
    keras_output = keras_layer(x, x, return_attention_scores=True)[0]
    np.testing.assert_allclose(keras_output, fused(x), atol=1e-5)
    again = ka.layers.MultiHeadSelfAttention.from_multi_head_attention(keras_layer)
    for a, b in zip(again.get_weights(), fused.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def _layers_and_inputs(rng):
    x, y = _x(rng, B, T, D), _x(rng, B, S, D)
    return [
        (ka.layers.MultiHeadAttention(N, 4, name="mha"), (x, y)),
        (ka.layers.MultiHeadSelfAttention(N, 4, name="self_mha"), (x,)),
        (
            ka.layers.TransformerEncoderBlock(
                num_heads=N, intermediate_dim=F, name="encoder_block"
            ),
            (x,),
        ),
        (
            ka.layers.TransformerDecoderBlock(
                num_heads=N, intermediate_dim=F, name="decoder_block"
            ),
            (x, y),
        ),
        (
            ka.layers.TransformerEncoder(
                2, num_heads=N, intermediate_dim=F, name="encoder"
            ),
            (x,),
        ),
        (
            ka.layers.TransformerDecoder(
                2, num_heads=N, intermediate_dim=F, name="decoder"
            ),
            (x, y),
        ),
    ]


def _functional(layer, inputs):
    symbols = [keras.Input(a.shape[1:]) for a in inputs]
    return keras.Model(symbols, layer(*symbols))


@pytest.mark.parametrize("index", range(6))
def test_lora_trains_only_the_adapters_and_saves_merged(rng, index, tmp_path):
    layer, inputs = _layers_and_inputs(rng)[index]
    model = _functional(layer, inputs)
    before = _np(model.predict(list(inputs), verbose=0))
    frozen = len(layer.trainable_weights)
    layer.enable_lora(2)
    adapted = [w for w in layer.trainable_weights if "lora" in w.path]
    assert adapted and all(w.path.split("/")[-1].startswith("lora") for w in adapted)
    # LoRA's B starts at zero: the function is unchanged until training.
    np.testing.assert_allclose(model.predict(list(inputs), verbose=0), before)
    assert len(layer.trainable_weights) < frozen + len(adapted)  # kernels frozen
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    target = np.ones_like(before)
    model.fit(list(inputs), target, epochs=2, verbose=0)
    after = _np(model.predict(list(inputs), verbose=0))
    assert not np.allclose(after, before)
    path = str(tmp_path / "lora.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)  # LoRA merged into the kernels
    np.testing.assert_allclose(
        reloaded.predict(list(inputs), verbose=0), after, atol=1e-5
    )


def test_lora_targets_are_checked(rng):
    layer, inputs = _layers_and_inputs(rng)[0]
    layer(*inputs)
    with pytest.raises(ValueError, match="target_names"):
        layer.enable_lora(2, target_names=["nothing"])
    layer.enable_lora(2, target_names=["key"])
    assert layer.key_dense.lora_enabled and not layer.query_dense.lora_enabled


# `Model.quantize` warns about the InputLayer, which has nothing to quantize.
@pytest.mark.filterwarnings("ignore:.*does not have a `quantize` method")
@pytest.mark.parametrize("index", range(6))
def test_int8_quantized_model_saves_and_reloads(rng, index, tmp_path):
    layer, inputs = _layers_and_inputs(rng)[index]
    model = _functional(layer, inputs)
    floats = _np(model.predict(list(inputs), verbose=0))
    model.quantize("int8")
    kernels = [w for w in layer.weights if w.path.endswith("kernel")]
    assert kernels and all(w.dtype == "int8" for w in kernels)
    quantized = _np(model.predict(list(inputs), verbose=0))
    assert np.mean((quantized - floats) ** 2) < 1e-2  # close, not equal
    path = str(tmp_path / "int8.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    reloaded_layer = reloaded.layers[-1]
    assert all(
        w.dtype == "int8" for w in reloaded_layer.weights if w.path.endswith("kernel")
    )
    np.testing.assert_allclose(reloaded.predict(list(inputs), verbose=0), quantized)


def test_quantize_on_the_layer_itself(rng):
    layer, inputs = _layers_and_inputs(rng)[2]
    floats = _np(layer(*inputs))
    layer.quantize("int8")
    assert layer._feedforward_output_dense.quantization_mode == "int8"
    assert layer._self_attention_layer.qkv_dense.quantization_mode == "int8"
    assert np.mean((_np(layer(*inputs)) - floats) ** 2) < 1e-2


def test_dtype_policy_map_quantizes_named_sublayers(rng):
    policy_map = keras.dtype_policies.DTypePolicyMap()
    int8 = keras.dtype_policies.QuantizedDTypePolicy("int8", "float32")
    policy_map["block/self_attention/qkv"] = int8
    policy_map["block/feedforward_output_dense"] = int8
    block = ka.layers.TransformerEncoderBlock(
        num_heads=N, intermediate_dim=F, dtype=policy_map, name="block"
    )
    block.build((B, T, D))
    assert block._self_attention_layer.qkv_dense._kernel.dtype == "int8"
    assert block._feedforward_output_dense._kernel.dtype == "int8"
    assert block._feedforward_intermediate_dense.kernel.dtype == "float32"
    assert block(_x(rng, B, T, D)).shape == (B, T, D)
