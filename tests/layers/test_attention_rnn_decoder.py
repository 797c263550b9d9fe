import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import testing

B, T, S, D, DM, UNITS = 2, 5, 7, 4, 6, 8


def make_decoder(cell_cls=keras.layers.GRUCell, style="bahdanau", **kwargs):
    if style == "bahdanau":
        attention = ka.layers.BahdanauAttention(units=5)
    else:
        attention = ka.layers.LuongAttention("general")
    cell = ka.layers.AttentionRNNCell(cell_cls(UNITS), attention, style=style, **kwargs)
    return ka.layers.AttentionRNNDecoder(cell)


@pytest.fixture
def data(rng):
    inputs = rng.normal(size=(B, T, D)).astype("float32")
    memory = rng.normal(size=(B, S, DM)).astype("float32")
    mask = np.ones((B, S), dtype=bool)
    mask[1, 4:] = False
    return inputs, memory, mask


# --- numpy reference: a SimpleRNN decoder with attention, written out ---


def _softmax(logits, mask):
    logits = np.where(mask, logits, -np.inf)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_decoder(decoder, inputs, memory, mask):
    cell = decoder.cell
    rnn = cell.cell
    kernel, recurrent, bias = (w.numpy() for w in rnn.weights)
    score = cell.attention.score
    s = np.zeros((B, UNITS), "float32")
    feed = np.zeros((B, UNITS), "float32")
    outputs, alignments = [], []
    for t in range(T):
        x = inputs[:, t]
        if cell.style == "bahdanau":
            hidden = np.tanh(
                (memory @ score.key_kernel.numpy())[:, :, :]
                + (s @ score.query_kernel.numpy())[:, None, :]
            )
            a = _softmax(hidden @ score.v.numpy(), mask)  # (B, S)
            c = np.einsum("bs,bsd->bd", a, memory)
            s = np.tanh(np.concatenate([x, c], -1) @ kernel + s @ recurrent + bias)
            out = np.concatenate([s, c], -1)
        else:
            x_in = np.concatenate([x, feed], -1)
            s = np.tanh(x_in @ kernel + s @ recurrent + bias)
            logits = np.einsum("bk,bsk->bs", s @ score.kernel.numpy(), memory)
            a = _softmax(logits, mask)
            c = np.einsum("bs,bsd->bd", a, memory)
            feed = np.tanh(
                np.concatenate([c, s], -1) @ cell.attention_layer.kernel.numpy()
            )
            out = feed
        outputs.append(out)
        alignments.append(a)
    return np.stack(outputs, 1), np.stack(alignments, 1)


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_matches_numpy_reference(style, data):
    inputs, memory, mask = data
    decoder = make_decoder(keras.layers.SimpleRNNCell, style)
    outputs, alignments = decoder(
        inputs, memory, memory_mask=mask, return_alignments=True
    )
    want_out, want_align = reference_decoder(decoder, inputs, memory, mask)
    np.testing.assert_allclose(outputs, want_out, atol=1e-5)
    np.testing.assert_allclose(alignments, want_align, atol=1e-5)


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
@pytest.mark.parametrize("cell_cls", [keras.layers.GRUCell, keras.layers.LSTMCell])
def test_teacher_forcing_equals_step_by_step(cell_cls, style, data, rng):
    inputs, memory, mask = data
    decoder = make_decoder(cell_cls, style)
    n_states = 2 if cell_cls is keras.layers.LSTMCell else 1
    init = [rng.normal(size=(B, UNITS)).astype("float32") for _ in range(n_states)]
    outputs, alignments = decoder(
        inputs, memory, memory_mask=mask, initial_state=init, return_alignments=True
    )
    cache = decoder.prepare_memory(memory, mask)
    states = decoder.get_initial_state(B, init)
    step_out, step_align = [], []
    for t in range(T):
        out, states, align = decoder.step(inputs[:, t], states, cache)
        step_out.append(out)
        step_align.append(align)
    np.testing.assert_allclose(outputs, np.stack(step_out, 1), atol=1e-5)
    np.testing.assert_allclose(alignments, np.stack(step_align, 1), atol=1e-6)
    # The initial state matters (the test would pass vacuously otherwise).
    assert not np.allclose(outputs, decoder(inputs, memory, memory_mask=mask))


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_alignment_history(style, data):
    inputs, memory, mask = data
    outputs, alignments = make_decoder(style=style)(
        inputs, memory, memory_mask=mask, return_alignments=True
    )
    alignments = keras.ops.convert_to_numpy(alignments)
    assert alignments.shape == (B, T, S)
    assert str(alignments.dtype) == "float32"
    np.testing.assert_allclose(alignments.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(alignments[1, :, 4:], 0.0)
    assert (alignments[1, :, :4] > 0).all()


def test_output_sizes(data):
    inputs, memory, _ = data
    assert make_decoder(style="bahdanau")(inputs, memory).shape == (B, T, UNITS + DM)
    assert make_decoder(style="luong")(inputs, memory).shape == (B, T, UNITS)
    luong = make_decoder(style="luong", attention_dim=3, input_feeding=False)
    assert luong(inputs, memory).shape == (B, T, 3)
    assert luong.state_size == [UNITS]


def test_input_feeding_changes_outputs(data):
    inputs, memory, mask = data
    fed = make_decoder(style="luong")
    unfed = make_decoder(style="luong", input_feeding=False)
    fed(inputs, memory)
    unfed(inputs, memory)
    # Same weights except the fed cell's wider input kernel.
    assert fed.cell.cell.kernel.shape[0] == D + UNITS
    assert unfed.cell.cell.kernel.shape[0] == D


def test_keras_mask_on_memory_equals_explicit_mask(rng):
    ids = rng.integers(1, 9, size=(B, S))
    ids[1, 4:] = 0
    inputs = rng.normal(size=(B, T, D)).astype("float32")
    embedding = keras.layers.Embedding(10, DM, mask_zero=True)
    decoder = make_decoder()
    memory = embedding(ids)
    implicit, a_implicit = decoder(inputs, memory, return_alignments=True)
    explicit, a_explicit = decoder(
        inputs, keras.ops.convert_to_numpy(memory), memory_mask=ids != 0,
        return_alignments=True,
    )  # fmt: skip
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(a_implicit)[1, :, 4:], 0)


