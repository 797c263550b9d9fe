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
