"""Initial weights of EVERY public layer and model: no two blocks start equal.

A weight that starts as a copy of another (or as a rescaled copy) starts
the layer in a degenerate, symmetric state (W_Q = W_K makes every initial
score matrix `x W W^T x^T` symmetric), which nothing else notices: 0.1.0
initialised the fused Q/K/V kernel of `MultiHeadSelfAttention` with
W_Q = W_K = W_V (one Keras initializer returns the same values at every
call) and 760 tests passed. `_copies_in` looks for that bug and its
relatives in the built weights:

- every pair of weights: equal, or the flattened prefix of one a rescaled
  copy of the other's (a seeded Keras initializer called for two shapes
  draws the same stream, only the scale differs: W_Q `(4, 3)` and W_K
  `(5, 3)` from one `GlorotUniform(seed=1)` share their first 12 values up
  to a factor), across sublayers and across the blocks of a stack;
- within a weight of rank >= 2, every pair of slices along every axis (the
  output columns catch duplicated column blocks of any size, e.g. the Q, K
  and V blocks of a fused kernel; the other axes catch duplicated heads or
  input rows).

Weights with at most two distinct values are left out: their initializer
is deterministic by design (zeros biases, ones gammas, a constant `g`, the
unit forget-gate bias of an LSTM).

Each case runs with the default (unseeded) initializers and, where the
layer takes an initializer, with seeded ones; seeded layers must also be
reproducible, and two unseeded instances must differ. Every public layer
needs an entry in `CASES` (or in `WEIGHTLESS`, checked to have no
weights), every model in `keras_attention.models` too, and every layer
whose config names an initializer a seeded case.
"""

import itertools

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import scores

# Shapes are small, and widths equal wherever the layer allows, so that
# weights that should differ have the same shape.
B = 2


def _glorot(seed):
    return keras.initializers.GlorotUniform(seed=seed)


def _kw(init, name="kernel_initializer"):
    """`{name: init(seed)}` for the seeded run, `{}` for the default one."""
    return {} if init is None else {name: init(1)}


def _call(layer, *shapes):
    """`layer` called once on zeros of the given shapes (this builds it and
    every sublayer)."""
    layer(*[np.zeros(shape, "float32") for shape in shapes])
    return layer


def _rnn_cell(init, style="bahdanau"):
    """A GRU + Bahdanau (or LSTM + Luong general) cell; seeded, every
    random initializer gets a seed of its own."""
    seeded = init is not None
    if style == "bahdanau":
        cell = keras.layers.GRUCell(
            4,
            **_kw(init),
            **(
                {"recurrent_initializer": keras.initializers.Orthogonal(seed=2)}
                if seeded
                else {}
            ),
        )
        score = scores.Additive(
            units=3, **({"kernel_initializer": _glorot(3)} if seeded else {})
        )
        return ka.layers.AttentionRNNCell(cell, ka.layers.ScoredAttention(score))
    return ka.layers.AttentionRNNCell(
        keras.layers.LSTMCell(4),
        ka.layers.LuongAttention("general"),
        style="luong",
        attention_dim=4,
    )


def _lstmn(init):
    """An LSTMN of 4 units; seeded, its two initializers get seeds 1 and 2
    (the deep fusion's weights follow them)."""
    seeded = {} if init is None else {"recurrent_initializer": init(2)}
    return ka.layers.LSTMN(4, **_kw(init), **seeded)


def _call_cell(layer):
    states = [np.zeros((B, size), "float32") for size in layer.state_size]
    layer(np.zeros((B, 4), "float32"), states, np.zeros((B, 5, 4), "float32"))
    return layer


def _transformer(**kwargs):
    model = ka.models.Transformer(
        11,
        11,
        hidden_dim=4,
        num_heads=2,
        intermediate_dim=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
        **kwargs,
    )
    tokens = np.ones((B, 3), "int32")
    model({"encoder_tokens": tokens, "decoder_tokens": tokens})
    return model


