"""`attention_impl`: the chunked path equals the dense one inside the layers."""

import functools
import importlib

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import testing
from keras_attention.ops.chunked.chunked_attention import chunked_attention

# `keras_attention.ops.multi_head` runs the paths (and imports `chunked_attention`).
attention_module = importlib.import_module("keras_attention.ops.multi_head")
dispatch_module = importlib.import_module("keras_attention.ops.dispatch.attention_plan")

B, T, S, D, N, H = 2, 11, 7, 12, 3, 4


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Several (ragged) blocks even at these tiny lengths."""
    monkeypatch.setattr(
        attention_module,
        "chunked_attention",
        functools.partial(chunked_attention, query_chunk_size=4, key_chunk_size=3),
    )


def _pair(cls, *args, **kwargs):
    dense = cls(*args, attention_impl="dense", **kwargs)
    chunked = cls(*args, attention_impl="chunked", **kwargs)
    return dense, chunked


def _value_and_grads(layer, inputs, kwargs, compile=None):
    """Output and gradients of `sum(out * cos(out))` with respect to the
    inputs and every trainable weight, through `stateless_call` and
    `testing.input_gradients` (any backend), eagerly or under `compile`."""
    weights = [keras.ops.convert_to_numpy(w) for w in layer.trainable_weights]
    frozen = [w.value for w in layer.non_trainable_weights]
    n = len(inputs)

    def forward(*args):
        out, _ = layer.stateless_call(list(args[n:]), frozen, *args[:n], **kwargs)
        return out

    def loss(*args):
        out = forward(*args)
        return keras.ops.sum(out * keras.ops.cos(out))  # a non-trivial upstream

    def run(*args):
        return [forward(*args), *testing.input_gradients(loss, args)]

    if compile is not None:
        run = compile(run)
    return [np.asarray(x) for x in run(*inputs, *weights)]


def _padding(length, real):
    mask = np.ones((B, length), bool)
    mask[1, real:] = False
    return mask


@pytest.mark.parametrize(
    "causal, padded, compiled",
    [(False, True, False), (True, False, False), (True, True, True)],
)
def test_self_attention_chunked_equals_dense(causal, padded, compiled, jit):
    x = np.random.default_rng(0).normal(size=(B, T, D)).astype("float32")
    dense, chunked = _pair(ka.layers.MultiHeadSelfAttention, N, H)
    dense.build(x.shape)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    kwargs = dict(use_causal_mask=causal)
    if padded:
        kwargs["query_mask"] = _padding(T, 6)
    compile = jit if compiled else None
    want = _value_and_grads(dense, [x], kwargs, compile)
    got = _value_and_grads(chunked, [x], kwargs, compile)
    assert len(want) == 2 + len(dense.trainable_weights)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_cross_attention_chunked_equals_dense_t_ne_s(compiled, jit):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(B, T, D)).astype("float32")
    value = rng.normal(size=(B, S, 5)).astype("float32")
    dense, chunked = _pair(ka.layers.MultiHeadAttention, N, H, value_dim=2)
    dense.build(query.shape, value.shape)
    chunked.build(query.shape, value.shape)
    chunked.set_weights(dense.get_weights())
    kwargs = dict(query_mask=_padding(T, 8), value_mask=_padding(S, 4))
    compile = jit if compiled else None
    want = _value_and_grads(dense, [query, value], kwargs, compile)
    got = _value_and_grads(chunked, [query, value], kwargs, compile)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_cached_decoding_chunked_equals_dense(jit):
    x = np.random.default_rng(2).normal(size=(B, 3, D)).astype("float32")
    dense, chunked = _pair(ka.layers.MultiHeadSelfAttention, N, H)
    dense.build(x.shape)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    cache = np.zeros((B, 2, 8, N, H), "float32")

    def stepper(layer):
        @jit
        def step(tokens, cache, index):
            return layer(
                tokens, use_causal_mask=True, cache=cache, cache_update_index=index
            )

        return step

    dense_step, chunked_step = stepper(dense), stepper(chunked)
    want_cache = got_cache = cache
    for index, (start, stop) in enumerate([(0, 2), (2, 3)]):
        want, want_cache = dense_step(x[:, start:stop], want_cache, start)
        got, got_cache = chunked_step(x[:, start:stop], got_cache, start)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=index)
    np.testing.assert_allclose(got_cache, want_cache, rtol=1e-6)


def test_auto_switches_at_the_threshold(monkeypatch):
    calls = []
    real = attention_module.chunked_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(attention_module, "chunked_attention", spy)
    monkeypatch.setattr(dispatch_module, "CHUNKED_MIN_SIZE", T * T)
    layer = ka.layers.MultiHeadSelfAttention(N, H)
    x = np.random.default_rng(3).normal(size=(B, T, D)).astype("float32")
    layer(x)
    assert len(calls) == 1  # T * T >= threshold: chunked
    layer(x[:, :-1])
    assert len(calls) == 1  # below the threshold: dense
    _, weights = layer(x, return_attention_scores=True)
    assert len(calls) == 1 and weights.shape == (B, N, T, T)  # weights: dense
    layer(x, attention_mask=np.ones((B, T, T), bool))
    assert len(calls) == 2  # explicit mask: chunked too
    dropping = ka.layers.MultiHeadSelfAttention(N, H, dropout=0.5, seed=1)
    dropping(x, training=True)
    assert len(calls) == 3  # attention dropout while training: chunked too


def test_choose_attention_impl():
    choose = ka.ops.choose_attention_impl
    big = 2048
    assert choose("auto", big, big) == "chunked"
    assert choose("auto", big, big - 1) == "dense"
    unknown = "runtime" if keras.backend.backend() == "tensorflow" else "dense"
    assert choose("auto", None, big) == unknown
    assert choose("auto", None, big, return_weights=True) == "dense"
    assert choose("auto", big, big, return_weights=True) == "dense"
    assert choose("dense", big, big) == "dense"
    assert choose("chunked", 1, 1) == "chunked"


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only TensorFlow traces a function for lengths it does not know",
)
def test_unknown_length_decides_when_the_graph_runs(monkeypatch):
    """One graph traced for `(None, None, D)` runs the chunked path for long
    inputs and the dense one for short, with the dense path's values."""
    import tensorflow as tf

    calls = []
    real = attention_module.chunked_attention

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        tick = tf.py_function(lambda: calls.append(1) or 0, [], tf.int32)
        with tf.control_dependencies([tick]):
            return tf.identity(out)

    monkeypatch.setattr(attention_module, "chunked_attention", spy)
    monkeypatch.setattr(dispatch_module, "CHUNKED_MIN_SIZE", T * T)
    auto = ka.layers.MultiHeadSelfAttention(N, H)
    dense = ka.layers.MultiHeadSelfAttention(N, H, attention_impl="dense")
    x = np.random.default_rng(4).normal(size=(B, T, D)).astype("float32")
    auto(x[:, :2]), dense(x[:, :2])
    dense.set_weights(auto.get_weights())
    traced = tf.function(auto, input_signature=[tf.TensorSpec((None, None, D))])
    np.testing.assert_allclose(traced(x), dense(x), rtol=1e-5, atol=1e-6)
    assert len(calls) == 1  # T * T >= threshold: chunked
    short = x[:, :-1]
    np.testing.assert_allclose(traced(short), dense(short), rtol=1e-5, atol=1e-6)
    assert len(calls) == 1  # below it: dense, in the same graph
    assert len(traced._list_all_concrete_functions()) == 1


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only TensorFlow traces a function for lengths it does not know",
)
def test_unknown_length_choice_trains_under_xla(monkeypatch):
    """`fit` under XLA on `keras.Input((None, D))` with padded batches on
    both sides of the threshold: the same losses and weights as the dense
    path (the run-time `cond` and its gradient compile, masks included)."""
    monkeypatch.setattr(dispatch_module, "CHUNKED_MIN_SIZE", T * T)
    rng = np.random.default_rng(5)
    # Batch sizes vary too: Keras retraces for `(None, None, D)`.
    shapes = [(B, T), (B + 1, 3), (B, T + 2), (B + 1, T + 1)]
    batches = [rng.normal(size=(*shape, D)).astype("float32") for shape in shapes]
    for batch in batches:
        batch[1, -2:] = 0.0  # padding, masked by `Masking`

    def train(impl):
        keras.utils.set_random_seed(6)
        x = keras.Input((None, D))
        masked = keras.layers.Masking()(x)
        y = ka.layers.MultiHeadSelfAttention(N, H, attention_impl=impl)(masked)
        model = keras.Model(x, keras.layers.Dense(1)(y))
        model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=True)
        losses = [
            model.train_on_batch(b, np.ones(b.shape[:2] + (1,), "float32"))
            for b in batches
        ]
        return losses, model.get_weights()

    (want, want_w), (got, got_w) = train("dense"), train("auto")
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for g, w in zip(got_w, want_w, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only TensorFlow traces a function for lengths it does not know",
)
@pytest.mark.parametrize("length", [T, 3], ids=["chunked", "dense"])
def test_unknown_length_under_xla_drops_the_same_weights_twice(monkeypatch, length):
    """Under XLA the backward recomputes the forward: with attention dropout
    it must drop the same weights. The output is linear in `value`, so
    `sum(out * c) == sum(d/dvalue * value)` holds only if it does."""
    import tensorflow as tf

    monkeypatch.setattr(dispatch_module, "CHUNKED_MIN_SIZE", T * T)
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(B, length, N, H)).astype("float32") for _ in "qkv")
    c = rng.normal(size=v.shape).astype("float32")
    seed = keras.random.SeedGenerator(3)
    spec = tf.TensorSpec((None, None, N, H))

    @tf.function(jit_compile=True, input_signature=[spec] * 4)
    def value_and_grad(q, k, v, c):
        with tf.GradientTape() as tape:
            tape.watch(v)
            out, _ = ka.ops.multi_head_attention(
                q, k, v, dropout_rate=0.5, seed=seed, training=True
            )
            f = tf.reduce_sum(out * c)
        return f, tape.gradient(f, v)

    f, d_v = value_and_grad(q, k, v, c)
    np.testing.assert_allclose(np.sum(np.asarray(d_v) * v), f, rtol=1e-4)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only TensorFlow traces a function for lengths it does not know",
)
def test_unknown_length_under_xla_trains_a_learned_score_modifier(monkeypatch):
    """The recomputing backward returns the gradients of the variables the
    score modifier reads (a T5 bias table), on both branches, as the dense
    path does."""
    import tensorflow as tf

    monkeypatch.setattr(dispatch_module, "CHUNKED_MIN_SIZE", 6 * 6)

    def make(impl):
        keras.utils.set_random_seed(1)
        bias = ka.modifiers.RelativePositionBias(num_heads=2)
        layer = ka.layers.MultiHeadSelfAttention(
            2, 4, attention_impl=impl, score_modifier=bias
        )
        layer(np.zeros((1, 3, 8), "float32"))
        return layer

    def gradients(layer):
        @tf.function(jit_compile=True, input_signature=[tf.TensorSpec((None, None, 8))])
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(tf.sin(layer(x)))
            return tape.gradient(y, [x, *layer.trainable_weights])

        return run

    dense, auto = make("dense"), make("auto")
    auto.set_weights(dense.get_weights())
    assert "relative_position_bias" in auto.trainable_weights[0].path
    for length in (7, 4):  # 49 >= 36: chunked; 16: dense
        x = np.random.default_rng(length).normal(size=(2, length, 8))
        x = x.astype("float32")
        want, got = gradients(dense)(x), gradients(auto)(x)
        assert np.any(np.asarray(got[1]) != 0.0)  # the table learns
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_chunked_cannot_return_scores():
    layer = ka.layers.MultiHeadSelfAttention(2, 4, attention_impl="chunked")
    x = np.zeros((1, 4, 8), "float32")
    with pytest.raises(ValueError, match="return_attention_scores=True"):
        layer(x, return_attention_scores=True)


