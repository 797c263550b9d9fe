"""Built-in mask modifiers: `(batch, head, query, key) -> bool`, True = may
attend, on absolute positions (see `keras_attention.ops.modifier_calls`)."""

import keras
from keras import ops

from keras_attention.modifiers.base import MaskModifier
from keras_attention.validation import check_int
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class CausalMask(MaskModifier):
    """Query `i` sees keys `j <= i`.

    Positions are absolute, so with a key/value cache (queries starting at
    the cache index) the mask is aligned bottom-right: the last query sees
    every written key. Without a cache, `T < S` queries are aligned top-left
    (Keras' `use_causal_mask`); pass `causal_offset = S - T` to the ops for
    bottom-right alignment.
    """

    def __call__(self, batch, head, query, key):
        return query >= key

    def key_range(self, query_start, query_stop):
        return 0, query_stop


@keras.saving.register_keras_serializable(package="keras_attention")
class SlidingWindow(MaskModifier):
    """Local attention: query `i` sees keys `i - window < j <= i` (causal,
    Mistral) or `|i - j| < window` (`causal=False`, Longformer's local
    attention)."""

    banded = True

    def __init__(self, window, causal=True):
        check_positive_int("window", window)
        self.window, self.causal = window, bool(causal)

    def __call__(self, batch, head, query, key):
        distance = query - key
        if self.causal:
            return ops.logical_and(distance >= 0, distance < self.window)
        return ops.abs(distance) < self.window

    def key_range(self, query_start, query_stop):
        hi = query_stop if self.causal else query_stop + self.window - 1
        return query_start - self.window + 1, hi

    def get_config(self):
        return {"window": self.window, "causal": self.causal}


@keras.saving.register_keras_serializable(package="keras_attention")
class AttentionSinks(MaskModifier):
    """The first `num_sinks` keys are always visible, on top of `mask`
    (StreamingLLM, Xiao et al., 2024): `mask(...) or key < num_sinks`, and
    with `causal=True` only to queries at or after them.

    Example: `AttentionSinks(4, SlidingWindow(256))`.
    """

    def __init__(self, num_sinks, mask, causal=True):
        from keras_attention.modifiers.base import deserialize

        check_positive_int("num_sinks", num_sinks)
        self.num_sinks, self.causal = num_sinks, bool(causal)
        self.mask = deserialize(mask)

    def __call__(self, batch, head, query, key):
        sink = key < self.num_sinks
        if self.causal:
            sink = ops.logical_and(sink, query >= key)
        allowed = ops.cast(self.mask(batch, head, query, key), "bool")
        return ops.logical_or(allowed, sink)

    def key_range(self, query_start, query_stop):
        inner = getattr(self.mask, "key_range", lambda *_: None)(
            query_start, query_stop
        )
        if inner is None:
            return None
        return 0, ops.maximum(inner[1], self.num_sinks)

    def get_config(self):
        from keras_attention.modifiers.base import serialize

        return {
            "num_sinks": self.num_sinks,
            "mask": serialize(self.mask),
            "causal": self.causal,
        }


@keras.saving.register_keras_serializable(package="keras_attention")
class PrefixLM(MaskModifier):
    """Prefix language model (Raffel et al., 2020; Dong et al., 2019): the
    first `prefix_length` positions see each other in both directions,
    the rest is causal: `key <= query or key < prefix_length`.

    `prefix_length` is an int, or an int tensor `(B,)` per example (not
    serialisable then).
    """

    def __init__(self, prefix_length):
        if isinstance(prefix_length, int):
            check_positive_int("prefix_length", prefix_length)
        self.prefix_length = prefix_length

    def _prefix(self):
        prefix = ops.cast(self.prefix_length, "int32")
        if len(prefix.shape) == 1:
            prefix = ops.reshape(prefix, (-1, 1, 1, 1))  # per example
        return prefix

    def __call__(self, batch, head, query, key):
        return ops.logical_or(key <= query, key < self._prefix())

    def key_range(self, query_start, query_stop):
        return 0, ops.maximum(query_stop, ops.max(self._prefix()))

    def get_config(self):
        if not isinstance(self.prefix_length, int):
            raise TypeError(
                "A PrefixLM with per-example prefix lengths holds data and "
                "cannot be serialised; pass an int `prefix_length`. Received: "
                f"prefix_length of type {type(self.prefix_length).__name__}"
            )
        return {"prefix_length": self.prefix_length}


