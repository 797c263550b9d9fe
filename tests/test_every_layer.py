"""Generic checks run on EVERY public layer of `keras_attention.layers`.

Each layer exported in `keras_attention.layers.__all__` needs at least one
entry in `LAYER_CASES`: a function returning `(layer, inputs)` (inputs: one
array or a list of arrays passed positionally), keyed by the class name, or
`"ClassName/variant"` for more cases of the same class. A layer without an
entry fails `test_every_public_layer_has_a_case`, so none can skip the
harness. Adding a layer is three lines:

    "MyLayer": lambda: (
        ka.layers.MyLayer(units=4), _inputs((2, 3, 4), (2, 5, 4))
    ),

Each case gets: config round trip, `.keras` (safe_mode) and SavedModel
save/load with identical outputs, finite outputs and gradients under
`mixed_float16`/`mixed_bfloat16` on inputs scaled by 1e4, and a
`fit(jit_compile=True)` (in `make test-large` only for the classes that
`test_implicit_masks.py` already trains compiled, `FIT_UNDER_MASKS`). Layers with a causal mode or a key padding mask
should also appear in `CAUSAL_CASES` / `PADDING_CASES`.
"""

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import scores
from keras_attention import testing


def _inputs(*shapes, seed=0):
    """Random float32 arrays of the given shapes (batch first)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=shape).astype("float32") for shape in shapes]
    return arrays if len(arrays) > 1 else arrays[0]


LAYER_CASES = {
    "ScoredAttention": lambda: (
        ka.layers.ScoredAttention(),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "ScoredAttention/additive-vector-query-dropout": lambda: (
        ka.layers.ScoredAttention(score="additive", dropout=0.2, seed=1),
        _inputs((2, 4), (2, 5, 6)),
    ),
    "ScoredAttention/general-hardmax-window": lambda: (
        ka.layers.ScoredAttention(score="general", probability="hardmax", window=1),
        _inputs((2, 3, 4), (2, 5, 6)),
    ),
    "ScoredAttention/cosine-location": lambda: (
        ka.layers.ScoredAttention(score=scores.Location(max_length=6)),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "BahdanauAttention": lambda: (
        ka.layers.BahdanauAttention(units=3, normalize=True),
        _inputs((2, 4), (2, 5, 6)),
    ),
    "LuongAttention": lambda: (
        ka.layers.LuongAttention(score="general", scale=True),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "LuongAttention/concat": lambda: (
        ka.layers.LuongAttention(score="concat", units=3),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "LuongAttention/local-p-vector-query": lambda: (
        ka.layers.LuongAttention("general", window=2, alignment="predictive"),
        _inputs((2, 4), (2, 7, 4)),
    ),
    "AttentionPooling": lambda: (
        ka.layers.AttentionPooling(units=3, num_contexts=2, dropout=0.1, seed=1),
        _inputs((2, 5, 4)),
    ),
    "PointerAttention": lambda: (
        ka.layers.PointerAttention(units=3),
        _inputs((2, 3, 4), (2, 5, 6)),
    ),
    "SelfAttention2D": lambda: (
        ka.layers.SelfAttention2D(channels_reduction=2, pool_keys=True),
        _inputs((2, 4, 4, 4)),
    ),
    "AttentionRNNCell": lambda: (
        ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(4), ka.layers.BahdanauAttention(units=3)
        ),
        _inputs((2, 5), (2, 4), (2, 6, 3)),  # step input, state, memory
    ),
    "AttentionRNNDecoder": lambda: (
        ka.layers.AttentionRNNDecoder(
            ka.layers.AttentionRNNCell(
                keras.layers.GRUCell(4), ka.layers.BahdanauAttention(units=3)
            )
        ),
        _inputs((2, 3, 5), (2, 6, 4)),
    ),
    "AttentionRNNDecoder/luong-lstm": lambda: (
        ka.layers.AttentionRNNDecoder(
            ka.layers.AttentionRNNCell(
                keras.layers.LSTMCell(4),
                ka.layers.LuongAttention("concat", units=3),
                style="luong",
                attention_dim=5,
            )
        ),
        _inputs((2, 3, 5), (2, 6, 4)),
    ),
    "AttentionRNNDecoder/luong-local-p": lambda: (
        ka.layers.AttentionRNNDecoder(
            ka.layers.AttentionRNNCell(
                keras.layers.GRUCell(4),
                ka.layers.LuongAttention("dot", window=1, alignment="predictive"),
                style="luong",
            )
        ),
        _inputs((2, 3, 5), (2, 6, 4)),
    ),
    "NeuralTuringMachineCell": lambda: (
        ka.layers.NeuralTuringMachineCell(
            keras.layers.Dense(4, activation="tanh"), memory_size=6, memory_width=3
        ),
        _inputs((2, 5)),  # one step from the (learned) initial state
    ),
    "NeuralTuringMachineCell/lstm-two-heads-each": lambda: (
        ka.layers.NeuralTuringMachineCell(
            keras.layers.LSTMCell(4),
            memory_size=7,
            memory_width=3,
            num_read_heads=2,
            num_write_heads=2,
            shift_range=2,
            learn_initial_memory=True,
        ),
        _inputs((2, 5)),
    ),
    "LSTMN": lambda: (
        ka.layers.LSTMN(4, attention_units=3, return_sequences=True),
        _inputs((2, 5, 3)),
    ),
    "LSTMN/encoder-backwards-state-dropout": lambda: (
        ka.layers.LSTMN(
            3,
            use_summary_in_score=False,
            return_state=True,
            go_backwards=True,
            dropout=0.1,
            recurrent_dropout=0.2,
            seed=1,
        ),
        _inputs((2, 4, 3)),
    ),
    "LSTMNShallowFusionDecoder": lambda: (
        ka.layers.LSTMNShallowFusionDecoder(
            ka.layers.LSTMN(4, attention_units=3), ka.layers.LuongAttention("general")
        ),
        _inputs((2, 3, 5), (2, 6, 4)),
    ),
    "LSTMNDeepFusionDecoder": lambda: (
        ka.layers.LSTMNDeepFusionDecoder(ka.layers.LSTMN(4), inter_attention_units=3),
        _inputs((2, 3, 5), (2, 6, 3), (2, 6, 4)),  # inputs, hidden and memory tapes
    ),
    "LSTMNDeepFusionDecoder/no-bias-no-summary-dropout": lambda: (
        ka.layers.LSTMNDeepFusionDecoder(
            ka.layers.LSTMN(
                3,
                use_bias=False,
                use_summary_in_score=False,
                dropout=0.1,
                recurrent_dropout=0.1,
                seed=1,
            )
        ),
        _inputs((2, 3, 5), (2, 6, 4), (2, 6, 3)),
    ),
    "MultiHeadAttention": lambda: (
        ka.layers.MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.1),
        _inputs((2, 3, 4), (2, 5, 6)),
    ),
    "MultiHeadSelfAttention": lambda: (
        ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3),
        _inputs((2, 5, 4)),
    ),
    "MemoryCompressedAttention": lambda: (
        ka.layers.MemoryCompressedAttention(num_heads=2, key_dim=3, dropout=0.1),
        _inputs((2, 4, 4), (2, 7, 6)),
    ),
    "MemoryCompressedAttention/factor-2-value_dim-output_shape": lambda: (
        ka.layers.MemoryCompressedAttention(
            num_heads=2, key_dim=3, value_dim=2, compression_factor=2, output_shape=5
        ),
        _inputs((2, 5, 4), (2, 5, 4)),
    ),
    "SinusoidalPositionEncoding": lambda: (
        ka.layers.SinusoidalPositionEncoding(),
        _inputs((2, 5, 6)),
    ),
    "PositionEmbedding": lambda: (
        ka.layers.PositionEmbedding(sequence_length=7),
        _inputs((2, 5, 6)),
    ),
    "TransformerEncoderBlock": lambda: (
        ka.layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=8),
        _inputs((2, 5, 4)),
    ),
    "TransformerEncoderBlock/pre-ln-gelu": lambda: (
        ka.layers.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=8, normalize_first=True, activation="gelu"
        ),
        _inputs((2, 5, 4)),
    ),
    "TransformerDecoderBlock": lambda: (
        ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=8),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "TransformerDecoderBlock/decoder-only": lambda: (
        ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=8),
        _inputs((2, 3, 4)),
    ),
    "TransformerEncoder": lambda: (
        ka.layers.TransformerEncoder(num_layers=2, num_heads=2, intermediate_dim=8),
        _inputs((2, 5, 4)),
    ),
    "TransformerDecoder": lambda: (
        ka.layers.TransformerDecoder(num_layers=2, num_heads=2, intermediate_dim=8),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
    "MemoryCompressedDecoderBlock": lambda: (
        ka.layers.MemoryCompressedDecoderBlock(
            num_heads=2, intermediate_dim=8, compression_factor=2
        ),
        _inputs((2, 5, 4)),
    ),
    "MemoryCompressedDecoderBlock/cross-attention-pre-ln": lambda: (
        ka.layers.MemoryCompressedDecoderBlock(
            num_heads=2, intermediate_dim=8, normalize_first=True, dropout=0.1
        ),
        _inputs((2, 4, 4), (2, 5, 4)),
    ),
    # Two layers, local then memory-compressed (the decoder's own tests run
    # the other patterns, the within-block flange and the chunked path).
    "MemoryCompressedDecoder": lambda: (
        ka.layers.MemoryCompressedDecoder(
            "LM", num_heads=2, intermediate_dim=8, local_block_size=2
        ),
        _inputs((2, 7, 4)),
    ),
    "ImageTransformerBlock": lambda: (
        ka.layers.ImageTransformerBlock(
            num_heads=2, intermediate_dim=8, query_block=(1, 2), memory_flange=(1, 1)
        ),
        _inputs((2, 3, 4, 4)),
    ),
    "ImageTransformerBlock/local-1d-chunked-dropout": lambda: (
        ka.layers.ImageTransformerBlock(
            num_heads=2,
            intermediate_dim=8,
            query_block=4,
            memory_flange=2,
            dropout=0.1,
            seed=1,
            attention_impl="chunked",
        ),
        _inputs((2, 3, 4, 4)),
    ),
    "ImageTransformerBlock/full-bidirectional": lambda: (
        ka.layers.ImageTransformerBlock(
            num_heads=2, intermediate_dim=8, query_block=None, causal=False
        ),
        _inputs((2, 3, 4, 4)),
    ),
    "UniversalTransformerEncoder": lambda: (
        ka.layers.UniversalTransformerEncoder(
            num_heads=2, intermediate_dim=8, max_steps=2
        ),
        _inputs((2, 5, 4)),
    ),
    "UniversalTransformerEncoder/fixed-depth-pre-ln": lambda: (
        ka.layers.UniversalTransformerEncoder(
            num_heads=2,
            intermediate_dim=8,
            max_steps=2,
            halting=False,
            normalize_first=True,
        ),
        _inputs((2, 5, 4)),
    ),
    "UniversalTransformerDecoder": lambda: (
        ka.layers.UniversalTransformerDecoder(
            num_heads=2, intermediate_dim=8, max_steps=2
        ),
        _inputs((2, 3, 4), (2, 5, 4)),
    ),
}

# Optional, for layers that have the property: a causal mode, checked by
# gradients (`(layer, inputs, call_kwargs)`), and masked keys that must not
# matter (`(layer, query, value)`, padded through `value_mask`).
CAUSAL_CASES = {
    "LSTMN": lambda: (
        ka.layers.LSTMN(3, return_sequences=True),
        _inputs((2, 4, 3)),
        {},
    ),
    "ScoredAttention": lambda: (
        ka.layers.ScoredAttention(score="general"),
        _inputs((2, 4, 3), (2, 4, 5)),
        {"use_causal_mask": True},
    ),
    # Decoders: the target steps (the memory has another length, S != T).
    "LSTMNShallowFusionDecoder": lambda: (
        ka.layers.LSTMNShallowFusionDecoder(
            ka.layers.LSTMN(3), ka.layers.BahdanauAttention(units=3)
        ),
        _inputs((2, 4, 3), (2, 5, 2)),
        {},
    ),
    "LSTMNDeepFusionDecoder": lambda: (
        ka.layers.LSTMNDeepFusionDecoder(ka.layers.LSTMN(3)),
        _inputs((2, 4, 3), (2, 5, 2), (2, 5, 3)),
        {},
    ),
    "LuongAttention": lambda: (
        ka.layers.LuongAttention(score="concat"),
        _inputs((2, 4, 3), (2, 4, 3)),
        {"use_causal_mask": True},
    ),
    "MultiHeadSelfAttention": lambda: (
        ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3),
        _inputs((2, 4, 4)),
        {"use_causal_mask": True},
    ),
    "MemoryCompressedAttention": lambda: (
        ka.layers.MemoryCompressedAttention(num_heads=2, key_dim=3),
        _inputs((2, 7, 4), (2, 7, 4)),
        {"use_causal_mask": True},
    ),
    "TransformerDecoderBlock": lambda: (
        ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=8),
        _inputs((2, 4, 4)),
        {},
    ),
    "MemoryCompressedDecoderBlock": lambda: (
        ka.layers.MemoryCompressedDecoderBlock(
            num_heads=2, intermediate_dim=8, compression_factor=2
        ),
        _inputs((2, 7, 4)),
        {},
    ),
    "MemoryCompressedDecoder": lambda: (
        ka.layers.MemoryCompressedDecoder(
            "LM", num_heads=2, intermediate_dim=8, local_block_size=2
        ),
        _inputs((2, 8, 4)),
        {},
    ),
    "UniversalTransformerDecoder": lambda: (
        ka.layers.UniversalTransformerDecoder(
            num_heads=2, intermediate_dim=8, max_steps=2
        ),
        _inputs((2, 4, 4), (2, 3, 4)),
        {},
    ),
}
PADDING_CASES = {
    # A recurrent layer over one sequence: padded steps appended and masked
    # (`value` None: `check_padding_invariance`'s self-attention form).
    "LSTMN": lambda: (
        ka.layers.LSTMN(3, return_sequences=True),
        _inputs((2, 4, 3)),
        None,
    ),
    "ScoredAttention": lambda: (
        ka.layers.ScoredAttention(score="cosine"),
        *_inputs((2, 3, 4), (2, 5, 4)),
    ),
    # A fourth item: `check_padding_invariance`'s keyword arguments.
    "LSTMNShallowFusionDecoder": lambda: (
        ka.layers.LSTMNShallowFusionDecoder(
            ka.layers.LSTMN(3), ka.layers.LuongAttention("general")
        ),
        *_inputs((2, 4, 3), (2, 5, 2)),
        {"mask_argument": "memory_mask"},
    ),
    "BahdanauAttention": lambda: (
        ka.layers.BahdanauAttention(units=3),
        *_inputs((2, 4), (2, 5, 6)),
    ),
    "LuongAttention": lambda: (
        ka.layers.LuongAttention(score="general", window=2),
        *_inputs((2, 3, 4), (2, 5, 4)),
    ),
    "MultiHeadAttention": lambda: (
        ka.layers.MultiHeadAttention(num_heads=2, key_dim=3),
        *_inputs((2, 3, 4), (2, 5, 6)),
    ),
    "MemoryCompressedAttention": lambda: (
        ka.layers.MemoryCompressedAttention(num_heads=2, key_dim=3),
        *_inputs((2, 3, 4), (2, 5, 6)),
    ),
}


def _public_layers():
    names = []
    for name in ka.layers.__all__:
        obj = getattr(ka.layers, name)
        if isinstance(obj, type) and issubclass(obj, keras.layers.Layer):
            names.append(name)
    return sorted(names)


PUBLIC_LAYERS = _public_layers()
CASES = sorted(LAYER_CASES)
# XLA compilation and SavedModel export take seconds: the main case of each
# class runs them in `make test`, the variants only in `make test-large`.
SLOW_CASES = [
    pytest.param(case, marks=pytest.mark.large) if "/" in case else case
    for case in CASES
]
# Classes whose compiled fit `tests/test_implicit_masks.py` already runs in
# `make test`, with padding masks and a check on the gradients: the unmasked
# compiled fit below repeats that XLA compilation (5-19 s per class with both
# test workers busy) and runs for them in `make test-large` only.
FIT_UNDER_MASKS = {
    "AttentionPooling", "AttentionRNNCell", "AttentionRNNDecoder",
    "BahdanauAttention", "LSTMN", "LSTMNDeepFusionDecoder",
    "LSTMNShallowFusionDecoder", "LuongAttention", "MemoryCompressedAttention",
    "MemoryCompressedDecoder", "MemoryCompressedDecoderBlock", "MultiHeadAttention",
    "MultiHeadSelfAttention", "NeuralTuringMachineCell", "PointerAttention",
    "ScoredAttention", "TransformerDecoder", "TransformerDecoderBlock",
    "TransformerEncoder", "TransformerEncoderBlock",
    "UniversalTransformerDecoder", "UniversalTransformerEncoder",
}  # fmt: skip
FIT_CASES = [
    pytest.param(case, marks=pytest.mark.large)
    if "/" in case or case in FIT_UNDER_MASKS
    else case
    for case in CASES
]


def _class_name(case):
    return case.split("/")[0]


def _fused_case(case):
    """`LAYER_CASES[case]` rebuilt from its config with
    `attention_impl="fused"` (keras.ops.dot_product_attention; its
    composition on a CPU) and no attention dropout (the kernels have none)."""
    layer, inputs = LAYER_CASES[case]()
    config = {**layer.get_config(), "attention_impl": "fused"}
    if "attention_dropout" in config:
        config["attention_dropout"] = 0.0
    elif isinstance(
        layer, (ka.layers.MultiHeadAttention, ka.layers.MemoryCompressedAttention)
    ):
        # Keras' signature: `dropout` is the attention dropout there.
        config["dropout"] = 0.0
    return type(layer).from_config(config), inputs


# The main case of every class that takes `attention_impl`, again on the
# fused path. `test_implicit_masks.py` trains the classes with a mask case
# under compiled fit on it too ("<case>+fused").
FUSED_CASES = [
    case
    for case in CASES
    if "/" not in case and "attention_impl" in LAYER_CASES[case]()[0].get_config()
]


def test_public_layers_are_discovered():
    assert {"ScoredAttention", "BahdanauAttention", "LuongAttention"} <= set(
        PUBLIC_LAYERS
    )
    for name in PUBLIC_LAYERS:
        assert getattr(ka, name) is getattr(ka.layers, name), name


@pytest.mark.parametrize("name", PUBLIC_LAYERS)
def test_every_public_layer_has_a_case(name):
    if not any(_class_name(case) == name for case in CASES):
        pytest.fail(
            f"{name} is exported by keras_attention.layers but has no entry in "
            f"LAYER_CASES ({__file__}); add `{name!r}: lambda: (layer, inputs)`."
        )


@pytest.mark.parametrize("case", CASES)
def test_case_builds_the_named_class(case):
    name = _class_name(case)
    assert name in PUBLIC_LAYERS, f"{case}: {name} is not a public layer"
    layer, _ = LAYER_CASES[case]()
    assert type(layer) is getattr(ka.layers, name)


@pytest.mark.parametrize("case", CASES)
def test_config_round_trip(case):
    layer, inputs = LAYER_CASES[case]()
    testing.check_config_round_trip(layer, inputs)


@pytest.mark.parametrize("case", SLOW_CASES)
def test_save_and_load(case):
    layer, inputs = LAYER_CASES[case]()
    testing.check_serialization(testing.make_model(layer, inputs), inputs)


@pytest.mark.parametrize("case", CASES)
def test_mixed_precision(case):
    _, inputs = LAYER_CASES[case]()
    testing.check_mixed_precision(lambda: LAYER_CASES[case]()[0], inputs)


def test_classes_left_to_test_large_have_a_compiled_fit_under_masks():
    """`FIT_UNDER_MASKS` names only classes that the implicit-mask suite
    trains under compiled fit in `make test` (its main case, not a variant)."""
    import test_implicit_masks as masks
    from conftest import _is_variant
    from conftest import _listed

    assert FIT_UNDER_MASKS <= set(masks.CASES)
    assert FIT_UNDER_MASKS <= set(CASES)
    fit = masks.test_padding_rows_get_no_gradient_under_compiled_fit.__name__
    variants = _listed("variants.txt")
    moved = [name for name in sorted(FIT_UNDER_MASKS) if _is_variant(
        f"tests/test_implicit_masks.py::{fit}[{name}]", variants)]  # fmt: skip
    assert not moved, f"{moved}: variants in tests/variants.txt, so `large`"


@pytest.mark.parametrize("case", FIT_CASES)
def test_jit_compile_fit(case):
    _check_jit_fit(*LAYER_CASES[case]())


def _check_jit_fit(layer, inputs):
    """One epoch of `fit(jit_compile=True)` on random targets."""
    model = testing.make_model(layer, inputs)
    rng = np.random.default_rng(1)
    targets = [
        rng.normal(size=output.shape).astype("float32")
        for output in keras.tree.flatten(model(inputs))
    ]
    testing.check_jit_fit(
        model, inputs, targets if len(targets) > 1 else targets[0], epochs=1
    )


# Eager JAX runs these op by op (5-25 s a case): on JAX the attention layers
# and blocks run them, the stacks only on TensorFlow. (The implicit-mask
# suite trains every class on the fused path compiled on both backends.)
_FUSED_ON_JAX = {
    "MultiHeadAttention", "MultiHeadSelfAttention", "TransformerEncoderBlock",
    "TransformerDecoderBlock",
}  # fmt: skip


def _fused_params(on_jax):
    return [
        case if case in on_jax else pytest.param(case, marks=pytest.mark.slow_on_jax)
        for case in FUSED_CASES
    ]


@pytest.mark.parametrize("case", _fused_params(_FUSED_ON_JAX))
def test_fused_path_equals_the_dense_path(case):
    """Outputs and input gradients of the fused variant, with the weights
    of a dense one (copied through the config, so the same layout)."""
    fused, inputs = _fused_case(case)
    config = {**fused.get_config(), "attention_impl": "dense"}
    dense = type(fused).from_config(config)
    inputs = inputs if isinstance(inputs, list) else [inputs]
    want = keras.tree.flatten(dense(*inputs))
    fused(*inputs)
    fused.set_weights(dense.get_weights())
    got = keras.tree.flatten(fused(*inputs))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)

    def loss(layer):
        return lambda *xs: sum(
            keras.ops.sum(keras.ops.sin(y)) for y in keras.tree.flatten(layer(*xs))
        )

    want = testing.input_gradients(loss(dense), inputs)
    got = testing.input_gradients(loss(fused), inputs)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", _fused_params({"MultiHeadSelfAttention"}))
def test_fused_mixed_precision(case):
    _, inputs = LAYER_CASES[case]()
    testing.check_mixed_precision(lambda: _fused_case(case)[0], inputs)


@pytest.mark.parametrize(
    "case",
    [
        case
        if case == "MultiHeadSelfAttention"
        else pytest.param(case, marks=pytest.mark.large)
        for case in FUSED_CASES
    ],
)
def test_fused_save_and_load(case):
    layer, inputs = _fused_case(case)
    testing.check_serialization(testing.make_model(layer, inputs), inputs)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.large) if case in FIT_UNDER_MASKS else case
        for case in FUSED_CASES
    ],
)
def test_fused_jit_compile_fit(case):
    _check_jit_fit(*_fused_case(case))


@pytest.mark.parametrize("case", sorted(CAUSAL_CASES))
def test_causality(case):
    layer, inputs, call_kwargs = CAUSAL_CASES[case]()
    testing.check_causality(layer, inputs, call_kwargs=call_kwargs)


@pytest.mark.parametrize("case", sorted(PADDING_CASES))
def test_padding_invariance(case):
    layer, query, value, *kwargs = PADDING_CASES[case]()
    testing.check_padding_invariance(layer, query, value, **(kwargs or [{}])[0])
