import keras
import numpy as np
import pytest
import score_reference as ref
from keras import ops

from keras_attention import scores

B, T, S, D = 2, 3, 5, 4


@pytest.fixture
def qk(rng):
    query = rng.normal(size=(B, T, D)).astype("float32")
    key = rng.normal(size=(B, S, D)).astype("float32")
    return query, key


def _w(variable):
    return ops.convert_to_numpy(variable).astype("float64")


def _run(score, query, key):
    out = ops.convert_to_numpy(score(query, key))
    assert out.shape == (query.shape[0], query.shape[1], key.shape[1])
    assert out.dtype == np.float32
    return out


@pytest.mark.parametrize("case", ref.cases(), ids=ref.case_id)
def test_every_score_matches_its_numpy_reference(rng, case):
    """Every entry of `ALL_SCORES` (and each class's options) computes the
    formula, with every weight moved off its initial value; the scores that
    allow it get a query and a key of different widths."""
    name, options = case
    key_width = D if ref.needs_same_width(name) else D + 2
    query = rng.normal(size=(B, T, D)).astype("float32")
    key = rng.normal(size=(B, S, key_width)).astype("float32")
    score = ref.make(name, **options)
    score(query, key)
    ref.randomize(score, rng)
    out = _run(score, query, key)
    np.testing.assert_allclose(out, ref.REFERENCES[name](score, query, key), atol=1e-5)


def test_every_score_has_a_numpy_reference():
    """A score added to `ALL_SCORES` needs its formula in
    `tests/score_reference.py`, which every score test runs against."""
    assert set(ref.REFERENCES) == set(scores.ALL_SCORES)
    for name, cls in scores.ALL_SCORES.items():
        assert type(ref.make(name)) is cls


def test_general_kernel_is_the_transpose_of_w(rng):
    query = rng.normal(size=(B, T, 6)).astype("float32")
    key = rng.normal(size=(B, S, 4)).astype("float32")
    score = scores.get("general")
    score(query, key)
    assert _w(score.kernel).shape == (6, 4)  # (Dq, Dk): W^T


def test_additive_units_default_to_key_width(qk):
    query, key = qk
    score = scores.get("concat")
    score(query, key)
    assert score.v.shape == (D,)


def test_additive_cached_key_projection_equals_call(qk):
    query, key = qk
    score = scores.Additive(units=3)
    full = _run(score, query, key)
    cached = score.score_projected(query, score.project_key(key))
    np.testing.assert_allclose(ops.convert_to_numpy(cached), full, atol=1e-6)


def test_cosine_is_bounded_by_beta_and_learns_only_beta(qk):
    query, key = qk
    out = _run(scores.Cosine(beta=3.0), query, key)
    assert np.all(np.abs(out) <= 3.0 + 1e-5)
    assert not scores.Cosine(beta=3.0).trainable_weights
    score = scores.Cosine(beta=2.0, trainable_beta=True)
    score(query, key)
    assert [w.name for w in score.trainable_weights] == ["beta"]


def test_cosine_zero_vector_is_finite(qk):
    query, key = qk
    key = key.copy()
    key[0, 1] = 0.0
    out = _run(scores.Cosine(), query, key)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0, :, 1], 0.0)


def test_location_ignores_key_contents(qk, rng):
    query, key = qk
    score = scores.Location(max_length=8)
    out = _run(score, query, key)
    other_key = rng.normal(size=key.shape).astype("float32")
    np.testing.assert_array_equal(_run(score, query, other_key), out)


def test_location_with_too_many_keys_raises(qk, rng):
    query, _ = qk
    key = rng.normal(size=(B, 9, D)).astype("float32")
    with pytest.raises(ValueError, match=r"key length 9 > max_length=8"):
        scores.Location(max_length=8)(query, key)
    score = scores.Location(max_length=8)
    score(query, key[:, :8])
    with pytest.raises(ValueError, match=r"max_length=8"):
        score(query, key)


def _location_attention(max_length=4):
    """`ScoredAttention` with a `Location` score, built on 3 keys."""
    import keras_attention as ka

    layer = ka.layers.ScoredAttention(score=scores.Location(max_length=max_length))
    layer(np.ones((B, T, D), "float32"), np.ones((B, 3, D), "float32"))
    return layer


