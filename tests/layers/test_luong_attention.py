import attention_reference as ref
import numpy as np
import pytest
import score_reference

import keras_attention as ka
from keras_attention import scores
from keras_attention.testing import check_config_round_trip

B, T, S, D = 2, 3, 5, 4


@pytest.fixture
def data(rng):
    return {
        "h_t": rng.normal(size=(B, T, D)).astype("float32"),
        "h_s": rng.normal(size=(B, S, D)).astype("float32"),
        "mask": np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool),
    }


def _check_the_formula(layer, data, rng, name):
    """The layer against `softmax(s(h_s, h_t))` over the unmasked source
    states, with `s` the NumPy reference of the score `name`, then its
    config round trip."""
    layer(data["h_t"], data["h_s"])
    score_reference.randomize(layer.score, rng)
    out, weights = layer(
        data["h_t"], data["h_s"], value_mask=data["mask"], return_attention_scores=True
    )
    logits = score_reference.REFERENCES[name](layer.score, data["h_t"], data["h_s"])
    exp_out, exp_w = ref.attend(logits, data["h_s"], data["mask"][:, None])
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    check_config_round_trip(layer, [data["h_t"], data["h_s"]])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"score": "dot"},
        {"score": "general"},
        {"score": "concat"},
        {"score": "concat", "units": 6},
        {"score": "dot", "scale": True},
        {"score": "general", "scale": True},
        {"score": "scaled_dot", "scale": True},
    ],
    ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()),
)
def test_luong_arguments_match_the_formula(data, rng, kwargs):
    layer = ka.layers.LuongAttention(**kwargs)
    assert getattr(layer.score, "use_scale", False) is kwargs.get("scale", False)
    _check_the_formula(layer, data, rng, kwargs["score"])
    assert layer.get_config()["score"] == kwargs["score"]


@pytest.mark.parametrize("name", sorted(scores.ALL_SCORES))
def test_every_score_by_name_matches_the_formula(data, rng, name):
    """Every name of `ALL_SCORES`; `location` needs `max_length`, so it is
    refused by name with the rule (and works as an object, below)."""
    if name == "location":
        with pytest.raises(ValueError, match=r"max_length.*Received: score='location'"):
            ka.layers.LuongAttention(score=name)
        return
    _check_the_formula(ka.layers.LuongAttention(score=name), data, rng, name)


@pytest.mark.parametrize("case", score_reference.cases(), ids=score_reference.case_id)
def test_every_score_object_matches_the_formula(data, rng, case):
    name, options = case
    score = score_reference.make(name, **options)
    layer = ka.layers.LuongAttention(score=score)
    assert layer.score is not score and layer.score_name is None
    _check_the_formula(layer, data, rng, name)
    assert layer.get_config()["score"] == scores.serialize(layer.score)


def test_concat_units(data):
    layer = ka.layers.LuongAttention(score="concat", units=6)
    layer(data["h_t"], data["h_s"])
    assert ref.to_np(layer.score.v).shape == (6,)


@pytest.mark.parametrize("name", ["general", "concat", "bilinear", "additive"])
def test_scores_with_weights_take_different_widths(data, rng, name):
    h_t = rng.normal(size=(B, T, 7)).astype("float32")
    layer = ka.layers.LuongAttention(score=name)
    out = layer(h_t, data["h_s"])
    logits = score_reference.REFERENCES[name](layer.score, h_t, data["h_s"])
    exp_out, _ = ref.attend(logits, data["h_s"])
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "cosine"])
def test_same_width_scores_reject_different_widths(data, rng, name):
    h_t = rng.normal(size=(B, T, 7)).astype("float32")
    with pytest.raises(
        ValueError, match=rf"`{name}` score needs.*query.shape\[-1\]=7, key.shape"
    ):
        ka.layers.LuongAttention(score=name)(h_t, data["h_s"])


def test_local_window(data):
    layer = ka.layers.LuongAttention(score="dot", window=1)
    _, weights = layer(data["h_t"], data["h_s"], return_attention_scores=True)
    band = np.abs(np.arange(S)[None] - np.arange(T)[:, None]) <= 1
    assert np.all(ref.to_np(weights)[:, ~band] == 0.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"score": "softmax"}, r"Unknown `score`.*Received: score='softmax'"),
        ({"score": "location"}, r"max_length.*Received: score='location'"),
        ({"score": "concat", "scale": True}, r"score='concat', scale=True"),
        (
            {"score": "cosine", "scale": True},
            r"`scale` applies to the scores with a learned scale.*"
            r"Received: score='cosine', scale=True",
        ),
        ({"score": "dot", "units": 4}, r"`units` applies to the 'concat'.*units=4"),
        (
            {"score": "concat", "units": 0},
            r"`units` must be a positive integer.*units=0",
        ),
        (
            {"score": scores.Dot(), "scale": True},
            r"`scale` applies to a score given by name.*Received: score=<Dot.*scale=True",
        ),
        (
            {"score": scores.Additive(), "units": 3},
            r"`units` applies to a score given by name.*units=3",
        ),
        ({"dropout": -0.1}, r"Received: dropout=-0.1"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.layers.LuongAttention(**kwargs)
