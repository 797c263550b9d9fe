import attention_reference as ref
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.testing import check_config_round_trip

B, T, S, D = 2, 3, 5, 4


@pytest.fixture
def data(rng):
    return {
        "h_t": rng.normal(size=(B, T, D)).astype("float32"),
        "h_s": rng.normal(size=(B, S, D)).astype("float32"),
        "mask": np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool),
    }


def _luong_logits(layer, h_t, h_s):
    s = layer.score
    if layer.score_name == "dot":
        logits = ref.dot(h_t, h_s)
    elif layer.score_name == "general":
        # h_t^T W_a h_s, with the kernel stored as (Dq, Dk).
        logits = np.einsum("btq,qk,bsk->bts", h_t, ref.to_np(s.kernel), h_s)
    else:
        logits = ref.additive(
            h_t, h_s, ref.to_np(s.key_kernel), ref.to_np(s.query_kernel), ref.to_np(s.v)
        )
    if layer.scale:
        logits = logits * ref.to_np(s.scale)
    return logits


@pytest.mark.parametrize(
    "kwargs",
    [
        {"score": "dot"},
        {"score": "general"},
        {"score": "concat"},
        {"score": "concat", "units": 6},
        {"score": "dot", "scale": True},
        {"score": "general", "scale": True},
    ],
    ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()),
)
def test_matches_the_formula(data, kwargs):
    layer = ka.layers.LuongAttention(**kwargs)
    layer(data["h_t"], data["h_s"])
    if layer.scale:
        layer.score.scale.assign(1.7)
    out, weights = layer(
        data["h_t"], data["h_s"], value_mask=data["mask"], return_attention_scores=True
    )
    logits = _luong_logits(layer, data["h_t"], data["h_s"])
    exp_out, exp_w = ref.attend(logits, data["h_s"], data["mask"][:, None])
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    check_config_round_trip(layer, [data["h_t"], data["h_s"]])


def test_concat_units(data):
    layer = ka.layers.LuongAttention(score="concat", units=6)
    layer(data["h_t"], data["h_s"])
    assert ref.to_np(layer.score.v).shape == (6,)


def test_general_with_different_widths(data, rng):
    h_t = rng.normal(size=(B, T, 7)).astype("float32")
    layer = ka.layers.LuongAttention(score="general")
    out = layer(h_t, data["h_s"])
    exp_out, _ = ref.attend(_luong_logits(layer, h_t, data["h_s"]), data["h_s"])
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)


def test_local_window(data):
    layer = ka.layers.LuongAttention(score="dot", window=1)
    _, weights = layer(data["h_t"], data["h_s"], return_attention_scores=True)
    band = np.abs(np.arange(S)[None] - np.arange(T)[:, None]) <= 1
    assert np.all(ref.to_np(weights)[:, ~band] == 0.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"score": "additive"}, r"`score` must be one of.*Received: score='additive'"),
        ({"score": "concat", "scale": True}, r"score='concat', scale=True"),
        ({"score": "dot", "units": 4}, r"`units` applies to the 'concat'.*units=4"),
        (
            {"score": "concat", "units": 0},
            r"`units` must be a positive integer.*units=0",
        ),
        ({"dropout": -0.1}, r"Received: dropout=-0.1"),
    ],
)
def test_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.layers.LuongAttention(**kwargs)
