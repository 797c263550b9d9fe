"""What the views accept, checked and brought to one form: the layers of
one example as `ViewLayer`s (private to the views)."""

import collections.abc
from typing import Any
from typing import NamedTuple

import numpy as np

from keras_attention.visualization.collect import AttentionRecord


class ViewLayer(NamedTuple):
    """One layer of one example: `weights` float32 `(N, T, S)`,
    `query_mask` bool `(T,)`, `key_mask` bool `(S,)` (True = a real
    position)."""

    name: str
    weights: Any
    query_mask: Any
    key_mask: Any


def _as_numpy(value):
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype="float32")


def _example_mask(mask, example, length):
    if mask is None:
        return np.ones(length, bool)
    return np.asarray(mask, bool)[example]


def _record_layer(name, record, example):
    weights = _as_numpy(record.weights)
    _check_weights(f"attention[{name!r}].weights", weights, (4,))
    _check_example(example, weights.shape[0])
    _, _, queries, keys = weights.shape
    return ViewLayer(
        name,
        weights[example],
        _example_mask(record.query_mask, example, queries),
        _example_mask(record.key_mask, example, keys),
    )


def _array_layer(name, weights, example, argument):
    weights = _as_numpy(weights)
    _check_weights(argument, weights, (3, 4))
    if weights.ndim == 4:
        _check_example(example, weights.shape[0])
        weights = weights[example]
    _, queries, keys = weights.shape
    return ViewLayer(name, weights, np.ones(queries, bool), np.ones(keys, bool))


def _check_weights(argument, weights, ranks):
    if weights.ndim not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        layout = {3: "(N, T, S)", 4: "(B, N, T, S)"}
        shapes = " or ".join(layout[r] for r in ranks)
        raise ValueError(
            f"`{argument}` must have rank {wanted}: weights {shapes}. "
            f"Received: {argument}.shape={weights.shape}"
        )
    if 0 in weights.shape:
        raise ValueError(
            f"`{argument}` must not be empty. Received: {argument}.shape={weights.shape}"
        )


def _check_example(example, batch):
    if isinstance(example, bool) or not isinstance(example, int):
        raise ValueError(
            f"`example` must be an int, the index of one example of the batch. "
            f"Received: example={example!r}"
        )
    if not -batch <= example < batch:
        raise ValueError(
            f"`example` must index the batch of {batch} example(s). "
            f"Received: example={example}"
        )


def view_layers(attention, example=0, argument="attention"):
    """The layers of `attention` for one example, as `ViewLayer`s.

    `attention`: an `AttentionCollection` (or any mapping name ->
    `AttentionRecord`), a mapping name -> `(B, N, T, S)` array, one
    `AttentionRecord`, or one array `(B, N, T, S)` (or `(N, T, S)`).
    """
    if isinstance(attention, AttentionRecord):
        return [_record_layer(attention.name, attention, example)]
    if isinstance(attention, collections.abc.Mapping):
        if len(attention) == 0:
            raise ValueError(
                f"`{argument}` holds no attention layer: it must name at least "
                f"one layer's weights. Received: {argument}={attention!r}"
            )
        layers = []
        for name, value in attention.items():
            if isinstance(value, AttentionRecord):
                layers.append(_record_layer(str(name), value, example))
            else:
                layers.append(
                    _array_layer(str(name), value, example, f"{argument}[{name!r}]")
                )
        return layers
    if isinstance(attention, (str, bytes)) or attention is None:
        raise ValueError(
            f"`{argument}` must be an AttentionCollection, a dict of weights "
            f"or an array (B, N, T, S). Received: {argument}={attention!r}"
        )
    return [_array_layer("attention", attention, example, argument)]


def check_tokens(argument, tokens, length, what):
    """`tokens` as a list of strings, one per position of `what`."""
    if isinstance(tokens, str) or not isinstance(tokens, collections.abc.Iterable):
        raise ValueError(
            f"`{argument}` must be a list of tokens, one per {what}. "
            f"Received: {argument}={tokens!r}"
        )
    tokens = [str(t) for t in tokens]
    if len(tokens) != length:
        raise ValueError(
            f"`{argument}` must hold one token per {what} ({length}). "
            f"Received: len({argument})={len(tokens)}"
        )
    return tokens


def check_threshold(threshold):
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        threshold = None
    if threshold is None or not 0.0 <= threshold < 1.0:
        raise ValueError(
            f"`threshold` must be a number in [0, 1): weights below it are not "
            f"drawn. Received: threshold={threshold!r}"
        )
    return float(threshold)
