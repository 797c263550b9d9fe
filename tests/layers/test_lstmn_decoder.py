"""The LSTMN fusion decoders (Cheng, Dong and Lapata, 2016, §3.3) against the paper.

`decoder_reference` is the LSTMN of §3.1 (equations 4-9) with the deep
fusion of §3.3 (equations 10-15) written out in float64, one sequence and
one step at a time, with the layers' own weights; shallow fusion is that
LSTMN followed by Luong's general attention over the encoder outputs. Both
decoders must match it (outputs and alignments, with encoder and decoder
padding and an initial state), and the deep decoder's `O(T)`-memory
gradients must match its derivatives. Then the decoding contract: causal,
padding never read, step-by-step decoding equal to teacher forcing,
greedy and beam search through `keras_attention.decoding`; and Keras':
a seq2seq model that trains compiled and saves.
"""

import keras
import lstmn_reference as ref
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing
from keras_attention.decoding import beam_search
from keras_attention.decoding import greedy_search
from keras_attention.ops import lstmn_fusion_recurrence

B, T, S, D, UNITS, WIDTH = 2, 4, 5, 3, 4, 3  # WIDTH: the encoder's hidden tape
DECODER_MASK = np.array([[1, 1, 0, 1], [1, 1, 1, 1]], bool)  # a hole
MEMORY_MASK = np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], bool)  # right, left
GARBAGE = 1e3
KINDS = ("shallow", "deep")


def _attend(scores, values):
    """softmax over the scores, the weighted sum of `values` (rows)."""
    p = ref.softmax(np.asarray(scores))
    return p, p @ values


def decoder_reference(w, x, mask, initial_state, source=None):
    """§3.1's LSTMN and, with `source = (gamma, alpha, source_mask)`,
    §3.3's deep fusion; float64. `w`: the weights by name. Returns the
    outputs `h_t` `(B, T, U)` and the inter-attention weights `(B, T, S)`
    (zeros without a source); a masked step keeps the state, reads nothing
    and adds nothing to the tape (`LSTMN`'s rule)."""
    w = {k: np.asarray(v, "float64") for k, v in w.items()}
    units = w["recurrent_kernel"].shape[0]
    outputs = np.zeros(x.shape[:2] + (units,))
    alignments = np.zeros(x.shape[:2] + (0 if source is None else source[0].shape[1],))
    for b in range(x.shape[0]):
        h, c = (np.asarray(s[b], "float64") for s in initial_state)
        tape = [(h, c)]
        h_read_prev = np.zeros(units)  # h~_0
        gamma_read = None if source is None else np.zeros(source[0].shape[-1])
        for t in range(x.shape[1]):
            if mask[b, t]:
                x_t = np.asarray(x[b, t], "float64")
                # (4)-(6): intra-attention over the tapes
                query = x_t @ w["attention_input_kernel"]
                query = query + h_read_prev @ w["attention_summary_kernel"]
                a = [
                    w["attention_vector"]
                    @ np.tanh(h_i @ w["attention_memory_kernel"] + query)
                    for h_i, _ in tape
                ]
                s = ref.softmax(np.array(a))
                h_read = sum(s_i * h_i for s_i, (h_i, _) in zip(s, tape, strict=True))
                c_read = sum(s_i * c_i for s_i, (_, c_i) in zip(s, tape, strict=True))
                # (7)-(8): the gates (Keras' order i, f, c, o)
                z = x_t @ w["kernel"] + h_read @ w["recurrent_kernel"] + w["bias"]
                gate_i, gate_f, cand, gate_o = np.split(z, 4)
                c = ref.sigmoid(gate_f) * c_read + ref.sigmoid(gate_i) * np.tanh(cand)
                if source is not None:
                    gamma, alpha, real = (np.asarray(a[b], "float64") for a in source)
                    real = real.astype(bool)
                    # (10)-(12): inter-attention over the source tapes
                    q = x_t @ w["source_input_kernel"]
                    q = q + gamma_read @ w["source_summary_kernel"]
                    scores = [
                        w["source_vector"]
                        @ np.tanh(g_j @ w["source_memory_kernel"] + q)
                        for g_j in gamma[real]
                    ]
                    p, gamma_read = _attend(scores, gamma[real])
                    alpha_read = p @ alpha[real]
                    alignments[b, t, real] = p
                    # (13)-(14): the gate r_t and the fused cell
                    r = ref.sigmoid(
                        x_t @ w["source_gate_input_kernel"]
                        + gamma_read @ w["source_gate_kernel"]
                        + w["source_gate_bias"]
                    )
                    c = r * alpha_read + c
                h = ref.sigmoid(gate_o) * np.tanh(c)  # (9) / (15)
                tape.append((h, c))
                h_read_prev = h_read
            outputs[b, t] = h
    return outputs, alignments


