"""LSTMN (Cheng, Dong and Lapata, 2016) against the paper's equations in NumPy.

`lstmn_reference` below is the paper's §3.1 written out one sequence and one
step at a time, in float64, with the layer's own weights; the layer must
match it on outputs, states and attention weights, with and without
padding, backwards, from a given state and without the `W_h~` term. Its
gradients must match finite differences of that reference, and the
`O(T)`-memory backward pass must equal autodiff through the loop. Then
Keras' rules: masks (no leak, by values and by gradients), causality,
`Bidirectional`, stacks, compiled `fit`, save/load, mixed precision.
"""

import tempfile

import keras
import lstmn_reference as ref
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing
from keras_attention.ops import lstmn_recurrence

B, T, D, UNITS = 2, 5, 3, 4
MASK = np.array([[1, 1, 0, 1, 0], [0, 0, 1, 1, 1]], bool)  # a hole, right, left
GARBAGE = 1e3


def lstmn_reference(weights, x, mask=None, initial_state=None, go_backwards=False):
    """The LSTMN of §3.1, float64, sequence by sequence, step by step.

    `weights`: a dict by weight name (the layer's). The tape starts with
    `(h_0, c_0)` (zeros unless given); a masked step keeps the state and
    adds nothing to the tape (Keras' rule). Returns `outputs (B, T, U)`,
    `h (B, U)`, `c (B, U)` and `scores (B, T, T)` (weights over the earlier
    real steps), all in processing order.
    """
    w = {k: np.asarray(v, "float64") for k, v in weights.items()}
    x = np.asarray(x, "float64")
    batch, steps, _ = x.shape
    units = w["recurrent_kernel"].shape[0]
    mask = np.ones((batch, steps), bool) if mask is None else np.asarray(mask, bool)
    if go_backwards:
        x, mask = x[:, ::-1], mask[:, ::-1]
    outputs = np.zeros((batch, steps, units))
    scores = np.zeros((batch, steps, steps))
    last_h, last_c = np.zeros((batch, units)), np.zeros((batch, units))
    for b in range(batch):
        h = np.zeros(units) if initial_state is None else initial_state[0][b]
        c = np.zeros(units) if initial_state is None else initial_state[1][b]
        tape = [(-1, h, c)]  # (step, h_i, c_i); step -1: the initial state
        summary = np.zeros(units)  # h~_0
        for t in range(steps):
            if mask[b, t]:
                query = x[b, t] @ w["attention_input_kernel"]
                if "attention_summary_kernel" in w:
                    query = query + summary @ w["attention_summary_kernel"]
                a = np.array(
                    [
                        w["attention_vector"]
                        @ np.tanh(h_i @ w["attention_memory_kernel"] + query)
                        for _, h_i, _ in tape
                    ]
                )
                s = ref.softmax(a)
                h_read = sum(
                    s_i * h_i for s_i, (_, h_i, _) in zip(s, tape, strict=True)
                )
                c_read = sum(
                    s_i * c_i for s_i, (_, _, c_i) in zip(s, tape, strict=True)
                )
                z = x[b, t] @ w["kernel"] + h_read @ w["recurrent_kernel"]
                z = z + w.get("bias", 0.0)
                gate_i, gate_f, cand, gate_o = np.split(z, 4)
                c = ref.sigmoid(gate_f) * c_read + ref.sigmoid(gate_i) * np.tanh(cand)
                h = ref.sigmoid(gate_o) * np.tanh(c)
                for (step, _, _), s_i in zip(tape[1:], s[1:], strict=True):
                    scores[b, t, step] = s_i
                tape.append((t, h, c))
                summary = h_read
            outputs[b, t] = h
        last_h[b], last_c[b] = h, c
    return outputs, last_h, last_c, scores


def _weights(layer):
    return {w.name: ref.as_float64(w) for w in layer.weights}


def _layer(x, **kwargs):
    kwargs = {"return_sequences": True, "return_state": True, **kwargs}
    layer = ka.layers.LSTMN(UNITS, **kwargs)
    layer(x)
    ref.randomize(layer)
    return layer


@pytest.fixture
def x(rng):
    return rng.normal(size=(B, T, D)).astype("float32")


# -- against the paper ----------------------------------------------------------