class SegmentMask(MaskModifier):
    """Packed sequences: a query sees only keys of its own segment.

    `segment_ids` int `(B, L)` label each position (the same ids for queries
    and keys, as in self-attention over a packed row; `key_segment_ids`
    when the keys differ). Combine with `CausalMask()` for packed causal
    language modelling: `SegmentMask(ids) & CausalMask()`. It holds data,
    so it is built per call (for `keras_attention.ops`), not serialised.
    """

    def __init__(self, segment_ids, key_segment_ids=None):
        self.query_ids = ops.cast(segment_ids, "int32")
        ids = segment_ids if key_segment_ids is None else key_segment_ids
        self.key_ids = ops.cast(ids, "int32")

    @staticmethod
    def _gather(ids, positions):
        length = ops.shape(ids)[1]
        flat = ops.clip(ops.reshape(positions, (-1,)), 0, length - 1)
        return ops.take(ids, flat, axis=1)  # (B, len(positions))

    def __call__(self, batch, head, query, key):
        q_ids = self._gather(self.query_ids, query)[:, None, :, None]
        k_ids = self._gather(self.key_ids, key)[:, None, None, :]
        return ops.equal(q_ids, k_ids)

    def get_config(self):
        raise TypeError(
            "SegmentMask holds the segment ids of one batch and cannot be "
            "serialised; build it per call. Received: a SegmentMask"
        )