def _seq2seq(style="bahdanau", cell_cls=keras.layers.GRUCell, **cell_kwargs):
    source = keras.Input((S,), dtype="int32")
    target = keras.Input((T,), dtype="int32")
    memory = keras.layers.Embedding(12, DM, mask_zero=True)(source)
    y = keras.layers.Embedding(12, D)(target)
    attention = (
        ka.layers.BahdanauAttention(5)
        if style == "bahdanau"
        else ka.layers.LuongAttention("dot")
    )
    cell = ka.layers.AttentionRNNCell(
        cell_cls(DM, **cell_kwargs), attention, style=style
    )
    hidden = ka.layers.AttentionRNNDecoder(cell)(y, memory)
    return keras.Model([source, target], keras.layers.Dense(12)(hidden))


@pytest.mark.parametrize(
    "style, cell_cls",
    [
        ("bahdanau", keras.layers.GRUCell),
        pytest.param("luong", keras.layers.LSTMCell, marks=pytest.mark.large),
    ],
)
def test_fit_compiles_with_xla(style, cell_cls, rng):
    model = _seq2seq(style, cell_cls, dropout=0.1, recurrent_dropout=0.1)
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )  # fmt: skip
    src = rng.integers(0, 12, size=(10, S))
    tgt = rng.integers(1, 12, size=(10, T))
    before = [w.numpy().copy() for w in model.trainable_weights]
    # One partial batch: the traced batch size is dynamic (None), the case
    # where a tensordot inside the time loop used to break XLA's gradient.
    history = model.fit([src, tgt], tgt, batch_size=16, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [
        not np.allclose(a, w.numpy())
        for a, w in zip(before, model.trainable_weights, strict=True)
    ]
    assert all(changed)  # every weight, attention included, gets a gradient


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_save_load_identical_outputs(style, rng, tmp_path):
    model = _seq2seq(style, keras.layers.LSTMCell)
    src = rng.integers(0, 12, size=(3, S))
    src[0, 3:] = 0
    tgt = rng.integers(1, 12, size=(3, T))
    expected = model.predict([src, tgt], verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(loaded.predict([src, tgt], verbose=0), expected)


def test_get_config_round_trip(data):
    inputs, memory, _ = data
    decoder = make_decoder(keras.layers.LSTMCell, "luong", attention_dim=6)
    decoder(inputs, memory)
    config = decoder.get_config()
    clone = ka.layers.AttentionRNNDecoder.from_config(config)
    assert clone.get_config() == config
    assert isinstance(clone.cell.cell, keras.layers.LSTMCell)
    assert clone.cell.attention_dim == 6
    assert clone.cell.attention.score_name == "general"
    clone(inputs, memory)
    clone.set_weights(decoder.get_weights())
    np.testing.assert_allclose(clone(inputs, memory), decoder(inputs, memory))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_finite(policy, rng):
    keras.config.set_dtype_policy(policy)
    inputs = 100 * rng.normal(size=(B, T, D)).astype("float32")
    memory = 100 * rng.normal(size=(B, S, DM)).astype("float32")
    outputs, alignments = make_decoder()(inputs, memory, return_alignments=True)
    assert np.isfinite(keras.ops.convert_to_numpy(outputs).astype("float32")).all()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(alignments).sum(-1), 1, atol=1e-3
    )


def test_additive_key_projection_is_cached(data):
    inputs, memory, _ = data
    decoder = make_decoder()
    decoder(inputs, memory)
    _, keys, _ = decoder.prepare_memory(memory)
    assert keys.shape == (B, S, 5)  # W h_j, projected once per sequence
    _, keys, _ = make_decoder(style="luong").prepare_memory(memory)
    assert keys is memory


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"style": "transformer"}, "`style` must be one of"),
        ({"input_feeding": True}, "`input_feeding` applies to the Luong"),
        ({"attention_dim": 4}, "`attention_dim` applies to the Luong"),
        ({"style": "luong", "attention_dim": 0}, "`attention_dim` must be a positive"),
        ({"cell": keras.layers.Dense(3)}, "`cell` must be a Keras RNN cell"),
        ({"attention": keras.layers.Attention()}, "`attention` must be a"),
        ({"attention": ka.layers.ScoredAttention(window=2)}, "local `window`"),
    ],
)
def test_cell_bad_arguments(kwargs, match):
    args = {
        "cell": keras.layers.GRUCell(4),
        "attention": ka.layers.BahdanauAttention(3),
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        ka.layers.AttentionRNNCell(**args)


def test_decoder_bad_inputs(data):
    inputs, memory, mask = data
    with pytest.raises(ValueError, match="`cell` must be an `AttentionRNNCell`"):
        ka.layers.AttentionRNNDecoder(keras.layers.GRUCell(4))
    with pytest.raises(ValueError, match="`inputs` must have rank 3"):
        make_decoder()(inputs[:, 0], memory)
    with pytest.raises(ValueError, match="`memory` must have rank 3"):
        make_decoder()(inputs, memory[:, 0])
    with pytest.raises(ValueError, match="`memory_mask` and `memory` must have"):
        make_decoder()(inputs, memory, memory_mask=mask[:, :3])
    decoder = make_decoder(keras.layers.LSTMCell)
    with pytest.raises(ValueError, match="`initial_state` must hold 2"):
        decoder(inputs, memory, initial_state=[np.zeros((B, UNITS), "float32")])
    cache = decoder.prepare_memory(memory)
    with pytest.raises(ValueError, match="`states` must be a list of 2"):
        decoder.step(inputs[:, 0], [np.zeros((B, UNITS), "float32")], cache)


def test_cell_dropout_applies_only_in_training(data):
    inputs, memory, _ = data
    rnn = keras.layers.GRUCell(UNITS, dropout=0.5, recurrent_dropout=0.5)
    decoder = ka.layers.AttentionRNNDecoder(
        ka.layers.AttentionRNNCell(rnn, ka.layers.BahdanauAttention(5))
    )
    inference = decoder(inputs, memory)
    np.testing.assert_array_equal(decoder(inputs, memory, training=False), inference)
    assert not np.allclose(decoder(inputs, memory, training=True), inference)
    assert rnn._dropout_mask is None  # reset after the sequence


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_masked_memory_padding_changes_nothing(style, data):
    inputs, memory, mask = data
    testing.check_padding_invariance(
        make_decoder(style=style),
        inputs,
        memory,
        mask_argument="memory_mask",
        call_kwargs={"memory_mask": mask},
    )


@pytest.mark.parametrize("usage", ["eager", "functional", "jit", "prebuilt"])
def test_keras_rnn_cannot_carry_the_memory_and_says_what_to_use(usage, data, jit):
    """Issue 12, item 6.3: `keras.layers.RNN(AttentionRNNCell(...))`.

    Keras 3's RNN calls its cell with `(inputs, states, training)` only (no
    `constants`), so the memory cannot reach the cell: the failure is a
    TypeError naming the memory and `AttentionRNNDecoder`, which runs the
    same cell with the memory.
    """
    inputs, memory, _ = data
    cell = make_decoder().cell
    if usage == "prebuilt":  # built for step-by-step use, then wrapped
        cell.build((B, D), memory.shape)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    match = r"needs `memory(_shape)?`.*keras.layers.RNN.*AttentionRNNDecoder"
    with pytest.raises(TypeError, match=match):
        if usage == "functional":
            rnn(keras.Input((None, D)))
        elif usage == "jit":
            jit(rnn)(inputs)
        else:
            rnn(inputs)
    # The advertised alternative runs the same cell over the same sequence.
    decoder = ka.layers.AttentionRNNDecoder(cell)
    assert decoder(inputs, memory).shape == (B, T, UNITS + DM)