@pytest.mark.parametrize("compiled", [False, True])
def test_explicit_mask_chunked_equals_dense(compiled, jit):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(B, T, D)).astype("float32")
    mask = rng.random((B, T, T)) < 0.6
    mask[0, 3] = False  # a query that sees nothing
    dense = ka.layers.MultiHeadSelfAttention(N, H, attention_impl="dense")
    dense.build(x.shape)
    chunked = ka.layers.MultiHeadSelfAttention(N, H, attention_impl="chunked")
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())

    def run(layer):
        return lambda x: layer(x, attention_mask=mask, use_causal_mask=True)

    want = np.asarray(run(dense)(x))
    got = np.asarray((jit(run(chunked)) if compiled else run(chunked))(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[0, 3], 0.0)


def test_chunked_attention_dropout_while_training():
    """Chunked dropout: active only in training, unbiased, seeded."""
    x = np.random.default_rng(8).normal(size=(1, 40, D)).astype("float32")

    def layer(seed):
        layer = ka.layers.MultiHeadSelfAttention(
            N, H, dropout=0.3, attention_impl="chunked", seed=seed
        )
        layer.build(x.shape)
        layer.set_weights(reference.get_weights())
        return layer

    reference = ka.layers.MultiHeadSelfAttention(N, H, attention_impl="dense")
    reference.build(x.shape)
    want = np.asarray(reference(x))
    a, b = layer(3), layer(3)
    np.testing.assert_allclose(np.asarray(a(x)), want, rtol=1e-5, atol=1e-6)
    first = np.asarray(a(x, training=True))
    again = np.asarray(a(x, training=True))
    assert not np.allclose(first, want, atol=1e-3)  # dropout is active
    assert not np.allclose(first, again, atol=1e-3)  # a fresh mask per call
    np.testing.assert_array_equal(np.asarray(b(x, training=True)), first)  # seeded


def test_bad_attention_impl_raises():
    with pytest.raises(ValueError, match="attention_impl='flash'"):
        ka.layers.MultiHeadAttention(2, 4, attention_impl="flash")
    with pytest.raises(ValueError, match="attention_impl"):
        ka.layers.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=8, attention_impl="Dense"
        )


