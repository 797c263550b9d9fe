import attention_reference as ref
import keras
import numpy as np
import pytest
import score_reference
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

import keras_attention as ka
from keras_attention import scores
from keras_attention import testing
from keras_attention.testing import input_gradients

B, T, S = 2, 3, 5


@pytest.fixture
def data(rng):
    return {
        "query": rng.normal(size=(B, T, 4)).astype("float32"),
        "vector": rng.normal(size=(B, 4)).astype("float32"),
        "key": rng.normal(size=(B, S, 4)).astype("float32"),
        "value": rng.normal(size=(B, S, 6)).astype("float32"),
        "value_mask": np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], bool),
        "attention_mask": rng.random((B, T, S)) > 0.3,
    }


@pytest.mark.parametrize("vector", [False, True], ids=["sequence", "vector"])
@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
def test_scaled_dot_matches_reference(data, vector, masked):
    query = data["vector"] if vector else data["query"]
    layer = ka.layers.ScoredAttention(score="scaled_dot")
    kwargs = {"value_mask": data["value_mask"]} if masked else {}
    out, weights = layer(
        query, data["value"], key=data["key"], return_attention_scores=True, **kwargs
    )
    q = query[:, None] if vector else query
    mask = data["value_mask"][:, None, :] if masked else None
    exp_out, exp_w = ref.attend(ref.scaled_dot(q, data["key"]), data["value"], mask)
    if vector:
        exp_out, exp_w = exp_out[:, 0], exp_w[:, 0]
    assert out.shape == exp_out.shape and weights.shape == exp_w.shape
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    if masked:
        w = ref.to_np(weights).reshape(B, -1, S)
        hidden = np.broadcast_to(~data["value_mask"][:, None], w.shape)
        assert np.all(w[hidden] == 0.0)
        np.testing.assert_allclose(ref.to_np(weights).sum(-1), 1.0, rtol=1e-6)


def test_general_score_with_different_widths(data, rng):
    query = rng.normal(size=(B, T, 7)).astype("float32")
    layer = ka.layers.ScoredAttention(score="general")
    out = layer(
        query, data["value"], key=data["key"], attention_mask=data["attention_mask"]
    )
    kernel = ref.to_np(layer.score.kernel)  # (Dq, Dk)
    logits = np.einsum("btq,qk,bsk->bts", query, kernel, data["key"])
    exp_out, _ = ref.attend(logits, data["value"], data["attention_mask"])
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)


def test_value_doubles_as_key(data):
    layer = ka.layers.ScoredAttention(score="dot")
    value = data["key"]
    out = layer(data["query"], value)
    exp_out, _ = ref.attend(ref.dot(data["query"], value), value)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)


def test_every_mask_source(data, rng):
    query_mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    key_mask = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]], bool)
    layer = ka.layers.ScoredAttention(score="dot")
    out, weights = layer(
        data["query"],
        data["value"],
        key=data["key"],
        query_mask=query_mask,
        value_mask=data["value_mask"],
        key_mask=key_mask,
        attention_mask=data["attention_mask"],
        use_causal_mask=True,
        return_attention_scores=True,
    )
    mask = (
        query_mask[:, :, None]
        & data["value_mask"][:, None]
        & key_mask[:, None]
        & data["attention_mask"]
        & np.tril(np.ones((T, S), bool))
    )
    exp_out, exp_w = ref.attend(
        ref.dot(data["query"], data["key"]), data["value"], mask
    )
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    # The padded query attends to nothing: zero weights, zero output.
    np.testing.assert_array_equal(ref.to_np(out)[0, 2], 0.0)
    assert np.all(ref.to_np(weights)[~mask] == 0.0)


def test_vector_query_with_attention_mask_of_rank_2(data):
    layer = ka.layers.ScoredAttention(score="dot")
    mask = data["value_mask"]
    out = layer(data["vector"], data["value"], key=data["key"], attention_mask=mask)
    logits = ref.dot(data["vector"][:, None], data["key"])
    exp_out, _ = ref.attend(logits, data["value"], mask[:, None])
    np.testing.assert_allclose(ref.to_np(out), exp_out[:, 0], atol=1e-5)


def test_fully_masked_query_gives_zero_output_and_finite_gradients(data):
    layer = ka.layers.ScoredAttention(score="additive")
    mask = np.zeros((B, S), bool)
    mask[1, 2] = True

    def loss(q, v):
        return ops.sum(layer(q, v, value_mask=mask))

    out = ref.to_np(layer(data["query"], data["key"], value_mask=mask))
    np.testing.assert_array_equal(out[0], 0.0)
    grads = input_gradients(loss, [data["query"], data["key"]])
    for g in grads:
        assert np.all(np.isfinite(ref.to_np(g)))
    np.testing.assert_array_equal(ref.to_np(grads[1])[0], 0.0)