VARIANTS = {
    "plain": ({}, {}),
    "masked": ({}, {"mask": MASK}),
    "backwards-masked": ({"go_backwards": True}, {"mask": MASK}),
    "no-summary-attention_units": (
        {"use_summary_in_score": False, "attention_units": 3},
        {"mask": MASK},
    ),
    # Row 1 starts with padding: its outputs there are the given h_0.
    "initial-state-no-bias": (
        {"use_bias": False},
        {"initial_state": True, "mask": MASK},
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_matches_the_numpy_reference(variant, x, rng):
    layer_kwargs, call_kwargs = VARIANTS[variant]
    layer = _layer(x, **layer_kwargs)
    call_kwargs = dict(call_kwargs)
    if call_kwargs.pop("initial_state", False):
        call_kwargs["initial_state"] = [
            rng.normal(size=(B, UNITS)).astype("float32") for _ in range(2)
        ]
    outputs, h, c, scores = layer(x, return_attention_scores=True, **call_kwargs)
    expected = lstmn_reference(
        _weights(layer), x, go_backwards=layer.go_backwards, **call_kwargs
    )
    names = ("outputs", "h", "c", "scores")
    got = (outputs, h, c, scores)
    for name, value, want in zip(names, got, expected, strict=True):
        np.testing.assert_allclose(ref.as_float64(value), want, atol=1e-5, err_msg=name)
    # The last output alone, without states or weights.
    layer.return_sequences, layer.return_state = False, False
    np.testing.assert_allclose(
        ref.as_float64(layer(x, **call_kwargs)), expected[0][:, -1], atol=1e-5
    )


def test_return_cells_is_the_memory_tape(x):
    """`return_cells`: entry t is the reference's `c` after the first t + 1
    steps (carried over at a padded step), backwards too; zeros at padded
    steps with `zero_output_for_mask`."""
    layer = _layer(x, go_backwards=True)
    outputs, h, c, cells = layer(x, mask=MASK, return_cells=True)
    reversed_x, reversed_mask = x[:, ::-1], MASK[:, ::-1]  # processing order
    for t in range(T):
        prefix = lstmn_reference(
            _weights(layer), reversed_x[:, : t + 1], reversed_mask[:, : t + 1]
        )
        np.testing.assert_allclose(ref.as_float64(cells)[:, t], prefix[2], atol=1e-5)
    layer.zero_output_for_mask = True
    zeroed = ref.as_float64(layer(x, mask=MASK, return_cells=True)[-1])
    np.testing.assert_array_equal(zeroed[~reversed_mask], 0.0)
    symbolic = layer(keras.Input((None, D)), return_cells=True)
    assert [tuple(o.shape) for o in symbolic] == [(None, None, UNITS)] + [
        (None, UNITS)
    ] * 2 + [(None, None, UNITS)]


def test_weights_sum_to_one_with_the_initial_state(x):
    """Each real step's weights over the earlier real steps plus the initial
    state form a distribution; step 1 reads the initial state alone."""
    layer = _layer(x)
    _, _, _, scores = layer(x, mask=MASK, return_attention_scores=True)
    scores = ref.as_float64(scores)
    assert np.all(np.triu(scores) == 0)  # earlier steps only
    assert np.all(np.where(MASK[:, None, :], 0.0, scores) == 0)  # real ones only
    initial = 1.0 - scores.sum(-1)
    assert np.all(initial[MASK] > 0) and np.all(initial[MASK] <= 1)
    np.testing.assert_allclose(initial[0, 0], 1.0)  # the first step
    assert np.all(scores[~MASK] == 0)  # padded steps attend to nothing


def test_the_first_step_is_keras_lstms_first_step(x):
    """Step 1 reads `(h_0, c_0)` alone: with the same `kernel`,
    `recurrent_kernel` and `bias`, it is `keras.layers.LSTM`'s first step
    (which checks the gate layout and the initial slot)."""
    layer = _layer(x)
    lstm = keras.layers.LSTM(UNITS, return_sequences=True)
    lstm(x)
    lstm.set_weights(
        [
            ref.as_float64(layer.kernel),
            ref.as_float64(layer.recurrent_kernel),
            ref.as_float64(layer.bias),
        ]
    )
    initial = [np.full((B, UNITS), 0.3, "float32"), np.full((B, UNITS), -0.2, "f4")]
    expected = ref.as_float64(lstm(x[:, :1], initial_state=initial))
    got = ref.as_float64(layer(x[:, :1], initial_state=initial)[0])
    np.testing.assert_allclose(got, expected, atol=1e-6)


# -- gradients --------------------------------------------------------------------


def _projections(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) for shape in shapes]


def test_gradients_match_finite_differences(x):
    """Gradients by the inputs and every weight (the `O(T)`-memory backward
    pass) against central differences of the float64 reference, through
    outputs, states and weights, with padding."""
    mask = MASK
    layer = _layer(x)
    names = [w.name for w in layer.trainable_weights]
    projections = _projections(1, (B, T, UNITS), (B, UNITS), (B, UNITS), (B, T, T))

    def loss(*args):
        values, x = list(args[1:]), args[0]
        out, _ = layer.stateless_call(
            values, [], x, mask=mask, return_attention_scores=True
        )
        return sum(
            ops.sum(y * ops.convert_to_tensor(p.astype("float32")))
            for y, p in zip(out, projections, strict=True)
        )

    weights = [ref.as_float64(w).astype("float32") for w in layer.trainable_weights]
    grads = [ref.as_float64(g) for g in testing.input_gradients(loss, [x, *weights])]

    def reference_loss(x, values):
        outputs = lstmn_reference(dict(zip(names, values, strict=True)), x, mask=mask)
        return sum(np.sum(y * p) for y, p in zip(outputs, projections, strict=True))

    arrays = [x.astype("float64")] + [ref.as_float64(w) for w in weights]
    for i, (array, grad) in enumerate(zip(arrays, grads, strict=True)):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            moved = []
            for step in (1e-6, -1e-6):
                changed = [a.copy() for a in arrays]
                changed[i][index] += step
                moved.append(reference_loss(changed[0], changed[1:]))
            numeric[index] = (moved[0] - moved[1]) / 2e-6
        name = "x" if i == 0 else names[i - 1]
        np.testing.assert_allclose(grad, numeric, atol=2e-4, rtol=1e-3, err_msg=name)
    assert np.all(grads[0][~mask] == 0)  # padded steps' inputs: no gradient


# JAX's backward is checked against finite differences above; this
# comparison compiles the differentiated loop, seconds on JAX.
@pytest.mark.slow_on_jax
def test_the_memory_efficient_backward_equals_autodiff_of_the_loop(rng):
    """Same gradients, by every input and weight, as differentiating the loop
    itself; with padding, `W_h~`, recurrent dropout and the weights returned."""
    units, att = 3, 4
    arrays = [
        rng.normal(size=shape).astype("float32")
        for shape in [(B, T, 4 * units), (B, T, att), (B, units), (B, units)]
        + [(units, 4 * units), (units, att), (att,), (units, att)]
    ]
    dropout = (rng.uniform(size=(B, units)) > 0.3).astype("float32") / 0.7
    projections = [p.astype("float32") for p in _projections(2, (B, T + 1, units))]

    def loss(memory_efficient):
        def fn(gates, attention, h0, c0, kernel, memory, vector, summary):
            inputs = {
                "gate_inputs": gates,
                "attention_inputs": attention,
                "step_mask": ops.convert_to_tensor(MASK.astype("float32")),
                "initial_hidden": h0,
                "initial_cell": c0,
                "recurrent_dropout_mask": ops.convert_to_tensor(dropout),
            }
            weights = ka.ops.LSTMNWeights(kernel, memory, vector, summary)
            hidden, cell, scores = lstmn_recurrence(
                inputs,
                weights,
                return_attention=True,
                memory_efficient=memory_efficient,
            )
            value = ops.sum(ops.sin(hidden) * projections[0]) + ops.sum(cell**2)
            return value + ops.sum(scores * ops.arange(T + 1, dtype="float32"))

        return fn

    # One program each on JAX (eager JAX compiles the loop piece by piece).
    compiled = ref.on_jax_compiled
    want = testing.input_gradients(compiled(loss(False)), arrays)
    got = testing.input_gradients(compiled(loss(True)), arrays)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(
            ref.as_float64(a), ref.as_float64(b), atol=1e-5, rtol=1e-5
        )


def _gradient_temp_bytes(steps, memory_efficient):
    """XLA's temporary memory for the gradient of a sum of the hidden tape."""
    import jax

    units = 8
    shapes = [(1, steps, 4 * units), (1, steps, units), (1, units), (1, units)]
    shapes += [(units, 4 * units), (units, units), (units,)]
    arrays = [np.full(shape, 0.1, "float32") for shape in shapes]
    names = ["gate_inputs", "attention_inputs", "initial_hidden", "initial_cell"]

    def loss(*arrays):
        inputs = dict(zip(names, arrays[:4], strict=True))
        inputs["step_mask"] = ops.ones((1, steps))
        weights = ka.ops.LSTMNWeights(*arrays[4:])
        hidden, _, _ = lstmn_recurrence(
            inputs, weights, memory_efficient=memory_efficient
        )
        return ops.sum(hidden)

    grad = jax.jit(jax.grad(loss, argnums=tuple(range(len(arrays)))))
    return grad.lower(*arrays).compile().memory_analysis().temp_size_in_bytes


_JAX_ONLY = pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="reads XLA's buffer sizes through JAX"
)