def shallow_reference(w, score_kernel, x, mask, initial_state, memory, memory_mask):
    """The LSTMN, then `h_t` attends over the memory with the general score
    `h_t^T W m_j`: `([h_t; ctx_t], weights)`."""
    hidden, _ = decoder_reference(w, x, mask, initial_state)
    memory = np.asarray(memory, "float64")
    weights = np.zeros(hidden.shape[:2] + memory.shape[1:2])
    contexts = np.zeros(hidden.shape[:2] + memory.shape[2:])
    for b in range(hidden.shape[0]):
        real = memory_mask[b]
        for t in range(hidden.shape[1]):
            scores = memory[b, real] @ (hidden[b, t] @ score_kernel)
            weights[b, t, real], contexts[b, t] = _attend(scores, memory[b, real])
    return np.concatenate([hidden, contexts], -1), weights


# -- layers and inputs ----------------------------------------------------------------


def _inputs(seed=0):
    """`x (B, T, D)`, the encoder's hidden tape `(B, S, WIDTH)` and memory
    tape `(B, S, UNITS)`, and an initial state `[h_0, c_0]`."""
    rng = np.random.default_rng(seed)
    shapes = [(B, T, D), (B, S, WIDTH), (B, S, UNITS), (B, UNITS), (B, UNITS)]
    arrays = [rng.normal(size=shape).astype("float32") for shape in shapes]
    return arrays[0], arrays[1], arrays[2], arrays[3:]


def _make(kind):
    """A new, unbuilt decoder and its memory arguments (`_inputs()`'s)."""
    _, memory, cells, _ = _inputs()
    lstmn = ka.layers.LSTMN(UNITS, attention_units=3)
    if kind == "shallow":
        attention = ka.layers.LuongAttention("general")
        return ka.layers.LSTMNShallowFusionDecoder(lstmn, attention), [memory]
    layer = ka.layers.LSTMNDeepFusionDecoder(lstmn, inter_attention_units=2)
    return layer, [memory, cells]


def _decoder(kind):
    """`(layer, memory arguments)`: built on `_inputs()`, every weight moved
    off its initial value."""
    layer, memories = _make(kind)
    layer(_inputs()[0], *memories)
    ref.randomize(layer)
    return layer, memories


def _weights(layer):
    """The LSTMN's and the deep fusion's weights by their (distinct) names."""
    deep = isinstance(layer, ka.layers.LSTMNDeepFusionDecoder)
    return {w.name: ref.as_float64(w) for w in (layer if deep else layer.lstmn).weights}


def _reference(layer, x, memories, mask, initial_state, memory_mask):
    w = _weights(layer)
    if isinstance(layer, ka.layers.LSTMNShallowFusionDecoder):
        kernel = ref.as_float64(layer.attention.score.kernel)
        return shallow_reference(
            w, kernel, x, mask, initial_state, memories[0], memory_mask
        )
    source = (memories[0], memories[1], memory_mask)
    return decoder_reference(w, x, mask, initial_state, source)


