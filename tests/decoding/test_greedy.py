import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.decoding import greedy_search

B, S, V, UNITS, MAX_LEN = 3, 6, 9, 8, 7


def _decoder_step_fn(rng, style):
    """A random seq2seq decoder: `(encode, step_fn factory)`."""
    embedding = keras.layers.Embedding(V, 4)
    attention = (
        ka.layers.BahdanauAttention(5)
        if style == "bahdanau"
        else ka.layers.LuongAttention("general")
    )
    decoder = ka.layers.AttentionRNNDecoder(
        ka.layers.AttentionRNNCell(keras.layers.GRUCell(UNITS), attention, style=style)
    )
    readout = keras.layers.Dense(
        V, kernel_initializer=keras.initializers.RandomNormal(0, 2)
    )
    memory = rng.normal(size=(B, S, 5)).astype("float32")
    mask = np.ones((B, S), bool)
    mask[0, 3:] = False
    decoder(embedding(np.zeros((B, 1), "int32")), memory)  # build

    def step_fn(tokens, state, index):
        cache = decoder.prepare_memory(memory, mask)
        output, state, alignment = decoder.step(embedding(tokens), state, cache)
        return readout(output), state, alignment

    state = decoder.get_initial_state(B)
    step_fn(np.zeros(B, "int32"), state, 0)  # build the readout outside any trace
    return step_fn, state


def python_greedy(step_fn, start, state, max_length, end_token=None):
    tokens, aligns, finished = start, [], np.zeros(len(start), bool)
    out = []
    for i in range(max_length):
        logits, state, align = step_fn(tokens, state, i)
        tokens = np.argmax(keras.ops.convert_to_numpy(logits), -1).astype("int32")
        tokens = np.where(finished, 0, tokens)
        align = np.where(finished[:, None], 0, keras.ops.convert_to_numpy(align))
        out.append(tokens)
        aligns.append(align)
        if end_token is not None:
            finished |= tokens == end_token
    return np.stack(out, 1), np.stack(aligns, 1)


@pytest.mark.parametrize("style, end_token", [("bahdanau", None), ("luong", 2)])
def test_jit_greedy_equals_python_loop(style, end_token, rng, jit):
    step_fn, state = _decoder_step_fn(rng, style)
    start = np.array([1, 1, 1], "int32")

    @jit
    def decode(start, state):
        return greedy_search(step_fn, start, state, MAX_LEN, end_token=end_token)

    tokens, alignments = decode(start, state)
    want_tokens, want_align = python_greedy(step_fn, start, state, MAX_LEN, end_token)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_allclose(alignments, want_align, atol=1e-5)
    assert alignments.shape == (B, MAX_LEN, S)
    np.testing.assert_array_equal(np.asarray(alignments)[0, :, 3:], 0.0)


def _counting_step_fn(tokens, state, index):
    """Predicts `tokens + 1`; aux is the step index, state counts steps."""
    logits = keras.ops.one_hot(tokens + 1, 10) * 5.0
    aux = {"index": keras.ops.full(keras.ops.shape(tokens), index + 100)}
    return logits, state + 1, aux


def test_end_token_pads_and_zeroes_aux():
    start = np.array([0, 5, 7], "int32")
    tokens, aux = greedy_search(
        _counting_step_fn, start, np.zeros(3), max_length=5, end_token=8, pad_token=-1
    )
    np.testing.assert_array_equal(
        tokens,
        [[1, 2, 3, 4, 5], [6, 7, 8, -1, -1], [8, -1, -1, -1, -1]],
    )
    np.testing.assert_array_equal(
        aux["index"],
        [[100, 101, 102, 103, 104], [100, 101, 102, 0, 0], [100, 0, 0, 0, 0]],
    )


def test_max_length_one_and_no_aux():
    def step_fn(tokens, state, index):
        return keras.ops.one_hot(tokens + 2, 10), state, None

    tokens, aux = greedy_search(step_fn, np.array([1, 3]), (), max_length=1)
    np.testing.assert_array_equal(tokens, [[3], [5]])
    assert aux is None


@pytest.mark.parametrize("max_length", [0, -1, 2.5, None])
def test_bad_max_length(max_length):
    with pytest.raises(ValueError, match="`max_length` must be a positive integer"):
        greedy_search(_counting_step_fn, np.array([1]), 0, max_length=max_length)


def test_bad_start_tokens():
    with pytest.raises(ValueError, match="`start_tokens` must have rank 1"):
        greedy_search(_counting_step_fn, np.array([[1]]), 0, max_length=2)


@pytest.mark.tf_only  # jax.jit traces concrete shapes: no unknown dimension
def test_aux_with_a_dimension_unknown_when_traced():
    # E.g. attention over a source whose length is only known at run time.
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def decode(memory):
        def step_fn(tokens, state, index):
            aux = memory * keras.ops.cast(index + 1, "float32")  # (B, S)
            return keras.ops.one_hot(tokens + 1, 10), state, aux

        start = keras.ops.zeros(keras.ops.shape(memory)[:1], "int32")
        return greedy_search(step_fn, start, (), max_length=3)

    memory = np.arange(8, dtype="float32").reshape(2, 4)
    tokens, aux = decode(memory)
    np.testing.assert_array_equal(tokens, [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_allclose(aux, memory[:, None] * np.array([1, 2, 3])[:, None])