@_JAX_ONLY
def test_training_memory_grows_linearly_with_the_length():
    """Doubling T doubles the memory of the backward pass over the final
    tapes."""
    ratio = _gradient_temp_bytes(128, True) / _gradient_temp_bytes(64, True)
    assert ratio < 2.5, ratio


@_JAX_ONLY
@pytest.mark.large
def test_differentiating_the_loop_would_grow_quadratically():
    """What the test above guards against: autodiff through the loop keeps a
    copy of the tapes per step, so doubling T quadruples its memory."""
    ratio = _gradient_temp_bytes(128, False) / _gradient_temp_bytes(64, False)
    assert ratio > 3.0, ratio


@pytest.mark.tf_only
def test_no_loop_accumulates_the_tapes_on_tensorflow():
    """TensorFlow's graph for the gradient: differentiating a `while_loop`
    pushes what each iteration read onto a stack (`TensorListPushBack`);
    the backward pass over the final tapes pushes nothing."""
    import tensorflow as tf

    layer = ka.layers.LSTMN(UNITS)
    x = tf.constant(np.ones((B, T, D), "float32"))
    layer(x)

    def op_types(memory_efficient):
        weights = layer.recurrent_weights()

        @tf.function
        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                inputs = {
                    "gate_inputs": tf.tile(x[..., :1], [1, 1, 4 * UNITS]),
                    "attention_inputs": tf.tile(x[..., :1], [1, 1, UNITS]),
                    "step_mask": tf.ones((B, T)),
                    "initial_hidden": tf.zeros((B, UNITS)),
                    "initial_cell": tf.zeros((B, UNITS)),
                }
                hidden, _, _ = lstmn_recurrence(
                    inputs, weights, memory_efficient=memory_efficient
                )
                value = tf.reduce_sum(hidden)
            return tape.gradient(value, x)

        graph = grad.get_concrete_function(x).graph.as_graph_def()
        functions = [node for f in graph.library.function for node in f.node_def]
        return {node.op for node in list(graph.node) + functions}

    assert "TensorListPushBack" in op_types(False)  # the check can fail
    assert "TensorListPushBack" not in op_types(True)


