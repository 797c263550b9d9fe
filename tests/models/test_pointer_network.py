import itertools

import keras
import numpy as np
import pytest

import keras_attention as ka

VARIANTS = {
    "lstm": {},
    "gru_bidirectional_glimpse": {
        "cell": "gru",
        "bidirectional": True,
        "glimpse": True,
    },
}


def _model(x, **kwargs):
    model = ka.models.PointerNetwork(units=8, **kwargs)
    model((x, np.zeros(x.shape[:2], "int32")))
    return model


def _inputs(rng, batch=3, length=5, features=2):
    return rng.normal(size=(batch, length, features)).astype("float32")


def _allowed_reference(pointers, num_positions, end_position=None):
    """Independent loop: which positions step t may point to."""
    batch, steps = pointers.shape
    allowed = np.ones((batch, steps, num_positions), bool)
    for b in range(batch):
        for t in range(steps):
            earlier = set(pointers[b, :t].tolist())
            if end_position is not None and end_position in earlier:
                allowed[b, t] = np.arange(num_positions) == end_position
            else:
                allowed[b, t, list(earlier)] = False
    return allowed


def _gathered(log_p, pointers):
    return np.take_along_axis(np.array(log_p), pointers[..., None], axis=-1)[..., 0]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_probabilities_sum_to_one_over_allowed_positions(rng, variant):
    x = _inputs(rng)
    pointers = np.array([rng.permutation(5) for _ in range(3)])
    model = _model(x, **VARIANTS[variant])
    probs = np.exp(np.array(model((x, pointers))))
    allowed = _allowed_reference(pointers, 5)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert np.all(probs[~allowed] == 0.0)
    assert np.all(probs[allowed] > 0.0)


def test_teacher_forcing_is_causal(rng):
    """Step t's distribution depends on the pointers before t only."""
    x = _inputs(rng)
    a = np.array([[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]])
    b = np.array([[0, 1, 4, 2, 3], [4, 3, 0, 2, 1], [2, 0, 1, 3, 4]])  # same a[:, :2]
    model = _model(x)
    log_a, log_b = np.array(model((x, a))), np.array(model((x, b)))
    np.testing.assert_allclose(log_a[:, :3], log_b[:, :3], rtol=1e-6, atol=1e-6)
    assert not np.allclose(log_a[:, 3:], log_b[:, 3:])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("beam_width", [1, 3])
def test_decoding_equals_teacher_forcing_and_never_repeats(rng, variant, beam_width):
    x = _inputs(rng)
    model = _model(x, **VARIANTS[variant])
    pointers, scores = model.decode(x, beam_width=beam_width)
    pointers = np.array(pointers)
    np.testing.assert_array_equal(np.sort(pointers, axis=1), np.tile(range(5), (3, 1)))
    # The step-by-step scores equal the one-pass teacher-forced log-probs.
    log_p = np.array(model((x, pointers)))
    np.testing.assert_allclose(
        _gathered(log_p, pointers).sum(-1), np.array(scores), rtol=1e-5, atol=1e-5
    )
    if beam_width == 1:  # greedy: every step took the arg-max
        np.testing.assert_array_equal(log_p.argmax(-1), pointers)


def test_beam_search_finds_best_permutation_of_three(rng):
    """With T=3 and 3 beams only the last step prunes, and it has one option."""
    x = _inputs(rng, batch=4, length=3)
    model = _model(x, glimpse=True)
    perms = np.array(list(itertools.permutations(range(3))))  # (6, 3)
    xs = np.repeat(x, len(perms), axis=0)
    all_scores = _gathered(model((xs, np.tile(perms, (4, 1)))), np.tile(perms, (4, 1)))
    all_scores = all_scores.sum(-1).reshape(4, len(perms))
    pointers, scores = model.decode(x, beam_width=3)
    np.testing.assert_array_equal(np.array(pointers), perms[all_scores.argmax(-1)])
    np.testing.assert_allclose(np.array(scores), all_scores.max(-1), rtol=1e-5)


@pytest.mark.parametrize("beam_width", [1, 2])
def test_end_position_repeats_only_after_the_end(rng, beam_width):
    x = _inputs(rng, batch=8, length=6)
    model = _model(x, end_position=0)
    targets = np.array([[3, 1, 0, 0, 0, 0]] * 8)
    log_p = np.array(model((x, targets)))
    allowed = _allowed_reference(targets, 6, end_position=0)
    probs = np.exp(log_p)
    assert np.all(probs[~allowed] == 0.0)
    np.testing.assert_allclose(log_p[:, 3:, 0], 0.0, atol=1e-6)  # finished
    pointers, scores = model.decode(x, beam_width=beam_width)
    for row in np.array(pointers):
        ended = np.flatnonzero(row == 0)
        body = row[: ended[0]] if len(ended) else row
        assert len(set(body.tolist())) == len(body)
        if len(ended):
            assert np.all(row[ended[0] :] == 0)
    log_p = np.array(model((x, np.array(pointers))))
    np.testing.assert_allclose(
        _gathered(log_p, np.array(pointers)).sum(-1), scores, rtol=1e-5, atol=1e-5
    )


def test_keras_round_trip_gives_identical_outputs(rng, tmp_path):
    x = _inputs(rng)
    pointers = np.array([rng.permutation(5) for _ in range(3)])
    model = _model(x, cell="gru", bidirectional=True, glimpse=True, end_position=4)
    path = str(tmp_path / "ptr.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, ka.models.PointerNetwork)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(
        np.array(loaded((x, pointers))), np.array(model((x, pointers)))
    )
    for width in (1, 2):
        expected, got = model.decode(x, width), loaded.decode(x, width)
        np.testing.assert_array_equal(np.array(got[0]), np.array(expected[0]))
        np.testing.assert_array_equal(np.array(got[1]), np.array(expected[1]))


def test_jit_compiled_fit(rng):
    x = rng.random((32, 4, 1)).astype("float32")
    y = np.argsort(x[..., 0], axis=1)
    model = ka.models.PointerNetwork(units=8)
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    history = model.fit(
        {"inputs": x, "pointers": y}, y, batch_size=16, epochs=2, verbose=0
    )
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("beam_width", [1, 2])
def test_jit_compiled_decode_equals_eager(rng, beam_width, jit):
    x = _inputs(rng, batch=4, length=4)
    model = _model(x, glimpse=True)
    compiled = jit(lambda x: model.decode(x, beam_width))
    got, eager = compiled(x), model.decode(x, beam_width)
    np.testing.assert_array_equal(np.array(got[0]), np.array(eager[0]))
    np.testing.assert_allclose(np.array(got[1]), np.array(eager[1]), rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"units": 0}, "units"),
        ({"cell": "rnn"}, "cell"),
        ({"units": 7, "bidirectional": True}, "units"),
        ({"end_position": -1}, "end_position"),
        ({"attention_units": 0}, "attention_units"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.models.PointerNetwork(**kwargs)


def test_bad_beam_width(rng):
    x = _inputs(rng, length=3)
    model = _model(x)
    with pytest.raises(ValueError, match="beam_width"):
        model.decode(x, beam_width=4)
