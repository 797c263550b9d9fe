"""The modifier protocol and its combinators (see `keras_attention.ops.modifier_calls`)."""

import keras
from keras import ops


class _Modifier:
    """The config and `repr` of every modifier: a subclass' constructor
    arguments, which `get_config` returns (none here)."""

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class MaskModifier(_Modifier):
    """A boolean function of positions: `(batch, head, query, key) -> bool`.

    Subclasses implement `__call__` and, when they can bound the keys a
    range of queries sees, `key_range(query_start, query_stop)` (the chunked
    path then skips the other key blocks). `banded = True` says that range
    is a band that moves with the queries (a window), not a prefix of the
    keys: the chunked backward pass then loops over query blocks and their
    band. `a & b` and `a | b` combine them.
    """

    banded = False

    def __call__(self, batch, head, query, key):
        raise NotImplementedError

    def key_range(self, query_start, query_stop):
        """`(lo, hi)`: queries in `[query_start, query_stop)` see at most the
        keys `[lo, hi)`; `None` when unknown."""
        return None

    def __and__(self, other):
        return AndMask([self, other])

    def __or__(self, other):
        return OrMask([self, other])


class ScoreModifier(_Modifier):
    """A function of a scaled logit and its positions:
    `(score, batch, head, query, key) -> score`.

    A subclass whose result is `score + b(batch, head, query, key)`, with a
    bias `b` that does not read the score, sets `additive_bias = True`: the
    fused path then passes `b` to the GPU's kernel as its `bias`.
    """

    additive_bias = False

    def __call__(self, score, batch, head, query, key):
        raise NotImplementedError


def serialize(modifier):
    """A modifier (or `None`) as a Keras config."""
    return None if modifier is None else keras.saving.serialize_keras_object(modifier)


def deserialize(config):
    """Inverse of `serialize`."""
    if config is None or callable(config):
        return config
    return keras.saving.deserialize_keras_object(config)


class _MaskCombination(MaskModifier):
    """`masks` combined position by position with `_combine`; their key
    ranges `[lo, hi)` merged with `_lower` on the starts and `_upper` on
    the stops; banded when `_banded` (`any` or `all`) of them is
    (subclasses set all four)."""

    _combine = None  # (bool, bool) -> bool, position by position
    _lower = _upper = None  # ops.maximum / ops.minimum: the merged range
    _banded = None  # any / all
    _needs_all_ranges = False  # a key range only when every mask has one

    def __init__(self, masks):
        self.masks = [deserialize(m) for m in masks]

    def __call__(self, batch, head, query, key):
        result = None
        for mask in self.masks:
            allowed = ops.cast(mask(batch, head, query, key), "bool")
            result = allowed if result is None else self._combine(result, allowed)
        return result

    def key_range(self, query_start, query_stop):
        bounds = [
            getattr(m, "key_range", lambda *_: None)(query_start, query_stop)
            for m in self.masks
        ]
        known = [b for b in bounds if b is not None]
        if not known or (self._needs_all_ranges and len(known) < len(bounds)):
            return None
        lo, hi = known[0]
        for other_lo, other_hi in known[1:]:
            lo, hi = self._lower(lo, other_lo), self._upper(hi, other_hi)
        return lo, hi

    @property
    def banded(self):
        return self._banded(getattr(m, "banded", False) for m in self.masks)

    def get_config(self):
        return {"masks": [serialize(m) for m in self.masks]}


@keras.saving.register_keras_serializable(package="keras_attention")
class AndMask(_MaskCombination):
    """Keys every one of `masks` allows (their key ranges intersect)."""

    _combine = staticmethod(ops.logical_and)
    _lower, _upper = staticmethod(ops.maximum), staticmethod(ops.minimum)
    _banded = staticmethod(any)


@keras.saving.register_keras_serializable(package="keras_attention")
class OrMask(_MaskCombination):
    """Keys any of `masks` allows (the hull of their key ranges; unknown
    when one of them has none)."""

    _combine = staticmethod(ops.logical_or)
    _lower, _upper = staticmethod(ops.minimum), staticmethod(ops.maximum)
    _banded = staticmethod(all)
    _needs_all_ranges = True


@keras.saving.register_keras_serializable(package="keras_attention")
class ScoreChain(ScoreModifier):
    """Apply `modifiers` in order (e.g. a bias, then a soft-cap)."""

    def __init__(self, modifiers):
        self.modifiers = [deserialize(m) for m in modifiers]

    @property
    def additive_bias(self):
        """A chain of additive biases is one."""
        return all(getattr(m, "additive_bias", False) for m in self.modifiers)

    def __call__(self, score, batch, head, query, key):
        for modifier in self.modifiers:
            score = modifier(score, batch, head, query, key)
        return score

    def get_config(self):
        return {"modifiers": [serialize(m) for m in self.modifiers]}
