"""`collect_attention`: the weights of every attention layer of a built model.

Per read class, the recorded weights are those the layer returns with its
flag (`return_attention_scores`, `return_alignments`) on the same inputs,
laid out `(B, N, T, S)`, and the model's outputs are those of a plain call,
bit for bit. Then the ways a model holds its layers (subclassed,
`Sequential`, stacks, a layer run twice, a model that asks for the weights
itself), the masks, the restoring of the wrapped methods after an error,
and the errors.
"""

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.visualization import AttentionRecord
from keras_attention.visualization import collect_attention
from keras_attention.visualization.readers import READ_CLASSES
from keras_attention.visualization.readers import READERS

L = ka.layers
B = 2


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=(B, *shape)).astype("float32")


def _heads(w):
    """`(B, T, S)` -> `(B, 1, T, S)`, `(B, S)` -> `(B, 1, 1, S)`."""
    w = np.asarray(w)
    return w[:, None] if w.ndim == 3 else w[:, None, None]


def _first(result, index=1):
    return np.asarray(result[index])


# -- one functional model per read class ---------------------------------------
# Each case: (layer, model inputs (symbolic), NumPy inputs, model outputs of
# the symbolic inputs, expected weights (B, N, T, S) from a direct call).


def _two_sequences(layer, expected, **kwargs):
    q, v = keras.Input((4, 8)), keras.Input((5, 8))
    data = [_x(4, 8), _x(5, 8, seed=1)]
    return layer, [q, v], data, layer(q, v, **kwargs), lambda: expected(data)


def _multi_head(layer):
    return _two_sequences(
        layer, lambda d: _first(layer(*d, return_attention_scores=True))
    )


def _scored(layer):
    return _two_sequences(
        layer, lambda d: _heads(layer(*d, return_attention_scores=True)[1])
    )


def _self_attention():
    layer = L.MultiHeadSelfAttention(num_heads=2, key_dim=4)
    x = keras.Input((5, 8))
    data = [_x(5, 8)]
    y = layer(x, use_causal_mask=True)
    return (
        layer,
        [x],
        data,
        y,
        lambda: _first(
            layer(data[0], use_causal_mask=True, return_attention_scores=True)
        ),
    )


def _memory_compressed():
    layer = L.MemoryCompressedAttention(num_heads=2, key_dim=4, compression_factor=2)
    x = keras.Input((6, 8))
    data = [_x(6, 8)]
    y = layer(x, x, use_causal_mask=True)
    return (
        layer,
        [x],
        data,
        y,
        lambda: _first(
            layer(data[0], data[0], use_causal_mask=True, return_attention_scores=True)
        ),
    )


def _single_query():
    layer = L.BahdanauAttention(8)
    q, v = keras.Input((8,)), keras.Input((5, 8))
    data = [_x(8), _x(5, 8, seed=1)]
    return (
        layer,
        [q, v],
        data,
        layer(q, v),
        lambda: _heads(layer(*data, return_attention_scores=True)[1]),
    )


def _pointer():
    layer = L.PointerAttention(8)
    return _two_sequences(layer, lambda d: _heads(np.exp(layer(*d))))


def _rnn_cell():
    layer = L.AttentionRNNCell(keras.layers.GRUCell(16), L.BahdanauAttention(8))
    x, h, memory = keras.Input((6,)), keras.Input((16,)), keras.Input((7, 12))
    data = [_x(6), _x(16, seed=1), _x(7, 12, seed=2)]
    output, states, alignment = layer(x, [h], memory=memory)
    return (
        layer,
        [x, h, memory],
        data,
        [output, alignment],
        lambda: _heads(layer(data[0], [data[1]], memory=data[2])[2]),
    )


def _rnn_decoder():
    layer = L.AttentionRNNDecoder(
        L.AttentionRNNCell(keras.layers.LSTMCell(16), L.LuongAttention("general"))
    )
    return _decoder(layer, memory_width=16)


def _decoder(layer, memory_width=6, cells=False):
    x, memory = keras.Input((5, 3)), keras.Input((7, memory_width))
    data = [_x(5, 3), _x(7, memory_width, seed=1)]
    inputs = [x, memory]
    if cells:
        inputs.append(keras.Input((7, memory_width)))
        data.append(_x(7, memory_width, seed=2))
    return (
        layer,
        inputs,
        data,
        layer(*inputs),
        lambda: _heads(layer(*data, return_alignments=True)[1]),
    )


