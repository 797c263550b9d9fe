"""Local attention with predictive alignment (Luong et al., 2015, local-p)."""

import attention_reference as ref
import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.testing import check_config_round_trip

B, T, S, D = 2, 3, 9, 4


def local_p_reference(h_t, h_s, w_a, w_p, v_p, window, mask=None):
    """Luong et al. (2015), eqs. (9)-(10), written out with NumPy.

    `S` is each example's number of valid source words and `s` a word's
    index among them; `mask` `(B, S)` marks the valid words.
    """
    if mask is None:
        mask = np.ones(h_s.shape[:2], bool)
    length = mask.sum(-1)  # (B,)
    s = np.cumsum(mask, -1) - 1.0  # (B, S)
    p = length[:, None] / (1 + np.exp(-(np.tanh(h_t @ w_p) @ v_p)))  # (B, T)
    scores = np.einsum("btq,qk,bsk->bts", h_t, w_a, h_s)  # "general"
    distance = s[:, None, :] - p[:, :, None]
    inside = (np.abs(distance) <= window) & mask[:, None, :]
    align = ref.softmax(scores, inside)
    sigma = window / 2
    weights = align * np.exp(-(distance**2) / (2 * sigma**2))
    return np.einsum("bts,bsd->btd", weights, h_s), weights, p


def _numpy_weights(layer):
    return (
        ref.to_np(layer.score.kernel),
        ref.to_np(layer.alignment_kernel),
        ref.to_np(layer.alignment_vector),
    )


@pytest.fixture
def data(rng):
    return {
        "h_t": rng.normal(size=(B, T, D)).astype("float32"),
        "h_s": rng.normal(size=(B, S, D)).astype("float32"),
        "mask": np.array([[True] * S, [True] * 5 + [False] * (S - 5)]),
    }


@pytest.mark.parametrize("window", [1, 2, 3])
def test_matches_luongs_formula(data, window):
    layer = ka.layers.LuongAttention(
        "general", window=window, alignment="predictive", alignment_units=6
    )
    out, weights = layer(
        data["h_t"], data["h_s"], value_mask=data["mask"], return_attention_scores=True
    )
    exp_out, exp_w, p = local_p_reference(
        data["h_t"], data["h_s"], *_numpy_weights(layer), window, data["mask"]
    )
    np.testing.assert_allclose(ref.to_np(weights), exp_w, atol=1e-6)
    np.testing.assert_allclose(ref.to_np(out), exp_out, atol=1e-5)
    # The predicted positions lie inside each example's source.
    assert np.all(p >= 0) and np.all(p <= data["mask"].sum(-1)[:, None])
    check_config_round_trip(layer, [data["h_t"], data["h_s"]])


def test_the_op_matches_the_formula(rng):
    scores = rng.normal(size=(B, T, S)).astype("float32")
    predicted = rng.uniform(0, S, size=(B, T)).astype("float32")
    positions, _ = ka.ops.source_positions(None, S)
    weights = ka.ops.local_predictive_weights(scores, predicted, positions, 2)
    distance = np.arange(S)[None, None, :] - predicted[:, :, None]
    expected = ref.softmax(scores, np.abs(distance) <= 2) * np.exp(-(distance**2) / 2)
    np.testing.assert_allclose(ref.to_np(weights), expected, atol=1e-6)
    # sigma = D / 2 = 1: the weight at distance 0 is the softmax's own.
    assert np.all(ref.to_np(weights) <= ref.softmax(scores, np.abs(distance) <= 2))


