import itertools

import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import beam_search

V, PAD, END = 5, 0, 2


def _table_step(table):
    """A step function whose log-probs depend on (previous token, position)."""
    table = ops.convert_to_tensor(np.log(table).astype("float32"))  # (L, V, V)

    def step_fn(tokens, state, index):
        logits = ops.take(table[index], tokens, axis=0)  # (B, V)
        counter = state + 1
        aux = ops.cast(tokens, "float32")[:, None] * ops.ones((1, 3))
        return logits, counter, aux

    return step_fn


def _random_table(rng, length):
    table = rng.uniform(0.05, 1.0, size=(length, V, V))
    table[..., PAD] = 1e-9  # never generate padding
    return table / table.sum(-1, keepdims=True)


def _brute_force(table, start, length, alpha):
    """Best length-normalized score over every sequence (end => stop)."""
    best, best_seq = -np.inf, None
    for seq in itertools.product(range(1, V), repeat=length):
        logp, prev, n = 0.0, start, 0
        for t, tok in enumerate(seq):
            logp += np.log(table[t, prev, tok])
            prev, n = tok, n + 1
            if tok == END:
                break
        if END in seq and any(s for s in seq[seq.index(END) + 1 :] if s != 1):
            # Tokens after the end are padding in beam search; count each
            # truncated sequence once, through its canonical filler.
            continue
        score = logp / ((5 + n) / 6) ** alpha
        if score > best + 1e-9:
            best = score
            best_seq = list(seq[:n]) + [PAD] * (length - n)
    return best, best_seq


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_equals_exhaustive_search(rng, alpha):
    length = 3
    table = _random_table(rng, length)
    start = np.array([1, 3, 4])
    tokens, aux, scores = beam_search(
        _table_step(table),
        start,
        ops.zeros((3,)),
        length,
        end_token=END,
        pad_token=PAD,
        num_beams=V * V,
        length_penalty_alpha=alpha,
    )
    for b, s in enumerate(start):
        best, seq = _brute_force(table, s, length, alpha)
        assert ops.convert_to_numpy(tokens)[b].tolist() == seq
        np.testing.assert_allclose(ops.convert_to_numpy(scores)[b], best, rtol=1e-5)
    # aux follows the chosen hypothesis: it records the previous token.
    aux = ops.convert_to_numpy(aux)
    assert aux.shape == (3, length, 3)
    np.testing.assert_array_equal(aux[:, 0, 0], start)


def test_one_beam_is_greedy(rng):
    table = _random_table(rng, 4)
    tokens, _, scores = beam_search(
        _table_step(table), np.array([1, 3]), ops.zeros((2,)), 4, END, num_beams=1
    )
    for b, prev in enumerate([1, 3]):
        expected = []
        for t in range(4):
            prev = int(np.argmax(table[t, prev]))
            expected.append(prev)
            if prev == END:
                break
        expected += [PAD] * (4 - len(expected))
        assert ops.convert_to_numpy(tokens)[b].tolist() == expected


def test_beam_finds_what_greedy_misses():
    # Greedy takes 3 (p=.6) then faces a flat distribution; 4 (p=.4) leads
    # to a sure end: beam search must prefer 4, END.
    table = np.full((2, V, V), 1e-9)
    table[0, 1] = [1e-9, 1e-9, 1e-9, 0.6, 0.4]
    table[1, 3] = [1e-9, 1 / 3, 1 / 3, 1 / 3, 1e-9]
    table[1, 4] = [1e-9, 1e-9, 1.0, 1e-9, 1e-9]
    step = _table_step(table)
    greedy, _, _ = beam_search(
        step, np.array([1]), ops.zeros((1,)), 2, END, num_beams=1
    )
    beam, _, _ = beam_search(step, np.array([1]), ops.zeros((1,)), 2, END, num_beams=2)
    assert ops.convert_to_numpy(greedy)[0, 0] == 3
    assert ops.convert_to_numpy(beam)[0].tolist() == [4, END]


def test_length_penalty_favours_longer_hypotheses():
    # Ending now costs log(.5); continuing costs log(.45) + log(1) then ends.
    table = np.full((3, V, V), 1e-9)
    table[0, 1] = [1e-9, 1e-9, 0.5, 0.45, 0.05]
    table[1, 3] = [1e-9, 1e-9, 0.95, 1e-9, 0.05]
    table[2, :, END] = 1.0
    step = _table_step(table)

    def best(alpha):
        tokens, _, _ = beam_search(
            step,
            np.array([1]),
            ops.zeros((1,)),
            3,
            END,
            num_beams=3,
            length_penalty_alpha=alpha,
        )
        return ops.convert_to_numpy(tokens)[0].tolist()

    assert best(0.0) == [END, PAD, PAD]
    assert best(3.0) == [3, END, PAD]


def test_all_beams_sorted_and_compiled_once(rng, jit):
    table = _random_table(rng, 4)
    traces = []

    @jit
    def run(start):
        traces.append(1)
        return beam_search(
            _table_step(table),
            start,
            ops.zeros((2,)),
            4,
            END,
            num_beams=3,
            return_all_beams=True,
        )

    tokens, aux, scores = run(np.array([1, 3], "int32"))
    run(np.array([4, 3], "int32"))
    assert len(traces) == 1
    assert tuple(tokens.shape) == (2, 3, 4) and tuple(aux.shape) == (2, 3, 4, 3)
    scores = np.asarray(scores)
    assert (np.diff(scores, axis=1) <= 1e-6).all()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(max_length=0), "max_length"),
        (dict(max_length=3, num_beams=0), "num_beams"),
        (dict(max_length=3, length_penalty_alpha=-1.0), "length_penalty_alpha"),
    ],
)
def test_bad_arguments(kwargs, name, rng):
    with pytest.raises(ValueError, match=f"`{name}`"):
        beam_search(_table_step(_random_table(rng, 3)), np.array([1]), (), **kwargs)


@pytest.mark.tf_only  # jax.jit traces concrete shapes: no unknown dimension
def test_aux_with_a_dimension_unknown_when_traced():
    # E.g. attention over a source whose length is only known at run time.
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def decode(memory):
        def step_fn(tokens, state, index):
            rows = ops.shape(tokens)[0]  # B * num_beams
            aux = ops.ones((rows, ops.shape(memory)[1])) * ops.cast(
                index + 1, "float32"
            )
            return 3.0 * ops.one_hot(tokens + 1, 10), state, aux

        start = ops.zeros(ops.shape(memory)[:1], "int32")
        tokens, aux, _ = beam_search(step_fn, start, (), max_length=3, num_beams=2)
        return tokens, aux

    tokens, aux = decode(np.zeros((2, 4), "float32"))
    np.testing.assert_array_equal(tokens, [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(
        aux, np.broadcast_to([[1.0], [2.0], [3.0]], (2, 3, 4))
    )