# -- against the paper ----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_matches_the_numpy_reference(kind):
    """Outputs and alignments, with decoder and encoder padding and an
    initial state."""
    layer, memories = _decoder(kind)
    x, _, _, initial = _inputs()
    outputs, alignments = layer(
        x,
        *memories,
        inputs_mask=DECODER_MASK,
        memory_mask=MEMORY_MASK,
        initial_state=initial,
        return_alignments=True,
    )
    want_outputs, want_alignments = _reference(
        layer, x, memories, DECODER_MASK, initial, MEMORY_MASK
    )
    np.testing.assert_allclose(ref.as_float64(outputs), want_outputs, atol=1e-5)
    real = DECODER_MASK[:, :, None]  # shallow: padded steps attend from the carried h
    if kind == "deep":
        real = np.ones_like(real)
    np.testing.assert_allclose(
        ref.as_float64(alignments) * real, want_alignments * real, atol=1e-5
    )
    assert np.all(
        ref.as_float64(alignments)[np.broadcast_to(~MEMORY_MASK[:, None], (B, T, S))]
        == 0
    )


def test_deep_fusion_gradients_match_the_reference(rng):
    """The `O(T)`-memory backward pass: the derivative along a random
    direction of every input and weight, against central differences of
    the float64 reference, through outputs and alignments, with padding.
    Padded decoder steps and encoder positions get no gradient."""
    layer, memories = _decoder("deep")
    x, _, _, initial = _inputs()
    variables = layer.trainable_variables
    names = [v.name for v in variables]
    projections = [rng.normal(size=(B, T, UNITS)), rng.normal(size=(B, T, S))]

    def loss(x, memory, cells, *values):
        (outputs, alignments), _ = layer.stateless_call(
            values,
            [],
            x,
            memory,
            cells,
            inputs_mask=DECODER_MASK,
            memory_mask=MEMORY_MASK,
            initial_state=initial,
            return_alignments=True,
        )
        return ops.sum(outputs * projections[0].astype("float32")) + ops.sum(
            alignments * projections[1].astype("float32")
        )

    arrays = [x, *memories] + [ref.as_float64(v).astype("float32") for v in variables]
    grads = [ref.as_float64(g) for g in testing.input_gradients(loss, arrays)]

    def reference_loss(arrays):
        w = dict(zip(names, arrays[3:], strict=True))
        source = (arrays[1], arrays[2], MEMORY_MASK)
        out = decoder_reference(w, arrays[0], DECODER_MASK, initial, source)
        return sum(np.sum(y * p) for y, p in zip(out, projections, strict=True))

    base = [np.asarray(a, "float64") for a in arrays]
    for i, grad in enumerate(grads):
        direction = rng.normal(size=base[i].shape)
        moved = []
        for step in (1e-6, -1e-6):
            changed = list(base)
            changed[i] = base[i] + step * direction
            moved.append(reference_loss(changed))
        numeric = (moved[0] - moved[1]) / 2e-6
        name = (["x", "memory", "memory_cells"] + names)[i]
        np.testing.assert_allclose(
            np.sum(grad * direction), numeric, rtol=1e-4, atol=1e-6, err_msg=name
        )
    assert np.all(grads[0][~DECODER_MASK] == 0)
    assert np.all(grads[1][~MEMORY_MASK] == 0) and np.all(grads[2][~MEMORY_MASK] == 0)