def _lstmn():
    layer = L.LSTMN(8, return_sequences=True)
    x = keras.Input((6, 5))
    data = [_x(6, 5)]
    return (
        layer,
        [x],
        data,
        layer(x),
        lambda: _heads(layer(data[0], return_attention_scores=True)[-1]),
    )


def _pooling():
    layer = L.AttentionPooling(num_contexts=3)
    x = keras.Input((6, 8))
    data = [_x(6, 8)]
    return (
        layer,
        [x],
        data,
        layer(x),
        lambda: np.asarray(layer(data[0], return_attention_scores=True)[1])[:, :, None],
    )


def _self_attention_2d():
    layer = L.SelfAttention2D(channels_reduction=4, pool_keys=True)
    x = keras.Input((4, 6, 16))
    data = [_x(4, 6, 16)]
    return (
        layer,
        [x],
        data,
        layer(x),
        lambda: _heads(layer(data[0], return_attention_scores=True)[1]),
    )


def _keras_attention(layer):
    q, v = keras.Input((4, 8)), keras.Input((5, 8))
    data = [_x(4, 8), _x(5, 8, seed=1)]
    return (
        layer,
        [q, v],
        data,
        layer([q, v]),
        lambda: _heads(layer(data, return_attention_scores=True)[1]),
    )


CASES = {
    "MultiHeadAttention": lambda: _multi_head(L.MultiHeadAttention(2, 4)),
    "MultiHeadSelfAttention": _self_attention,
    "MemoryCompressedAttention": _memory_compressed,
    "ScoredAttention": lambda: _scored(L.ScoredAttention("scaled_dot")),
    "BahdanauAttention": _single_query,
    "LuongAttention": lambda: _scored(L.LuongAttention("general")),
    "PointerAttention": _pointer,
    "AttentionRNNCell": _rnn_cell,
    "AttentionRNNDecoder": _rnn_decoder,
    "LSTMNShallowFusionDecoder": lambda: _decoder(
        L.LSTMNShallowFusionDecoder(L.LSTMN(8), L.BahdanauAttention(4))
    ),
    "LSTMNDeepFusionDecoder": lambda: _decoder(
        L.LSTMNDeepFusionDecoder(L.LSTMN(8)), memory_width=8, cells=True
    ),
    "LSTMN": _lstmn,
    "AttentionPooling": _pooling,
    "SelfAttention2D": _self_attention_2d,
    "keras.MultiHeadAttention": lambda: _multi_head(
        keras.layers.MultiHeadAttention(2, 4)
    ),
    "keras.GroupQueryAttention": lambda: _multi_head(
        keras.layers.GroupQueryAttention(
            head_dim=4, num_query_heads=4, num_key_value_heads=2
        )
    ),
    "keras.Attention": lambda: _keras_attention(keras.layers.Attention()),
    "keras.AdditiveAttention": lambda: _keras_attention(
        keras.layers.AdditiveAttention()
    ),
}


def _assert_same_outputs(collected, plain):
    got, want = keras.tree.flatten(collected), keras.tree.flatten(plain)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _case_class(name):
    """The class a case of `CASES` tests: ours, or Keras' (`keras.X`)."""
    if name.startswith("keras."):
        return getattr(keras.layers, name.removeprefix("keras."))
    return getattr(L, name)


def test_the_cases_cover_every_read_class():
    covered = [_case_class(name) for name in CASES]
    for cls in READ_CLASSES:
        assert any(issubclass(c, cls) for c in covered), cls.__name__


@pytest.mark.parametrize("name", sorted(CASES))
def test_weights_are_the_layers_own_and_outputs_unchanged(name):
    layer, inputs, data, outputs, expected = CASES[name]()
    assert type(layer) is _case_class(name)
    model = keras.Model(inputs, outputs)
    collected = collect_attention(model, data)
    assert list(collected) == [layer.name]
    record = collected[layer.name]
    assert record.class_name == type(layer).__name__
    assert record.layer_name == layer.name and record.call_index == 0
    assert record.weights.dtype == np.float32 and record.weights.ndim == 4
    np.testing.assert_allclose(record.weights, expected(), atol=1e-6, rtol=0)
    _assert_same_outputs(collected.outputs, model(data))
    for reader in READERS:
        assert reader.method not in vars(layer)  # restored


