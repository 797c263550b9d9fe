import numpy as np
import pytest
from keras import ops

from keras_attention.ops import band_mask
from keras_attention.ops import causal_mask
from keras_attention.ops import compute_attention_mask
from keras_attention.ops import merge_masks
from keras_attention.ops import padding_mask


def test_padding_mask_values():
    mask = ops.convert_to_numpy(padding_mask(np.array([0, 2, 4]), 4))
    expected = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(mask, expected)


@pytest.mark.parametrize("t, s, offset", [(3, 3, 0), (2, 5, 0), (2, 5, 3), (4, 2, 0)])
def test_causal_mask_values(t, s, offset):
    mask = ops.convert_to_numpy(causal_mask(t, s, offset=offset))
    expected = np.array(
        [[j <= offset + i for j in range(s)] for i in range(t)], dtype=bool
    )
    np.testing.assert_array_equal(mask, expected)


def test_causal_mask_default_key_length_is_square():
    mask = ops.convert_to_numpy(causal_mask(3))
    np.testing.assert_array_equal(mask, np.tril(np.ones((3, 3), bool)))


@pytest.mark.parametrize("window, offset", [(0, 0), (1, 0), (2, 1)])
def test_band_mask_values(window, offset):
    t, s = 4, 6
    mask = ops.convert_to_numpy(band_mask(t, s, window, offset=offset))
    expected = np.array(
        [[abs(j - (i + offset)) <= window for j in range(s)] for i in range(t)]
    )
    np.testing.assert_array_equal(mask, expected)


def test_merge_masks_is_logical_and_and_skips_none():
    a = np.array([[True, True, False]])
    b = np.array([[True], [False]])
    merged = ops.convert_to_numpy(merge_masks(None, a, None, b))
    np.testing.assert_array_equal(merged, np.logical_and(a, b))
    assert merge_masks(None, None) is None
    # Integer masks are read as booleans.
    single = ops.convert_to_numpy(merge_masks(np.array([1, 0, 2])))
    np.testing.assert_array_equal(single, [True, False, True])


def _random_bool(rng, shape):
    return rng.random(shape) > 0.3


def test_compute_attention_mask_combines_every_source(rng):
    b, t, s = 2, 3, 5
    query = np.zeros((b, t, 4), "float32")
    value = np.zeros((b, s, 4), "float32")
    query_mask = _random_bool(rng, (b, t))
    value_mask = _random_bool(rng, (b, s))
    key_mask = _random_bool(rng, (b, s))
    attention_mask = _random_bool(rng, (b, t, s))
    mask = compute_attention_mask(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        key_mask=key_mask,
        attention_mask=attention_mask,
        use_causal_mask=True,
    )
    causal = np.tril(np.ones((t, s), bool))
    expected = (
        query_mask[:, :, None]
        & value_mask[:, None, :]
        & key_mask[:, None, :]
        & attention_mask
        & causal[None]
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(mask), expected)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, None),
        ({"value_mask": np.array([[1, 1, 0]], bool)}, [[[1, 1, 0], [1, 1, 0]]]),
        ({"query_mask": np.array([[1, 0]], bool)}, [[[1, 1, 1], [0, 0, 0]]]),
        ({"use_causal_mask": True}, [[[1, 0, 0], [1, 1, 0]]]),
        (
            {"use_causal_mask": True, "causal_offset": 1},
            [[[1, 1, 0], [1, 1, 1]]],
        ),
    ],
)
def test_compute_attention_mask_single_sources(kwargs, expected):
    query = np.zeros((1, 2, 4), "float32")
    value = np.zeros((1, 3, 4), "float32")
    mask = compute_attention_mask(query, value, **kwargs)
    if expected is None:
        assert mask is None
    else:
        np.testing.assert_array_equal(
            np.broadcast_to(ops.convert_to_numpy(mask), (1, 2, 3)),
            np.array(expected, bool),
        )


@pytest.mark.parametrize(
    "name, shape, match",
    [
        ("query_mask", (2, 4), r"query_mask.*Received: query_mask.shape=\(2, 4\)"),
        ("query_mask", (2, 3, 1), r"`query_mask` must have rank 2"),
        ("value_mask", (2, 3), r"Received: value_mask.shape=\(2, 3\)"),
        ("key_mask", (2,), r"`key_mask` must have rank 2"),
        ("attention_mask", (2, 5, 3), r"attention_mask.shape=\(2, 5, 3\)"),
        ("attention_mask", (2, 5), r"`attention_mask` must have shape \(3, 5\)"),
        ("attention_mask", (2, 2, 3, 5), r"one of the shapes \(3, 5\), \(2, 3, 5\)"),
        ("value_mask", (3, 5), r"value_mask.shape=\(3, 5\)"),
    ],
)
def test_compute_attention_mask_rejects_wrong_shapes(name, shape, match):
    query = np.zeros((2, 3, 4), "float32")
    value = np.zeros((2, 5, 4), "float32")
    with pytest.raises(ValueError, match=match):
        compute_attention_mask(query, value, **{name: np.ones(shape, bool)})


def test_compute_attention_mask_takes_2d_and_per_head_masks():
    query = np.zeros((2, 3, 4), "float32")
    value = np.zeros((2, 5, 4), "float32")
    pattern = np.random.default_rng(0).random((3, 5)) > 0.5
    padding = np.array([[True] * 5, [True] * 4 + [False]])
    mask = compute_attention_mask(
        query, value, value_mask=padding, attention_mask=pattern
    )
    np.testing.assert_array_equal(mask, pattern[None] & padding[:, None])
    per_head = np.stack([pattern, ~pattern])[None]  # (1, N=2, T, S)
    mask = compute_attention_mask(
        query, value, value_mask=padding, attention_mask=per_head, num_heads=2
    )
    np.testing.assert_array_equal(mask, per_head & padding[:, None, None])


def test_compute_attention_mask_sliding_window_with_offset():
    query = np.zeros((1, 2, 4), "float32")
    value = np.zeros((1, 6, 4), "float32")
    mask = compute_attention_mask(
        query, value, use_causal_mask=True, causal_offset=3, sliding_window=2
    )
    # Queries at absolute positions 3 and 4 see themselves and one before.
    expected = [[0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 0]]
    np.testing.assert_array_equal(mask[0], np.array(expected, bool))


def test_compute_attention_mask_accepts_broadcastable_shapes():
    query = np.zeros((2, 3, 4), "float32")
    value = np.zeros((2, 5, 4), "float32")
    attention_mask = np.tril(np.ones((3, 5), bool))[None]  # (1, T, S)
    mask = compute_attention_mask(query, value, attention_mask=attention_mask)
    np.testing.assert_array_equal(
        np.broadcast_to(ops.convert_to_numpy(mask), (2, 3, 5))[1], attention_mask[0]
    )
