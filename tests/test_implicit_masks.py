"""Keras masks from `Embedding(mask_zero=True)` hide padding in COMPILED models.

Before 0.2.0 the Transformer blocks read `x._keras_mask` by hand: fine in
eager mode and on TensorFlow, but a JAX tracer cannot carry attributes
(Keras keeps its mask in a side table), so under `jit` (`model.predict`
and `model.fit` on JAX) the padding mask vanished and real positions
attended to padding. Every check here therefore runs through a compiled
`predict` or `fit` (`jit_compile=True`) of a functional model whose
sequences come out of `Embedding(vocab, width, mask_zero=True)` (token 0
is padding; right- and left-padded rows, so that causal layers are tested
too), on whatever backend the suite runs on (`make test`: TensorFlow,
`make test-jax`: JAX):

- invariance: new, large values in the padding row of every embedding
  change no output at a real position (while changing the row of a real
  token does change them, so the model is not blind to its inputs);
- gradients: `fit` with plain SGD and a loss over real positions only
  (sample weights) leaves the padding row exactly where it was, while the
  rows of real tokens move.

Every public layer that takes a Keras mask needs an entry in `CASES` (two
sequences, e.g. query and value or decoder and encoder, come from two
embeddings); the position layers, whose outputs depend on positions only,
are in `POSITION_CASES` and must pass the mask through; the others are in
`NO_MASK` with the reason, checked to not support masking (so Keras warns
instead of silently dropping a mask). The models are in `CASES` too:
`Transformer` masks its own padding id, `PointerNetwork` has no padding.
"""

import dataclasses

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import scores

VOCAB, WIDTH = 9, 4
# Real (True) and padded (False) positions: right-padded, left-padded and
# unpadded rows. Left padding is what a causal layer would see through.
QUERY_REAL = np.array(  # (B, T): query / decoder / self-attention tokens
    [[1, 1, 1, 1, 0], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]], bool
)
VALUE_REAL = np.array(  # (B, S): value / memory / encoder tokens
    [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1]], bool
)
# `AttentionRNNDecoder` passes the inputs' mask on to its outputs (a loss
# then ignores padded target steps) but runs its recurrence over every step:
# its targets are right-padded, as documented.
RIGHT_PADDED_QUERY_REAL = np.array(
    [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], bool
)
(BATCH, T), S = QUERY_REAL.shape, VALUE_REAL.shape[1]
GARBAGE = 100.0
ATOL = 1e-5


