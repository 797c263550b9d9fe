import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.models import Transformer
from keras_attention.testing import CompiledOnJax

PAD, START, END = 0, 1, 2


def _model(vocab=12, **kwargs):
    config = dict(
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
    )
    config.update(kwargs)
    return Transformer(vocab, vocab, **config)


def _full_pass(model, src, prefix):
    # Compiled on JAX, where each eager call at a new length costs seconds.
    return CompiledOnJax(model)({"encoder_tokens": src, "decoder_tokens": prefix})


def _full_pass_log_probs(model, src, prefix):
    logits = _full_pass(model, src, prefix)
    logits = ops.convert_to_numpy(logits)[:, -1].astype("float64")
    logits[:, PAD] = -1e9  # generate() never emits padding
    logits -= logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


# On JAX the eager search runs op by op (seconds per new shape): the
# compiled variant, which `generate` runs by default, is enough there.
COMPILED_AND_EAGER = [True, pytest.param(False, marks=pytest.mark.slow_on_jax)]


@pytest.mark.parametrize("jit_compile", COMPILED_AND_EAGER)
def test_cached_greedy_generation_equals_uncached(rng, jit_compile):
    model = _model(normalize_first=jit_compile, num_encoder_layers=1)
    src = np.array([[5, 6, 7, 8, 0, 0], [9, 4, 3, 0, 0, 0], [3, 3, 4, 5, 6, 7]])
    length = 6
    tokens = ops.convert_to_numpy(
        model.generate(src, max_length=length, end_id=END, jit_compile=jit_compile)
    )
    prefix = np.full((3, 1), START)
    finished = np.zeros(3, bool)
    for _ in range(length):
        log_probs = _full_pass_log_probs(model, src, prefix)
        nxt = np.where(finished, PAD, log_probs.argmax(-1))
        finished |= nxt == END
        prefix = np.concatenate([prefix, nxt[:, None]], 1)
    np.testing.assert_array_equal(tokens, prefix[:, 1:])


@pytest.mark.slow_on_jax  # generate(jit_compile=False) runs op by op on JAX
def test_exhaustive_beam_search_on_the_model_matches_brute_force():
    vocab, length, alpha = 4, 3, 0.6  # outputs in {1, 2, 3}
    model = _model(vocab=vocab, num_encoder_layers=1, num_decoder_layers=1)
    src = np.array([[3, 1, 2, 0], [2, 3, 3, 1]])
    tokens = model.generate(
        src,
        max_length=length,
        end_id=END,
        num_beams=9,
        length_penalty_alpha=alpha,
        jit_compile=False,
    )
    tokens = ops.convert_to_numpy(tokens)
    seqs = np.array(list(itertools.product([1, 2, 3], repeat=length)))
    prefixes = np.concatenate([np.full((len(seqs), 1), START), seqs[:, :-1]], 1)
    for b in range(2):
        # One causal full pass scores every sequence at every position.
        logits = model(
            {
                "encoder_tokens": np.repeat(src[b : b + 1], len(seqs), 0),
                "decoder_tokens": prefixes,
            }
        )
        logits = ops.convert_to_numpy(logits).astype("float64")
        logits[..., PAD] = -1e9
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        best, best_seq = -np.inf, None
        for seq, lp in zip(seqs.tolist(), logp, strict=True):
            n = seq.index(END) + 1 if END in seq else length
            if any(s != 1 for s in seq[n:]):
                continue  # count each ended sequence once
            score = sum(lp[t, seq[t]] for t in range(n)) / ((5 + n) / 6) ** alpha
            if score > best + 1e-7:
                best, best_seq = score, seq[:n] + [PAD] * (length - n)
        assert tokens[b].tolist() == best_seq


def test_generate_returns_cross_attention():
    model = _model(num_decoder_layers=1)
    src = np.array([[5, 6, 7, 0, 0]])
    tokens, weights = model.generate(
        src, max_length=4, num_beams=2, return_attention_scores=True
    )
    weights = ops.convert_to_numpy(weights)
    assert weights.shape == (1, 1, 2, 4, 5)
    np.testing.assert_array_equal(weights[..., 3:], 0.0)  # encoder padding
    ended = ops.convert_to_numpy(tokens)[0] == PAD
    sums = weights.sum(-1)[0, 0]  # (N, T)
    np.testing.assert_allclose(sums[:, ~ended], 1.0, atol=1e-5)


def _copy_data(rng, n, length, vocab):
    body = rng.integers(3, vocab, size=(n, length))
    src = body
    tgt = body[:, ::-1]
    dec_in = np.concatenate([np.full((n, 1), START), tgt], 1)
    dec_out = np.concatenate([tgt, np.full((n, 1), END)], 1)
    return {"encoder_tokens": src, "decoder_tokens": dec_in}, dec_out


