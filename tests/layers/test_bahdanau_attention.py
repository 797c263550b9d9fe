import attention_reference as ref
import numpy as np
import pytest

import keras_attention as ka
from keras_attention import scores
from keras_attention.testing import check_config_round_trip

B, S = 2, 6


@pytest.fixture
def data(rng):
    return {
        "state": rng.normal(size=(B, 5)).astype("float32"),  # s_{t-1}
        "states": rng.normal(size=(B, 3, 5)).astype("float32"),
        "annotations": rng.normal(size=(B, S, 4)).astype("float32"),  # h_j
        "mask": np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], bool),
    }


def _formula(layer, query, annotations, mask):
    s = layer.score
    e = ref.additive(
        query,
        annotations,
        ref.to_np(s.key_kernel),
        ref.to_np(s.query_kernel),
        ref.to_np(s.v),
    )
    return ref.attend(e, annotations, mask[:, None])


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "sequence"])
def test_matches_the_formula(data, vector):
    query = data["state"] if vector else data["states"]
    layer = ka.layers.BahdanauAttention(units=7)
    context, alpha = layer(
        query,
        data["annotations"],
        value_mask=data["mask"],
        return_attention_scores=True,
    )
    q = query[:, None] if vector else query
    exp_c, exp_a = _formula(layer, q, data["annotations"], data["mask"])
    if vector:
        exp_c, exp_a = exp_c[:, 0], exp_a[:, 0]
    assert ref.to_np(layer.score.key_kernel).shape == (4, 7)
    np.testing.assert_allclose(ref.to_np(alpha), exp_a, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(context), exp_c, atol=1e-5)


def test_equals_scored_attention_with_the_additive_score(data):
    layer = ka.layers.BahdanauAttention(units=3, normalize=True)
    generic = ka.layers.ScoredAttention(score=scores.Additive(units=3, normalize=True))
    out = layer(data["states"], data["annotations"], value_mask=data["mask"])
    generic(data["states"], data["annotations"])
    generic.set_weights(layer.get_weights())
    expected = generic(data["states"], data["annotations"], value_mask=data["mask"])
    np.testing.assert_array_equal(ref.to_np(out), ref.to_np(expected))
    assert len(layer.weights) == 5  # W, U, v, g, bias


def test_normalized_variant_uses_weight_normalised_v(data, rng):
    layer = ka.layers.BahdanauAttention(units=3, normalize=True)
    layer(data["states"], data["annotations"])
    s = layer.score
    s.g.assign(2.0)
    s.bias.assign(rng.normal(size=(3,)))
    out = layer(data["states"], data["annotations"])
    hidden = (data["annotations"] @ ref.to_np(s.key_kernel))[:, None] + (
        data["states"] @ ref.to_np(s.query_kernel)
    )[:, :, None]
    v = ref.to_np(s.v)
    e = np.tanh(hidden + ref.to_np(s.bias)) @ (2.0 * v / np.linalg.norm(v))
    exp_c, _ = ref.attend(e, data["annotations"])
    np.testing.assert_allclose(ref.to_np(out), exp_c, atol=1e-5)


def test_config_round_trip(data):
    layer = ka.layers.BahdanauAttention(units=4, normalize=True, dropout=0.1, seed=3)
    config = layer.get_config()
    assert "score" not in config
    assert config["units"] == 4 and config["normalize"] is True
    check_config_round_trip(layer, [data["states"], data["annotations"]])


@pytest.mark.parametrize("units", [0, -2, 2.5, None, True])
def test_rejects_bad_units(units):
    with pytest.raises(
        ValueError, match=rf"`units` must be a positive integer.*units={units!r}"
    ):
        ka.layers.BahdanauAttention(units=units)


def test_rejects_negative_dropout():
    with pytest.raises(ValueError, match=r"Received: dropout=-0.5"):
        ka.layers.BahdanauAttention(units=2, dropout=-0.5)