def _tokens(real, seed):
    """Random real tokens (1 .. VOCAB - 1), 0 at the padded positions."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, VOCAB, size=real.shape)
    return np.where(real, tokens, 0).astype("int32")


@dataclasses.dataclass
class Case:
    """A model on token inputs and what padding may not change.

    `real`: boolean, broadcastable to the output: the entries that must not
    depend on padding. `sample_weight`: the loss weights of `fit` (None:
    every output entry is real). `loss`: "mse", or "sparse" for logits
    trained with sparse categorical cross-entropy (`targets` then are class
    ids, real ones).
    """

    model: keras.Model
    inputs: list
    embeddings: list
    real: np.ndarray
    sample_weight: np.ndarray | None = None
    loss: str = "mse"
    targets: np.ndarray | None = None


def _embedding(name):
    return keras.layers.Embedding(VOCAB, WIDTH, mask_zero=True, name=name)


def _one_sequence(make_layer, **call_kwargs):
    """`layer(Embedding(tokens))` for self-attention layers."""
    tokens = keras.Input((T,), dtype="int32", name="tokens")
    embedding = _embedding("embedding")
    outputs = make_layer()(embedding(tokens), **call_kwargs)
    real = QUERY_REAL
    return Case(
        keras.Model(tokens, outputs),
        [_tokens(real, seed=1)],
        [embedding],
        real[:, :, None],
        sample_weight=real.astype("float32"),
    )


def _two_sequences(make_layer, loss="mse", query_real=QUERY_REAL, **call_kwargs):
    """`layer(Embedding(query tokens), Embedding(value tokens))` for
    cross-attention layers and decoders with an encoder sequence."""
    query = keras.Input((T,), dtype="int32", name="query_tokens")
    value = keras.Input((S,), dtype="int32", name="value_tokens")
    query_embedding, value_embedding = _embedding("query"), _embedding("value")
    outputs = make_layer()(
        query_embedding(query), value_embedding(value), **call_kwargs
    )
    real = query_real
    case = Case(
        keras.Model([query, value], outputs),
        [_tokens(real, seed=1), _tokens(VALUE_REAL, seed=2)],
        [query_embedding, value_embedding],
        real[:, :, None],
        sample_weight=real.astype("float32"),
    )
    if loss == "sparse":  # pointer log-probabilities over the value positions
        case.loss = "sparse"
        case.real = real[:, :, None] & VALUE_REAL[:, None, :]
        rng = np.random.default_rng(3)
        case.targets = np.array(  # real value positions
            [rng.choice(np.flatnonzero(row), size=T) for row in VALUE_REAL], "int32"
        )
    return case


def _pooled(make_layer):
    """`layer(Embedding(tokens))` for layers that pool the sequence away:
    every row has a real token, so the whole output is real."""
    tokens = keras.Input((T,), dtype="int32", name="tokens")
    embedding = _embedding("embedding")
    outputs = make_layer()(embedding(tokens))
    real = np.ones((BATCH,) + (1,) * (len(outputs.shape) - 1), bool)
    return Case(keras.Model(tokens, outputs), [_tokens(QUERY_REAL, seed=1)],
                [embedding], real)  # fmt: skip


def _rnn_cell():
    return ka.layers.AttentionRNNCell(
        keras.layers.GRUCell(WIDTH), ka.layers.BahdanauAttention(units=3)
    )


def _attention_rnn_cell():
    """One step: float step input and state, the memory from an embedding."""
    step_input = keras.Input((3,), name="step_input")
    state = keras.Input((WIDTH,), name="state")
    memory = keras.Input((S,), dtype="int32", name="memory_tokens")
    embedding = _embedding("memory")
    output, _, _ = _rnn_cell()(step_input, [state], embedding(memory))
    rng = np.random.default_rng(4)
    return Case(
        keras.Model([step_input, state, memory], output),
        [
            rng.normal(size=(BATCH, 3)).astype("float32"),
            rng.normal(size=(BATCH, WIDTH)).astype("float32"),
            _tokens(VALUE_REAL, seed=2),
        ],
        [embedding],
        np.ones((BATCH, 1), bool),
    )


def _lstmn_deep_fusion():
    """An LSTMN encoder hands its hidden and memory tapes (`return_cells`)
    to the deep-fusion decoder: the memory mask comes with the tapes."""
    encoder = ka.layers.LSTMN(3, return_sequences=True)
    decoder = ka.layers.LSTMNDeepFusionDecoder(ka.layers.LSTMN(3))

    def layer(decoder_inputs, encoder_inputs):
        hidden, cells = encoder(encoder_inputs, return_cells=True)
        return decoder(decoder_inputs, hidden, cells)

    return layer


def _transformer(**kwargs):
    """The model embeds its own tokens and masks `padding_id`."""
    model = ka.models.Transformer(
        VOCAB,
        VOCAB,
        hidden_dim=WIDTH,
        num_heads=2,
        intermediate_dim=8,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        **kwargs,
    )
    real = QUERY_REAL
    rng = np.random.default_rng(5)
    return Case(
        model,
        [
            {
                "encoder_tokens": _tokens(VALUE_REAL, seed=2),
                "decoder_tokens": _tokens(real, seed=1),
            }
        ],
        None,  # the model's embeddings, known once it is built
        real[:, :, None],
        sample_weight=real.astype("float32"),
        loss="sparse",
        targets=rng.integers(1, VOCAB, size=(BATCH, T)).astype("int32"),
    )


def _bert_inputs():
    """Token ids and keras-hub's `padding_mask` input (BERT takes its
    padding as an input, not as a Keras mask)."""
    tokens = keras.Input((T,), dtype="int32", name="token_ids")
    padding = keras.Input((T,), dtype="int32", name="padding_mask")
    return tokens, padding, [_tokens(QUERY_REAL, seed=1), QUERY_REAL.astype("int32")]


def _bert_encoder(**kwargs):
    return ka.models.BertEncoder(
        VOCAB, 1, 2, WIDTH, 8, dropout=0.0, max_sequence_length=T, **kwargs
    )


def _with_unused_pooler(outputs, pooled):
    """`outputs` plus zero times the pooled output: the pooler then gets a
    (zero) gradient, where Keras would warn that it gets none (the pooled
    output reads position 0, padding in some rows here: it has its own
    tests in tests/models/test_bert_encoder.py)."""
    return outputs + 0.0 * keras.ops.mean(pooled)


def _bert(**kwargs):
    """The encoder's sequence output at real positions."""
    encoder = _bert_encoder(**kwargs)
    tokens, padding, inputs = _bert_inputs()
    outputs = encoder({"token_ids": tokens, "padding_mask": padding})
    sequence = _with_unused_pooler(outputs["sequence_output"], outputs["pooled_output"])
    real = QUERY_REAL
    return Case(
        keras.Model([tokens, padding], sequence),
        inputs,
        [encoder.token_embedding],
        real[:, :, None],
        sample_weight=real.astype("float32"),
    )


