"""The five steps of docs/architecture.md, "How to add a new attention
variant", followed for a toy mask modifier defined here.

`EvenDistance`: query `i` sees key `j` only when `i - j` is even (and, with
`causal=True`, `j <= i`). Each test is one step of the guide: the modifier
is written and registered (steps 1-2), a layer and a block use it (step 3),
it matches a NumPy reference by hand and the dense, chunked and fused paths
agree on outputs and gradients (step 4), and it survives the config and
`.keras` round trips (step 2 again, through a model). Step 5 (export and
document) is for a modifier of the library itself and has nothing to test
here.

The second part follows "How to add a score function" for a toy score,
`Diagonal` (`k^T diag(w) q`): written and registered (steps 1-3, the name
in `ALL_SCORES` for the duration of a test), checked against its NumPy
reference, used by `ScoredAttention` and `LuongAttention` by name and as an
object, and saved and reloaded in a model with them.
"""

import math
import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention import testing

B, T, D, N, H = 2, 7, 6, 2, 4


# -- steps 1 and 2: the maths as a registered modifier ------------------------


@keras.saving.register_keras_serializable(package="keras_attention_guide")
class EvenDistance(km.MaskModifier):
    """Query `i` sees key `j` when `i - j` is even (and `j <= i` if causal)."""

    def __init__(self, causal=False):
        self.causal = bool(causal)

    def __call__(self, batch, head, query, key):
        even = ops.equal(ops.mod(query - key, 2), 0)
        if self.causal:
            return ops.logical_and(even, query >= key)
        return even

    def key_range(self, query_start, query_stop):
        # Causal: the chunked path never visits keys after the last query.
        return (0, query_stop) if self.causal else None

    def get_config(self):
        return {"causal": self.causal}


def _np_allowed(query_positions, key_positions, causal):
    q, k = query_positions[:, None], key_positions[None, :]
    allowed = (q - k) % 2 == 0
    return allowed & (k <= q) if causal else allowed


# -- NumPy references --------------------------------------------------------


def _inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape).astype("float32") for shape in shapes]


def _np_softmax_attention(q, k, v, allowed):
    """`(B, T, N, H)` heads attended under a boolean `(T, S)` mask."""
    logits = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    logits = np.where(allowed, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, v)


def _np_layer(weights, query, value, allowed):
    """`MultiHeadAttention` by hand: projections, attention, output."""
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    q = np.einsum("btd,dnh->btnh", query, wq) + bq
    k = np.einsum("bsd,dnh->bsnh", value, wk) + bk
    v = np.einsum("bsd,dnh->bsnh", value, wv) + bv
    heads = _np_softmax_attention(q, k, v, allowed)
    return np.einsum("btnh,nhd->btd", heads, wo) + bo


def _layer(impl, causal=True, seed=1):
    """A built `MultiHeadAttention` with the modifier and random weights
    (biases too, so that the reference checks them)."""
    layer = ka.layers.MultiHeadAttention(
        num_heads=N,
        key_dim=H,
        mask_modifier=EvenDistance(causal=causal),
        attention_impl=impl,
    )
    layer.build((B, T, D), (B, T + 2, D))
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.normal(size=w.shape).astype("float32") for w in layer.get_weights()]
    )
    return layer


def _run(fn, *inputs):
    """`fn(*inputs)` as NumPy, compiled on JAX (which runs eager code op by
    op, slowly); TensorFlow runs it eagerly. Layers must be built first."""
    if keras.backend.backend() == "jax":
        import jax

        fn = jax.jit(fn)
    return keras.tree.map_structure(ops.convert_to_numpy, fn(*inputs))


def _gradients(fn, projection, inputs):
    """Gradients of `sum(fn(*inputs) * projection)` w.r.t. each input."""

    def loss(*args):
        return ops.sum(fn(*args) * projection)

    def gradients(*args):
        return tuple(testing.input_gradients(loss, list(args)))

    return list(_run(gradients, *inputs))