# -- masks, causality ----------------------------------------------------------------


def test_padding_never_leaks(x, rng):
    """Garbage at padded steps changes no output, state or weight, and gets
    no gradient; padding anywhere is the same as running the real steps
    alone."""
    layer = _layer(x)
    garbled = np.where(MASK[:, :, None], x, GARBAGE * rng.normal(size=x.shape))
    expected = layer(x, mask=MASK, return_attention_scores=True)
    actual = layer(garbled.astype("float32"), mask=MASK, return_attention_scores=True)
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_allclose(ref.as_float64(a), ref.as_float64(b), atol=1e-6)
    for row in range(B):  # the real steps of one row, alone
        real = x[row : row + 1, MASK[row]]
        alone = ref.as_float64(layer(real)[0])[0]
        np.testing.assert_allclose(
            ref.as_float64(expected[0])[row, MASK[row]], alone, atol=1e-6
        )
    grad = testing.input_gradients(
        lambda x: ops.sum(ops.sin(layer(x, mask=MASK)[0])), [x]
    )[0]
    assert np.all(ref.as_float64(grad)[~MASK] == 0)
    assert np.all(np.abs(ref.as_float64(grad)[MASK]).sum(-1) > 0)


def test_masked_steps_carry_the_state_or_output_zeros(x):
    layer = _layer(x)
    outputs = ref.as_float64(layer(x, mask=MASK)[0])
    np.testing.assert_array_equal(outputs[0, 2], outputs[0, 1])  # carried over
    np.testing.assert_array_equal(outputs[1, :2], 0.0)  # before any real step
    layer.zero_output_for_mask = True
    zeroed = ref.as_float64(layer(x, mask=MASK)[0])
    np.testing.assert_array_equal(zeroed[~MASK], 0.0)
    np.testing.assert_array_equal(zeroed[MASK], outputs[MASK])