def _token_model(layer):
    q_tokens = keras.Input((None,), dtype="int32")
    v_tokens = keras.Input((None,), dtype="int32")
    q = keras.layers.Embedding(10, 4, mask_zero=True, name="q_embed")(q_tokens)
    v = keras.layers.Embedding(10, 4, mask_zero=True, name="v_embed")(v_tokens)
    out = layer(q, v)
    return keras.Model([q_tokens, v_tokens], out)


@pytest.mark.parametrize("score", ["scaled_dot", "additive"])
def test_implicit_keras_masks_equal_explicit_masks(score):
    q_tokens = np.array([[3, 4, 0], [5, 6, 7]], "int32")  # padded query at the end
    v_tokens = np.array([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]], "int32")
    layer = ka.layers.ScoredAttention(score=score)
    model = _token_model(layer)
    implicit = ref.to_np(model([q_tokens, v_tokens]))
    # numpy copies: eager Embedding outputs carry their Keras mask along.
    q = ref.to_np(model.get_layer("q_embed")(q_tokens)).astype("float32")
    v = ref.to_np(model.get_layer("v_embed")(v_tokens)).astype("float32")
    explicit = layer(q, v, query_mask=q_tokens != 0, value_mask=v_tokens != 0)
    np.testing.assert_array_equal(implicit, ref.to_np(explicit))
    # The masks really are used: without them the output changes.
    unmasked = ref.to_np(layer(q, v))
    assert not np.allclose(implicit, unmasked)
    np.testing.assert_array_equal(implicit[0, 2], 0.0)


def test_output_keeps_the_query_mask():
    q_tokens = keras.Input((None,), dtype="int32")
    q = keras.layers.Embedding(10, 4, mask_zero=True)(q_tokens)
    out = ka.layers.ScoredAttention()(q, q)
    pooled = keras.layers.GlobalAveragePooling1D()(out)  # uses the mask
    model = keras.Model(q_tokens, [out, pooled])
    tokens = np.array([[1, 2, 0, 0]], "int32")
    seq, mean = model(tokens)
    np.testing.assert_allclose(
        ref.to_np(mean), ref.to_np(seq)[:, :2].mean(1), atol=1e-6
    )


@pytest.mark.parametrize("window", [1, 2])
def test_window_is_a_local_band(rng, window):
    query = rng.normal(size=(B, 6, 4)).astype("float32")
    value = rng.normal(size=(B, 7, 4)).astype("float32")
    layer = ka.layers.ScoredAttention(score="dot", window=window)
    out, weights = layer(query, value, return_attention_scores=True)
    t, s = np.arange(6)[:, None], np.arange(7)[None, :]
    band = np.abs(s - t) <= window
    exp_out, exp_w = ref.attend(ref.dot(query, value), value, band[None])
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    assert np.all(ref.to_np(weights)[:, ~band] == 0.0)


@pytest.mark.parametrize("vector", [False, True], ids=["sequence", "vector"])
def test_hardmax_one_hot_and_gradients_flow(data, vector):
    query = data["vector"] if vector else data["query"]
    layer = ka.layers.ScoredAttention(score="general", probability="hardmax")
    out, weights = layer(
        query,
        data["value"],
        key=data["key"],
        value_mask=data["value_mask"],
        return_attention_scores=True,
    )
    weights = ref.to_np(weights)
    np.testing.assert_array_equal(weights.sum(-1), 1.0)
    assert set(np.unique(weights)) == {0.0, 1.0}
    q = query[:, None] if vector else query
    kernel = ref.to_np(layer.score.kernel)
    logits = np.einsum("btq,qk,bsk->bts", q, kernel, data["key"])
    logits = np.where(data["value_mask"][:, None], logits, -np.inf)
    best = np.argmax(logits, -1)  # (B, T)
    expected = np.take_along_axis(data["value"][:, None], best[..., None, None], 2)
    expected = expected[:, :, 0]
    np.testing.assert_allclose(
        ref.to_np(out), expected[:, 0] if vector else expected, atol=1e-6
    )

    # Straight-through: the one-hot forward pass still passes the softmax
    # gradient to the query and the keys (through the score).
    def loss(q, k):
        return ops.sum(layer(q, data["value"], key=k) * np.arange(6.0, dtype="float32"))

    g_query, g_key = input_gradients(loss, [query, data["key"]])
    assert np.all(np.isfinite(ref.to_np(g_query)))
    assert np.any(ref.to_np(g_query) != 0) and np.any(ref.to_np(g_key) != 0)