@keras.saving.register_keras_serializable(package="keras_attention")
class BlockLocal2D(MaskModifier):
    """Image Transformer's local 2D attention (Parmar et al., 2018) over an
    image flattened in raster order, `image_width` pixels a row.

    The image is split into query blocks of `query_block = (rows, cols)`
    pixels; every query of a block sees the memory block around it: its own
    block extended by `memory_flange = (rows, cols)` pixels above, left and
    right (and below when `causal=False`). With `causal=True` (generation)
    a query never sees pixels after it in raster order.

    `chunk_size` is one band of query blocks, `query_block[0] * image_width`
    positions: the chunked path takes it as its block size (see
    `keras_attention.ops.chunked.chunked_attention`), so that it visits only the
    bands a query block can see instead of 512-position chunks that
    straddle them.
    """

    banded = True

    def __init__(
        self, image_width, query_block=(8, 8), memory_flange=(8, 8), causal=True
    ):
        check_positive_int("image_width", image_width)
        for name, pair in (
            ("query_block", query_block),
            ("memory_flange", memory_flange),
        ):
            if (
                not isinstance(pair, (tuple, list))
                or len(pair) != 2
                or any(not isinstance(v, int) or v < 0 for v in pair)
                or (name == "query_block" and min(pair) < 1)
            ):
                raise ValueError(
                    f"`{name}` must be two non-negative ints (rows, cols), "
                    f"positive for query_block. Received: {name}={pair!r}"
                )
        self.image_width = image_width
        self.query_block = tuple(query_block)
        self.memory_flange = tuple(memory_flange)
        self.causal = bool(causal)

    @property
    def chunk_size(self):
        return self.query_block[0] * self.image_width

    def __call__(self, batch, head, query, key):
        (bh, bw), (fh, fw) = self.query_block, self.memory_flange
        q_row, q_col = query // self.image_width, query % self.image_width
        k_row, k_col = key // self.image_width, key % self.image_width
        top = (q_row // bh) * bh - fh
        bottom = (q_row // bh + 1) * bh + (0 if self.causal else fh)
        left = (q_col // bw) * bw - fw
        right = (q_col // bw + 1) * bw + fw
        inside = ops.logical_and(
            ops.logical_and(k_row >= top, k_row < bottom),
            ops.logical_and(k_col >= left, k_col < right),
        )
        if self.causal:
            inside = ops.logical_and(inside, key <= query)
        return inside

    def key_range(self, query_start, query_stop):
        (bh, _), (fh, _) = self.query_block, self.memory_flange
        w = self.image_width
        first_row = (query_start // w // bh) * bh - fh
        if self.causal:
            return first_row * w, query_stop
        last_row = ((query_stop - 1) // w // bh + 1) * bh + fh
        return first_row * w, last_row * w

    def get_config(self):
        return {
            "image_width": self.image_width,
            "query_block": self.query_block,
            "memory_flange": self.memory_flange,
            "causal": self.causal,
        }


@keras.saving.register_keras_serializable(package="keras_attention")
class BlockLocal1D(MaskModifier):
    """Image Transformer's local 1D attention (Parmar et al., 2018): the
    positions (e.g. pixels in raster order) are split into query blocks of
    `query_block` positions; a query of block `b` sees the keys
    `[b * query_block - memory_flange, (b + 1) * query_block)`, its own
    block and the `memory_flange` positions before it, and with
    `causal=True` (generation) only those at or before itself. With
    `causal=False` the memory also extends `memory_flange` positions after
    the block.

    `chunk_size` is `query_block`: the chunked path takes it as its block
    size, so that each query block visits only its own memory.
    """

    banded = True

    def __init__(self, query_block=256, memory_flange=256, causal=True):
        check_positive_int("query_block", query_block)
        meaning = "positions before the query block"
        check_int("memory_flange", memory_flange, 0, meaning=meaning)
        self.query_block, self.memory_flange = query_block, memory_flange
        self.causal = bool(causal)

    @property
    def chunk_size(self):
        return self.query_block

    def __call__(self, batch, head, query, key):
        start = (query // self.query_block) * self.query_block
        inside = key >= start - self.memory_flange
        if self.causal:
            return ops.logical_and(inside, key <= query)
        stop = start + self.query_block + self.memory_flange
        return ops.logical_and(inside, key < stop)

    def key_range(self, query_start, query_stop):
        q, f = self.query_block, self.memory_flange
        lo = (query_start // q) * q - f
        if self.causal:
            return lo, query_stop
        return lo, ((query_stop - 1) // q + 1) * q + f

    def get_config(self):
        return {
            "query_block": self.query_block,
            "memory_flange": self.memory_flange,
            "causal": self.causal,
        }


@keras.saving.register_keras_serializable(package="keras_attention")
class CompressedCausalMask(MaskModifier):
    """The causal rule over a compressed memory `[x_0; slot_1 .. slot_S_c]`
    (`MemoryCompressedAttention`, Liu et al., 2018): query `i` reads the
    first key always and slot `j` once every position it summarises is at
    or before it, `j f - 1 <= i` (`f` the `compression_factor`; memory
    index `j >= 1` is the slot of positions `[(j - 1) f, j f)`).

    It is `ops.memory_compression_mask(..., use_causal_mask=True)` without
    padding; with padding that mask is stricter, and the layer passes both.
    Its `key_range` lets the chunked path skip the slots no query of a
    block can read yet, about half of them.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> mask = ka.modifiers.CompressedCausalMask(3)
    >>> allowed = mask(0, 0, np.arange(7)[:, None], np.arange(4)[None, :])
    >>> np.asarray(allowed, "int32")[[0, 2, 5, 6]].tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]]
    """

    def __init__(self, compression_factor):
        check_positive_int("compression_factor", compression_factor)
        self.compression_factor = compression_factor

    def __call__(self, batch, head, query, key):
        complete = key * self.compression_factor - 1 <= query
        return ops.logical_or(key == 0, complete)

    def key_range(self, query_start, query_stop):
        return 0, query_stop // self.compression_factor + 1

    def get_config(self):
        return {"compression_factor": self.compression_factor}