def _han():
    """Equal widths everywhere, so every pair of weights is compared."""
    model = ka.models.HierarchicalAttentionNetwork(
        9, 4, embedding_dim=4, word_units=4, sentence_units=4, attention_units=4
    )
    model(np.ones((B, 2, 3), "int32"))
    return model


def _bert_encoder():
    """Equal widths (hidden, feed-forward, vocabulary, positions), so every
    pair of weights is compared."""
    encoder = ka.models.BertEncoder(
        4, 2, 2, 4, 4, dropout=0.0, max_sequence_length=4, num_segments=4
    )
    encoder({"token_ids": np.ones((B, 3), "int32")})
    return encoder


def _bert_masked_lm():
    model = ka.models.BertMaskedLM(_bert_encoder())
    model({"token_ids": np.ones((B, 3), "int32"), "mask_positions": np.ones((B, 1))})
    return model


def _image_transformer():
    model = ka.models.ImageTransformer(
        (2, 3), 4, hidden_dim=4, num_heads=2, intermediate_dim=4, num_layers=2
    )
    model(np.zeros((B, 2, 3), "int32"))
    return model


def _pointer_network(**kwargs):
    model = ka.models.PointerNetwork(units=4, **kwargs)
    pointers = np.tile(np.arange(5), (B, 1))
    model((np.zeros((B, 5, 2), "float32"), pointers))
    return model


