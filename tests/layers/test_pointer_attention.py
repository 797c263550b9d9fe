import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka


def _reference(layer, dec, enc, mask):
    score = layer.score
    w1 = np.array(score.key_kernel)
    w2 = np.array(score.query_kernel)
    v = np.array(score.v)
    hidden = np.tanh((dec @ w2)[:, :, None, :] + (enc @ w1)[:, None, :, :])
    u = hidden @ v  # (B, To, Ti)
    u = np.where(mask, u, -np.inf)
    u = u - u.max(-1, keepdims=True)
    return u - np.log(np.exp(u).sum(-1, keepdims=True))


def test_matches_formula_with_chosen_and_padding_masks(rng):
    enc = rng.normal(size=(3, 6, 5)).astype("float32")
    dec = rng.normal(size=(3, 4, 7)).astype("float32")
    pointers = np.array([[1, 0, 2, 3], [5, 4, 3, 2], [0, 1, 2, 3]])
    value_mask = np.ones((3, 6), bool)
    value_mask[2, 4:] = False  # third example has 4 inputs
    layer = ka.layers.PointerAttention(units=8)
    chosen = ka.ops.chosen_positions_mask(pointers, 6)
    log_p = np.array(layer(dec, enc, value_mask=value_mask, attention_mask=chosen))
    mask = np.array(chosen) & value_mask[:, None, :]
    expected = _reference(layer, dec, enc, mask)
    np.testing.assert_allclose(log_p[mask], expected[mask], rtol=1e-5, atol=1e-5)
    probs = np.exp(log_p)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert np.all(probs[~mask] == 0.0)
    assert np.all(np.isfinite(log_p))


def test_chosen_positions_mask_excludes_earlier_pointers():
    mask = np.array(ka.ops.chosen_positions_mask(np.array([[2, 0, 1]]), 3))[0]
    expected = np.array([[1, 1, 1], [1, 1, 0], [0, 1, 0]], bool)
    np.testing.assert_array_equal(mask, expected)


def test_chosen_positions_mask_with_end_position():
    # Position 0 is "end": allowed until chosen, then the only allowed one.
    mask = np.array(ka.ops.chosen_positions_mask(np.array([[2, 0, 0]]), 3, 0))[0]
    expected = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], bool)
    np.testing.assert_array_equal(mask, expected)
    step = np.array(ka.ops.pointer_step_mask(np.array([[0, 1, 0], [1, 0, 0]]), 0))
    np.testing.assert_array_equal(step, np.array([[1, 0, 1], [1, 0, 0]], bool))


@pytest.mark.tf_only
def test_masked_positions_have_finite_loss_and_gradients(rng):
    enc = keras.Variable(rng.normal(size=(2, 5, 4)).astype("float32"))
    dec = rng.normal(size=(2, 5, 4)).astype("float32")
    pointers = np.array([[0, 1, 2, 3, 4], [4, 3, 2, 1, 0]])
    layer = ka.layers.PointerAttention(units=6)
    chosen = ka.ops.chosen_positions_mask(pointers, 5)
    import tensorflow as tf

    with tf.GradientTape() as tape:
        log_p = layer(dec, enc, attention_mask=chosen)
        # Cross-entropy of the targets plus a term touching masked entries.
        nll = -ops.sum(ops.take_along_axis(log_p, pointers[..., None], axis=-1))
        loss = nll + 0.0 * ops.sum(log_p)
    grads = tape.gradient(loss, [enc, *layer.trainable_weights])
    for g in grads:
        assert np.all(np.isfinite(np.array(g)))
    assert np.isfinite(float(loss))


def test_single_step_query_equals_sequence_row(rng):
    enc = rng.normal(size=(2, 5, 4)).astype("float32")
    dec = rng.normal(size=(2, 3, 4)).astype("float32")
    layer = ka.layers.PointerAttention(units=6)
    full = np.array(layer(dec, enc))
    step = np.array(layer(dec[:, 1], enc, projected_value=layer.project_inputs(enc)))
    np.testing.assert_allclose(step, full[:, 1], rtol=1e-6, atol=1e-6)


def test_keras_mask_of_encoder_is_used():
    tokens = keras.Input((None,), dtype="int32")
    enc = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    log_p = ka.layers.PointerAttention(units=4)(enc, enc)
    model = keras.Model(tokens, log_p)
    out = np.exp(np.array(model(np.array([[3, 4, 0, 0]]))))
    assert np.all(out[0, :, 2:] == 0.0)
    np.testing.assert_allclose(out[0].sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, call, match",
    [
        ({"units": 0}, None, "units"),
        ({"units": 4}, "rank2_value", "value"),
        ({"units": 4}, "bad_mask", "attention_mask"),
    ],
)
def test_bad_input(kwargs, call, match):
    with pytest.raises(ValueError, match=match):
        layer = ka.layers.PointerAttention(**kwargs)
        enc = np.zeros((2, 5, 4), "float32")
        if call == "rank2_value":
            layer(enc, enc[:, 0])
        elif call == "bad_mask":
            layer(enc, enc, attention_mask=np.ones((2, 5, 3), bool))
