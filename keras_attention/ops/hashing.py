"""A counter-based integer hash: random bits as a pure function of
coordinates, so that a draw can be repeated exactly (attention dropout's
backward pass, seeded sampling under XLA) without any random state."""

from keras import ops

# The `lowbias32` integer finaliser (C. Wellons, "Prospecting for hash
# functions", 2018): full avalanche, two multiplications.
_MIX_1 = 0x7FEB352D
_MIX_2 = 0x846CA68B
GOLDEN = 0x9E3779B9  # 2^32 / phi: spreads consecutive counters apart


def mix32(x):
    """A uint32 -> uint32 bijection with good avalanche (`lowbias32`)."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, ops.convert_to_tensor(_MIX_1, "uint32"))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, ops.convert_to_tensor(_MIX_2, "uint32"))
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def _u32(x):
    return ops.cast(x, "uint32")


def dropout_keep_mask(seed, batch, heads, query_positions, key_positions, rate):
    """The attention-dropout keep mask of a block, `(B, N, q, k)` boolean.

    A pure function of the absolute coordinates, so any block of the
    `(B, N, T, S)` weights can be (re)drawn on its own and the chunked
    forward and backward passes agree, whatever the chunk sizes:
    `keep[b, n, i, j] = hash(seed, b, n, i, j) >= rate` with the hash uniform
    on 24 bits, i.e. each weight is kept with probability `1 - rate` up to
    2^-24.

    Args:
        seed: int tensor `(2,)` (a draw of `keras.random.randint`).
        batch: the batch size B.
        heads: the number of heads N.
        query_positions: int32 `(q,)`, absolute query positions.
        key_positions: int32 `(k,)`, absolute key positions.
        rate: the dropout rate, a Python float in `[0, 1)`.
    """
    seed = _u32(seed)
    example_head = ops.reshape(
        ops.arange(batch, dtype="int32")[:, None] * heads
        + ops.arange(heads, dtype="int32")[None, :],
        (batch, heads, 1, 1),
    )
    rows = mix32(
        ops.bitwise_xor(
            mix32(_u32(example_head) + seed[0]), _u32(query_positions)[:, None]
        )
    )  # (B, N, q, 1)
    cols = mix32(
        _u32(key_positions) * ops.convert_to_tensor(GOLDEN, "uint32") + seed[1]
    )  # (k,)
    bits = ops.right_shift(mix32(ops.bitwise_xor(rows, cols)), 8)  # 24 bits
    threshold = int(round(rate * (1 << 24)))
    return ops.greater_equal(ops.cast(bits, "int32"), threshold)