# name -> (factory(init) -> built layer or model, seeded: whether the
# factory threads a seeded initializer into every random weight). `init`
# is None (default initializers) or `seed -> initializer`.
CASES = {
    "ScoredAttention/additive": (
        lambda init: _call(
            ka.layers.ScoredAttention(scores.Additive(units=3, **_kw(init))),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    "ScoredAttention/general": (
        lambda init: _call(
            ka.layers.ScoredAttention(scores.General(**_kw(init))),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    "ScoredAttention/location": (
        lambda init: _call(
            ka.layers.ScoredAttention(scores.Location(max_length=6, **_kw(init))),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    "BahdanauAttention": (
        lambda init: _call(ka.layers.BahdanauAttention(units=3), (B, 3, 4), (B, 5, 4)),
        False,
    ),
    "BahdanauAttention/normalize": (
        lambda init: _call(
            ka.layers.BahdanauAttention(units=3, normalize=True), (B, 3, 4), (B, 5, 4)
        ),
        False,
    ),
    "LuongAttention/general": (
        lambda init: _call(ka.layers.LuongAttention("general"), (B, 3, 4), (B, 5, 4)),
        False,
    ),
    "LuongAttention/concat": (
        lambda init: _call(
            ka.layers.LuongAttention("concat", units=3), (B, 3, 4), (B, 5, 4)
        ),
        False,
    ),
    "LuongAttention/local-p": (
        lambda init: _call(
            ka.layers.LuongAttention(
                "general", window=2, alignment="predictive", alignment_units=4
            ),
            (B, 3, 4),
            (B, 5, 4),
        ),
        False,
    ),
    "AttentionPooling": (
        lambda init: _call(
            ka.layers.AttentionPooling(units=4, num_contexts=4, **_kw(init)),
            (B, 5, 4),
        ),
        True,
    ),
    # units = attention_units = width: W_h and W_h~ (4, 4) have one shape.
    "LSTMN": (
        lambda init: _call(
            ka.layers.LSTMN(
                4,
                **_kw(init),
                **({} if init is None else {"recurrent_initializer": init(2)}),
            ),
            (B, 5, 4),
        ),
        True,
    ),
    # Widths 4 throughout: the fusion's (4, 4) weights meet the LSTMN's.
    "LSTMNShallowFusionDecoder": (
        lambda init: _call(
            ka.layers.LSTMNShallowFusionDecoder(
                _lstmn(init),
                ka.layers.ScoredAttention(
                    scores.General(
                        **({} if init is None else {"kernel_initializer": init(3)})
                    )
                ),
            ),
            (B, 5, 4),
            (B, 6, 4),
        ),
        True,
    ),
    "LSTMNDeepFusionDecoder": (
        lambda init: _call(
            ka.layers.LSTMNDeepFusionDecoder(_lstmn(init), inter_attention_units=4),
            (B, 5, 4),
            (B, 6, 4),
            (B, 6, 4),
        ),
        True,
    ),
    "PointerAttention": (
        lambda init: _call(ka.layers.PointerAttention(units=3), (B, 3, 4), (B, 5, 4)),
        False,
    ),
    "MultiHeadAttention": (
        lambda init: _call(
            ka.layers.MultiHeadAttention(num_heads=2, key_dim=3, **_kw(init)),
            (B, 3, 6),
            (B, 5, 6),
        ),
        True,
    ),
    "MultiHeadAttention/value_dim-gate": (
        lambda init: _call(
            ka.layers.MultiHeadAttention(
                num_heads=2, key_dim=3, value_dim=2, use_gate=True, **_kw(init)
            ),
            (B, 3, 6),
            (B, 5, 6),
        ),
        True,
    ),
    # key_dim = value_dim: the key and value projections (and convolutions)
    # have one shape.
    "MemoryCompressedAttention": (
        lambda init: _call(
            ka.layers.MemoryCompressedAttention(num_heads=2, key_dim=3, **_kw(init)),
            (B, 4, 6),
            (B, 7, 6),
        ),
        True,
    ),
    "MultiHeadSelfAttention": (
        lambda init: _call(
            ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3, **_kw(init)),
            (B, 4, 6),
        ),
        True,
    ),
    "MultiHeadSelfAttention/value_dim-gate": (
        lambda init: _call(
            ka.layers.MultiHeadSelfAttention(
                num_heads=2, key_dim=3, value_dim=2, use_gate=True, **_kw(init)
            ),
            (B, 4, 6),
        ),
        True,
    ),
    # channels_reduction = value_channels_reduction: f, g and h have one shape.
    "SelfAttention2D": (
        lambda init: _call(
            ka.layers.SelfAttention2D(
                channels_reduction=2, value_channels_reduction=2, **_kw(init)
            ),
            (B, 4, 4, 8),
        ),
        True,
    ),
    "PositionEmbedding": (
        lambda init: _call(
            ka.layers.PositionEmbedding(6, **_kw(init, "initializer")), (B, 5, 4)
        ),
        True,
    ),
    "AttentionRNNCell": (lambda init: _call_cell(_rnn_cell(init)), True),
    # One step from the initial state (`states=None`).
    "NeuralTuringMachineCell": (
        lambda init: _call(
            ka.layers.NeuralTuringMachineCell(
                keras.layers.Dense(
                    4, **({} if init is None else {"kernel_initializer": _glorot(7)})
                ),
                memory_size=6,
                memory_width=4,
                **_kw(init),
            ),
            (B, 4),
        ),
        True,
    ),
    "AttentionRNNCell/luong-lstm": (
        lambda init: _call_cell(_rnn_cell(init, "luong")),
        False,
    ),
    "AttentionRNNDecoder": (
        lambda init: _call(
            ka.layers.AttentionRNNDecoder(_rnn_cell(init)), (B, 3, 4), (B, 5, 4)
        ),
        True,
    ),
    "AttentionRNNDecoder/luong-lstm": (
        lambda init: _call(
            ka.layers.AttentionRNNDecoder(_rnn_cell(init, "luong")),
            (B, 3, 4),
            (B, 5, 4),
        ),
        False,
    ),
    # intermediate_dim = width: both feed-forward kernels are (4, 4).
    "TransformerEncoderBlock": (
        lambda init: _call(
            ka.layers.TransformerEncoderBlock(
                num_heads=2, intermediate_dim=4, **_kw(init)
            ),
            (B, 5, 4),
        ),
        True,
    ),
    "TransformerDecoderBlock": (
        lambda init: _call(
            ka.layers.TransformerDecoderBlock(
                num_heads=2, intermediate_dim=4, **_kw(init)
            ),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    "ImageTransformerBlock": (
        lambda init: _call(
            ka.layers.ImageTransformerBlock(
                num_heads=2,
                intermediate_dim=4,
                query_block=(1, 2),
                memory_flange=(1, 1),
                **_kw(init),
            ),
            (B, 2, 3, 4),
        ),
        True,
    ),
    "TransformerDecoderBlock/decoder-only": (
        lambda init: _call(
            ka.layers.TransformerDecoderBlock(
                num_heads=2, intermediate_dim=4, **_kw(init)
            ),
            (B, 3, 4),
        ),
        True,
    ),
    "TransformerEncoder": (
        lambda init: _call(
            ka.layers.TransformerEncoder(
                num_layers=2,
                num_heads=2,
                intermediate_dim=4,
                normalize_first=True,
                **_kw(init),
            ),
            (B, 5, 4),
        ),
        True,
    ),
    "TransformerDecoder": (
        lambda init: _call(
            ka.layers.TransformerDecoder(
                num_layers=2, num_heads=2, intermediate_dim=4, **_kw(init)
            ),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    "MemoryCompressedDecoderBlock": (
        lambda init: _call(
            ka.layers.MemoryCompressedDecoderBlock(
                num_heads=2, intermediate_dim=4, compression_factor=2, **_kw(init)
            ),
            (B, 5, 4),
        ),
        True,
    ),
    "MemoryCompressedDecoder": (
        lambda init: _call(
            ka.layers.MemoryCompressedDecoder(
                "LMF", num_heads=2, intermediate_dim=4, local_block_size=2, **_kw(init)
            ),
            (B, 5, 4),
        ),
        True,
    ),
    "UniversalTransformerEncoder": (
        lambda init: _call(
            ka.layers.UniversalTransformerEncoder(
                num_heads=2, intermediate_dim=4, max_steps=2, **_kw(init)
            ),
            (B, 5, 4),
        ),
        True,
    ),
    "UniversalTransformerDecoder": (
        lambda init: _call(
            ka.layers.UniversalTransformerDecoder(
                num_heads=2, intermediate_dim=4, max_steps=2, **_kw(init)
            ),
            (B, 3, 4),
            (B, 5, 4),
        ),
        True,
    ),
    # The models take no initializer: default initializers only.
    "Transformer": (lambda init: _transformer(), False),
    "Transformer/learned-tied": (
        lambda init: _transformer(position_encoding="learned", tie_weights=True),
        False,
    ),
    "PointerNetwork": (lambda init: _pointer_network(), False),
    "HierarchicalAttentionNetwork": (lambda init: _han(), False),
    "ImageTransformer": (lambda init: _image_transformer(), False),
    "BertEncoder": (lambda init: _bert_encoder(), False),
    "BertMaskedLM": (lambda init: _bert_masked_lm(), False),
    "PointerNetwork/gru-bidirectional-glimpse": (
        lambda init: _pointer_network(
            cell="gru", bidirectional=True, glimpse=True, attention_units=3
        ),
        False,
    ),
}

# Public layers without weights: nothing to initialise (checked).
WEIGHTLESS = {
    "SinusoidalPositionEncoding": lambda: _call(
        ka.layers.SinusoidalPositionEncoding(), (B, 5, 4)
    ),
}

ALL = sorted(CASES)
SEEDED = sorted(name for name, (_, seeded) in CASES.items() if seeded)


def _class_name(case):
    return case.split("/")[0]


def _public(module, base):
    return sorted(
        name
        for name in module.__all__
        if isinstance(getattr(module, name), type)
        and issubclass(getattr(module, name), base)
    )


PUBLIC_LAYERS = _public(ka.layers, keras.layers.Layer)
PUBLIC_MODELS = _public(ka.models, keras.Model)


# -- the checker --------------------------------------------------------------

# Cosine above this: a rescaled copy (float32 rounding of a copy leaves
# about 1e-14; two random vectors of >= 3 entries come this close with
# probability below 1e-8).
_PARALLEL = 1.0 - 1e-9
_MIN_PARALLEL_SIZE = 3


def _random_weights(obj):
    """`[(label, float64 array)]` of the weights whose initializer draws
    random values (more than two distinct values)."""
    out = []
    for i, w in enumerate(obj.weights):
        a = np.asarray(keras.ops.convert_to_numpy(w), "float64")
        if np.unique(a).size > 2:
            out.append((f"#{i} {w.path} {a.shape}", a))
    return out


def _copy_pairs(rows):
    """Pairs `(i, j)` of rows of the 2-D `rows` that are equal, or (with
    at least `_MIN_PARALLEL_SIZE` entries) equal up to a factor."""
    equal = np.all(rows[:, None, :] == rows[None, :, :], axis=-1)
    if rows.shape[1] >= _MIN_PARALLEL_SIZE:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        unit = rows / np.where(norms == 0, 1.0, norms)
        equal |= np.abs(unit @ unit.T) > _PARALLEL
    i, j = np.nonzero(np.triu(equal, k=1))
    return list(zip(i.tolist(), j.tolist(), strict=True))


def _copies_in(named):
    """Descriptions of every copy among the weights `[(label, array)]`."""
    found = []
    for label, a in named:
        for axis in range(a.ndim if a.ndim >= 2 else 0):
            slices = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
            found += [
                f"{label}: slices {i} and {j} along axis {axis}"
                for i, j in _copy_pairs(slices)
            ]
    for (label1, a1), (label2, a2) in itertools.combinations(named, 2):
        n = min(a1.size, a2.size)
        if a1.shape != a2.shape and n < _MIN_PARALLEL_SIZE:
            continue
        prefixes = np.stack([a1.reshape(-1)[:n], a2.reshape(-1)[:n]])
        if _copy_pairs(prefixes):
            what = "equal" if a1.shape == a2.shape else f"first {n} values"
            found.append(f"{label1} and {label2}: copies ({what})")
    return found


def _check_no_copies(obj, case):
    named = _random_weights(obj)
    assert named, f"{case}: no randomly initialised weight to check"
    found = _copies_in(named)
    assert not found, f"{case}: weights start as copies of each other:\n  " + (
        "\n  ".join(found)
    )


# -- the checker finds what it is meant to ------------------------------------


def test_checker_finds_a_fused_kernel_with_equal_blocks():
    w = np.random.default_rng(0).normal(size=(6, 6))
    fused = np.concatenate([w, w, 2.0 * w], axis=1)  # W_Q = W_K, W_V = 2 W_Q
    found = _copies_in([("qkv", fused)])
    assert any("slices 0 and 6 along axis 1" in f for f in found), found
    assert any("slices 0 and 12 along axis 1" in f for f in found), found
    assert len(found) == 3 * 6, found  # each column of W_Q has two copies


def test_checker_finds_equal_heads_and_rescaled_weights_of_other_shapes():
    rng = np.random.default_rng(0)
    head = rng.normal(size=(4, 1, 3))
    kernel = np.concatenate([head, head], axis=1)  # (D, N, H), two equal heads
    assert _copies_in([("kernel", kernel)]) == ["kernel: slices 0 and 1 along axis 1"]
    # What one seeded initializer gives for two shapes: a rescaled prefix.
    init = _glorot(1)
    w_k, w_q = (
        np.asarray(keras.ops.convert_to_numpy(init(s))) for s in [(4, 3), (5, 3)]
    )
    found = _copies_in([("W_K", w_k.astype("float64")), ("W_Q", w_q.astype("float64"))])
    assert found == ["W_K and W_Q: copies (first 12 values)"]


def test_checker_accepts_independent_weights():
    rng = np.random.default_rng(0)
    named = [(f"w{i}", rng.normal(size=(4, 6))) for i in range(3)]
    named.append(("b", rng.normal(size=(6,))))
    assert _copies_in(named) == []


# -- the issue's reproduction ---------------------------------------------------


def test_issue_reproduction_q_k_v_blocks_differ():
    l = ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=3)  # noqa: E741
    l.build((2, 4, 6))
    w = np.asarray(l.qkv_dense.kernel)
    assert w.shape == (6, 18)
    blocks = {"W_Q": w[:, :6], "W_K": w[:, 6:12], "W_V": w[:, 12:]}
    for a, b in itertools.combinations(blocks, 2):
        assert not np.allclose(blocks[a], blocks[b], atol=1e-3), f"{a} == {b}"
    assert _copies_in([("qkv", w.astype("float64"))]) == []


# -- every public layer and model ---------------------------------------------


@pytest.mark.parametrize("name", PUBLIC_LAYERS)
def test_every_public_layer_has_a_case(name):
    if name not in {_class_name(case) for case in CASES} | set(WEIGHTLESS):
        pytest.fail(
            f"{name} is exported by keras_attention.layers but has no entry in "
            f"CASES ({__file__}): add `{name!r}: (lambda init: built_layer, "
            "seeded)`, or list it in WEIGHTLESS if it has no weights."
        )


@pytest.mark.parametrize("name", PUBLIC_MODELS)
def test_every_public_model_has_a_case(name):
    if not any(_class_name(case) == name for case in CASES):
        pytest.fail(
            f"{name} is exported by keras_attention.models but has no entry in "
            f"CASES ({__file__})."
        )


@pytest.mark.parametrize("case", ALL)
def test_case_builds_the_named_class(case):
    obj = CASES[case][0](None)
    name = _class_name(case)
    module = ka.models if name in PUBLIC_MODELS else ka.layers
    assert type(obj) is getattr(module, name)
    assert obj.built


@pytest.mark.parametrize("name", sorted({_class_name(case) for case in ALL}))
def test_layers_taking_an_initializer_have_a_seeded_case(name):
    first = next(case for case in ALL if _class_name(case) == name)
    config = CASES[first][0](None).get_config()
    takes_one = any(key in config for key in ("kernel_initializer", "initializer"))
    if takes_one and not any(_class_name(case) == name for case in SEEDED):
        pytest.fail(
            f"{name} takes an initializer (its config: {sorted(config)}) but "
            f"has no seeded case in CASES ({__file__})."
        )


@pytest.mark.parametrize("name", sorted(WEIGHTLESS))
def test_weightless_layers_have_no_weights(name):
    layer = WEIGHTLESS[name]()
    assert layer.built
    assert layer.weights == [], f"{name} has weights: give it a case in CASES"


@pytest.mark.parametrize("case", ALL)
def test_no_two_blocks_start_equal(case):
    _check_no_copies(CASES[case][0](None), case)


@pytest.mark.parametrize("case", SEEDED)
def test_no_two_blocks_start_equal_with_a_seeded_initializer(case):
    _check_no_copies(CASES[case][0](_glorot), case)


def _weights(obj):
    return [np.asarray(keras.ops.convert_to_numpy(w)) for w in obj.weights]


@pytest.mark.parametrize("case", SEEDED)
def test_seeded_layers_are_reproducible(case):
    factory = CASES[case][0]
    first, second = _weights(factory(_glorot)), _weights(factory(_glorot))
    assert len(first) == len(second)
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"{case}: weight #{i}")


@pytest.mark.parametrize("case", ALL)
def test_unseeded_instances_differ(case):
    factory = CASES[case][0]
    first, second = factory(None), factory(None)
    random = [label for label, _ in _random_weights(first)]
    assert random, f"{case}: no randomly initialised weight"
    same = [
        label
        for label, a, b in zip(
            [f"#{i} {w.path}" for i, w in enumerate(first.weights)],
            _weights(first),
            _weights(second),
            strict=True,
        )
        if np.unique(a).size > 2 and np.array_equal(a, b)
    ]
    assert not same, f"{case}: two unseeded instances start with equal {same}"