# -- step 1: the mask itself --------------------------------------------------


def test_the_mask_is_the_formula_and_its_key_range_is_conservative():
    positions = np.arange(10)
    for causal in (False, True):
        indices = ka.ops.position_indices(1, 1, positions, positions)
        got = ops.convert_to_numpy(EvenDistance(causal)(*indices))[0, 0]
        np.testing.assert_array_equal(got, _np_allowed(positions, positions, causal))
    # Every key a block of queries may see lies in its `key_range`.
    allowed = _np_allowed(positions, positions, causal=True)
    for start, stop in [(0, 3), (2, 6), (7, 10)]:
        lo, hi = EvenDistance(causal=True).key_range(start, stop)
        seen = np.flatnonzero(allowed[start:stop].any(axis=0))
        assert lo <= seen.min() and seen.max() < hi
    assert EvenDistance(causal=False).key_range(0, 3) is None


# -- step 3 and 4: a layer with it, against NumPy -----------------------------


@pytest.mark.parametrize("impl", ["dense", "chunked"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_layer_with_the_modifier_matches_numpy(impl, causal):
    layer = _layer(impl, causal)
    query, value = _inputs((B, T, D), (B, T + 2, D))
    allowed = _np_allowed(np.arange(T), np.arange(T + 2), causal)
    expected = _np_layer(layer.get_weights(), query, value, allowed)
    got = _run(layer, query, value)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # The modifier really changes the result: without it the layer differs.
    unmasked = _np_layer(layer.get_weights(), query, value, np.ones_like(allowed))
    assert np.abs(got - unmasked).max() > 1e-2


def test_the_dispatch_keeps_the_path_asked_for():
    query, value = _inputs((B, T, D), (B, T, D))
    for impl in ("dense", "chunked", "fused"):
        layer = _layer(impl)
        with ka.ops.recording_attention_plans() as plans:
            _run(layer, query, value)
        assert [plan.impl for plan in plans] == [impl]


# -- step 4: every path gives the same outputs and gradients ------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dense_and_chunked_kernels_agree_on_outputs_and_gradients(causal):
    """At the ops level, in blocks of 3 x 2 so that the chunked path's
    online softmax, its key range and its own backward pass all run."""
    q, k, v = _inputs((B, T, N, H), (B, T + 2, N, H), (B, T + 2, N, H), seed=2)
    projection = _inputs((B, T, N, H), seed=3)[0]
    modifier = EvenDistance(causal)

    def dense(q, k, v):
        output, _ = ka.ops.multi_head_attention(
            q, k, v, attention_impl="dense", mask_modifier=modifier
        )
        return output

    def chunked(q, k, v):
        return ka.ops.chunked_attention(
            q, k, v, mask_modifier=modifier, query_chunk_size=3, key_chunk_size=2
        )

    outputs, grads = [], []
    for path in (dense, chunked):
        outputs.append(_run(path, q, k, v))
        grads.append(_gradients(path, projection, [q, k, v]))
    allowed = _np_allowed(np.arange(T), np.arange(T + 2), causal)
    np.testing.assert_allclose(
        outputs[0], _np_softmax_attention(q, k, v, allowed), atol=2e-5
    )
    np.testing.assert_allclose(outputs[1], outputs[0], atol=2e-5)
    for dense_grad, chunked_grad in zip(*grads, strict=True):
        assert np.abs(dense_grad).max() > 1e-3
        np.testing.assert_allclose(chunked_grad, dense_grad, rtol=1e-4, atol=5e-5)


def test_layer_paths_agree_on_input_gradients():
    """Through the layer: dense, chunked and fused (a mask modifier becomes
    the fused kernel's `mask`; on a CPU, Keras' composition runs it)."""
    query, value, projection = _inputs((B, T, D), (B, T + 2, D), (B, T, D), seed=4)
    results = {}
    for impl in ("dense", "chunked", "fused"):
        layer = _layer(impl)
        outputs = _run(layer, query, value)
        results[impl] = (outputs, _gradients(layer, projection, [query, value]))
    dense_out, dense_grads = results["dense"]
    for impl in ("chunked", "fused"):
        outputs, grads = results[impl]
        np.testing.assert_allclose(
            outputs, dense_out, rtol=1e-5, atol=1e-4, err_msg=impl
        )
        for got, expected in zip(grads, dense_grads, strict=True):
            np.testing.assert_allclose(
                got, expected, rtol=1e-4, atol=1e-3, err_msg=impl
            )


def test_a_block_takes_the_modifier_on_every_path():
    (x,) = _inputs((B, T, 8), seed=5)

    def block(**kwargs):
        layer = ka.layers.TransformerEncoderBlock(
            num_heads=N,
            intermediate_dim=16,
            kernel_initializer=keras.initializers.GlorotUniform(seed=6),
            **kwargs,
        )
        layer.build(x.shape)
        return _run(layer, x)

    dense = block(mask_modifier=EvenDistance(), attention_impl="dense")
    chunked = block(mask_modifier=EvenDistance(), attention_impl="chunked")
    np.testing.assert_allclose(chunked, dense, atol=1e-5)
    assert np.abs(block() - dense).max() > 1e-3  # the modifier was applied


# -- step 2 again: config and `.keras` round trips -----------------------------


def test_modifier_survives_config_and_keras_round_trips(tmp_path):
    modifier = EvenDistance(causal=True)
    config = keras.saving.serialize_keras_object(modifier)
    assert config["registered_name"] == "keras_attention_guide>EvenDistance"
    revived = keras.saving.deserialize_keras_object(config)
    assert type(revived) is EvenDistance and revived.causal is True

    layer = _layer("dense")
    query, value = _inputs((B, T, D), (B, T + 2, D), seed=7)
    testing.check_config_round_trip(layer, [query, value])
    assert layer.get_config()["mask_modifier"] == config

    model = testing.make_model(layer, [query, value])
    expected = ops.convert_to_numpy(model([query, value]))
    path = os.path.join(tmp_path, "even_distance.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    (reloaded_layer,) = [
        x for x in loaded.layers if isinstance(x, ka.layers.MultiHeadAttention)
    ]
    assert isinstance(reloaded_layer.mask_modifier, EvenDistance)
    assert reloaded_layer.mask_modifier.causal is True
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded([query, value])), expected
    )