def test_left_and_right_padding_agree(data):
    """Positions count valid words, so where the padding sits is irrelevant."""
    layer = ka.layers.LuongAttention("dot", window=2, alignment="predictive")
    n = 5
    right = data["h_s"].copy()
    right[:, n:] = 0
    left = np.concatenate([np.zeros_like(right[:, n:]), right[:, :n]], axis=1)
    right_mask = np.arange(S)[None].repeat(B, 0) < n
    left_mask = right_mask[:, ::-1]
    out_r, w_r = layer(data["h_t"], right, value_mask=right_mask,
                       return_attention_scores=True)  # fmt: skip
    out_l, w_l = layer(data["h_t"], left, value_mask=left_mask,
                       return_attention_scores=True)  # fmt: skip
    np.testing.assert_allclose(ref.to_np(out_r), ref.to_np(out_l), atol=1e-5)
    np.testing.assert_allclose(
        ref.to_np(w_r)[..., :n], ref.to_np(w_l)[..., S - n :], atol=1e-6
    )


def test_gradients_reach_the_position_predictor(data):
    """W_p and v_p act only through the Gaussian (the window is a hard
    cut): a compiled training step must still move them, on every backend."""
    h_t, h_s = keras.Input((T, D)), keras.Input((S, D))
    layer = ka.layers.LuongAttention("general", window=2, alignment="predictive")
    model = keras.Model([h_t, h_s], layer(h_t, h_s))
    model.compile(keras.optimizers.SGD(0.5), "mse", jit_compile=True)
    before = [ref.to_np(w) for w in (layer.alignment_kernel, layer.alignment_vector)]
    target = np.ones((B, T, D), "float32")
    model.fit([data["h_t"], data["h_s"]], target, epochs=1, verbose=0)
    after = [ref.to_np(w) for w in (layer.alignment_kernel, layer.alignment_vector)]
    for old, new in zip(before, after, strict=True):
        assert np.abs(new - old).max() > 1e-6


def _local_p_decoder():
    return ka.layers.AttentionRNNDecoder(
        ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(8),
            ka.layers.LuongAttention("general", window=2, alignment="predictive"),
            style="luong",
        )
    )


def test_the_decoder_cell_attends_locally(rng):
    decoder = _local_p_decoder()
    targets = rng.normal(size=(B, 4, 5)).astype("float32")
    memory = rng.normal(size=(B, S, 8)).astype("float32")
    mask = np.array([[True] * S, [True] * 6 + [False] * (S - 6)])
    out = decoder(targets, memory, memory_mask=mask, return_alignments=True)
    alignments = ref.to_np(out[1])  # (B, T, S)
    assert alignments.shape == (B, 4, S)
    # At most 2 D + 1 = 5 source words get weight, none of them padding.
    assert np.all((alignments > 0).sum(-1) <= 5)
    assert np.all(alignments[1, :, 6:] == 0)
    assert np.all(alignments.sum(-1) <= 1 + 1e-6)


def test_the_decoder_trains_compiled_and_reloads(rng, tmp_path):
    src = keras.Input((S, 8))
    tgt = keras.Input((4, 5))
    out = _local_p_decoder()(tgt, src)
    model = keras.Model([src, tgt], keras.layers.Dense(3)(out))
    x = [rng.normal(size=(8, S, 8)), rng.normal(size=(8, 4, 5))]
    y = rng.normal(size=(8, 4, 3))
    model.compile("adam", "mse", jit_compile=True)
    # One batch per epoch: the first epoch's loss is the untrained model's.
    # (A compiled `evaluate` would cost a compilation of its own.)
    losses = model.fit(x, y, epochs=5, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    path = tmp_path / "local_p.keras"
    model.save(path)
    reloaded = keras.models.load_model(path)
    # The trained model runs eagerly: one compiled `predict` is enough.
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model(x), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alignment": "predictive"}, "needs a `window`"),
        ({"alignment": "local"}, "alignment='local'"),
        ({"window": 2, "alignment_units": 4}, "alignment_units=4"),
        (
            {"window": 2, "alignment": "predictive", "probability": "hardmax"},
            "probability='hardmax'",
        ),
        ({"window": 2, "alignment": "predictive", "alignment_units": 0}, "units"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ka.layers.ScoredAttention(**kwargs)


def test_a_decoder_cell_refuses_local_m():
    with pytest.raises(ValueError, match="alignment='predictive'"):
        ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(4), ka.layers.LuongAttention("dot", window=2)
        )