# Exact (1e-5 on every entry) where the test above checks a direction;
# compiles the differentiated loop: seconds on JAX.
@pytest.mark.slow_on_jax
def test_the_fusion_backward_equals_autodiff_of_the_loop(rng):
    units, att, width, source_att = 3, 2, 4, 3
    shapes = {
        "gate_inputs": (B, T, 4 * units),
        "attention_inputs": (B, T, att),
        "initial_hidden": (B, units),
        "initial_cell": (B, units),
        "source_attention_inputs": (B, T, source_att),
        "source_gate_inputs": (B, T, units),
        "source_hidden": (B, S, width),
        "source_cell": (B, S, units),
        "source_projected": (B, S, source_att),
    }
    weight_shapes = [(units, 4 * units), (units, att), (att,), (units, att)]
    weight_shapes += [(width, source_att), (source_att,), (width, units)]
    arrays = [rng.normal(size=s).astype("float32") for s in shapes.values()]
    arrays += [rng.normal(size=s).astype("float32") for s in weight_shapes]
    masks = {
        "step_mask": DECODER_MASK.astype("float32"),
        "source_mask": MEMORY_MASK.astype("float32"),
    }

    def loss(memory_efficient):
        def fn(*values):
            inputs = dict(zip(shapes, values[: len(shapes)], strict=True))
            inputs.update({k: ops.convert_to_tensor(v) for k, v in masks.items()})
            weights = ka.ops.LSTMNWeights(*values[len(shapes) :])
            hidden, cell, intra, inter = lstmn_fusion_recurrence(
                inputs,
                weights,
                return_attention=True,
                memory_efficient=memory_efficient,
            )
            value = ops.sum(ops.sin(hidden)) + ops.sum(cell**2) + ops.sum(intra**2)
            return value + ops.sum(inter * ops.arange(S, dtype="float32"))

        return fn

    want = testing.input_gradients(loss(False), arrays)
    got = testing.input_gradients(loss(True), arrays)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(
            ref.as_float64(a), ref.as_float64(b), atol=1e-5, rtol=1e-5
        )


@pytest.mark.tf_only
def test_no_loop_accumulates_the_tapes_on_tensorflow():
    """Training memory stays `O(T)`: the gradient's graph pushes nothing
    per iteration (`TensorListPushBack`), as `LSTMN`'s."""
    import tensorflow as tf

    layer, memories = _decoder("deep")
    x = tf.constant(_inputs()[0])

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = tf.reduce_sum(layer(x, *memories, return_alignments=True)[0])
        return tape.gradient(value, [x, *layer.trainable_variables])

    graph = grad.get_concrete_function(x).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    assert "TensorListPushBack" not in {node.op for node in nodes}


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="reads XLA's buffer sizes through JAX"
)
def test_training_memory_grows_linearly_with_the_length():
    """XLA's temporary memory for the gradient of the deep decoder's loop:
    doubling T (S fixed) doubles it, where differentiating the loop would
    keep a copy of the tapes per step (a quadratic growth)."""
    import jax

    def temp_bytes(steps, units=8, source=4):
        shapes = {
            "gate_inputs": (1, steps, 4 * units),
            "attention_inputs": (1, steps, units),
            "initial_hidden": (1, units),
            "initial_cell": (1, units),
            "source_attention_inputs": (1, steps, units),
            "source_gate_inputs": (1, steps, units),
            "source_hidden": (1, source, units),
            "source_cell": (1, source, units),
            "source_projected": (1, source, units),
        }
        weight_shapes = [(units, 4 * units), (units, units), (units,), None]
        weight_shapes += [(units, units), (units,), (units, units)]
        arrays = [np.full(s, 0.1, "float32") for s in shapes.values()]
        arrays += [
            None if s is None else np.full(s, 0.1, "float32") for s in weight_shapes
        ]

        def loss(*values):
            inputs = dict(zip(shapes, values[: len(shapes)], strict=True))
            inputs["step_mask"] = ops.ones((1, steps))
            inputs["source_mask"] = ops.ones((1, source))
            weights = ka.ops.LSTMNWeights(*values[len(shapes) :])
            return ops.sum(lstmn_fusion_recurrence(inputs, weights)[0])

        grad = jax.jit(jax.grad(loss, argnums=tuple(range(len(shapes)))))
        compiled = grad.lower(*arrays).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    ratio = temp_bytes(128) / temp_bytes(64)
    assert ratio < 2.5, ratio