def _han():
    """Documents `(B, N, W)` with padded words and a padded sentence; the
    model masks its own padding id (0)."""
    model = ka.models.HierarchicalAttentionNetwork(
        VOCAB, 3, embedding_dim=WIDTH, word_units=3, sentence_units=3,
        attention_units=4,
    )  # fmt: skip
    real = np.stack([QUERY_REAL, QUERY_REAL[::-1], QUERY_REAL[[1, 2, 0]]], axis=1)
    real[0, 1] = False  # (B, N, W): a sentence of padding only
    tokens = _tokens(real, seed=4)
    model(tokens)  # built, so that its embedding exists
    return Case(
        model,
        [tokens],
        [model.embedding],
        np.ones((BATCH, 1), bool),  # every document is real
        loss="sparse",
        targets=np.array([0, 2, 1], "int32"),
    )


def _block(cls, **kwargs):
    return lambda: cls(num_heads=2, intermediate_dim=8, **kwargs)


def _stack(cls, **kwargs):
    return lambda: cls(num_layers=2, num_heads=2, intermediate_dim=8, **kwargs)


CASES = {
    "ScoredAttention": lambda: _two_sequences(
        lambda: ka.layers.ScoredAttention(score="additive")
    ),
    "ScoredAttention/causal-general": lambda: _two_sequences(
        lambda: ka.layers.ScoredAttention(score=scores.General()),
        use_causal_mask=True,
    ),
    "BahdanauAttention": lambda: _two_sequences(
        lambda: ka.layers.BahdanauAttention(units=3)
    ),
    "LuongAttention": lambda: _two_sequences(
        lambda: ka.layers.LuongAttention("general", scale=True)
    ),
    "AttentionPooling": lambda: _pooled(lambda: ka.layers.AttentionPooling(units=3)),
    "AttentionPooling/two-contexts": lambda: _pooled(
        lambda: ka.layers.AttentionPooling(units=3, num_contexts=2)
    ),
    "HierarchicalAttentionNetwork": _han,
    "PointerAttention": lambda: _two_sequences(
        lambda: ka.layers.PointerAttention(units=3), loss="sparse"
    ),
    "MultiHeadAttention": lambda **kw: _two_sequences(
        lambda: ka.layers.MultiHeadAttention(num_heads=2, key_dim=3, **kw)
    ),
    # Causal over absolute positions, with left-padded queries and keys.
    "MemoryCompressedAttention": lambda: _two_sequences(
        lambda: ka.layers.MemoryCompressedAttention(num_heads=2, key_dim=3),
        use_causal_mask=True,
    ),
    "MemoryCompressedAttention/bidirectional-factor-2": lambda: _two_sequences(
        lambda: ka.layers.MemoryCompressedAttention(
            num_heads=2, key_dim=3, compression_factor=2
        )
    ),
    "MultiHeadSelfAttention": lambda **kw: _one_sequence(
        lambda: ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3, **kw)
    ),
    "MultiHeadSelfAttention/causal": lambda **kw: _one_sequence(
        lambda: ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3, **kw),
        use_causal_mask=True,
    ),
    "AttentionRNNCell": _attention_rnn_cell,
    # The cell in `keras.layers.RNN`, which skips masked steps.
    "NeuralTuringMachineCell": lambda: _one_sequence(
        lambda: keras.layers.RNN(
            ka.layers.NeuralTuringMachineCell(
                keras.layers.LSTMCell(4), memory_size=6, memory_width=3
            ),
            return_sequences=True,
        )
    ),
    # Masked steps are skipped as `keras.layers.LSTM` skips them, wherever
    # they are (left padding included), alone and in `Bidirectional`.
    "LSTMN": lambda: _one_sequence(lambda: ka.layers.LSTMN(4, return_sequences=True)),
    "LSTMN/bidirectional": lambda: _one_sequence(
        lambda: keras.layers.Bidirectional(
            ka.layers.LSTMN(3, return_sequences=True, use_summary_in_score=False)
        )
    ),
    # Padded target steps are skipped as `LSTMN` skips them (left padding
    # included); padded source positions are never attended.
    "LSTMNShallowFusionDecoder": lambda: _two_sequences(
        lambda: ka.layers.LSTMNShallowFusionDecoder(
            ka.layers.LSTMN(3), ka.layers.BahdanauAttention(units=3)
        )
    ),
    "LSTMNDeepFusionDecoder": lambda: _two_sequences(_lstmn_deep_fusion),
    "AttentionRNNDecoder": lambda: _two_sequences(
        lambda: ka.layers.AttentionRNNDecoder(_rnn_cell()),
        query_real=RIGHT_PADDED_QUERY_REAL,
    ),
    "TransformerEncoderBlock": lambda **kw: _one_sequence(
        _block(ka.layers.TransformerEncoderBlock, **kw)
    ),
    "TransformerDecoderBlock": lambda **kw: _two_sequences(
        _block(ka.layers.TransformerDecoderBlock, **kw)
    ),
    "TransformerDecoderBlock/decoder-only-pre-ln": lambda **kw: _one_sequence(
        _block(ka.layers.TransformerDecoderBlock, normalize_first=True, **kw)
    ),
    "TransformerEncoder": lambda **kw: _one_sequence(
        _stack(ka.layers.TransformerEncoder, normalize_first=True, **kw)
    ),
    # Causal over absolute positions, with left-padded tokens: padding stays
    # out of the compressed slots and the local blocks.
    "MemoryCompressedDecoderBlock": lambda **kw: _one_sequence(
        _block(ka.layers.MemoryCompressedDecoderBlock, compression_factor=2, **kw)
    ),
    "MemoryCompressedDecoderBlock/cross-attention": lambda **kw: _two_sequences(
        _block(ka.layers.MemoryCompressedDecoderBlock, **kw)
    ),
    "MemoryCompressedDecoder": lambda **kw: _one_sequence(
        lambda: ka.layers.MemoryCompressedDecoder(
            "LM", num_heads=2, intermediate_dim=8, local_block_size=2, **kw
        )
    ),
    "TransformerDecoder": lambda **kw: _two_sequences(
        _stack(ka.layers.TransformerDecoder, **kw)
    ),
    "UniversalTransformerEncoder": lambda **kw: _one_sequence(
        lambda: ka.layers.UniversalTransformerEncoder(
            num_heads=2, intermediate_dim=8, max_steps=2, **kw
        )
    ),
    "UniversalTransformerDecoder": lambda **kw: _two_sequences(
        lambda: ka.layers.UniversalTransformerDecoder(
            num_heads=2, intermediate_dim=8, max_steps=2, **kw
        )
    ),
    "Transformer": _transformer,
    "BertEncoder": _bert,
}

