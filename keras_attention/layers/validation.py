"""Argument checks shared by the layers: each raises a ValueError that names
the argument, the rule and the received value."""

import keras
import numpy as np


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer"
            f"{' or None' if allow_none else ''}. Received: {name}={value!r}"
        )


def check_rate(name, value):
    if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


def check_rank(name, shape, ranks):
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(shape) not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"`{name}` must have rank {wanted}. Received: {name}.shape={tuple(shape)}"
        )


def check_same(name_a, a, name_b, b, what):
    if a is not None and b is not None and a != b:
        raise ValueError(
            f"`{name_a}` and `{name_b}` must have the same {what}. "
            f"Received: {name_a} {what}={a}, {name_b} {what}={b}"
        )


def static_int(value):
    """`value` as a Python int when it is known without running anything (a
    Python or numpy integer), else `None` (e.g. a traced tensor)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def check_index(name, value, length, limit, limit_name):
    """ValueError unless `length` positions from `value` fit in `[0, limit)`.

    Only static indices (see `static_int`) are checked; `length` or `limit`
    `None` (unknown) skips the upper bound.
    """
    index = static_int(value)
    if index is None:
        return
    if index < 0:
        raise ValueError(f"`{name}` must be >= 0. Received: {name}={index}")
    if length is not None and limit is not None and index + length > limit:
        raise ValueError(
            f"`{name}` + the {length} new position(s) must not exceed "
            f"`{limit_name}`={limit}: `{name}` must be <= {limit - length}. "
            f"Received: {name}={index}"
        )


def get_activation(value, name="activation"):
    """`keras.activations.get(value)` with an error naming the argument."""
    try:
        return keras.activations.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be the name of a Keras activation or a callable. "
            f"Received: {name}={value!r}"
        ) from error