# -- models ---------------------------------------------------------------------


def _tokens():
    return np.array([[5, 3, 8, 2, 0, 0], [7, 1, 4, 9, 6, 2]], "int32")


class _Translator(keras.Model):
    """A subclassed encoder-decoder: the attention sits in attributes."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(20, 8, mask_zero=True)
        self.encoder = L.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=16, name="encoder"
        )
        self.decoder = L.TransformerDecoderBlock(
            num_heads=2, intermediate_dim=16, name="decoder"
        )

    def call(self, tokens):
        x = self.embed(tokens)
        return self.decoder(x, self.encoder(x))


def test_subclassed_model_blocks_give_self_and_cross_attention():
    model = _Translator()
    tokens = _tokens()
    model(tokens)
    collected = collect_attention(model, tokens)
    assert list(collected) == [
        "encoder/self_attention",
        "decoder/self_attention",
        "decoder/cross_attention",
    ]
    x = model.embed(tokens)
    encoded, enc_scores = model.encoder(x, return_attention_scores=True)
    _, dec_scores = model.decoder(x, encoded, return_attention_scores=True)
    for name, want in (
        ("encoder/self_attention", enc_scores),
        ("decoder/self_attention", dec_scores["self_attention"]),
        ("decoder/cross_attention", dec_scores["cross_attention"]),
    ):
        np.testing.assert_allclose(collected[name].weights, want, atol=1e-6)
    _assert_same_outputs(collected.outputs, model(tokens))
    cross = collected["decoder/cross_attention"]
    assert cross.class_name == "MultiHeadAttention"
    np.testing.assert_array_equal(cross.key_mask, tokens != 0)


def test_sequential_model_with_masked_embedding_reports_padding():
    model = keras.Sequential(
        [
            keras.Input((6,), dtype="int32"),
            keras.layers.Embedding(20, 8, mask_zero=True),
            L.TransformerEncoderBlock(num_heads=2, intermediate_dim=16, name="block"),
            L.AttentionPooling(name="pool"),
        ]
    )
    tokens = _tokens()
    collected = collect_attention(model, tokens)
    assert list(collected) == ["block/self_attention", "pool"]
    real = tokens != 0
    block = collected["block/self_attention"]
    np.testing.assert_array_equal(block.query_mask, real)
    np.testing.assert_array_equal(block.key_mask, real)
    assert np.all(block.weights[0, :, :, 4:] == 0)  # padded keys: no attention
    pool = collected["pool"]
    assert pool.query_mask is None  # the queries are the context vectors
    np.testing.assert_array_equal(pool.key_mask, real)
    assert pool.weights.shape == (B, 1, 1, 6)
    assert np.all(pool.weights[0, 0, 0, 4:] == 0)
    _assert_same_outputs(collected.outputs, model(tokens))


def test_stacks_are_read_block_by_block():
    source, target = keras.Input((6, 8)), keras.Input((5, 8))
    encoder = L.TransformerEncoder(2, num_heads=2, intermediate_dim=16, name="encoder")
    decoder = L.TransformerDecoder(2, num_heads=2, intermediate_dim=16, name="decoder")
    model = keras.Model([source, target], decoder(target, encoder(source)))
    data = [_x(6, 8), _x(5, 8, seed=1)]
    collected = collect_attention(model, data)
    assert list(collected) == [
        "encoder/block_0/self_attention",
        "encoder/block_1/self_attention",
        "decoder/block_0/self_attention",
        "decoder/block_0/cross_attention",
        "decoder/block_1/self_attention",
        "decoder/block_1/cross_attention",
    ]
    encoded, enc_scores = encoder(data[0], return_attention_scores=True)
    _, dec_scores = decoder(data[1], encoded, return_attention_scores=True)
    for i in range(2):
        np.testing.assert_allclose(
            collected[f"encoder/block_{i}/self_attention"].weights,
            np.asarray(enc_scores)[:, i],
            atol=1e-6,
        )
        for kind in ("self_attention", "cross_attention"):
            np.testing.assert_allclose(
                collected[f"decoder/block_{i}/{kind}"].weights,
                np.asarray(dec_scores[kind])[:, i],
                atol=1e-6,
            )
    causal = collected["decoder/block_0/self_attention"].weights
    assert np.all(np.triu(causal[0, 0], k=1) == 0)
    assert collected["decoder/block_1/cross_attention"].weights.shape == (B, 2, 5, 6)
    _assert_same_outputs(collected.outputs, model(data))


def test_a_layer_run_several_times_gives_numbered_entries():
    shared = L.MultiHeadAttention(2, 4, name="shared")
    a, b = keras.Input((4, 8)), keras.Input((3, 8))
    first = shared(a, a)
    model = keras.Model([a, b], [first, shared(b, first)])
    data = [_x(4, 8), _x(3, 8, seed=1)]
    collected = collect_attention(model, data)
    assert list(collected) == ["shared[0]", "shared[1]"]
    assert [r.call_index for r in collected.values()] == [0, 1]
    assert collected["shared[1]"].weights.shape == (B, 2, 3, 4)
    np.testing.assert_allclose(
        collected["shared[1]"].weights,
        shared(data[1], shared(data[0], data[0]), return_attention_scores=True)[1],
        atol=1e-6,
    )
    _assert_same_outputs(collected.outputs, model(data))


def test_universal_transformer_block_gives_one_entry_per_step():
    x = keras.Input((5, 8))
    universal = L.UniversalTransformerEncoder(
        num_heads=2, intermediate_dim=16, max_steps=3, halting=False, name="ut"
    )
    model = keras.Model(x, universal(x))
    collected = collect_attention(model, _x(5, 8))
    assert list(collected) == [f"ut/block/self_attention[{i}]" for i in range(3)]
    _assert_same_outputs(collected.outputs, model(_x(5, 8)))


def test_a_model_that_asks_for_the_weights_keeps_its_outputs():
    layer = L.MultiHeadAttention(2, 4)
    keras_layer = keras.layers.MultiHeadAttention(2, 4)
    q, v = keras.Input((4, 8)), keras.Input((5, 8))
    y, w = layer(q, v, return_attention_scores=True)
    z, u = keras_layer(y, v, return_attention_scores=True)
    model = keras.Model([q, v], [z, w, u])
    data = [_x(4, 8), _x(5, 8, seed=1)]
    collected = collect_attention(model, data)
    _assert_same_outputs(collected.outputs, model(data))
    np.testing.assert_array_equal(collected[layer.name].weights, collected.outputs[1])
    np.testing.assert_array_equal(
        collected[keras_layer.name].weights, collected.outputs[2]
    )


def test_package_model():
    model = ka.models.Transformer(
        20,
        20,
        hidden_dim=8,
        num_heads=2,
        intermediate_dim=8,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    inputs = (_tokens(), _tokens()[:, :4])
    model(inputs)
    collected = collect_attention(model, inputs)
    assert list(collected) == [
        "encoder/block_0/self_attention",
        "decoder/block_0/self_attention",
        "decoder/block_0/cross_attention",
    ]
    np.testing.assert_array_equal(
        collected["decoder/block_0/cross_attention"].key_mask, _tokens() != 0
    )
    _assert_same_outputs(collected.outputs, model(inputs))


def test_a_single_layer():
    layer = L.SelfAttention2D(channels_reduction=4, pool_keys=False)
    image = _x(2, 2, 8)
    layer(image)
    collected = collect_attention(layer, image)
    record = collected[layer.name]
    assert isinstance(record, AttentionRecord)
    assert record.weights.shape == (B, 1, 4, 4)
    _assert_same_outputs(collected.outputs, layer(image))


def _memory_compressed_decoder():
    layer = L.MemoryCompressedDecoder(
        "LM",
        num_heads=2,
        intermediate_dim=16,
        compression_factor=3,
        local_block_size=4,
        name="tdmca",
    )
    return (
        layer,
        _x(6, 8),
        {
            "tdmca/block_0/self_attention": ("MultiHeadSelfAttention", (B, 2, 6, 6)),
            "tdmca/block_1/self_attention": ("MemoryCompressedAttention", (B, 2, 6, 3)),
        },
    )


def _image_transformer_block():
    layer = L.ImageTransformerBlock(
        num_heads=2,
        intermediate_dim=16,
        query_block=(1, 2),
        memory_flange=(1, 1),
        name="image",
    )
    return (
        layer,
        _x(2, 4, 8),
        {
            "image/block/self_attention": ("MultiHeadSelfAttention", (B, 2, 8, 8)),
        },
    )


@pytest.mark.parametrize(
    "case",
    [_memory_compressed_decoder, _image_transformer_block],
    ids=lambda c: c.__name__,
)
def test_layers_built_on_multi_head_attention(case):
    layer, data, expected = case()
    model = keras.Sequential([keras.Input(data.shape[1:]), layer])
    collected = collect_attention(model, data)
    found = {name: (r.class_name, r.weights.shape) for name, r in collected.items()}
    assert found == expected
    _assert_same_outputs(collected.outputs, model(data))


# keras-hub's attention projects a masked query with an EinsumDense, which
# warns on an eager call, with or without collect_attention.
@pytest.mark.filterwarnings("ignore:.*does not support masking")
def test_keras_hub_blocks():
    keras_hub = pytest.importorskip("keras_hub")
    tokens = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
    x = keras_hub.layers.TransformerDecoder(intermediate_dim=16, num_heads=2)(x)
    model = keras.Model(tokens, x)
    collected = collect_attention(model, _tokens())
    (record,) = collected.values()
    assert issubclass(
        type(model.layers[-1]._self_attention_layer), keras.layers.MultiHeadAttention
    )
    assert record.weights.shape == (B, 2, 6, 6)
    np.testing.assert_array_equal(record.key_mask, _tokens() != 0)
    assert np.all(np.triu(record.weights[1, 0], k=1) == 0)  # causal
    _assert_same_outputs(collected.outputs, model(_tokens()))


class _Fails(keras.layers.Layer):
    def call(self, x):
        raise RuntimeError("boom")


def test_wrapped_methods_are_restored_after_an_error():
    layer = L.MultiHeadSelfAttention(2, 4)
    keras_layer = keras.layers.MultiHeadAttention(2, 4)
    x = keras.Input((5, 8))
    model = keras.Model(x, keras_layer(layer(x), x))

    class Failing(keras.Model):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.fails = _Fails()

        def call(self, x):
            return self.fails(self.inner(x))

    failing = Failing(model)
    failing.built = True
    with pytest.raises(RuntimeError, match="boom"):
        collect_attention(failing, _x(5, 8))
    assert "_attention" not in vars(layer) and "call" not in vars(keras_layer)
    assert list(collect_attention(model, _x(5, 8))) == [layer.name, keras_layer.name]


# -- errors ---------------------------------------------------------------------


def test_model_must_be_a_keras_layer():
    with pytest.raises(TypeError, match=r"`model` must be a built Keras.*Received"):
        collect_attention(lambda x: x, _x(3, 4))


def test_model_must_be_built():
    with pytest.raises(ValueError, match=r"`model` must be built.*built=False"):
        collect_attention(_Translator(), _tokens())


def test_model_without_attention_layer():
    x = keras.Input((4,))
    model = keras.Model(x, keras.layers.Dense(2)(x))
    with pytest.raises(ValueError, match="`model` must hold at least one") as info:
        collect_attention(model, np.zeros((1, 4)))
    message = str(info.value)
    for name in ("MultiHeadAttention", "ScoredAttention", "SelfAttention2D"):
        assert name in message
    assert "Received: model=" in message


def test_model_whose_attention_layers_do_not_run():
    class Unused(keras.Model):
        def __init__(self):
            super().__init__()
            self.attention = L.MultiHeadAttention(2, 4)
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    model = Unused()
    model(_x(3, 4))
    with pytest.raises(ValueError, match="none of them ran"):
        collect_attention(model, _x(3, 4))


def test_compiled_call_is_refused():
    layer = L.MultiHeadSelfAttention(2, 4)
    x = keras.Input((5, 8))
    model = keras.Model(x, layer(x))
    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(lambda data: collect_attention(model, data).outputs)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(lambda data: collect_attention(model, data).outputs)
    else:
        pytest.skip("no compiled call on this backend")
    with pytest.raises(RuntimeError, match="eagerly"):
        compiled(_x(5, 8))
    assert "_attention" not in vars(layer)