# Layers whose outputs depend on positions only: the mask passes through.
POSITION_CASES = {
    "SinusoidalPositionEncoding": lambda: ka.layers.SinusoidalPositionEncoding(),
    "PositionEmbedding": lambda: ka.layers.PositionEmbedding(sequence_length=T + 1),
}

# Layers and models that take no sequence mask, and why (checked: they do
# not support masking, so Keras warns rather than dropping a mask silently).
NO_MASK = {
    "SelfAttention2D": (
        "attends over the pixels of an image (B, H, W, C): no padding",
        lambda: ka.layers.SelfAttention2D(),
    ),
    "ImageTransformerBlock": (
        "attends over the pixels of an image (B, H, W, D): no padding",
        lambda: ka.layers.ImageTransformerBlock(num_heads=2, intermediate_dim=4),
    ),
    "ImageTransformer": (
        "models whole images (B, H, W) of pixel levels: no padding",
        lambda: ka.models.ImageTransformer((2, 3), 4, hidden_dim=4, num_heads=2),
    ),
    "BertMaskedLM": (
        "the BertEncoder case covers its padding (an input, as in keras-hub); "
        "its tied head reads the padding token's row as an output class, so "
        "that row changes logits and gets gradients by design: "
        "tests/models/test_bert_encoder.py checks every other logit",
        lambda: ka.models.BertMaskedLM(_bert_encoder()),
    ),
    "PointerNetwork": (
        "points into a set of feature vectors (B, T_in, F) with no padding "
        "convention (shorter outputs use `end_position`)",
        lambda: ka.models.PointerNetwork(units=4),
    ),
}


