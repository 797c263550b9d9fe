"""`MemoryCompressedAttention` (Liu et al., 2018) against a NumPy reference
written from the paper, and its causality, padding, compiled and saved
behaviour.

The reference recomputes everything from the layer's weights with explicit
loops: the projections, the strided convolution as a sum over its `f`
kernel taps, the memory `[k_0; slots]`, which memory entries each query
may read (slot `j` only once every real key of `[j f, (j + 1) f)` is
visible), the softmax and the output projection.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing

FACTOR = 3
ATOL = 1e-5


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


def _normal(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def _layer(**kwargs):
    defaults = dict(num_heads=2, key_dim=3, compression_factor=FACTOR)
    return ka.layers.MemoryCompressedAttention(**{**defaults, **kwargs})


def _weights(layer):
    """`{"query/kernel": array, ...}` by sublayer and weight name."""
    return {"/".join(w.path.split("/")[-2:]): _np(w) for w in layer.weights}


# -- the NumPy reference -------------------------------------------------------


def reference_visibility(t, s, factor, real, causal, allowed):
    """`(B, T, 1 + S_c)`: may query `i` read the first key, slot `j`?

    `real` `(B, S)` marks real keys, `allowed` `(B, T, S)` the keys each
    query may see (the causal rule is applied here on top of it: a slot is
    read once all its `f` positions are `<= i`, real or not).
    """
    batch = real.shape[0]
    slots = math.ceil(s / factor)
    visible = np.zeros((batch, t, 1 + slots), bool)
    for b in range(batch):
        real_positions = [p for p in range(s) if real[b, p]]
        for i in range(t):

            def sees(p, b=b, i=i):
                return allowed[b, i, p] and (not causal or p <= i)

            if real_positions:
                visible[b, i, 0] = sees(real_positions[0])
            for j in range(slots):
                members = [
                    p
                    for p in range(j * factor, (j + 1) * factor)
                    if p in real_positions
                ]
                complete = not causal or (j + 1) * factor - 1 <= i
                visible[b, i, 1 + j] = (
                    bool(members) and all(sees(p) for p in members) and complete
                )
    return visible


def _compress(x, real, kernel, bias, factor):
    """Strided convolution over `(B, S, D)`, padded keys zeroed: slot `j` is
    `bias + sum_tap x[j f + tap] @ kernel[tap]` over the taps inside `S`."""
    batch, s, _ = x.shape
    slots = math.ceil(s / factor)
    out = np.zeros((batch, slots, kernel.shape[-1]), "float64")
    for j in range(slots):
        out[:, j] = bias
        for tap in range(factor):
            p = j * factor + tap
            if p < s:
                out[:, j] += (x[:, p] * real[:, p, None]) @ kernel[tap]
    return out


def reference(
    layer, query, value, real=None, query_real=None, causal=False, allowed=None
):
    """The layer's output and weights, `(B, T, D)` and `(B, N, T, 1 + S_c)`."""
    w = {k: v.astype("float64") for k, v in _weights(layer).items()}
    f, n, h = layer.compression_factor, layer.num_heads, layer.key_dim
    (batch, t, _), s = query.shape, value.shape[1]
    real = np.ones((batch, s), bool) if real is None else real
    allowed = np.ones((batch, t, s), bool) if allowed is None else allowed
    q = np.einsum("btd,dnh->btnh", query, w["query/kernel"]) + w["query/bias"]
    memory = []
    for name in ("key", "value"):
        x = np.einsum("bsd,dnh->bsnh", value, w[f"{name}/kernel"]) + w[f"{name}/bias"]
        conv = f"{name}_compression"
        slots = _compress(
            x.reshape(batch, s, -1), real, w[f"{conv}/kernel"], w[f"{conv}/bias"], f
        ).reshape(batch, -1, n, x.shape[-1])
        first = np.argmax(real, axis=1)  # the first real key (0 if none)
        memory.append(np.concatenate([x[np.arange(batch), first][:, None], slots], 1))
    visible = reference_visibility(t, s, f, real, causal, allowed)
    if query_real is not None:
        visible &= query_real[:, :, None]
    logits = np.einsum("btnh,bmnh->bntm", q, memory[0]) / np.sqrt(h)
    logits = np.where(visible[:, None], logits, -np.inf)
    peak = np.max(logits, axis=-1, keepdims=True)
    e = np.where(
        visible[:, None], np.exp(logits - np.where(np.isfinite(peak), peak, 0)), 0
    )
    total = e.sum(-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    heads = np.einsum("bntm,bmnh->btnh", weights, memory[1])
    out = np.einsum("btnh,nhe->bte", heads, w["attention_output/kernel"])
    return out + w["attention_output/bias"], weights


def _randomize(layer, seed=1):
    """Every weight moved off its initial value (biases included)."""
    rng = np.random.default_rng(seed)
    layer.set_weights([_normal(rng, *w.shape) * 0.5 for w in layer.weights])


def _padding(batch, length, seed):
    """Right-, left- and mid-padded rows, and a row without padding."""
    rng = np.random.default_rng(seed)
    real = np.ones((batch, length), bool)
    real[0, length - 3 :] = False
    if batch > 1:
        real[1, :2] = False
    if batch > 2:
        real[2, rng.choice(length, size=2, replace=False)] = False
    return real


# -- (a) the formula -----------------------------------------------------------

LENGTHS = [(7, 7), (9, 9), (10, 10), (5, 10), (9, 4)]  # (T, S); S % 3 != 0 too


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t, s", LENGTHS)
def test_matches_the_reference(t, s, causal):
    rng = np.random.default_rng(t * 100 + s)
    query, value = _normal(rng, 3, t, 5), _normal(rng, 3, s, 4)
    layer = _layer()
    layer(query, value)
    _randomize(layer)
    out, weights = layer(
        query, value, use_causal_mask=causal, return_attention_scores=True
    )
    want_out, want_weights = reference(layer, query, value, causal=causal)
    assert weights.shape == (3, 2, t, 1 + math.ceil(s / FACTOR))
    np.testing.assert_allclose(_np(weights), want_weights, atol=ATOL)
    np.testing.assert_allclose(_np(out), want_out, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t, s", [(7, 7), (10, 10), (6, 8)])
def test_matches_the_reference_with_padding(t, s, causal):
    rng = np.random.default_rng(t + s)
    query, value = _normal(rng, 3, t, 5), _normal(rng, 3, s, 4)
    real = _padding(3, s, seed=s)
    query_real = _padding(3, t, seed=t) if t == s else None
    layer = _layer()
    layer(query, value)
    _randomize(layer)
    out, weights = layer(
        query,
        value,
        value_mask=real,
        query_mask=query_real,
        use_causal_mask=causal,
        return_attention_scores=True,
    )
    want_out, want_weights = reference(layer, query, value, real, query_real, causal)
    np.testing.assert_allclose(_np(weights), want_weights, atol=ATOL)
    np.testing.assert_allclose(_np(out), want_out, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("causal", [False, True])
def test_keras_masks_match_the_reference(causal):
    """A Keras mask (`Masking`: all-zero rows are padding) on the value, in a
    compiled functional model, is the explicit `value_mask`."""
    rng = np.random.default_rng(3)
    t, s = 9, 10
    real = _padding(3, s, seed=0)
    query = _normal(rng, 3, t, 5)
    value = _normal(rng, 3, s, 4) * real[:, :, None]
    layer = _layer()
    query_in, value_in = keras.Input((t, 5)), keras.Input((s, 4))
    masked = keras.layers.Masking(0.0)(value_in)
    model = keras.Model(
        [query_in, value_in], layer(query_in, masked, use_causal_mask=causal)
    )
    _randomize(layer)
    want, _ = reference(layer, query, value, real, causal=causal)
    got = model.predict([query, value], verbose=0)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=ATOL)


def test_attention_mask_matches_the_reference():
    """An explicit `(B, T, S)` mask: a slot is read only when every real key
    it summarises is allowed."""
    rng = np.random.default_rng(4)
    t, s = 8, 10
    query, value = _normal(rng, 2, t, 5), _normal(rng, 2, s, 4)
    allowed = rng.random((2, t, s)) < 0.8
    real = _padding(2, s, seed=1)
    layer = _layer()
    layer(query, value)
    _randomize(layer)
    out, weights = layer(
        query,
        value,
        value_mask=real,
        attention_mask=allowed,
        return_attention_scores=True,
    )
    want_out, want_weights = reference(layer, query, value, real, allowed=allowed)
    np.testing.assert_allclose(_np(weights), want_weights, atol=ATOL)
    np.testing.assert_allclose(_np(out), want_out, atol=ATOL, rtol=ATOL)


def test_a_triangular_attention_mask_is_the_causal_mask_on_whole_slots():
    """Without padding and with whole slots the two agree; a triangular
    `attention_mask` lets the last query read the partial last slot (all its
    keys are visible to it), the causal rule does not (it is not complete)."""
    rng = np.random.default_rng(5)
    layer = _layer()
    for length, same in ((9, True), (10, False)):
        x = _normal(rng, 2, length, 4)
        tril = np.tril(np.ones((length, length), bool))
        causal = _np(layer(x, x, use_causal_mask=True))
        masked = _np(layer(x, x, attention_mask=tril))
        np.testing.assert_allclose(masked[:, :9], causal[:, :9], atol=1e-6)
        assert np.allclose(masked, causal, atol=1e-6) == same, length


@pytest.mark.parametrize("s", [1, 2, 3, 4, 7, 9, 10])
@pytest.mark.parametrize("causal", [False, True])
def test_memory_mask_op_matches_the_reference(s, causal):
    t = 10
    real = _padding(3, s, seed=s) if s > 3 else np.ones((3, s), bool)
    allowed = np.random.default_rng(s).random((3, t, s)) < 0.7
    got = ka.ops.memory_compression_mask(
        t, s, FACTOR, key_mask=real, attention_mask=allowed, use_causal_mask=causal
    )
    want = reference_visibility(t, s, FACTOR, real, causal, allowed)
    np.testing.assert_array_equal(_np(got), want)


def test_a_triangular_mask_over_slots_would_leak():
    """The causal rule is not `j <= i` over the slot axis: query 0 reads only
    the first key, query 2 (the last position of slot 0) reads slot 0."""
    mask = _np(ka.ops.memory_compression_mask(10, 10, FACTOR, use_causal_mask=True))[0]
    np.testing.assert_array_equal(mask[:, 0], True)
    # The partial last slot {9} is never complete: no causal query reads it.
    completed = [[i >= (j + 1) * FACTOR - 1 for j in range(4)] for i in range(10)]
    np.testing.assert_array_equal(mask[:, 1:], completed)


# -- (b, c) causality ----------------------------------------------------------


def test_causal_by_perturbation_at_every_step():
    """Changing inputs after `t` changes no output at `<= t`, for every `t`,
    including the steps at which a slot completes (2, 5, 8); the completed
    slot is read from the step it completes, the partial last slot (9)
    never."""
    rng = np.random.default_rng(6)
    x = _normal(rng, 2, 10, 4)
    layer = _layer()
    out, weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    out, weights = _np(out), _np(weights)
    for t in range(10):
        changed = x.copy()
        changed[:, t + 1 :] = _normal(rng, 2, 10 - t - 1, 4) * 10
        got = _np(layer(changed, changed, use_causal_mask=True))
        np.testing.assert_allclose(got[:, : t + 1], out[:, : t + 1], atol=1e-6)
        if t < 9:
            assert not np.allclose(got[:, t + 1 :], out[:, t + 1 :])
        read = weights[:, :, t, 1:] > 0  # (B, N, S_c)
        done = (t + 1) // FACTOR  # slots complete so far
        assert read[..., :done].all() and not read[..., done:].any(), t


def test_causal_by_gradients():
    rng = np.random.default_rng(7)
    x = _normal(rng, 2, 10, 4)
    testing.check_causality(_layer(), [x, x], call_kwargs={"use_causal_mask": True})


def test_causal_with_left_padding_reads_the_first_real_key():
    """Left-padded rows: every real query reads at least the first real key,
    so none gets a zero output before its first slot completes."""
    rng = np.random.default_rng(8)
    x = _normal(rng, 2, 7, 4)
    real = np.array([[0, 1, 1, 1, 1, 1, 1], [1] * 7], bool)
    _, weights = _layer()(
        x, x, query_mask=real, value_mask=real, use_causal_mask=True,
        return_attention_scores=True,
    )  # fmt: skip
    sums = _np(weights).sum(-1)  # (B, N, T)
    np.testing.assert_allclose(sums[:, :, real[0]][0], 1.0, atol=1e-6)
    np.testing.assert_array_equal(sums[0][:, ~real[0]], 0.0)
    # Query 1 reads the first real key alone: slot 0 ends with key 2.
    np.testing.assert_allclose(_np(weights)[0, :, 1, 0], 1.0, atol=1e-6)


def test_a_prefix_gives_the_same_outputs():
    """Causal outputs at `<= t` depend on the positions `<= t` alone, not on
    the sequence's length (the partial last slot is never read)."""
    rng = np.random.default_rng(17)
    x = _normal(rng, 2, 11, 4)
    layer = _layer()
    whole = _np(layer(x, x, use_causal_mask=True))
    for length in range(1, 11):
        part = x[:, :length]
        got = _np(layer(part, part, use_causal_mask=True))
        np.testing.assert_allclose(got, whole[:, :length], atol=1e-6)


# -- caches ----------------------------------------------------------------------


@pytest.mark.parametrize("steps", [[1] * 11, [5, 1, 1, 4]])
def test_cached_steps_equal_the_full_pass(steps):
    """Token by token (slots complete at steps 2, 5, 8) and in chunks: each
    cached call's outputs and weights equal the full pass's rows."""
    rng = np.random.default_rng(18)
    x = _normal(rng, 2, 11, 4)
    layer = _layer(key_dim=3, value_dim=3)
    whole, weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    cache = np.zeros((2, 2, 11, 2, 3), "float32")
    start = 0
    for n in steps:
        new = x[:, start : start + n]
        out, w, cache = layer(
            new, new, use_causal_mask=True, return_attention_scores=True,
            cache=cache, cache_update_index=start,
        )  # fmt: skip
        np.testing.assert_allclose(
            _np(out), _np(whole)[:, start : start + n], atol=1e-5
        )
        np.testing.assert_allclose(
            _np(w), _np(weights)[:, :, start : start + n], atol=1e-6
        )
        start += n
    np.testing.assert_allclose(_np(cache), _np(layer.compute_cache(x)), atol=1e-6)


def test_a_cache_read_as_is_equals_its_sequence():
    rng = np.random.default_rng(19)
    query, value = _normal(rng, 2, 4, 4), _normal(rng, 2, 8, 4)
    layer = _layer(key_dim=3)
    want = _np(layer(query, value))
    got, _ = layer(query, cache=layer.compute_cache(value))  # output, cache
    np.testing.assert_allclose(_np(got), want, atol=1e-6)


def test_bad_cache_arguments():
    x = np.zeros((2, 4, 4), "float32")
    layer = _layer(key_dim=3)
    layer(x, x)
    with pytest.raises(ValueError, match="needs a `cache`"):
        layer(x, x, cache_update_index=0)
    with pytest.raises(ValueError, match="cache.shape"):
        layer(x, x, cache=np.zeros((2, 2, 4, 3, 3), "float32"), cache_update_index=0)
    with pytest.raises(ValueError, match="value_dim == key_dim"):
        other = _layer(key_dim=3, value_dim=2)
        other(x, x)
        other.compute_cache(x)


def test_cache_update_index_must_leave_room_for_the_new_tokens():
    """Four new tokens from index 7 of a cache of 10 do not fit: an error
    naming the index (before, the write was clamped without a word)."""
    x = np.zeros((2, 4, 4), "float32")
    layer = _layer(key_dim=3)
    layer(x, x)
    cache = np.zeros((2, 2, 10, 2, 3), "float32")
    with pytest.raises(ValueError, match="`cache_update_index` must be <= 6"):
        layer(x, x, cache=cache, cache_update_index=7, use_causal_mask=True)
    with pytest.raises(ValueError, match="must be >= 0"):
        layer(x, x, cache=cache, cache_update_index=-1, use_causal_mask=True)


# -- (d) padding ---------------------------------------------------------------


def test_padding_invariance_appended():
    rng = np.random.default_rng(9)
    testing.check_padding_invariance(
        _layer(), _normal(rng, 2, 4, 5), _normal(rng, 2, 7, 4)
    )


@pytest.mark.parametrize("causal", [False, True])
def test_padded_positions_change_nothing_and_get_no_gradient(causal):
    rng = np.random.default_rng(10)
    x = _normal(rng, 3, 10, 4)
    real = _padding(3, 10, seed=3)
    layer = _layer()
    kwargs = dict(query_mask=real, value_mask=real, use_causal_mask=causal)
    want = _np(layer(x, x, **kwargs))[real]
    garbage = np.where(real[:, :, None], x, _normal(rng, 3, 10, 4) * 1e3)
    np.testing.assert_allclose(
        _np(layer(garbage, garbage, **kwargs))[real], want, atol=ATOL
    )
    weights = ops.convert_to_tensor(real[:, :, None].astype("float32"))

    def loss(value):
        return ops.sum(
            ops.sin(layer(ops.convert_to_tensor(x), value, **kwargs)) * weights
        )

    (grad,) = testing.input_gradients(loss, [x])
    grad = _np(grad)
    np.testing.assert_array_equal(grad[~real], 0.0)
    assert np.abs(grad[real]).max() > 0


def test_a_key_row_of_padding_only_reads_nothing():
    rng = np.random.default_rng(11)
    query, value = _normal(rng, 2, 4, 5), _normal(rng, 2, 5, 4)
    real = np.array([[0] * 5, [1] * 5], bool)
    layer = _layer()
    out, weights = layer(query, value, value_mask=real, return_attention_scores=True)
    np.testing.assert_array_equal(_np(weights)[0], 0.0)
    bias = _np(layer.output_dense.bias)
    np.testing.assert_allclose(_np(out)[0], np.broadcast_to(bias, (4, 5)), atol=1e-6)


# -- (e, f, g) compiled, saved, unknown lengths --------------------------------


def _model(layer, t=None, s=None, causal=True):
    query, value = keras.Input((t, 5)), keras.Input((s, 4))
    return keras.Model([query, value], layer(query, value, use_causal_mask=causal))


def test_compiled_fit_and_predict():
    rng = np.random.default_rng(12)
    inputs = [_normal(rng, 4, 8, 5), _normal(rng, 4, 8, 4)]
    layer = _layer(dropout=0.1, seed=3)
    model = _model(layer, 8, 8)
    testing.check_jit_fit(model, inputs, _normal(rng, 4, 8, 5), epochs=2)
    model.compile(jit_compile=True)
    np.testing.assert_allclose(
        model.predict(inputs, verbose=0),
        _np(layer(*inputs, use_causal_mask=True)),
        atol=ATOL,
    )


def test_save_and_load():
    rng = np.random.default_rng(13)
    inputs = [_normal(rng, 2, 7, 5), _normal(rng, 2, 7, 4)]
    layer = _layer(value_dim=2, output_shape=6, compression_factor=2)
    model = _model(layer, 7, 7)
    _randomize(layer)
    testing.check_serialization(model, inputs)


def test_unknown_length_in_a_functional_model():
    rng = np.random.default_rng(14)
    layer = _layer()
    model = _model(layer)
    for t, s in [(7, 7), (9, 10), (10, 4)]:
        query, value = _normal(rng, 2, t, 5), _normal(rng, 2, s, 4)
        want = _np(layer(query, value, use_causal_mask=True))
        np.testing.assert_allclose(
            model.predict([query, value], verbose=0), want, atol=ATOL
        )


@pytest.mark.tf_only
def test_unknown_length_in_a_tf_function():
    import tensorflow as tf

    layer = _layer()
    spec = tf.TensorSpec((None, None, 4), tf.float32)
    mask_spec = tf.TensorSpec((None, None), tf.bool)

    @tf.function(input_signature=[spec, mask_spec], jit_compile=False)
    def run(x, mask):
        return layer(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)

    rng = np.random.default_rng(15)
    for length in (7, 9, 10):
        x, real = _normal(rng, 2, length, 4), _padding(2, length, seed=length)
        want = _np(layer(x, x, query_mask=real, value_mask=real, use_causal_mask=True))
        np.testing.assert_allclose(_np(run(x, real)), want, atol=ATOL)
    assert len(run.get_concrete_function().graph.get_operations()) > 0


# -- arguments -------------------------------------------------------------------


def test_config_round_trip():
    layer = _layer(
        value_dim=2, compression_factor=4, dropout=0.1, output_shape=3, seed=2
    )
    rng = np.random.default_rng(16)
    testing.check_config_round_trip(
        layer, [_normal(rng, 2, 5, 4), _normal(rng, 2, 9, 4)]
    )
    assert layer.get_config()["compression_factor"] == 4


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"compression_factor": 0}, "compression_factor=0"),
        ({"compression_factor": 1.5}, "compression_factor=1.5"),
        ({"num_heads": 0}, "num_heads=0"),
        ({"key_dim": -1}, "key_dim=-1"),
        ({"dropout": 1.0}, "dropout=1.0"),
    ],
)
def test_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=f"Received: {argument}"):
        _layer(**kwargs)


def test_a_per_head_attention_mask_is_refused():
    x = np.zeros((2, 4, 3), "float32")
    with pytest.raises(ValueError, match="`attention_mask`"):
        _layer()(x, x, attention_mask=np.ones((2, 2, 4, 4), bool))


def test_the_output_keeps_the_query_mask():
    padded = np.array([[1, 2, 3, 0, 0]], "int32")
    embedding = keras.layers.Embedding(7, 4, mask_zero=True)
    x = embedding(padded)
    got = _layer().compute_mask(x, embedding.compute_mask(padded))
    np.testing.assert_array_equal(_np(got), padded != 0)