@pytest.mark.parametrize(
    "layer",
    [
        ka.layers.MultiHeadAttention(2, 4, attention_impl="chunked"),
        ka.layers.MultiHeadSelfAttention(2, 4, attention_impl="dense"),
        ka.layers.TransformerEncoderBlock(
            num_heads=2, intermediate_dim=8, attention_impl="chunked"
        ),
        ka.layers.TransformerDecoderBlock(
            num_heads=2, intermediate_dim=8, attention_impl="chunked"
        ),
        ka.layers.TransformerEncoder(
            2, num_heads=2, intermediate_dim=8, attention_impl="chunked"
        ),
        ka.layers.TransformerDecoder(
            2, num_heads=2, intermediate_dim=8, attention_impl="dense"
        ),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.attention_impl == layer.attention_impl
    assert clone.get_config() == config


def test_encoder_stack_chunked_equals_dense():
    x = np.random.default_rng(4).normal(size=(B, T, 8)).astype("float32")
    mask = np.asarray(_padding(T, 5))
    kwargs = dict(num_layers=2, num_heads=2, intermediate_dim=16, dropout=0.0)
    dense = ka.layers.TransformerEncoder(**kwargs, attention_impl="dense")
    chunked = ka.layers.TransformerEncoder(**kwargs, attention_impl="chunked")
    want = dense(x, padding_mask=mask)
    chunked.build(x.shape)
    chunked.set_weights(dense.get_weights())
    got = chunked(x, padding_mask=mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # The sublayers really use the forced implementation.
    assert chunked.blocks[0].self_attention.attention_impl == "chunked"
    assert keras.ops.all(keras.ops.isfinite(got))