def _class_name(case):
    return case.split("/")[0].removesuffix(FUSED)


# Classes that take `attention_impl`: their cases (`f(**layer_kwargs)`) run
# again as "<case>+fused", with attention_impl="fused" (the kernels of
# keras.ops.dot_product_attention; Keras' composition on a CPU).
FUSED = "+fused"
IMPL_CLASSES = {
    "MultiHeadAttention", "MultiHeadSelfAttention", "TransformerEncoderBlock",
    "TransformerDecoderBlock", "TransformerEncoder", "TransformerDecoder",
    "UniversalTransformerEncoder", "UniversalTransformerDecoder", "Transformer",
    "BertEncoder",
}  # fmt: skip

# One case per class in `make test`; the variants in `make test-large`.
CASE_PARAMS = [
    pytest.param(case, marks=pytest.mark.large) if "/" in case else case
    for case in sorted(CASES)
] + [
    pytest.param(case + FUSED, marks=pytest.mark.large) if "/" in case else case + FUSED
    for case in sorted(CASES)
    if _class_name(case) in IMPL_CLASSES
]


def _public(module, base):
    return sorted(
        name
        for name in module.__all__
        if isinstance(getattr(module, name), type)
        and issubclass(getattr(module, name), base)
    )


PUBLIC_LAYERS = _public(ka.layers, keras.layers.Layer)
PUBLIC_MODELS = _public(ka.models, keras.Model)


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _build(case):
    """The case, its model compiled with XLA and its embeddings known."""
    if case.endswith(FUSED):
        case = CASES[case.removesuffix(FUSED)](attention_impl="fused")
    else:
        case = CASES[case]()
    case.model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=(
            keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            if case.loss == "sparse"
            else "mse"
        ),
        jit_compile=True,
    )
    if case.embeddings is None:  # Transformer: build it to reach its embeddings
        case.model.build()
        case.embeddings = [case.model.encoder_embedding, case.model.decoder_embedding]
    return case


def _inputs(case):
    return case.inputs[0] if len(case.inputs) == 1 else case.inputs


def _predict(case):
    return _np(case.model.predict(_inputs(case), batch_size=BATCH, verbose=0))


def _set_rows(embeddings, row_of, seed):
    """Row `row_of(i)` of embedding `i` gets new random values of magnitude
    GARBAGE."""
    rng = np.random.default_rng(seed)
    for i, embedding in enumerate(embeddings):
        table = _np(embedding.embeddings).copy()
        row = row_of(i)
        table[row] = GARBAGE * rng.normal(size=table.shape[1])
        embedding.embeddings.assign(table)


def _token_input(case, i):
    """The tokens that embedding `i` reads."""
    if isinstance(case.inputs[0], dict):
        return case.inputs[0][["encoder_tokens", "decoder_tokens"][i]]
    return [x for x in case.inputs if x.dtype == np.int32][i]


def _first_real_token(case, i):
    """The first real token of embedding `i`'s input (in C order)."""
    tokens = _token_input(case, i)
    return int(tokens[tokens != 0][0])


def _real_tokens(case, i):
    """The distinct tokens at real positions of embedding `i`'s input."""
    tokens = _token_input(case, i)
    return np.unique(tokens[tokens != 0])


# -- coverage -------------------------------------------------------------------


@pytest.mark.parametrize("name", PUBLIC_LAYERS + PUBLIC_MODELS)
def test_every_public_layer_and_model_has_a_case(name):
    covered = {_class_name(c) for c in CASES} | set(POSITION_CASES) | set(NO_MASK)
    if name not in covered:
        pytest.fail(
            f"{name} is exported by keras_attention but has no entry in CASES, "
            f"POSITION_CASES or NO_MASK ({__file__})."
        )


@pytest.mark.parametrize("name", sorted(NO_MASK))
def test_layers_without_a_case_take_no_mask(name):
    why, factory = NO_MASK[name]
    assert why
    assert not factory().supports_masking, (
        f"{name} supports masking: give it a case in CASES ({__file__})"
    )