# -- the decoding contract -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_causal_and_padding_never_read(kind, rng):
    """Output t depends on decoder inputs up to t only (by values here; by
    gradients in `tests/test_every_layer.py`'s `CAUSAL_CASES`); garbage at
    padded encoder positions and padded decoder steps changes no real
    output or alignment."""
    layer, memories = _decoder(kind)
    x = _inputs()[0]
    future = x.copy()
    future[:, 2:] = GARBAGE * rng.normal(size=future[:, 2:].shape)
    np.testing.assert_array_equal(
        ref.as_float64(layer(future, *memories))[:, :2],
        ref.as_float64(layer(x, *memories))[:, :2],
    )
    kwargs = {"inputs_mask": DECODER_MASK, "memory_mask": MEMORY_MASK}
    expected = layer(x, *memories, return_alignments=True, **kwargs)
    garbled_x = np.where(DECODER_MASK[..., None], x, GARBAGE * rng.normal(size=x.shape))
    garbled = [
        np.where(MEMORY_MASK[..., None], m, GARBAGE * rng.normal(size=m.shape))
        for m in memories
    ]
    actual = layer(
        garbled_x.astype("float32"),
        *[m.astype("float32") for m in garbled],
        return_alignments=True,
        **kwargs,
    )
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_allclose(
            ref.as_float64(a)[DECODER_MASK], ref.as_float64(b)[DECODER_MASK], atol=1e-6
        )


def _step_function(layer, cache, embedding, readout):
    def step_fn(tokens, state, index):
        x = ops.take(embedding, tokens, axis=0)  # (B, D)
        output, state, alignment = layer.step(x, state, cache)
        return ops.matmul(output, readout), state, alignment

    return step_fn


@pytest.mark.parametrize("kind", KINDS)
def test_step_by_step_decoding_equals_teacher_forcing(kind):
    """`step` over `get_initial_state` gives the full pass's outputs and
    alignments, from an initial state and with encoder padding; a step past
    `max_length` is refused."""
    layer, memories = _decoder(kind)
    x, _, _, initial = _inputs()
    outputs, alignments = layer(
        x, *memories, memory_mask=MEMORY_MASK, initial_state=initial,
        return_alignments=True,
    )  # fmt: skip
    cache = layer.prepare_memory(*memories, memory_mask=MEMORY_MASK)
    state = layer.get_initial_state(B, T, initial)
    for t in range(T):
        output, state, alignment = layer.step(x[:, t], state, cache)
        np.testing.assert_allclose(
            ref.as_float64(output), ref.as_float64(outputs[:, t]), atol=1e-5
        )
        np.testing.assert_allclose(
            ref.as_float64(alignment), ref.as_float64(alignments[:, t]), atol=1e-5
        )
    with pytest.raises(ValueError, match="max_length"):
        layer.step(x[:, 0], state, cache)