@pytest.mark.parametrize(
    "tie_weights", [False, pytest.param(True, marks=pytest.mark.large)]
)
def test_learns_to_reverse_a_tiny_sequence(rng, tie_weights):
    vocab, length = 8, 4
    keras.utils.set_random_seed(1)
    model = Transformer(
        vocab,
        vocab,
        hidden_dim=32,
        num_heads=2,
        intermediate_dim=64,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        tie_weights=tie_weights,
        position_encoding="learned" if tie_weights else "sinusoidal",
        max_length=8,
    )
    x, y = _copy_data(rng, 512, length, vocab)
    # A decaying rate: a constant 5e-3 ends between 0.875 and 0.97 depending
    # on the backend's random streams; with the decay every run measured
    # (TF and JAX, seeds 1 and 2) reaches 1.0.
    epochs = 8
    rate = keras.optimizers.schedules.CosineDecay(
        5e-3, decay_steps=epochs * len(y) // 32, alpha=0.05
    )
    model.compile(
        optimizer=keras.optimizers.Adam(rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)
    x_test, y_test = _copy_data(np.random.default_rng(7), 64, length, vocab)
    tokens = ops.convert_to_numpy(
        model.generate(x_test["encoder_tokens"], max_length=length + 1)
    )
    accuracy = (tokens == y_test).all(-1).mean()
    print(f"exact-match accuracy {accuracy:.3f}")
    assert accuracy >= 0.9, accuracy
    assert (model.output_projection is None) == tie_weights


def test_bad_arguments():
    with pytest.raises(ValueError, match="`hidden_dim`"):
        Transformer(10, 10, hidden_dim=10, num_heads=3)
    with pytest.raises(ValueError, match="`position_encoding`"):
        Transformer(10, 10, hidden_dim=8, num_heads=2, position_encoding="rotary")
    with pytest.raises(ValueError, match="`encoder_vocabulary_size`"):
        Transformer(0, 10)


@pytest.mark.slow_on_jax  # generate(jit_compile=False) runs op by op on JAX
def test_generate_with_several_source_lengths():
    # The second length retraces the compiled search with an unknown length.
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    rng = np.random.default_rng(0)
    for length in (5, 7):
        src = rng.integers(3, 12, size=(2, length))
        tokens, weights = model.generate(
            src, max_length=4, num_beams=2, return_attention_scores=True
        )
        assert tuple(weights.shape) == (2, 1, 2, 4, length)
    eager = model.generate(src, max_length=4, num_beams=2, jit_compile=False)
    np.testing.assert_array_equal(tokens, eager)


def _chunked_equals_dense_setup(monkeypatch):
    """Small blocks so that the chunked path loops over several, ragged ones."""
    import functools
    import importlib

    from keras_attention.ops.chunked.chunked_attention import chunked_attention

    module = importlib.import_module("keras_attention.ops.multi_head")
    monkeypatch.setattr(
        module,
        "chunked_attention",
        functools.partial(chunked_attention, query_chunk_size=4, key_chunk_size=3),
    )


@pytest.mark.tf_only  # GradientTape
def test_attention_impl_chunked_equals_dense(monkeypatch):
    import tensorflow as tf

    _chunked_equals_dense_setup(monkeypatch)
    small = dict(num_encoder_layers=1, num_decoder_layers=1, normalize_first=True)
    dense = _model(attention_impl="dense", **small)
    chunked = _model(attention_impl="chunked", **small)
    dense.build()
    chunked.build()
    chunked.set_weights(dense.get_weights())
    # Padding in both sources and targets, S=8 != T=7, neither a block multiple.
    src = np.array([[5, 6, 7, 8, 9, 3, 0, 0], [4, 4, 3, 5, 6, 7, 8, 9]])
    tgt = np.array([[START, 7, 6, 5, 0, 0, 0], [START, 9, 8, 7, 6, 5, 4]])
    inputs = {"encoder_tokens": src, "decoder_tokens": tgt}

    def value_and_grads(model):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            loss = tf.reduce_sum(logits * tf.cos(logits))  # non-trivial upstream
        grads = tape.gradient(loss, model.trainable_weights)
        return [logits.numpy()] + [tf.convert_to_tensor(g).numpy() for g in grads]

    want, got = value_and_grads(dense), value_and_grads(chunked)
    assert len(want) == len(dense.trainable_weights) + 1
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    # Cached generation on the chunked path gives the dense path's tokens.
    np.testing.assert_array_equal(
        ops.convert_to_numpy(chunked.generate(src, max_length=3, jit_compile=False)),
        ops.convert_to_numpy(dense.generate(src, max_length=3, jit_compile=False)),
    )


def test_attention_impl_reaches_every_attention_layer_and_config():
    model = _model(attention_impl="chunked", num_encoder_layers=1)
    assert model.get_config()["attention_impl"] == "chunked"
    impls = {
        layer.attention_impl
        for layer in model._flatten_layers()
        if hasattr(layer, "attention_impl") and layer is not model
    }
    assert impls == {"chunked"}
    assert Transformer.from_config(model.get_config()).attention_impl == "chunked"
    assert _model().attention_impl == "auto"


def test_attention_impl_bad_value():
    with pytest.raises(ValueError, match="`attention_impl`.*flash"):
        _model(attention_impl="flash")


@pytest.mark.tf_only  # counts tf.function traces
@pytest.mark.parametrize("num_beams", [1, 2])
def test_generate_traces_the_step_once_not_per_token(monkeypatch, num_beams):
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    traces = []
    real_logits = model.logits  # called once per Python run of the step

    def counting_logits(decoder_output):
        traces.append(1)
        return real_logits(decoder_output)

    monkeypatch.setattr(model, "logits", counting_logits)
    rng = np.random.default_rng(0)
    src = rng.integers(3, 12, size=(2, 5))
    model.generate(src, max_length=8, num_beams=num_beams)
    per_compile = len(traces)
    # The first step, then the loop body: not one trace per token (8).
    assert 1 <= per_compile <= 2, per_compile
    model.generate(rng.integers(3, 12, size=(2, 5)), max_length=8, num_beams=num_beams)
    assert len(traces) == per_compile  # same shapes: no retrace at all
    (function,) = model._generate_functions.values()
    assert function.experimental_get_tracing_count() == 1


# -- sampling ----------------------------------------------------------------


def _full_pass_log_probs_at_every_step(model, src, prefix):
    logits = _full_pass(model, src, prefix)
    logits = ops.convert_to_numpy(logits).astype("float64")
    logits[..., PAD] = -1e9  # generate() never emits padding
    logits -= logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


@pytest.mark.parametrize("jit_compile", COMPILED_AND_EAGER)
def test_sampled_generation_stays_in_the_models_top_k(rng, jit_compile):
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    src = rng.integers(3, 12, size=(4, 5))
    length, k = 6, 3
    tokens = ops.convert_to_numpy(
        model.generate(
            src,
            max_length=length,
            end_id=END,
            sample=True,
            temperature=5.0,  # flat: outside the top 3 would often be drawn
            top_k=k,
            seed=0,
            jit_compile=jit_compile,
        )
    )
    prefix = np.concatenate([np.full((4, 1), START), tokens[:, :-1]], 1)
    log_probs = _full_pass_log_probs_at_every_step(model, src, prefix)  # (B, T, V)
    ranks = (log_probs > np.take_along_axis(log_probs, tokens[..., None], -1)).sum(-1)
    ended = np.cumsum(tokens == END, axis=1) - (tokens == END) > 0
    assert (ranks[~ended] < k).all()  # every sampled token is in the top k ...
    assert (ranks[~ended] > 0).any()  # ... and not always the greedy one
    assert (tokens[ended] == PAD).all()


@pytest.mark.slow_on_jax  # generate(jit_compile=False) runs op by op on JAX
def test_sampled_generation_is_reproducible_with_a_seed(rng):
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    src = rng.integers(3, 12, size=(3, 5))

    def generate(seed, **kwargs):
        kwargs = {"max_length": 8, "sample": True, "top_p": 0.95, **kwargs}
        return ops.convert_to_numpy(model.generate(src, seed=seed, **kwargs))

    first = generate(11)
    np.testing.assert_array_equal(first, generate(11))
    np.testing.assert_array_equal(first, generate(11, jit_compile=False))
    assert not np.array_equal(first, generate(12))
    greedy = ops.convert_to_numpy(model.generate(src, max_length=8))
    np.testing.assert_array_equal(generate(5, top_k=1, top_p=None), greedy)


@pytest.mark.tf_only  # counts tf.function traces
def test_sampling_with_a_new_seed_does_not_retrace():
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    src = np.random.default_rng(0).integers(3, 12, size=(2, 5))
    runs = [
        ops.convert_to_numpy(model.generate(src, max_length=6, sample=True, seed=s))
        for s in (1, 2, None)
    ]
    assert not np.array_equal(runs[0], runs[1])
    (function,) = model._generate_functions.values()
    assert function.experimental_get_tracing_count() == 1


def test_generate_sampling_bad_arguments():
    model = _model(num_encoder_layers=1, num_decoder_layers=1)
    src = np.array([[3, 4, 5]])
    with pytest.raises(ValueError, match=r"`num_beams` must be 1.*num_beams=2"):
        model.generate(src, max_length=3, sample=True, num_beams=2)
    with pytest.raises(ValueError, match=r"apply only with `sample=True`.*top_k=5"):
        model.generate(src, max_length=3, top_k=5)
    with pytest.raises(ValueError, match=r"`temperature` must be.*temperature=0"):
        model.generate(src, max_length=3, sample=True, temperature=0)
    with pytest.raises(ValueError, match=r"`top_p` must be in \(0, 1\]"):
        model.generate(src, max_length=3, sample=True, top_p=2.0)
    assert model._generate_functions == {}  # nothing traced for bad arguments
