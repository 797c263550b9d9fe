"""Argument checks shared by the layers: each raises a ValueError that names
the argument, the rule and the received value."""


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
