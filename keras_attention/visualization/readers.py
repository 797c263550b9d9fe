"""Which layers `collect_attention` reads, and how (the registry).

One `AttentionReader` per family: the method of the layer that computes
its weights (wrapped on the instance while collecting), the call argument
that asks for them, where they are in what that method returns, how they
become `(B, N, T, S)`, and which padding masks describe their query and
key axes. `reader_for(layer)` picks the first reader whose classes the
layer is an instance of, so a subclass is read as its base unless a more
specific reader comes first (our `MultiHeadAttention` before Keras').
"""

import inspect
from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import keras
from keras import ops

from keras_attention import layers as ka_layers
from keras_attention.keras_compat import get_keras_mask


class AttentionReader(NamedTuple):
    """How to ask one family of layers for its attention weights.

    `method`: the method wrapped on the instance (`"call"`, or
    `"_attention"` for our multi-head layers, which the Transformer blocks
    and stacks call directly). `flag`: its argument that asks for the
    weights, or `None` when every call returns them. `weights(result)`: the
    weights in what the method returned with `flag=True`. `layout(w)`: the
    NumPy weights as `(B, N, T, S)`. `masks(arguments)`: the query and key
    padding masks `(B, T)`, `(B, S)` (tensors or `None`) from the method's
    bound arguments.
    """

    classes: tuple
    method: str
    flag: Any
    weights: Callable
    layout: Callable
    masks: Callable


def heads_first(weights):
    """`(B, N, T, S)` as is; `(B, T, S)` -> `(B, 1, T, S)`; `(B, S)` (one
    query) -> `(B, 1, 1, S)`."""
    while weights.ndim < 4:
        weights = weights[:, None]
    return weights


def contexts_as_heads(weights):
    """Attention pooling: `(B, K, S)` (K context vectors, each its own
    distribution) -> `(B, K, 1, S)`; `(B, S)` -> `(B, 1, 1, S)`."""
    if weights.ndim == 2:
        weights = weights[:, None]
    return weights[:, :, None]


def _mask(arguments, mask_names, tensor_names):
    """The first explicit mask of `mask_names` that was passed, else the
    Keras mask of the first tensor of `tensor_names` that has one."""
    for name in mask_names:
        if arguments.get(name) is not None:
            return arguments[name]
    for name in tensor_names:
        tensor = arguments.get(name)
        mask = None if tensor is None else get_keras_mask(tensor)
        if mask is not None:
            return mask
    return None


def _masks(query=((), ()), key=((), ())):
    """`masks(arguments)` from `(mask argument names, tensor names)` for
    the query and the key axis."""

    def masks(arguments):
        return _mask(arguments, *query), _mask(arguments, *key)

    return masks


def _multi_head_masks(arguments):
    """Our `_attention(query, value, key, masks, ...)`: the masks dict, as
    the layer (or the block calling it) filled it."""
    masks = arguments.get("masks") or {}
    key = masks.get("key_mask")
    return masks.get("query_mask"), masks.get("value_mask") if key is None else key


def _keras_attention_masks(arguments):
    """`keras.layers.Attention(inputs=[query, value, key], mask=[q, v])`."""
    inputs, mask = arguments.get("inputs") or [], arguments.get("mask")
    found = []
    for i in range(2):
        explicit = (
            mask[i] if isinstance(mask, (list, tuple)) and len(mask) > i else None
        )
        tensor = inputs[i] if len(inputs) > i else None
        if explicit is None and tensor is not None:
            explicit = get_keras_mask(tensor)
        found.append(explicit)
    return tuple(found)


def _second(result):
    return result[1]


def _keras_convention(classes, masks, layout=heads_first):
    """The reader of layers that follow Keras' convention: `call(...,
    return_attention_scores=True)` returns `(output, weights)`."""
    return AttentionReader(
        classes, "call", "return_attention_scores", _second, layout, masks
    )


_QUERY = (("query_mask",), ("query",))
_KEY = (("key_mask", "value_mask"), ("key", "value"))

READERS = (
    AttentionReader(
        (
            ka_layers.MultiHeadAttention,
            ka_layers.MemoryCompressedAttention,
        ),
        "_attention",
        "return_attention_scores",
        lambda result: result.scores,
        heads_first,
        _multi_head_masks,
    ),
    _keras_convention((ka_layers.ScoredAttention,), _masks(_QUERY, _KEY)),
    AttentionReader(
        (ka_layers.PointerAttention,),
        "call",
        None,
        ops.exp,  # log-probabilities; masked positions exp(-1e30) = 0
        heads_first,
        _masks(((), ("query",)), (("value_mask",), ("value",))),
    ),
    AttentionReader(
        (ka_layers.AttentionRNNCell,),
        "call",
        None,
        lambda result: result[2],  # (output, states, alignment)
        heads_first,
        _masks(key=(("memory_mask",), ("memory",))),
    ),
    AttentionReader(
        (
            ka_layers.AttentionRNNDecoder,
            ka_layers.LSTMNShallowFusionDecoder,
            ka_layers.LSTMNDeepFusionDecoder,
        ),
        "call",
        "return_alignments",
        _second,
        heads_first,
        _masks((("inputs_mask",), ("inputs",)), (("memory_mask",), ("memory",))),
    ),
    AttentionReader(
        (ka_layers.LSTMN,),
        "call",
        "return_attention_scores",
        lambda result: result[-1],  # the weights come last
        heads_first,
        _masks((("mask",), ("sequences",)), (("mask",), ("sequences",))),
    ),
    _keras_convention(
        (ka_layers.AttentionPooling,),
        _masks(key=(("mask",), ("inputs",))),
        layout=contexts_as_heads,
    ),
    _keras_convention((ka_layers.SelfAttention2D,), _masks()),
    _keras_convention(
        (keras.layers.MultiHeadAttention, keras.layers.GroupQueryAttention),
        _masks(_QUERY, _KEY),
    ),
    _keras_convention(
        (keras.layers.Attention,),  # and AdditiveAttention
        _keras_attention_masks,
    ),
)

READ_CLASSES = tuple(cls for reader in READERS for cls in reader.classes)


def reader_for(layer):
    """The `AttentionReader` of `layer`, or `None` when it is not an
    attention layer this module reads (or a subclass whose method lacks the
    reader's flag)."""
    for reader in READERS:
        if isinstance(layer, reader.classes):
            method = getattr(type(layer), reader.method, None)
            if method is None:
                return None
            if reader.flag is not None:
                if reader.flag not in inspect.signature(method).parameters:
                    return None
            return reader
    return None
