"""`collect_attention`: the attention weights of every layer of a built model."""

import collections.abc
import contextlib
import functools
import inspect
from typing import Any
from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from keras_attention.visualization.readers import READ_CLASSES
from keras_attention.visualization.readers import reader_for


class AttentionRecord(NamedTuple):
    """The weights of one call of one attention layer.

    Attributes:
        name: the key in the collection: the layer's path from the model,
            its name and those of the layers holding it joined by `/`
            (`"transformer_encoder/block_0/self_attention"`), with `[i]`
            appended when the layer ran more than once (`i` from 0).
        layer_name: the layer's own `name`.
        class_name: the layer's class name (`"MultiHeadSelfAttention"`).
        call_index: which call of the layer this is, from 0.
        weights: float32 NumPy `(B, N, T, S)`: `N` heads (1 for a layer
            without heads), `T` queries, `S` keys.
        query_mask: boolean NumPy `(B, T)`, True = a real query, or `None`
            when the layer received no padding mask for its queries.
        key_mask: boolean NumPy `(B, S)`, True = a real key, or `None`.
    """

    name: str
    layer_name: str
    class_name: str
    call_index: int
    weights: Any
    query_mask: Any
    key_mask: Any


class AttentionCollection(collections.abc.Mapping):
    """What `collect_attention` returns: the records by name, in the order
    the layers ran, and the model's outputs.

    A read-only mapping `name -> AttentionRecord` (see `AttentionRecord`
    for the names); `outputs` holds what the model returned.
    """

    def __init__(self, outputs, records):
        self.outputs = outputs
        self._records = {record.name: record for record in records}

    def __getitem__(self, name):
        return self._records[name]

    def __iter__(self):
        return iter(self._records)

    def __len__(self):
        return len(self._records)

    def __repr__(self):
        rows = ", ".join(
            f"{name!r}: {tuple(r.weights.shape)}" for name, r in self._records.items()
        )
        return f"AttentionCollection({{{rows}}})"


def _numpy(tensor, path, dtype):
    """`tensor` as NumPy; a traced tensor (the layer ran inside `jit`, a
    `tf.function` or a scan) has no value to read."""
    try:
        return np.asarray(ops.convert_to_numpy(tensor), dtype=dtype)
    except Exception as error:  # noqa: BLE001 - each backend raises its own
        raise RuntimeError(
            f"`collect_attention` reads the weights of `{path}` eagerly, but the "
            "layer ran inside a compiled function (jit, tf.function, a scan), "
            "where they have no value yet. Call the model eagerly."
        ) from error


def _padding(mask, shape, path):
    """`mask` as a boolean `(B, L)` array when it has that shape, else
    `None` (a mask over other positions does not describe this axis)."""
    if mask is None:
        return None
    mask = _numpy(mask, path, "bool")
    return mask if mask.shape == shape else None


class _Recorder:
    """The calls seen while collecting, in order."""

    def __init__(self):
        self.calls = []

    def record(self, path, layer, reader, result, arguments):
        weights = _numpy(reader.weights(result), path, "float32")
        weights = reader.layout(weights)  # (B, N, T, S)
        batch, _, queries, keys = weights.shape
        query_mask, key_mask = reader.masks(arguments)
        self.calls.append(
            dict(
                path=path,
                layer_name=layer.name,
                class_name=type(layer).__name__,
                weights=weights,
                query_mask=_padding(query_mask, (batch, queries), path),
                key_mask=_padding(key_mask, (batch, keys), path),
            )
        )

    def records(self):
        """One `AttentionRecord` per call; a layer that ran `k > 1` times
        gives `path[0]` ... `path[k-1]`."""
        counts = collections.Counter(call["path"] for call in self.calls)
        seen = collections.Counter()
        records = []
        for call in self.calls:
            path = call.pop("path")
            index = seen[path]
            seen[path] += 1
            name = f"{path}[{index}]" if counts[path] > 1 else path
            records.append(AttentionRecord(name=name, call_index=index, **call))
        return records