def test_causal(x, rng):
    """Output t depends on inputs up to t only: by gradients and by values."""
    layer = _layer(x, return_state=False)
    testing.check_causality(layer, x)
    changed = x.copy()
    changed[:, 3:] = rng.normal(size=changed[:, 3:].shape)
    np.testing.assert_array_equal(
        ref.as_float64(layer(changed))[:, :3], ref.as_float64(layer(x))[:, :3]
    )


# -- Keras' RNN conventions ---------------------------------------------------------


def test_bidirectional_concatenates_both_directions(x):
    """`keras.layers.Bidirectional` runs a forward and a `go_backwards`
    copy, zeroes masked steps and flips the backward outputs back."""
    bidirectional = keras.layers.Bidirectional(
        ka.layers.LSTMN(UNITS, return_sequences=True)
    )
    bidirectional(x)
    ref.randomize(bidirectional)
    got = ref.as_float64(bidirectional(x, mask=MASK))
    forward = lstmn_reference(_weights(bidirectional.forward_layer), x, MASK)[0]
    backward = lstmn_reference(
        _weights(bidirectional.backward_layer), x, MASK, go_backwards=True
    )[0][:, ::-1]
    expected = np.concatenate([forward, backward], -1) * MASK[:, :, None]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    outputs = keras.layers.Bidirectional(ka.layers.LSTMN(UNITS, return_state=True))(x)
    assert [tuple(o.shape) for o in outputs] == [(B, 2 * UNITS)] + [(B, UNITS)] * 4


def test_a_stack_passes_the_mask_on(x):
    """Embedding(mask_zero) -> LSTMN(return_sequences) -> LSTMN: the second
    layer gets the first's mask (`compute_mask`)."""
    tokens = np.array([[3, 1, 0, 2, 0], [0, 0, 4, 1, 2]], "int32")
    embedding = keras.layers.Embedding(5, D, mask_zero=True)
    first = ka.layers.LSTMN(UNITS, return_sequences=True)
    second = ka.layers.LSTMN(UNITS)
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, second(first(embedding(inputs))))
    model(tokens)
    ref.randomize(first, seed=1)
    ref.randomize(second, seed=2)
    embedded = ref.as_float64(embedding(tokens))
    hidden = lstmn_reference(_weights(first), embedded, tokens > 0)[0]
    expected = lstmn_reference(_weights(second), hidden, tokens > 0)[1]
    np.testing.assert_allclose(ref.as_float64(model(tokens)), expected, atol=1e-5)


def test_symbolic_shapes_and_dtypes():
    layer = ka.layers.LSTMN(UNITS, return_state=True)
    outputs = layer(keras.Input((None, D)), return_attention_scores=True)
    assert [tuple(o.shape) for o in outputs] == [
        (None, UNITS),
        (None, UNITS),
        (None, UNITS),
        (None, None, None),
    ]
    assert [o.dtype for o in outputs] == ["float32"] * 4
    mask = keras.layers.Masking()(keras.Input((6, D)))
    sequences = ka.layers.LSTMN(UNITS, return_sequences=True)(mask)
    assert tuple(sequences.shape) == (None, 6, UNITS)


def test_mixed_precision_runs_the_recurrence_in_float32(x):
    layer = _layer(x)
    expected = ref.as_float64(layer(x)[0])
    keras.config.set_dtype_policy("mixed_float16")
    mixed = ka.layers.LSTMN(UNITS, return_sequences=True, return_state=True)
    mixed(x)
    mixed.set_weights(layer.get_weights())
    outputs, _, _, scores = mixed(x, return_attention_scores=True)
    assert outputs.dtype == "float16" and scores.dtype == "float32"
    assert all(w.dtype == "float32" for w in mixed.weights)
    np.testing.assert_allclose(ref.as_float64(outputs), expected, atol=2e-3)


