import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.keras_compat import build_proj_equation
from keras_attention.keras_compat import first_mask
from keras_attention.keras_compat import get_output_shape
from keras_attention.keras_compat import trace_output_spec
from keras_attention.layers.results import LayerResult
from keras_attention.modifiers import CompressedCausalMask
from keras_attention.ops.cache import cache_entries
from keras_attention.validation import build_key_shape
from keras_attention.validation import check_attention_inputs
from keras_attention.validation import check_cache_arguments
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rate
from keras_attention.validation import input_widths


@keras.saving.register_keras_serializable(package="keras_attention")
class MemoryCompressedAttention(keras.layers.Layer):
    """Multi-head attention over a memory compressed by strided convolutions.

    Memory-compressed attention (Liu et al., 2018, figure 1): the keys and
    values are projected per head as in multi-head attention, then each is
    shortened `f = compression_factor` times by a learned 1-D convolution
    with kernel size and stride `f` over the projected width `N H` (one
    convolution for `K`, one for `V`):

    `K_c = Conv_K(K W^K)`, `V_c = Conv_V(V W^V)`, slot `j` summarising keys
    `[j f, (j + 1) f)`, and
    `head_n = softmax(Q W_n^Q [k_0; K_c]_n^T / sqrt(H)) [v_0; V_c]_n`,
    `output = Concat(head_1, ..., head_N) W^O`.

    The attention costs `T (1 + ceil(S / f))` scores instead of `T S`. The
    convolution acts after the projections, as in the paper's figure
    (tensor2tensor's `multihead_self_attention_reduced` convolves the
    input before projecting it, shared by the heads): it reduces exactly
    the keys and values each head reads, on their own width. A sequence
    whose length is not a multiple of `f` keeps a last, partial slot (as
    if zeros followed the last key).

    The memory starts with the uncompressed projected key and value of the
    first real position, `k_0, v_0`, which every query may read, followed
    by the `ceil(S / f)` slots: without it a causal query could read
    nothing before its first slot completes (tensor2tensor prepends the
    first position "to make it attendable by everyone"; here the first
    *unpadded* one, so left padding does not hide it).

    Masks are boolean, True = may attend, over the *uncompressed* positions
    (`keras_attention.ops.memory_compression_mask` turns them into a mask
    over the memory):

    - `value_mask` / `key_mask` `(B, S)` mark padded keys: they are zeroed
      before the convolution, so they add nothing to their slot; a slot of
      padding only is hidden, a partly padded slot stays visible (its
      other keys are real);
    - `use_causal_mask`: query `i` reads slot `j` only once the slot is
      complete, its last position `(j + 1) f - 1 <= i` (a plain triangular
      mask over the slots would leak up to `f - 1` future keys), and `k_0`
      once its position is `<= i`; in self-attention a real query therefore
      always reads `k_0`. The output at `i` depends on the positions `<= i`
      alone, not on the sequence's length (a partial last slot is read by
      no causal query), so a prefix gives the same outputs as the whole
      sequence and cached decoding equals the full pass;
    - `attention_mask` `(T, S)` or `(B, T, S)` over the uncompressed keys:
      query `i` reads a slot only if it may see EVERY real key the slot
      summarises (reading a slot reads all its keys) and `k_0` if it may
      see the first real key; a per-head mask `(B, N, T, S)` is refused;
    - `query_mask` `(B, T)`: a padded query reads nothing; a query that
      reads nothing gets zero heads (its output is the output projection's
      bias).

    Keras masks (from `Embedding(mask_zero=True)`) fill `query_mask`,
    `value_mask` and `key_mask` automatically, and the output keeps the
    query's mask. The softmax runs in float32 whatever the dtype policy
    (`keras_attention.ops.multi_head_attention`).

    Args:
        num_heads: number of heads `N`.
        key_dim: size `H` of each head for queries and keys.
        value_dim: size of each head for values; `key_dim` when `None`.
        compression_factor: `f`, the kernel size and stride of the
            compressing convolutions (3 in the paper). Defaults to `3`.
        dropout: dropout rate on the attention weights while training.
        use_bias: whether the projections and convolutions have biases.
        output_shape: the output's feature shape (an int or a tuple); the
            query's width when `None`.
        kernel_initializer: initializer of the projection and convolution
            kernels; every kernel draws its own values, also when seeded.
        bias_initializer: initializer of the biases.
        kernel_regularizer: as in `keras.layers.MultiHeadAttention` (every
            projection and convolution kernel).
        bias_regularizer: as in Keras (every bias).
        activity_regularizer: as in Keras (every sublayer's output).
        kernel_constraint: as in Keras.
        bias_constraint: as in Keras.
        seed: seed of the dropout.
        attention_impl: the path of the attention over the memory,
            `"auto"`, `"dense"`, `"chunked"` or `"fused"` (see
            `keras_attention.ops.plan_attention`); the memory is already
            `f` times shorter than the keys, and its mask is an explicit
            `(B, T, 1 + S_c)` pattern.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, T, Dq)`.
        value: `(B, S, Dv)`.
        key: `(B, S, Dk)`; `value` when `None`.
        query_mask: `(B, T)`.
        value_mask, key_mask: `(B, S)`.
        attention_mask: `(T, S)` or `(B, T, S)`.
        use_causal_mask: bool.
        return_attention_scores: also return the weights over the memory,
            float32 `(B, N, T, 1 + ceil(S / f))` (`k_0` first).
        training: bool, whether dropout is active.
        cache: `None` or `(B, 2, S_max, N, H)`, the projected keys and
            values of every position before they are compressed (the
            layout of `MultiHeadAttention`'s cache; needs
            `value_dim == key_dim`). With `cache_update_index` the new
            tokens' keys and values are written at that position and the
            memory is compressed from the whole cache, whose first position
            is `k_0` (a cache holds no padding); queries are at absolute
            positions from `cache_update_index` on, and positions not
            written yet are never read (causally, a slot is read once
            complete; otherwise they count as padding). Without an index
            the cache is read as is, as `value` and `key` (which may then
            be `None`). Each cached call compresses the whole cache again
            (the convolutions' `O(S_max D^2)` work, besides the attention's
            `O(S_max D / f)`): simple and exact; keeping finished slots
            would make a decoding step cheaper.
        cache_update_index: int or traced int scalar, the position of the
            first new token in `cache`.

    Returns:
        `output` `(B, T, *output_shape)`, then the weights if asked, then
        the updated cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 10, 16).astype("float32")
    >>> layer = ka.layers.MemoryCompressedAttention(
    ...     num_heads=4, key_dim=4, compression_factor=3)
    >>> output, weights = layer(
    ...     x, x, use_causal_mask=True, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 10, 16), (2, 4, 10, 5))
    >>> bool(np.all(np.asarray(weights)[:, :, :2, 1:] == 0))  # no slot done yet
    True

    References:
        - Liu et al., 2018, Generating Wikipedia by Summarizing Long
          Sequences: https://arxiv.org/abs/1801.10198
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        compression_factor=3,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("compression_factor", compression_factor)
        check_rate("dropout", dropout)
        ka_ops.check_attention_impl(attention_impl)
        self.supports_masking = True
        self.attention_impl = attention_impl
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.compression_factor = compression_factor
        self.dropout = dropout
        self.use_bias = use_bias
        self._output_shape = _feature_shape(output_shape)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self._sublayer_activity_regularizer = keras.regularizers.get(
            activity_regularizer
        )
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None

    # -- build -------------------------------------------------------------

    @property
    def _value_size(self):
        return self.key_dim if self.value_dim is None else self.value_dim

    def _sublayer_kwargs(self, index):
        return dict(
            kernel_initializer=fresh_initializer(self.kernel_initializer, index),
            bias_initializer=fresh_initializer(self.bias_initializer, index),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            activity_regularizer=self._sublayer_activity_regularizer,
            kernel_constraint=self.kernel_constraint,
            bias_constraint=self.bias_constraint,
            dtype=self.dtype_policy,
        )

    def _projection(self, name, index, bound, output_shape):
        equation, bias_axes, rank = build_proj_equation(2, bound, len(output_shape))
        return keras.layers.EinsumDense(
            equation,
            output_shape=get_output_shape(rank - 1, output_shape),
            bias_axes=bias_axes if self.use_bias else None,
            name=name,
            **self._sublayer_kwargs(index),
        )

    def _compression(self, name, index, width):
        return keras.layers.Conv1D(
            width,
            self.compression_factor,
            strides=self.compression_factor,
            padding="valid",  # the input is padded to whole slots first
            use_bias=self.use_bias,
            name=name,
            **self._sublayer_kwargs(index),
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        key_shape = build_key_shape(value_shape, key_shape)
        for name, shape in zip(
            ("query", "value", "key"),
            (query_shape, value_shape, key_shape),
            strict=True,
        ):
            _check_sequence(name, shape)
        n, h, hv = self.num_heads, self.key_dim, self._value_size
        self.query_dense = self._projection("query", 0, 1, (n, h))
        self.key_dense = self._projection("key", 1, 1, (n, h))
        self.value_dense = self._projection("value", 2, 1, (n, hv))
        self.key_compression = self._compression("key_compression", 3, n * h)
        self.value_compression = self._compression("value_compression", 4, n * hv)
        out = self._output_shape or (query_shape[-1],)
        self.output_dense = self._projection("attention_output", 5, 2, out)
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.key_compression.build((None, None, n * h))
        self.value_compression.build((None, None, n * hv))
        self.output_dense.build((None, None, n, hv))
        # Padding masks pass through position-wise projections unchanged;
        # saying so keeps Keras from warning that the mask is dropped.
        for layer in self._flatten_layers(include_self=False):
            layer.supports_masking = True
        self._widths = input_widths(query_shape, value_shape, key_shape)
        self.built = True

    # -- call --------------------------------------------------------------

    def call(
        self,
        query,
        value=None,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        read_cache = cache is not None and cache_update_index is None
        if read_cache:
            value = key = None
        else:
            key = value if key is None else key
        self._check_inputs(query, value, key, cache, cache_update_index)
        masks = dict(
            query_mask=first_mask(query_mask, query),
            value_mask=None if read_cache else first_mask(value_mask, value),
            key_mask=None if read_cache else first_mask(key_mask, key),
            attention_mask=attention_mask,
        )
        keys = cache[:, 0] if cache is not None else value
        ka_ops.check_attention_masks(query, keys, **masks)
        result = self._attention(
            query,
            value,
            key,
            masks,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=cache,
            cache_update_index=cache_update_index,
        )
        return result.keras_outputs(return_attention_scores)

    def _attention(
        self,
        query,
        value,
        key,
        masks,
        *,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        """Projections, cache, compression, attention, output projection: a
        `LayerResult`. Arguments as `call`, already checked, the masks in
        one dict (the decoder blocks call this directly, as they call
        `MultiHeadAttention._attention`)."""
        key = value if key is None else key
        q = self.query_dense(query)  # (B, T, N, H)
        k, v, caches, entries, key_real = self._keys_and_values(
            value, key, masks, cache, cache_update_index
        )  # (B, S, N, H) each
        memory_mask, modifier = self._memory_masks(
            query, k, masks, key_real, use_causal_mask, cache_update_index
        )  # (B, T, 1 + S_c) or None, CompressedCausalMask or None
        heads, weights = ka_ops.multi_head_attention(
            q,
            self._memory(self.key_compression, k, key_real),
            self._memory(self.value_compression, v, key_real),
            attention_mask=memory_mask,
            mask_modifier=modifier,
            attention_impl=self.attention_impl,
            return_weights=return_attention_scores,
            dropout_rate=self.dropout,
            seed=self.seed_generator,
            training=training,
            validate=False,
        )  # (B, T, N, Hv), (B, N, T, 1 + S_c) or None
        output = self.output_dense(heads)  # (B, T, *output_shape)
        return LayerResult(output, weights, caches, entries)

    def _memory_masks(
        self, query, keys, masks, key_real, use_causal_mask, cache_update_index
    ):
        """`(attention_mask, mask_modifier)` for the attention over the
        memory. A causal call without a cache update passes the causal rule
        as `CompressedCausalMask`, whose `key_range` lets the chunked path
        skip the slots a query block cannot read yet (about half); the dense
        `memory_compression_mask` is built only when it says more (padding,
        an `attention_mask`, a query mask, or a cached step)."""
        modifier = None
        if use_causal_mask and cache_update_index is None:
            modifier = CompressedCausalMask(self.compression_factor)
            if key_real is None and all(
                masks.get(name) is None for name in ("query_mask", "attention_mask")
            ):
                return None, modifier
        memory_mask = ka_ops.memory_compression_mask(
            ops.shape(query)[1],
            ops.shape(keys)[1],
            self.compression_factor,
            key_mask=key_real,
            query_mask=masks.get("query_mask"),
            attention_mask=masks.get("attention_mask"),
            use_causal_mask=use_causal_mask,
            batch_size=ops.shape(query)[0],
            query_offset=0 if cache_update_index is None else cache_update_index,
        )  # (B, T, 1 + S_c)
        return memory_mask, modifier

    def _keys_and_values(self, value, key, masks, cache, cache_update_index):
        """The uncompressed keys and values `(B, S, N, H)` the memory is made
        of, with the updated caches, the new cache entries and which keys
        are real `(B, S)` (or `None`)."""
        key_real = ka_ops.merge_masks(masks.get("value_mask"), masks.get("key_mask"))
        if cache is None:
            return self.key_dense(key), self.value_dense(value), (), (), key_real
        if cache_update_index is None:  # read as is
            return cache[:, 0], cache[:, 1], (cache,), (None,), key_real
        k, v = self.key_dense(key), self.value_dense(value)  # the new tokens
        entries = (cache_entries(cache, k, v),)
        cache, k, v = ka_ops.update_cache(cache, k, v, cache_update_index)
        written = ka_ops.written_positions_mask(
            ops.shape(k)[1], cache_update_index, ops.shape(value)[1]
        )  # (1, S_max): the rest hold no key yet
        return k, v, (cache,), entries, ka_ops.merge_masks(key_real, written)

    def _memory(self, compression, x, key_real):
        """`[x_0; Conv(x)]`: `(B, S, N, H)` -> `(B, 1 + S_c, N, H)`."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        heads, size = x.shape[2], x.shape[3]
        flat = ops.reshape(x, (batch, length, heads * size))  # (B, S, N H)
        padded = ka_ops.pad_to_slots(flat, self.compression_factor, key_real)
        slots = compression(padded)  # (B, S_c, N H)
        slots = ops.reshape(slots, (batch, -1, heads, size))  # (B, S_c, N, H)
        if key_real is None:
            first = x[:, :1]  # (B, 1, N, H)
        else:
            first = ka_ops.gather_positions(x, ka_ops.first_key_position(key_real)[0])
        return ops.concatenate([first, ops.cast(slots, first.dtype)], axis=1)

    def _check_inputs(self, query, value, key, cache=None, cache_update_index=None):
        """Each argument checked once, with its name (static shapes only)."""
        if value is None and cache is None:
            raise ValueError(
                "`value` is needed unless a `cache` is read as is. Received: value=None"
            )
        check_attention_inputs(query, value, key, self._widths)
        if cache is not None:
            self._check_cache_layout()
        check_cache_arguments(
            cache, cache_update_index, query, self.num_heads, self.key_dim
        )

    def _check_cache_layout(self):
        if self._value_size != self.key_dim:
            raise ValueError(
                "A cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )

    def compute_cache(self, value, key=None):
        """Project a fixed key/value sequence once, uncompressed: `(B, 2, S,
        N, H)`, to pass as `cache` without `cache_update_index`."""
        key = value if key is None else key
        self._check_cache_layout()
        return ops.stack([self.key_dense(key), self.value_dense(value)], axis=1)

    # -- shapes and config -------------------------------------------------

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self._output_shape or (query_shape[-1],))

    def compute_output_spec(self, query, value=None, key=None, **kwargs):
        # Traced from `call`: float32 weights `(B, N, T, 1 + S_c)`.
        if not self.built:
            self.build(query.shape, value.shape, None if key is None else key.shape)
        return trace_output_spec(self, query, value, key, **kwargs)

    def get_config(self):
        serialize = keras.saving.serialize_keras_object
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "compression_factor": self.compression_factor,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "output_shape": self._output_shape,
            "kernel_initializer": serialize(self.kernel_initializer),
            "bias_initializer": serialize(self.bias_initializer),
            "kernel_regularizer": serialize(self.kernel_regularizer),
            "bias_regularizer": serialize(self.bias_regularizer),
            "activity_regularizer": serialize(self._sublayer_activity_regularizer),
            "kernel_constraint": serialize(self.kernel_constraint),
            "bias_constraint": serialize(self.bias_constraint),
            "seed": self.seed,
            "attention_impl": self.attention_impl,
        }


def _feature_shape(output_shape):
    """`output_shape` as a tuple, or `None`."""
    if output_shape is None:
        return None
    shape = (output_shape,) if isinstance(output_shape, int) else tuple(output_shape)
    for size in shape:
        check_positive_int("output_shape", size)
    return shape


def _check_sequence(name, shape):
    if len(shape) != 3 or shape[-1] is None:
        raise ValueError(
            f"`{name}` must have rank 3 `(B, T, D)` and a known last dimension. "
            f"Received: {name}.shape={tuple(shape)}"
        )