def _wrapper(original, path, layer, reader, recorder):
    """`original` (a bound method) as the model asked for it, recorded: a
    call that did not ask for the weights runs a second time with the flag,
    so that its own result stays exactly what it was."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        weighted = result
        if reader.flag is not None and not bound.arguments.get(reader.flag):
            bound.arguments[reader.flag] = True
            weighted = original(*bound.args, **bound.kwargs)
        recorder.record(path, layer, reader, weighted, bound.arguments)
        return result

    return wrapper


@contextlib.contextmanager
def _recording(found, recorder):
    """Wrap the method of each `(path, layer, reader)` of `found` on the
    instance for the duration of the block; always restored, even when the
    block raises."""
    patched = []
    try:
        for path, layer, reader in found:
            own = layer.__dict__.get(reader.method)  # an instance attribute
            original = getattr(layer, reader.method)
            wrapper = _wrapper(original, path, layer, reader, recorder)
            object.__setattr__(layer, reader.method, wrapper)
            patched.append((layer, reader.method, own))
        yield recorder
    finally:
        for layer, method, own in reversed(patched):
            if own is None:
                object.__delattr__(layer, method)
            else:
                object.__setattr__(layer, method, own)


def _children(layer):
    return layer._flatten_layers(include_self=False, recursive=False)


def _attention_layers(model):
    """`(path, layer, reader)` of the attention layers of `model`, depth
    first in the order the model tracks its layers. The layers inside an
    attention layer are not visited (a decoder's attention is read through
    the decoder); a shared layer is found once."""
    reader = reader_for(model)
    if reader is not None:
        return [(model.name, model, reader)]
    found, seen, paths = [], {id(model)}, set()

    def visit(layer, prefix):
        for child in _children(layer):
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = f"{prefix}{child.name}"
            while path in paths:  # two sublayers of one name
                path += "_"
            paths.add(path)
            reader = reader_for(child)
            if reader is not None:
                found.append((path, child, reader))
            else:
                visit(child, f"{path}/")

    visit(model, "")
    return found


def _check_model(model):
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(
            "`model` must be a built Keras model or layer (`keras.Model`, "
            "`keras.Sequential`, a subclassed model or a `keras.layers.Layer`). "
            f"Received: model={model!r} of type {type(model).__name__}"
        )
    if not model.built:
        raise ValueError(
            "`model` must be built: call it once (or build it) before "
            "collecting its attention, so that its layers exist. Received: "
            f"model={model.name!r} with built=False"
        )


def _no_attention_error(model, found):
    looked_for = ", ".join(
        f"{cls.__module__.split('.')[0]}.{cls.__name__}" for cls in READ_CLASSES
    )
    if found:
        names = ", ".join(path for path, _, _ in found)
        return ValueError(
            f"`model` holds attention layers ({names}) but none of them ran "
            "when it was called on `inputs`. Received: "
            f"model={model.name!r}"
        )
    return ValueError(
        "`model` must hold at least one attention layer that "
        f"`collect_attention` reads (instances of {looked_for}, or of their "
        f"subclasses). Received: model={model.name!r} with no such layer"
    )


def collect_attention(model, inputs, **kwargs):
    """The attention weights of every attention layer of a built model.

    Calls `model(inputs, **kwargs)` once, eagerly, and records on the way
    the post-softmax weights of each attention layer inside it, however
    deep (a functional, `Sequential` or subclassed model, a Transformer
    stack, one of the package's models, or a single layer). Nothing is
    rebuilt and the model's outputs do not change: while the model runs,
    each attention layer's method is wrapped on the instance (and always
    restored, even on error); a call that did not ask for the weights runs
    as the model asked, and once more with its flag
    (`return_attention_scores=True`, `return_alignments=True`) for the
    weights. So the outputs are those of a plain call bit for bit, on
    every kernel path, and the weights are exactly what the layer returns
    with its flag on the same inputs. The price is each attention layer
    computed twice (once where the model already asks for the weights,
    or where every call returns them). Run it eagerly: under `jit` or a
    `tf.function` the weights have no value yet (a `RuntimeError` says so).

    Which layers are read, and how (a subclass is read as its base):

    - `MultiHeadAttention`, `MultiHeadSelfAttention`,
      `MemoryCompressedAttention`: their weights `(B, N, T, S)`, however
      they are called, by themselves or inside a block, stack, Universal
      Transformer, `ImageTransformerBlock`, `MemoryCompressedDecoder` or
      model (`S` the compressed memory slots for the memory-compressed
      layer). A stack is read through its blocks' attention layers, so the
      self- and cross-attention of each block are two entries:
      `".../block_0/self_attention"`, `".../block_0/cross_attention"`. Our
      `MultiHeadAttention` on inputs of rank above 3 (Keras' layout with
      `attention_axes`) is not read.
    - `ScoredAttention`, `BahdanauAttention`, `LuongAttention`: `(B, T, S)`
      as `(B, 1, T, S)`, a single query `(B, S)` as `(B, 1, 1, S)`.
    - `PointerAttention`: its output, the log-probabilities over the
      inputs, exponentiated (masked positions get 0).
    - `AttentionRNNDecoder`, `LSTMNShallowFusionDecoder`,
      `LSTMNDeepFusionDecoder`: the alignment history
      (`return_alignments=True`), `(B, 1, T, S)`; `AttentionRNNCell`
      called by itself: its alignment `(B, 1, 1, S)`.
    - `LSTMN`: the intra-attention over its own past states, `(B, 1, T, T)`.
    - `AttentionPooling`: `(B, K, 1, T)`, each of the `K` context vectors
      as a head with one query.
    - `SelfAttention2D`: query pixels over key pixels in raster order,
      `(B, 1, H W, H' W')` (`H' W' = H W / 4` with `pool_keys`).
    - `keras.layers.MultiHeadAttention` (and its subclasses whose `call`
      takes `return_attention_scores`, e.g. keras-hub's
      `CachedMultiHeadAttention`), `keras.layers.GroupQueryAttention`:
      `(B, N, T, S)`; `keras.layers.Attention` and `AdditiveAttention`:
      `(B, 1, T, S)`.

    Not read (they have no way to return weights): the LSTMN's own
    intra-attention inside the fusion decoders (their inter-attention is
    read), `NeuralTuringMachineCell`'s addressing. The layers inside a read
    layer are not visited: a decoder's `ScoredAttention` is read through
    the decoder's alignments.

    Names: the key of a record is the layer's path from the model, the
    names of the layers holding it joined by `/`; a layer that ran `k > 1`
    times (a shared layer, the block of a Universal Transformer at each of
    its steps) gives `k` entries, `path[0]` to `path[k-1]`, in call order.
    The records follow the order in which the layers ran.

    Masks: each record carries the padding masks the layer received for
    its queries and keys (explicit masks, else the Keras masks of its
    inputs, e.g. from `Embedding(mask_zero=True)`), as boolean `(B, T)`
    and `(B, S)` arrays, True = a real position, or `None` when it had none
    (or one over other positions, as the memory-compressed layer's keys).
    Padded keys get zero weight; padded queries' rows are whatever the
    layer returns, to be marked, not drawn, by a view.

    Args:
        model: a built `keras.Model` (functional, `Sequential` or
            subclassed) or `keras.layers.Layer` holding at least one of the
            layers above.
        inputs: what `model` is called on.
        **kwargs: further arguments of the call (`training=False`, ...).
            With `training=True` the two calls of a layer draw different
            dropout masks.

    Returns:
        An `AttentionCollection`: a mapping `name -> AttentionRecord`
        (`name`, `layer_name`, `class_name`, `call_index`, float32
        `weights` `(B, N, T, S)`, `query_mask`, `key_mask`) in the order
        the layers ran, with the model's outputs as `.outputs`.

    Raises:
        TypeError: `model` is not a Keras model or layer.
        ValueError: `model` is not built, holds no attention layer read
            here, or none of them ran.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_attention as ka
    >>> tokens = keras.Input((6,), dtype="int32")
    >>> x = keras.layers.Embedding(50, 16, mask_zero=True)(tokens)
    >>> x = ka.layers.TransformerEncoder(
    ...     num_layers=2, num_heads=4, intermediate_dim=32, name="encoder")(x)
    >>> model = keras.Model(tokens, ka.layers.AttentionPooling(name="pool")(x))
    >>> batch = np.array([[5, 3, 8, 2, 0, 0], [7, 1, 4, 9, 6, 2]])
    >>> collected = ka.visualization.collect_attention(model, batch)
    >>> list(collected)
    ['encoder/block_0/self_attention', 'encoder/block_1/self_attention', 'pool']
    >>> record = collected["encoder/block_0/self_attention"]
    >>> record.class_name, record.weights.shape
    ('MultiHeadSelfAttention', (2, 4, 6, 6))
    >>> record.key_mask[0].tolist()
    [True, True, True, True, False, False]
    >>> collected["pool"].weights.shape
    (2, 1, 1, 6)
    >>> np.array_equal(collected.outputs, model(batch))
    True
    """
    _check_model(model)
    found = _attention_layers(model)
    if not found:
        raise _no_attention_error(model, found)
    with _recording(found, _Recorder()) as recorder:
        outputs = model(inputs, **kwargs)
    records = recorder.records()
    if not records:
        raise _no_attention_error(model, found)
    return AttentionCollection(outputs, records)