def test_location_functional_model_with_unknown_key_length(rng):
    """Issue 12, item 6.2: a `None` key length is checked once it is known."""
    layer = _location_attention()
    query, value = keras.Input((T, D)), keras.Input((None, D))
    model = keras.Model([query, value], layer(query, value))
    q = rng.normal(size=(B, T, D)).astype("float32")
    for length in (2, 4):
        v = rng.normal(size=(B, length, D)).astype("float32")
        np.testing.assert_allclose(
            model.predict([q, v], verbose=0), layer(q, v), atol=1e-6
        )
    v = rng.normal(size=(B, 6, D)).astype("float32")
    # `predict` retraces for a new length; on TensorFlow the second retrace
    # relaxes the length to `None` (`reduce_retracing`), so the check may
    # run at trace time (ValueError) or at run time (the graph's assertion).
    errors = (ValueError,)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        errors += (tf.errors.InvalidArgumentError,)
    with pytest.raises(errors, match=r"key length\W*6\W*> max_length=4"):
        model.predict([q, v], verbose=0)


@pytest.mark.tf_only
def test_location_key_length_known_only_at_run_time(rng):
    """A TensorFlow graph traced with an unknown key length: the scores of a
    valid length are the static ones; a longer one fails at run time with a
    message naming `max_length` and the length (not "Matrix
    size-incompatible"), or gives NaN under XLA, which drops assertions."""
    import tensorflow as tf

    layer = _location_attention()
    q = rng.normal(size=(B, T, D)).astype("float32")
    signature = [tf.TensorSpec((None, T, D)), tf.TensorSpec((None, None, D))]
    for jit_compile in (False, True):
        attend = tf.function(
            lambda query, value: layer(query, value),
            input_signature=signature,
            jit_compile=jit_compile,
        )
        for length in (1, 4):
            v = rng.normal(size=(B, length, D)).astype("float32")
            np.testing.assert_allclose(attend(q, v), layer(q, v), atol=1e-6)
        v = rng.normal(size=(B, 6, D)).astype("float32")
        if jit_compile:
            assert np.isnan(ops.convert_to_numpy(attend(q, v))).all()
        else:
            with pytest.raises(
                tf.errors.InvalidArgumentError,
                match=r"at most `max_length` keys.*key length\] \[6\] "
                r"\[> max_length=4\]",
            ):
                attend(q, v)


@pytest.mark.parametrize("name", sorted(scores.ALL_SCORES))
def test_only_the_same_width_scores_reject_mismatched_widths(rng, name):
    query = rng.normal(size=(B, T, 3)).astype("float32")
    key = rng.normal(size=(B, S, 4)).astype("float32")
    if name not in ("dot", "scaled_dot", "cosine", "content"):
        assert _run(ref.make(name), query, key).shape == (B, T, S)
        return
    with pytest.raises(
        ValueError, match=r"`\w+`.*query.shape\[-1\]=3, key.shape\[-1\]=4"
    ):
        ref.make(name)(query, key)


def test_scores_reject_wrong_rank(rng):
    with pytest.raises(ValueError, match=r"`key` must have rank 3.*key.shape=\(2, 4\)"):
        scores.Dot()(np.zeros((2, 3, 4), "float32"), np.zeros((2, 4), "float32"))


@pytest.mark.parametrize(
    "identifier, cls",
    [
        ("dot", scores.Dot),
        ("DOT", scores.Dot),
        ("scaled_dot", scores.ScaledDot),
        ("general", scores.General),
        ("bilinear", scores.General),
        ("additive", scores.Additive),
        ("concat", scores.Additive),
        ("cosine", scores.Cosine),
        ("content", scores.Cosine),
        ({"class_name": "Location", "config": {"max_length": 4}}, scores.Location),
    ],
)
def test_get_by_name_or_config(identifier, cls):
    assert type(scores.get(identifier)) is cls


@pytest.mark.parametrize("built", [False, True], ids=["unbuilt", "built"])
def test_get_copies_a_score_object(qk, built):
    """`get` promises a fresh object: two layers given one score must not
    share its weights. A built score's copy has the same weight values in
    variables of its own."""
    query, key = qk
    score = scores.Additive(units=3, normalize=True)
    if built:
        score(query, key)
    copy = scores.get(score)
    assert copy is not score and type(copy) is scores.Additive
    assert copy.get_config() == score.get_config()
    assert copy.built is built
    if built:
        np.testing.assert_array_equal(_run(copy, query, key), _run(score, query, key))
        copy.v.assign(np.zeros(3, "float32"))
        assert np.any(_w(score.v) != 0.0)


