"""`MemoryCompressedDecoder` (T-DMCA, Liu et al., 2018) and its
memory-compressed block: layer kinds and masks, causality, cached steps and
cached generation against the full pass, compiled fit with Keras masks,
saving and bad arguments."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import testing

B, D, N, F = 2, 8, 2, 16


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


def _decoder(pattern="LMLMF", **kwargs):
    defaults = dict(
        num_heads=N, intermediate_dim=F, compression_factor=3, local_block_size=4
    )
    return ka.layers.MemoryCompressedDecoder(pattern, **{**defaults, **kwargs})


def _randomize(layer, seed=1):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype(w.dtype))


def test_the_pattern_makes_the_layers(rng):
    decoder = _decoder("LMF", local_memory_flange=2)
    x = rng.normal(size=(B, 13, D)).astype("float32")
    _, weights = decoder(x, return_attention_scores=True)
    local, compressed, full = (_np(w) for w in weights["self_attention"])
    rows, cols = np.indices((13, 13))
    # A local query sees its own block (4) and the 2 positions before it.
    band = (cols <= rows) & (cols >= (rows // 4) * 4 - 2)
    assert (local[..., ~band] == 0).all() and (local[..., band] > 0).all()
    assert compressed.shape == (B, N, 13, 1 + 5)
    np.testing.assert_array_equal(full[..., ~(cols <= rows)], 0.0)
    kinds = [type(b).__name__ for b in decoder.blocks]
    assert kinds == [
        "TransformerDecoderBlock",
        "MemoryCompressedDecoderBlock",
        "TransformerDecoderBlock",
    ]
    assert decoder.blocks[1].self_attention.compression_factor == 3


def test_the_default_flange_is_the_previous_block(rng):
    block = _decoder("L").blocks[0]
    assert block.mask_modifier.get_config() == {
        "query_block": 4,
        "memory_flange": 4,
        "causal": True,
    }


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("steps", [[1] * 14, [7, 1, 1, 5]])
def test_cached_steps_equal_the_full_pass(rng, normalize_first, steps):
    """Token by token and in chunks, through the steps at which a local
    block starts (4, 8, 12) and a slot completes (2, 5, 8, 11)."""
    x = rng.normal(size=(B, 14, D)).astype("float32")
    decoder = _decoder(normalize_first=normalize_first)
    full = _np(decoder(x))
    _randomize(decoder)
    full = _np(decoder(x))
    cache = decoder.init_cache(B, 14)
    start, outputs = 0, []
    for n in steps:
        y, cache = decoder(
            x[:, start : start + n], cache=cache, cache_update_index=start
        )
        outputs.append(_np(y))
        start += n
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, atol=1e-4)


def _language_model(vocabulary=11, length=None, pattern="LMF"):
    """Embedding (`mask_zero=True`), decoder, logits. The dense path: with
    an unknown length `"auto"` compiles every path it may take (several
    times the compile time)."""
    tokens = keras.Input((length,), dtype="int32")
    embedding = keras.layers.Embedding(vocabulary, D, mask_zero=True)
    decoder = _decoder(pattern, normalize_first=True, attention_impl="dense")
    head = keras.layers.Dense(vocabulary)
    model = keras.Model(tokens, head(decoder(embedding(tokens))))
    return model, embedding, decoder, head


def _step_fn(embedding, decoder, head):
    def step_fn(tokens, cache, index):
        x = embedding(tokens[:, None])
        y, cache = decoder(x, cache=cache, cache_update_index=index)
        return head(y)[:, 0], cache, None

    return step_fn


def _log_probabilities(model, start, tokens):
    """`log P(tokens | start)` `(B,)` from the full pass."""
    inputs = np.concatenate([start[:, None], tokens[:, :-1]], axis=1)
    logits = _np(model(inputs)).astype("float64")
    logits -= logits.max(-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return np.take_along_axis(log_p, tokens[..., None], -1)[..., 0].sum(-1)


@pytest.mark.parametrize("search", ["greedy", "sample"])
def test_cached_generation_equals_the_full_pass(search):
    """The tokens decoded with the cache are those the full pass predicts,
    token for token (each the arg-max of the full pass's logits at its
    position; sampling at a temperature near 0 too)."""
    model, embedding, decoder, head = _language_model()
    _randomize(model, seed=2)
    step_fn, steps = _step_fn(embedding, decoder, head), 10
    start, cache = np.array([1, 2], "int32"), decoder.init_cache(B, steps)
    if search == "greedy":
        tokens, _ = ka.decoding.greedy_search(step_fn, start, cache, steps)
    else:
        tokens, _ = ka.decoding.sample(
            step_fn, start, cache, steps, temperature=1e-4, seed=3
        )
    tokens = _np(tokens)
    inputs = np.concatenate([start[:, None], tokens[:, :-1]], axis=1)
    np.testing.assert_array_equal(tokens, np.argmax(_np(model(inputs)), axis=-1))


def test_cached_beam_search_scores_equal_the_full_pass():
    """Every beam's score is the full pass's log-probability of its tokens:
    the cache rows followed their hypotheses."""
    model, embedding, decoder, head = _language_model()
    _randomize(model, seed=6)
    step_fn, steps = _step_fn(embedding, decoder, head), 10
    start = np.array([3, 4], "int32")
    tokens, _, scores = ka.decoding.beam_search(
        step_fn, start, decoder.init_cache(B, steps), steps, num_beams=3,
        length_penalty_alpha=0.0, return_all_beams=True,
    )  # fmt: skip
    tokens, scores = _np(tokens), _np(scores)
    for k in range(3):
        want = _log_probabilities(model, start, tokens[:, k])
        np.testing.assert_allclose(scores[:, k], want, rtol=1e-4, atol=1e-4)


def test_causal_by_gradients(rng):
    x = rng.normal(size=(B, 10, D)).astype("float32")
    decoder = _decoder()
    decoder(x)
    _randomize(decoder)
    testing.check_causality(decoder, [x])


def test_compiled_fit_and_predict_with_keras_masks():
    """Compiled fit and predict with `Embedding(mask_zero=True)` (padded
    rows): predict equals the eager call on the same weights."""
    model, *_ = _language_model(length=12)
    rng = np.random.default_rng(4)
    tokens = rng.integers(1, 11, size=(4, 12)).astype("int32")
    tokens[1, 8:] = 0
    testing.check_jit_fit(model, tokens, np.roll(tokens, -1, axis=1), epochs=2,
                          loss=keras.losses.SparseCategoricalCrossentropy(
                              from_logits=True))  # fmt: skip
    np.testing.assert_allclose(
        model.predict(tokens, verbose=0), _np(model(tokens)), atol=1e-5
    )


def test_save_and_load(rng):
    """`.keras` round trip, and on TensorFlow the SavedModel export."""
    model, *_ = _language_model(length=10)
    _randomize(model, seed=5)
    tokens = rng.integers(1, 11, size=(2, 10)).astype("int32")
    testing.check_serialization(model, [tokens])


def test_config_round_trip(rng):
    decoder = _decoder("MLF", local_memory_flange=0, dropout=0.1, seed=4)
    testing.check_config_round_trip(decoder, [rng.normal(size=(B, 7, D))])
    config = decoder.get_config()
    assert config["layer_pattern"] == "MLF" and "num_layers" not in config
    again = ka.layers.MemoryCompressedDecoder.from_config(config)
    assert again.blocks[1].mask_modifier.memory_flange == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"layer_pattern": "LXM"}, "layer_pattern='LXM'"),
        ({"layer_pattern": ""}, "layer_pattern=''"),
        ({"layer_pattern": 5}, "layer_pattern=5"),
        ({"compression_factor": 0}, "compression_factor=0"),
        ({"local_block_size": 0}, "local_block_size=0"),
        ({"local_memory_flange": -1}, "local_memory_flange=-1"),
        ({"mask_modifier": ka.modifiers.CausalMask()}, "mask_modifier="),
        ({"num_key_value_heads": 1}, "num_key_value_heads=1"),
        ({"rope_max_wavelength": 100}, "rope_max_wavelength=100"),
    ],
)
def test_bad_arguments(kwargs, message):
    pattern = kwargs.pop("layer_pattern", "LM")
    with pytest.raises(ValueError, match=f"Received: {message}"):
        _decoder(pattern, **kwargs)


def test_the_compressed_block_has_no_keras_hub_twin():
    block = ka.layers.MemoryCompressedDecoderBlock(num_heads=2, intermediate_dim=4)
    with pytest.raises(ValueError, match="keras-hub has no memory-compressed"):
        block.to_keras_hub()