# == "How to add a score function", followed for a toy score ===================
#
# `Diagonal`: `s(k, q) = k^T diag(w) q`, a bilinear score with a diagonal
# matrix (one weight per feature), so query and key share one width.


# -- steps 1 and 2: the maths as a registered score ----------------------------


@keras.saving.register_keras_serializable(package="keras_attention_guide")
class Diagonal(ka.scores.Score):
    """`s(k, q) = k^T diag(w) q`."""

    def __init__(self, kernel_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        if query_shape[-1] != key_shape[-1]:
            raise ValueError(
                "The `diagonal` score needs `query` and `key` of the same width. "
                f"Received: query.shape[-1]={query_shape[-1]}, "
                f"key.shape[-1]={key_shape[-1]}"
            )
        self.kernel = self.add_weight(
            name="kernel", shape=(key_shape[-1],), initializer=self.kernel_initializer
        )

    def call(self, query, key):
        return ops.einsum("btd,d,bsd->bts", query, self.kernel, key)

    def get_config(self):
        return {
            **super().get_config(),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


def _np_diagonal(score, query, key):
    """Step 4's NumPy reference: `k^T diag(w) q` from the formula."""
    w = ops.convert_to_numpy(score.kernel).astype("float64")
    return np.einsum("btd,d,bsd->bts", query, w, key)


@pytest.fixture
def diagonal_registered(monkeypatch):
    """Step 3 for the duration of a test: the name in `ALL_SCORES`, the
    class where `scores.deserialize` looks, the reference in `REFERENCES`."""
    import score_reference

    monkeypatch.setitem(ka.scores.ALL_SCORES, "diagonal", Diagonal)
    monkeypatch.setitem(ka.scores._CLASSES, "Diagonal", Diagonal)
    monkeypatch.setitem(score_reference.REFERENCES, "diagonal", _np_diagonal)
    return score_reference


def _score_inputs(seed=3):
    query, value = _inputs((B, T, D), (B, T + 2, D), seed=seed)
    return query, value


def test_the_score_is_the_formula_and_is_registered(diagonal_registered):
    ref = diagonal_registered
    assert set(ref.REFERENCES) == set(ka.scores.ALL_SCORES)
    query, key = _score_inputs()
    score = ka.scores.get("diagonal")
    assert type(score) is Diagonal
    score(query, key)
    ref.randomize(score, np.random.default_rng(0))
    np.testing.assert_allclose(
        ops.convert_to_numpy(score(query, key)),
        _np_diagonal(score, query, key),
        atol=1e-5,
    )
    assert ops.convert_to_numpy(score(query, key)).dtype == np.float32
    with pytest.raises(ValueError, match=r"`diagonal`.*key.shape\[-1\]=3"):
        Diagonal()(query, key[..., :3])
    config = ka.scores.serialize(score)
    assert config["registered_name"] == "keras_attention_guide>Diagonal"
    assert type(ka.scores.get(config)) is Diagonal


# -- step 5 (of the layers): ScoredAttention and LuongAttention take it --------


def _score_layers():
    """A `ScoredAttention` given the object, a `LuongAttention` the name."""
    score = Diagonal()
    return [
        ka.layers.ScoredAttention(score=score, name="scored"),
        ka.layers.LuongAttention(score="diagonal", name="luong"),
        ka.layers.LuongAttention(score=score, name="luong_object"),
    ]


def test_layers_with_the_score_match_numpy(diagonal_registered):
    query, value = _score_inputs()
    mask = np.ones((B, T + 2), bool)
    mask[1, 4:] = False
    rng = np.random.default_rng(1)
    for layer in _score_layers():
        layer(query, value)
        diagonal_registered.randomize(layer.score, rng)
        out = layer(query, value, value_mask=mask)
        logits = np.where(
            mask[:, None], _np_diagonal(layer.score, query, value), -np.inf
        )
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected = np.einsum("bts,bsd->btd", weights, value)
        np.testing.assert_allclose(ops.convert_to_numpy(out), expected, atol=1e-5)
    with pytest.raises(
        ValueError, match=r"`scale` applies.*score='diagonal', scale=True"
    ):
        ka.layers.LuongAttention(score="diagonal", scale=True)


def test_layers_with_the_score_survive_config_and_keras_round_trips(
    diagonal_registered, tmp_path
):
    query, value = _score_inputs(seed=8)
    layers = _score_layers()
    for layer in layers:
        testing.check_config_round_trip(layer, [query, value])
    assert layers[1].get_config()["score"] == "diagonal"
    assert layers[2].get_config()["score"]["class_name"] == "Diagonal"
    # One object given to two layers: each has weights of its own.
    assert layers[0].score is not layers[2].score

    q_in, v_in = keras.Input((T, D)), keras.Input((T + 2, D))
    outputs = [layer(q_in, v_in) for layer in layers]
    model = keras.Model([q_in, v_in], outputs)
    rng = np.random.default_rng(2)
    for layer in layers:
        diagonal_registered.randomize(layer.score, rng)
    expected = [ops.convert_to_numpy(x) for x in model([query, value])]
    path = os.path.join(tmp_path, "diagonal.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    for layer in layers:
        assert isinstance(loaded.get_layer(layer.name).score, Diagonal)
    for got, want in zip(loaded([query, value]), expected, strict=True):
        np.testing.assert_array_equal(ops.convert_to_numpy(got), want)