class _Unsaveable(scores.Score):
    """A score whose constructor argument has no config."""

    def __init__(self, weights_fn, **kwargs):
        super().__init__(**kwargs)
        self.weights_fn = weights_fn

    def call(self, query, key):
        return self.weights_fn(query, key)


def test_get_rejects_a_score_it_cannot_copy():
    with pytest.raises(
        ValueError, match=r"copied from its config.*`_Unsaveable` cannot be.*Received"
    ):
        scores.get(_Unsaveable(lambda q, k: q))


@pytest.mark.parametrize(
    "identifier, match",
    [
        ("softmax", r"Unknown `score`.*Received: score='softmax'"),
        ("location", r"max_length.*Received: score='location'"),
        (3, r"Received: score=3"),
    ],
)
def test_get_rejects_bad_identifiers(identifier, match):
    with pytest.raises(ValueError, match=match):
        scores.get(identifier)


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: scores.Additive(units=0), r"units=0"),
        (lambda: scores.Cosine(beta=-1.0), r"beta=-1.0"),
        (lambda: scores.Location(max_length=0), r"max_length=0"),
    ],
)
def test_constructors_reject_bad_arguments(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


@pytest.mark.parametrize(
    "score",
    [
        scores.Dot(use_scale=True),
        scores.ScaledDot(),
        scores.General(kernel_initializer="ones"),
        scores.Additive(units=3, normalize=True),
        scores.Cosine(beta=4.0, trainable_beta=True, epsilon=1e-6),
        scores.Location(max_length=6),
    ],
    ids=lambda s: type(s).__name__,
)
def test_serialize_deserialize_round_trip(score, qk):
    config = scores.serialize(score)
    revived = scores.deserialize(config)
    assert type(revived) is type(score)
    assert revived.get_config() == score.get_config()
    assert type(scores.get(config)) is type(score)
    # Same weights -> same scores.
    query, key = qk
    expected = _run(score, query, key)
    revived(query, key)
    revived.set_weights(score.get_weights())
    np.testing.assert_array_equal(_run(revived, query, key), expected)


@keras.saving.register_keras_serializable(package="test_scores")
class NegativeL1(scores.Score):
    """A user score: `-sum |k - q| / temperature`."""

    def __init__(self, temperature=1.0, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature

    def call(self, query, key):
        diff = query[:, :, None, :] - key[:, None, :, :]
        return -ops.sum(ops.abs(diff), axis=-1) / self.temperature

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature}


def test_user_subclass_round_trip_and_use(qk):
    query, key = qk
    score = NegativeL1(temperature=2.0)
    expected = -np.abs(query[:, :, None] - key[:, None]).sum(-1) / 2.0
    np.testing.assert_allclose(_run(score, query, key), expected, atol=1e-5)
    revived = scores.deserialize(scores.serialize(score))
    assert type(revived) is NegativeL1
    assert revived.temperature == 2.0
    assert type(scores.get(scores.serialize(score))) is NegativeL1


def test_base_score_call_is_abstract(qk):
    query, key = qk
    with pytest.raises(NotImplementedError, match="Score must implement"):
        scores.Score()(query, key)


@pytest.mark.parametrize("name", ["dot", "general", "additive", "cosine"])
def test_scores_are_float32_for_float16_inputs(qk, name):
    query, key = qk
    out = scores.get(name)(
        ops.cast(query * 300, "float16"), ops.cast(key * 300, "float16")
    )
    out = ops.convert_to_numpy(out)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["dot", "general", "additive", "cosine"])
def test_scores_compute_in_float32_under_mixed_policies(qk, name, policy):
    query, key = qk
    keras.config.set_dtype_policy(policy)
    score = scores.get(name)
    # 1 + 2**-9 is not representable in bfloat16 (nor 3e5 in float16).
    big_query = (query * 3e5).astype("float32")
    out = _run(score, big_query, key + 2**-9)
    assert all(w.dtype == "float32" for w in score.weights)
    assert np.all(np.isfinite(out))
    if name == "dot":
        expected = np.einsum("btd,bsd->bts", big_query, key + 2**-9)
        np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_additive_rejects_boolean_units():
    with pytest.raises(ValueError, match="units=True"):
        scores.Additive(units=True)