def test_dropout_only_in_training_and_seeded(rng):
    query = rng.normal(size=(B, T, 4)).astype("float32")
    value = rng.normal(size=(B, 20, 4)).astype("float32")
    plain = ka.layers.ScoredAttention()
    layer = ka.layers.ScoredAttention(dropout=0.5, seed=7)
    expected = ref.to_np(plain(query, value))
    np.testing.assert_array_equal(ref.to_np(layer(query, value)), expected)
    np.testing.assert_array_equal(
        ref.to_np(layer(query, value, training=False)), expected
    )
    _, w_train = layer(query, value, training=True, return_attention_scores=True)
    w_train = ref.to_np(w_train)
    _, w_eval = plain(query, value, return_attention_scores=True)
    w_eval = ref.to_np(w_eval)
    dropped = w_train == 0
    assert 0.25 < dropped.mean() < 0.75
    np.testing.assert_allclose(w_train[~dropped], 2 * w_eval[~dropped], rtol=1e-5)
    # Same seed, same masks; another seed, other masks.
    same = ka.layers.ScoredAttention(dropout=0.5, seed=7)
    other = ka.layers.ScoredAttention(dropout=0.5, seed=8)
    first = ref.to_np(
        ka.layers.ScoredAttention(dropout=0.5, seed=7)(query, value, training=True)
    )
    np.testing.assert_array_equal(ref.to_np(same(query, value, training=True)), first)
    assert not np.array_equal(ref.to_np(other(query, value, training=True)), first)


@pytest.mark.parametrize("vector", [False, True], ids=["sequence", "vector"])
@pytest.mark.parametrize("name", sorted(scores.ALL_SCORES))
def test_every_score_matches_its_numpy_reference(data, rng, name, vector):
    """`softmax(s(k, q))` over the unmasked keys, then the average of the
    values, for every entry of `ALL_SCORES` (`tests/score_reference.py`)."""
    query = data["vector"] if vector else data["query"]
    layer = ka.layers.ScoredAttention(score=score_reference.make(name))
    layer(query, data["value"], key=data["key"])
    score_reference.randomize(layer.score, rng)
    out, weights = layer(
        query,
        data["value"],
        key=data["key"],
        value_mask=data["value_mask"],
        return_attention_scores=True,
    )
    q = query[:, None] if vector else query
    logits = score_reference.REFERENCES[name](layer.score, q, data["key"])
    exp_out, exp_w = ref.attend(logits, data["value"], data["value_mask"][:, None])
    if vector:
        exp_out, exp_w = exp_out[:, 0], exp_w[:, 0]
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)


def test_two_layers_given_one_score_have_their_own_weights(data):
    """One `Score` object given to two layers: each layer gets a copy, so
    training one does not move the other."""
    score = scores.Additive(units=3)
    first = ka.layers.ScoredAttention(score=score)
    second = ka.layers.ScoredAttention(score=score)
    for layer in (first, second):
        layer(data["query"], data["value"], key=data["key"])
    assert first.score is not second.score
    own = [id(w) for w in first.weights]
    assert not any(id(w) in own for w in second.weights)
    before = ref.to_np(second(data["query"], data["value"], key=data["key"]))
    first.score.v.assign(first.score.v * 3.0)
    after = ref.to_np(second(data["query"], data["value"], key=data["key"]))
    np.testing.assert_array_equal(after, before)