@pytest.mark.parametrize("name", sorted(POSITION_CASES))
def test_position_layers_pass_the_mask_through(name):
    """Under compiled `predict`, a masked mean after the position layer
    averages the real positions only: the mask reached it."""
    tokens = keras.Input((T,), dtype="int32")
    layer = POSITION_CASES[name]()
    pooled = keras.layers.GlobalAveragePooling1D()(
        layer(_embedding("embedding")(tokens))
    )
    model = keras.Model(tokens, pooled)
    model.compile(jit_compile=True)
    real = QUERY_REAL
    actual = _np(model.predict(_tokens(real, seed=1), batch_size=BATCH, verbose=0))
    encoding = _np(layer(np.zeros((1, T, WIDTH), "float32")))[0]  # (T, D)
    expected = (real @ encoding) / real.sum(1, keepdims=True)
    unmasked = np.broadcast_to(encoding.mean(0), expected.shape)
    assert not np.allclose(expected, unmasked, atol=1e-3)  # the check can fail
    np.testing.assert_allclose(actual, expected, atol=ATOL)


def test_position_embedding_of_a_padded_position_gets_no_gradient():
    """Position `T` (padding in every row) does not reach the masked loss
    of a compiled `fit`, so its learned embedding stays put."""
    tokens = keras.Input((T + 1,), dtype="int32")
    layer = ka.layers.PositionEmbedding(sequence_length=T + 1)
    embedding = _embedding("embedding")
    embedding.trainable = False  # the positions alone reach the loss
    pooled = keras.layers.GlobalAveragePooling1D()(layer(embedding(tokens)))
    model = keras.Model(tokens, pooled)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse", jit_compile=True)
    before = _np(layer.embeddings).copy()
    padding = np.zeros((BATCH, 1), "int32")  # position T: padding in every row
    inputs = np.concatenate([_tokens(QUERY_REAL, seed=1), padding], axis=1)
    targets = np.random.default_rng(0).normal(size=(BATCH, WIDTH)).astype("float32")
    model.fit(inputs, targets, batch_size=BATCH, epochs=2, verbose=0)
    after = _np(layer.embeddings)
    np.testing.assert_array_equal(after[T], before[T])
    assert not np.array_equal(after[0], before[0]), "real positions did not train"


# -- invariance under compiled predict ------------------------------------------


@pytest.mark.parametrize("case_name", CASE_PARAMS)
def test_padding_rows_change_no_real_output_under_compiled_predict(case_name):
    case = _build(case_name)
    before = _predict(case)
    real = np.broadcast_to(case.real, before.shape)
    _set_rows(case.embeddings, lambda i: 0, seed=0)
    after = _predict(case)
    scale = max(1.0, float(np.abs(before[real]).max()))
    np.testing.assert_allclose(
        after[real],
        before[real],
        atol=ATOL * scale,
        err_msg=f"{case_name}: the padding embedding changed real outputs",
    )
    # The check can fail: a real token's row does change the real outputs.
    _set_rows(case.embeddings, lambda i: _first_real_token(case, i), seed=1)
    changed = _predict(case)
    assert np.abs(changed[real] - before[real]).max() > 1e-3, (
        f"{case_name}: outputs do not depend on real tokens either"
    )


# -- gradients under compiled fit -----------------------------------------------


@pytest.mark.parametrize("case_name", CASE_PARAMS)
def test_padding_rows_get_no_gradient_under_compiled_fit(case_name):
    case = _build(case_name)
    targets = case.targets
    if targets is None:
        shape = (BATCH, *case.model.outputs[0].shape[1:])
        targets = np.random.default_rng(6).normal(size=shape).astype("float32")
    before = [_np(e.embeddings).copy() for e in case.embeddings]
    case.model.fit(
        _inputs(case),
        targets,
        sample_weight=case.sample_weight,
        batch_size=BATCH,
        epochs=3,
        verbose=0,
    )
    for i, (embedding, old) in enumerate(zip(case.embeddings, before, strict=True)):
        new = _np(embedding.embeddings)
        np.testing.assert_array_equal(
            new[0], old[0], err_msg=f"{case_name}: padding row of embedding {i} moved"
        )
        tokens = _real_tokens(case, i)
        assert not np.array_equal(new[tokens], old[tokens]), (
            f"{case_name}: embedding {i} did not train at all"
        )