def test_dropout_only_while_training(x):
    layer = _layer(x, dropout=0.5, recurrent_dropout=0.5, seed=3)
    plain = ka.layers.LSTMN(UNITS, return_sequences=True, return_state=True)
    plain(x)
    plain.set_weights(layer.get_weights())
    np.testing.assert_array_equal(
        ref.as_float64(layer(x)[0]), ref.as_float64(plain(x)[0])
    )
    trained = ref.as_float64(layer(x, training=True)[0])
    assert not np.allclose(trained, ref.as_float64(plain(x)[0]), atol=1e-3)


# -- compiled training, unknown lengths, saving ---------------------------------------


TOKENS = np.array([[3, 1, 0, 2, 0], [0, 0, 4, 1, 2]], "int32")  # 0: padding


def _bidirectional_model():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(6, D, mask_zero=True)(tokens)
    summary = keras.layers.Bidirectional(
        ka.layers.LSTMN(UNITS, dropout=0.1, recurrent_dropout=0.1, seed=1)
    )(embedded)
    return keras.Model(tokens, keras.layers.Dense(1)(summary))


@pytest.mark.large  # the single layer trains compiled in test_implicit_masks.py
def test_bidirectional_compiled_fit_and_predict():
    """`fit(jit_compile=True)` with padding and dropout, then a compiled
    `predict` on another length equal to the eager call."""
    model = _bidirectional_model()
    testing.check_jit_fit(model, TOKENS, np.ones((B, 1), "float32"), epochs=1)
    longer = np.concatenate([TOKENS, TOKENS[:, ::-1]], axis=1)  # (B, 2 T)
    np.testing.assert_allclose(
        ref.as_float64(model.predict(longer, verbose=0)),
        ref.as_float64(model(longer)),
        atol=1e-5,
    )


def test_bidirectional_keras_round_trip():
    model = _bidirectional_model()
    testing.check_serialization(model, TOKENS, saved_model=False)


@pytest.mark.tf_only
def test_saved_model_serves_any_length(x):
    """Exported with an unknown length, the SavedModel serves two lengths
    with the same numbers as the layer."""
    import tensorflow as tf

    inputs = keras.Input((None, D))
    model = keras.Model(inputs, _layer(x, return_state=False)(inputs))
    with tempfile.TemporaryDirectory() as tmp:
        model.export(tmp, verbose=False)
        reloaded = tf.saved_model.load(tmp)  # keep: owns the variables
        for steps in (2, T + 3):
            longer = np.concatenate([x, x], axis=1)[:, :steps]
            np.testing.assert_allclose(
                ref.as_float64(reloaded.serve(longer)),
                ref.as_float64(model(longer)),
                atol=1e-5,
            )


@pytest.mark.tf_only
def test_graph_mode_gradient_equals_the_eager_one():
    """In a plain TensorFlow graph (`tf.function`, no XLA) the backward loop
    runs compiled by XLA, out of Grappler's reach: the same gradients as
    eagerly, with padding."""
    import tensorflow as tf

    layer = ka.layers.LSTMN(UNITS)
    x = tf.constant(np.random.default_rng(3).normal(size=(B, T, D)), "float32")
    mask = tf.constant([[True] * T, [True] * (T - 2) + [False] * 2])
    layer(x, mask=mask)

    def gradients(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = tf.reduce_sum(layer(x, mask=mask) ** 2)
        return tape.gradient(value, [x] + layer.trainable_weights)

    for eager, graph in zip(gradients(x), tf.function(gradients)(x), strict=True):
        np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)


@pytest.mark.large
@pytest.mark.tf_only
def test_graph_mode_fit_of_a_long_batch():
    """`fit` without XLA on 64 sequences of 256 steps, 100 units: Grappler's
    rewrite of the backward loop failed there with an `AlreadyExistsError`
    (TensorFlow issues 23780 and 38906) before the loop was compiled by XLA
    in plain graphs."""
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(1000, 16, mask_zero=True)(tokens)
    outputs = keras.layers.Dense(2)(ka.layers.LSTMN(100)(x))
    model = keras.Model(tokens, outputs)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", loss, jit_compile=False)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 1000, (64, 256))
    ids[:, 200:] = 0
    for _ in range(2):
        value = model.train_on_batch(ids, rng.integers(0, 2, 64))
        assert np.isfinite(value)
