"""`CompressedCausalMask`: the causal rule of `memory_compression_mask`
without padding, a valid `key_range`, serialisation and bad arguments."""

import keras
import numpy as np
import pytest

import keras_attention as ka


def _allowed(mask, queries, memory):
    q = np.arange(queries)[:, None]
    k = np.arange(memory)[None, :]
    return np.asarray(mask(0, 0, q, k), bool)


@pytest.mark.parametrize("length, factor", [(7, 3), (9, 3), (10, 4), (5, 1), (6, 8)])
def test_equals_the_causal_memory_mask(length, factor):
    memory = 1 + -(-length // factor)
    expected = ka.ops.memory_compression_mask(
        length, length, factor, use_causal_mask=True
    )
    mask = ka.modifiers.CompressedCausalMask(factor)
    np.testing.assert_array_equal(
        _allowed(mask, length, memory), np.asarray(expected)[0]
    )


@pytest.mark.parametrize("factor", [2, 3, 5])
def test_key_range_holds_every_visible_slot(factor):
    length, memory = 40, 1 + -(-40 // factor)
    mask = ka.modifiers.CompressedCausalMask(factor)
    allowed = _allowed(mask, length, memory)
    for start in range(0, length, 4):
        stop = min(start + 4, length)
        lo, hi = mask.key_range(start, stop)
        visible = np.flatnonzero(allowed[start:stop].any(axis=0))
        assert lo <= visible.min() and visible.max() < hi
        assert hi <= memory + 1  # a bound, not the whole memory


def test_serialises():
    mask = ka.modifiers.CompressedCausalMask(3)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(mask)
    )
    assert isinstance(restored, ka.modifiers.CompressedCausalMask)
    assert restored.compression_factor == 3


@pytest.mark.parametrize("factor", [0, -1, 1.5])
def test_bad_compression_factor(factor):
    with pytest.raises(ValueError, match="compression_factor"):
        ka.modifiers.CompressedCausalMask(factor)
