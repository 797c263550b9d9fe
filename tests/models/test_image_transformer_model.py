"""ImageTransformer: causal over pixels, cached sampling consistent with the
full pass, local = full with the mask on both paths, saving, compiled fit,
argument errors."""

import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km

SHAPE = (4, 6)
LEVELS = 3


def _model(mask_modifier="local2d", **kwargs):
    if mask_modifier == "local2d":
        mask_modifier = km.BlockLocal2D(SHAPE[1], (2, 3), (1, 3))
    sizes = dict(hidden_dim=16, num_heads=2, intermediate_dim=24, num_layers=2)
    return ka.models.ImageTransformer(
        SHAPE, LEVELS, mask_modifier=mask_modifier, **{**sizes, **kwargs}
    )


def _images(n=3, seed=0):
    return np.random.default_rng(seed).integers(0, LEVELS, size=(n, *SHAPE))


MODIFIERS = {
    "full": None,
    "local2d": "local2d",
    "local1d": km.BlockLocal1D(query_block=4, memory_flange=5),
}


@pytest.mark.parametrize("name", sorted(MODIFIERS))
def test_a_pixel_depends_only_on_the_pixels_before_it(name):
    model = _model(MODIFIERS[name])
    images = _images()
    logits = ops.convert_to_numpy(model(images)).reshape(3, -1, LEVELS)
    flat = images.reshape(3, -1)
    for t in (0, 7, 13, flat.shape[1] - 1):
        changed = flat.copy()
        changed[:, t:] = (changed[:, t:] + 1) % LEVELS  # pixel t and after
        after = ops.convert_to_numpy(model(changed.reshape(images.shape)))
        after = after.reshape(3, -1, LEVELS)
        np.testing.assert_allclose(after[:, : t + 1], logits[:, : t + 1], atol=1e-5)
        if t + 1 < flat.shape[1]:  # the next pixel does see the change
            assert np.abs(after[:, t + 1] - logits[:, t + 1]).max() > 1e-6


@pytest.mark.parametrize("name", sorted(MODIFIERS))
def test_greedy_sample_is_the_full_pass_argmax(name):
    """Cached decoding equals the full pass: a greedy sample (top_k=1) is a
    fixed point of the teacher-forced model's argmax."""
    model = _model(MODIFIERS[name])
    greedy = ops.convert_to_numpy(model.sample(2, top_k=1, seed=0))
    assert greedy.shape == (2, *SHAPE) and greedy.dtype == np.int32
    argmax = np.argmax(ops.convert_to_numpy(model(greedy)), axis=-1)
    np.testing.assert_array_equal(argmax, greedy)


def test_sampling_is_reproducible_by_seed():
    model = _model()
    first = ops.convert_to_numpy(model.sample(4, seed=3))
    np.testing.assert_array_equal(ops.convert_to_numpy(model.sample(4, seed=3)), first)
    other = ops.convert_to_numpy(model.sample(4, seed=4))
    assert (other != first).any()
    assert first.min() >= 0 and first.max() < LEVELS


@pytest.mark.parametrize("impl", ["chunked", "fused"])
def test_local_chunked_and_fused_equal_dense_and_the_mask_by_hand(impl):
    images = _images()
    dense = _model(attention_impl="dense")
    other = _model(attention_impl=impl)
    dense(images)
    other(images)
    other.set_weights(dense.get_weights())
    expected = ops.convert_to_numpy(dense(images))
    np.testing.assert_allclose(ops.convert_to_numpy(other(images)), expected, atol=1e-5)
    # Full attention with the same weights sees more: different logits.
    full = _model(None)
    full(images)
    full.set_weights(dense.get_weights())
    assert np.abs(ops.convert_to_numpy(full(images)) - expected).max() > 1e-4


def test_save_load_gives_identical_outputs(tmp_path):
    model = _model(dropout=0.1, seed=2)
    images = _images()
    expected = ops.convert_to_numpy(model(images))
    path = os.path.join(tmp_path, "image_transformer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.mask_modifier, km.BlockLocal2D)
    assert loaded.mask_modifier.get_config() == model.mask_modifier.get_config()
    np.testing.assert_array_equal(ops.convert_to_numpy(loaded(images)), expected)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded.sample(2, seed=1)),
        ops.convert_to_numpy(model.sample(2, seed=1)),
    )


@pytest.mark.parametrize("impl", ["chunked", "fused"])
def test_compiled_fit_lowers_the_loss(impl):
    model = _model(attention_impl=impl)
    # Every image is the same stripes: easy to learn.
    images = np.tile(np.arange(SHAPE[1]) % LEVELS, (16, SHAPE[0], 1))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    losses = model.fit(images, images, epochs=6, batch_size=8, verbose=0)
    losses = losses.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(image_shape=(4,)), "image_shape"),
        (dict(image_shape=(4, 0)), "image_shape"),
        (dict(num_levels=1), "num_levels"),
        (dict(hidden_dim=15), "divisible"),
        (dict(num_layers=0), "num_layers"),
        (dict(dropout=1.5), "dropout"),
        (dict(attention_impl="fast"), "attention_impl"),
        (dict(mask_modifier=km.BlockLocal2D(5, (2, 2), (1, 1))), "image_width"),
        (
            dict(mask_modifier=km.BlockLocal2D(6, (2, 2), (1, 1), causal=False)),
            "causal",
        ),
        (dict(mask_modifier=km.BlockLocal1D(4, 4, causal=False)), "causal"),
        (dict(mask_modifier="local"), "mask_modifier"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    arguments = dict(image_shape=SHAPE, num_levels=LEVELS, hidden_dim=16, num_heads=2)
    with pytest.raises(ValueError, match=match):
        ka.models.ImageTransformer(**{**arguments, **kwargs})


def test_bad_calls_are_refused():
    model = _model()
    with pytest.raises(ValueError, match=r"images.shape=\(2, 6, 4\)"):
        model(np.zeros((2, 6, 4), "int32"))
    with pytest.raises(ValueError, match="num_images"):
        model.sample(0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(query_block=0), "query_block"),
        (dict(query_block=2.0), "query_block"),
        (dict(memory_flange=-1), "memory_flange"),
        (dict(memory_flange=True), "memory_flange"),
    ],
)
def test_block_local_1d_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=f"{match}.*Received: {match}="):
        km.BlockLocal1D(**kwargs)