def test_symbolic_and_eager_shapes_agree(data):
    q = keras.Input((T, 4))
    v = keras.Input((S, 6))
    k = keras.Input((S, 4))
    layer = ka.layers.ScoredAttention()
    out, weights = layer(q, v, key=k, return_attention_scores=True)
    assert tuple(out.shape) == (None, T, 6)
    assert tuple(weights.shape) == (None, T, S)
    eager_out, eager_w = layer(
        data["query"], data["value"], key=data["key"], return_attention_scores=True
    )
    assert tuple(eager_out.shape) == (B, T, 6)
    assert tuple(eager_w.shape) == (B, T, S)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"score": "softmax"}, r"Unknown `score`.*Received: score='softmax'"),
        ({"score": "location"}, r"Received: score='location'"),
        ({"dropout": -0.1}, r"`dropout` must be in \[0, 1\). Received: dropout=-0.1"),
        ({"dropout": 1.0}, r"Received: dropout=1.0"),
        ({"window": 0}, r"`window` must be a positive integer.*Received: window=0"),
        ({"window": 1.5}, r"Received: window=1.5"),
        ({"probability": "sparsemax"}, r"Received: probability='sparsemax'"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.layers.ScoredAttention(**kwargs)


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda d: ka.layers.ScoredAttention()(d["query"], d["vector"]),
            r"`value` must have rank 3. Received: value.shape=\(2, 4\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(d["query"][..., None], d["key"]),
            r"`query` must have rank 2 or 3. Received: query.shape=\(2, 3, 4, 1\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(
                d["query"], d["value"], key=d["key"][:, :4]
            ),
            r"`key` and `value` must have the same length.*key length=4, value length=5",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(
                d["query"], d["value"], key=d["key"], value_mask=np.ones((B, T), bool)
            ),
            r"`value_mask`.*Received: value_mask.shape=\(2, 3\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(
                d["query"], d["key"], query_mask=np.ones((B, S), bool)
            ),
            r"`query_mask`.*Received: query_mask.shape=\(2, 5\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(
                d["query"], d["key"], attention_mask=np.ones((B, S), bool)
            ),
            r"`attention_mask` must have shape \(3, 5\).*attention_mask.shape=\(2, 5\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention(window=2)(d["vector"], d["key"]),
            r"`window` with alignment=.monotonic. needs a sequence query.*"
            r"query.shape=\(2, 4\), window=2",
        ),
        (
            lambda d: ka.layers.ScoredAttention()(
                d["vector"], d["key"], use_causal_mask=True
            ),
            r"`use_causal_mask` needs a sequence query.*query.shape=\(2, 4\)",
        ),
        (
            lambda d: ka.layers.ScoredAttention(score="dot")(
                d["query"][..., :3], d["key"]
            ),
            r"query.shape\[-1\]=3, key.shape\[-1\]=4",
        ),
    ],
    ids=[
        "rank2-value",
        "rank4-query",
        "key-value-length",
        "value-mask-shape",
        "query-mask-shape",
        "attention-mask-rank",
        "window-vector-query",
        "causal-vector-query",
        "dot-widths",
    ],
)
def test_call_rejects_bad_inputs(data, call, match):
    with pytest.raises(ValueError, match=match):
        call(data)


def test_key_value_length_mismatch_after_build(data):
    layer = ka.layers.ScoredAttention()
    layer(data["query"], data["value"], key=data["key"])
    with pytest.raises(ValueError, match=r"key length=4, value length=5"):
        layer(data["query"], data["value"], key=data["key"][:, :4])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 4),
    s=st.integers(1, 6),
    d=st.integers(1, 5),
    vector=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_masked_attention_matches_reference(b, t, s, d, vector, seed):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(b, d) if vector else (b, t, d)).astype("float32")
    value = rng.normal(size=(b, s, d)).astype("float32")
    mask = rng.random((b, s)) > 0.4
    mask[0] = False  # always one example whose keys are all padding
    layer = ka.layers.ScoredAttention(score="dot")
    out, weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    q = query[:, None] if vector else query
    exp_out, exp_w = ref.attend(ref.dot(q, value), value, mask[:, None])
    if vector:
        exp_out, exp_w = exp_out[:, 0], exp_w[:, 0]
    weights = ref.to_np(weights)
    np.testing.assert_allclose(weights, exp_w, atol=1e-5)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-4)
    w = weights.reshape(b, -1, s)
    assert np.all(w[np.broadcast_to(~mask[:, None], w.shape)] == 0.0)
    sums = w.sum(-1)
    np.testing.assert_allclose(sums[mask.any(-1)], 1.0, rtol=1e-5)
    np.testing.assert_array_equal(sums[0], 0.0)


@keras.saving.register_keras_serializable(package="test_scored_attention")
class ShiftedDot(scores.Score):
    """A user score with a weight: `k^T q + b`."""

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        self.shift = self.add_weight(name="shift", shape=(), initializer="ones")

    def call(self, query, key):
        return ops.matmul(query, ops.swapaxes(key, -1, -2)) * self.shift


def test_user_score_in_a_saved_model(data):
    layer = ka.layers.ScoredAttention(score=ShiftedDot())
    inputs = [data["query"], data["key"]]
    layer(*inputs)
    layer.score.shift.assign(0.5)
    exp_out, _ = ref.attend(0.5 * ref.dot(data["query"], data["key"]), data["key"])
    np.testing.assert_allclose(ref.to_np(layer(*inputs)), exp_out, atol=1e-5)
    model = testing.make_model(layer, inputs)
    testing.check_serialization(model, inputs, saved_model=False)