def test_a_compiled_step_past_max_length_outputs_nan(jit):
    layer, memories = _decoder("deep")
    cache = layer.prepare_memory(*memories)
    state = layer.get_initial_state(B, 1)
    x = _inputs()[0][:, 0]

    def two_steps(x):
        _, state_1, _ = layer.step(x, state, cache)
        return layer.step(x, state_1, cache)[0]

    assert np.all(np.isnan(ref.as_float64(jit(two_steps)(x))))


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_and_beam_search(kind, rng):
    """Greedy search equals the arg-max loop over `step`; the best beam's
    score is the teacher-forced log-probability of its tokens (so the
    state's rows followed their hypotheses)."""
    layer, memories = _decoder(kind)
    vocab, length, beams = 6, 3, 3
    width = UNITS + (WIDTH if kind == "shallow" else 0)
    embedding = rng.normal(size=(vocab, D)).astype("float32")
    readout = rng.normal(size=(width, vocab)).astype("float32")
    start = np.array([1, 2], "int32")

    @ref.on_jax_compiled
    def searches(memories):
        cache = layer.prepare_memory(*memories, memory_mask=MEMORY_MASK)
        step_fn = _step_function(layer, cache, embedding, readout)
        state = layer.get_initial_state(B, length)
        greedy = greedy_search(step_fn, start, state, length)
        cache = keras.tree.map_structure(lambda a: ops.repeat(a, beams, axis=0), cache)
        step_fn = _step_function(layer, cache, embedding, readout)
        beam = beam_search(
            step_fn, start, state, length, num_beams=beams, length_penalty_alpha=0.0
        )
        return greedy, beam

    (tokens, aux), (beam_tokens, _, scores) = searches(memories)
    cache = layer.prepare_memory(*memories, memory_mask=MEMORY_MASK)
    step_fn = _step_function(layer, cache, embedding, readout)
    state, previous = layer.get_initial_state(B, length), start
    for t in range(length):
        logits, state, alignment = step_fn(previous, state, t)
        previous = np.argmax(ref.as_float64(logits), -1)
        np.testing.assert_array_equal(ref.as_float64(tokens)[:, t], previous)
        np.testing.assert_allclose(
            ref.as_float64(aux)[:, t], ref.as_float64(alignment), atol=1e-6
        )

    tokens = ref.as_float64(beam_tokens).astype("int32")
    inputs = embedding[np.concatenate([start[:, None], tokens[:, :-1]], 1)]
    logits = ref.as_float64(layer(inputs, *memories, memory_mask=MEMORY_MASK)) @ readout
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.take_along_axis(log_probs, tokens[..., None], -1).sum((1, 2))
    np.testing.assert_allclose(ref.as_float64(scores), expected, atol=1e-4)


# -- Keras: training, saving, precision -------------------------------------------------

VOCAB = 7
SOURCE_TOKENS = np.array([[3, 1, 4, 0, 0], [0, 2, 5, 6, 1]], "int32")  # 0: padding
TARGET_TOKENS = np.array([[1, 4, 2, 0], [1, 3, 3, 5]], "int32")


def _seq2seq():
    """An LSTMN encoder and the deep decoder over its tapes, starting from
    its last state, then a readout (the shallow decoder trains compiled in
    `tests/test_implicit_masks.py`)."""
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(VOCAB, D, mask_zero=True)(source)
    encoder = ka.layers.LSTMN(UNITS, return_sequences=True, return_state=True)
    hidden, h, c, cells = encoder(embedded, return_cells=True)
    targets = keras.layers.Embedding(VOCAB, D, mask_zero=True)(target)
    decoder = ka.layers.LSTMNDeepFusionDecoder(ka.layers.LSTMN(UNITS, dropout=0.1))
    outputs = decoder(targets, hidden, cells, initial_state=[h, c])
    return keras.Model([source, target], keras.layers.Dense(VOCAB)(outputs))


def test_seq2seq_compiled_fit_and_keras_round_trip():
    """`fit(jit_compile=True)` with padding on both sides and dropout, then
    `.keras` save/load with identical outputs."""
    model = _seq2seq()
    inputs = [SOURCE_TOKENS, TARGET_TOKENS]
    testing.check_jit_fit(
        model,
        inputs,
        np.roll(TARGET_TOKENS, -1, axis=1),
        epochs=1,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    testing.check_serialization(model, inputs, saved_model=False)


@pytest.mark.parametrize("kind", KINDS)
def test_config_round_trip(kind):
    layer, memories = _decoder(kind)
    testing.check_config_round_trip(layer, [_inputs()[0], *memories])


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_precision_runs_the_recurrence_in_float32(kind):
    layer, memories = _decoder(kind)
    x = _inputs()[0]
    expected = ref.as_float64(layer(x, *memories))
    keras.config.set_dtype_policy("mixed_float16")
    mixed, _ = _make(kind)
    mixed(x, *memories)
    mixed.set_weights(layer.get_weights())
    outputs, alignments = mixed(x, *memories, return_alignments=True)
    assert outputs.dtype == "float16" and alignments.dtype == "float32"
    assert all(w.dtype == "float32" for w in mixed.lstmn.weights)
    np.testing.assert_allclose(ref.as_float64(outputs), expected, atol=3e-3)
