import math

import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.validation import check_index
from keras_attention.layers.validation import check_positive_int
from keras_attention.layers.validation import check_rank
from keras_attention.layers.validation import check_rate
from keras_attention.layers.validation import check_same


def check_cache(cache, batch, num_heads, head_dim, name="cache"):
    """ValueError unless `cache` has the static shape `(B, 2, S, N, H)`."""
    shape = tuple(cache.shape)
    expected = (batch, 2, None, num_heads, head_dim)
    ok = len(shape) == 5 and all(
        want is None or got is None or got == want
        for got, want in zip(shape, expected, strict=True)
    )
    if not ok:
        raise ValueError(
            f"`{name}` must have shape (batch, 2, max_length, num_heads, key_dim) "
            f"= {expected}. Received: {name}.shape={shape}"
        )


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention of a query sequence over a key/value sequence.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_N) W^O` with
    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(H)) V W_i^V`
    (Vaswani et al., 2017). Every head has its own projections; the heads
    are concatenated and mixed by the output projection `W^O`. The softmax
    runs in float32 whatever the compute dtype, so `mixed_float16` logits
    cannot overflow. All the maths is `keras_attention.ops.dot_product_attention`.

    Masks are boolean, True = may attend: `value_mask`/`key_mask` `(B, S)`
    hide padded keys from every query, `query_mask` `(B, T)` zeroes the
    attention of padded queries, `attention_mask` `(B, T, S)` is any pattern,
    `use_causal_mask` lets query `i` see keys `j <= i`. Keras masks (from
    `Embedding(mask_zero=True)`) fill `query_mask`, `value_mask` and
    `key_mask` automatically, and the query's mask is passed on.

    Key/value cache (autoregressive decoding): `cache` is a fixed-size tensor
    `(B, 2, S_max, N, H)` holding the projected keys (`cache[:, 0]`) and
    values (`cache[:, 1]`) of every position. With `cache_index` (an int or
    a traced int tensor) the keys/values projected from the new `key`/`value`
    tokens are written at `[cache_index, cache_index + T)` and the queries
    attend to cache positions `< cache_index + T` only (causally from
    `cache_index` with `use_causal_mask=True`); with `cache_index=None` the
    cache is read as is and `key`/`value` are ignored (a precomputed
    cross-attention cache, see `compute_cache`). A cache needs
    `value_dim == key_dim`. The cache keeps its shape, so a generation loop
    compiles once under XLA.

    Weights are 2-D with the heads flattened head-major: `query_kernel`
    `(Dq, N * H)`, `key_kernel` `(Dk, N * H)`, `value_kernel` `(Dv, N * Hv)`,
    `output_kernel` `(N * Hv, output_dim)` (a `keras.layers.MultiHeadAttention`
    kernel `(D, N, H)` converts with `reshape(D, N * H)`).

    Args:
        num_heads: number of heads `N`.
        key_dim: size `H` of each head for queries and keys.
        value_dim: size of each head for values; `key_dim` when `None`.
        dropout: dropout rate on the output (after `W^O`) while training.
        attention_dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_dim: width of the output; the query's width when `None`.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the biases.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"` or `"chunked"`. `"chunked"` is
            exact attention in O(T + S) memory instead of O(T S)
            (`keras_attention.ops.chunked_attention`: an online softmax over
            key blocks, recomputation in the backward pass); it handles
            every mask and attention dropout but cannot return attention
            scores (a ValueError says so). `"auto"` takes it when it applies and
            `T * S >= keras_attention.ops.CHUNKED_MIN_SIZE` (2048 * 2048),
            the dense path otherwise.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, T, Dq)`.
        value: `(B, S, Dv)`; may be `None` only with a cache and no
            `cache_index`.
        key: `(B, S, Dk)`; `value` when `None`.
        query_mask, value_mask, key_mask, attention_mask: boolean masks
            (with a cache, `S` is the cache length `S_max`).
        use_causal_mask: bool.
        return_attention_scores: also return the post-softmax per-head
            weights, float32 `(B, N, T, S)`.
        training: bool, whether dropout is active.
        cache: `None` or `(B, 2, S_max, N, H)`.
        cache_index: `None` or the int position of the first new token.

    Returns:
        `output` `(B, T, output_dim)`, then the weights if asked, then the
        updated cache if one was passed: `output`, `(output, weights)`,
        `(output, cache)` or `(output, weights, cache)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> query = np.random.rand(2, 3, 16).astype("float32")
    >>> value = np.random.rand(2, 5, 8).astype("float32")
    >>> layer = ka.layers.MultiHeadAttention(num_heads=4, key_dim=4)
    >>> output, weights = layer(query, value, return_attention_scores=True)
    >>> output.shape, weights.shape
    (TensorShape([2, 3, 16]), TensorShape([2, 4, 3, 5]))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        attention_dropout=0.0,
        use_bias=True,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        ka_ops.check_attention_impl(attention_impl)
        self.attention_impl = attention_impl
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.seed_generator = (
            keras.random.SeedGenerator(seed)
            if dropout > 0 or attention_dropout > 0
            else None
        )
        self.supports_masking = True

    @property
    def _value_dim(self):
        return self.value_dim or self.key_dim

    def _kernel(self, name, fan_in, fan_out, blocks=1):
        """A 2-D kernel `(fan_in, blocks * fan_out)`.

        Kernels are stored 2-D, heads flattened head-major (`(D, N * H)`,
        not `(D, N, H)`): inside an XLA loop on CPU, reshaping a 3-D or 4-D
        kernel to a matmul operand costs a copy at every step (measured
        ~0.8 ms for a 256 x 768 kernel, 40x the matmul itself). A kernel
        made of several `blocks` (the fused Q/K/V one) is initialized block
        by block, so each block has the scale of a separate projection.
        """
        initializer = self.kernel_initializer.__class__.from_config(
            self.kernel_initializer.get_config()
        )

        def init(shape, dtype=None):
            return ops.concatenate(
                [initializer((fan_in, fan_out), dtype) for _ in range(blocks)],
                axis=1,
            )

        return self.add_weight(
            name=name, shape=(fan_in, blocks * fan_out), initializer=init
        )

    def _bias(self, name, size):
        if not self.use_bias:
            return None
        return self.add_weight(
            name=name, shape=(size,), initializer=self.bias_initializer
        )

    # -- build -------------------------------------------------------------

    def build(self, query_shape, value_shape=None, key_shape=None):
        check_rank("query", query_shape, 3)
        if value_shape is None:
            raise ValueError(
                "`value` is needed to build the layer (its width sets the "
                "value projection). Received: value=None"
            )
        check_rank("value", value_shape, 3)
        if key_shape is None:
            key_shape = value_shape
        check_rank("key", key_shape, 3)
        for name, shape in (("query", query_shape), ("value", value_shape)):
            if shape[-1] is None:
                raise ValueError(
                    f"The last dimension of `{name}` must be known. "
                    f"Received: {name}.shape={tuple(shape)}"
                )
        n, h, hv = self.num_heads, self.key_dim, self._value_dim
        self._query_dim = query_shape[-1]
        self._key_input_dim = key_shape[-1]
        self._value_input_dim = value_shape[-1]
        self.query_kernel = self._kernel("query_kernel", query_shape[-1], n * h)
        self.query_bias = self._bias("query_bias", n * h)
        self.key_kernel = self._kernel("key_kernel", key_shape[-1], n * h)
        self.key_bias = self._bias("key_bias", n * h)
        self.value_kernel = self._kernel("value_kernel", value_shape[-1], n * hv)
        self.value_bias = self._bias("value_bias", n * hv)
        self._build_output(query_shape)

    def _build_output(self, query_shape):
        out = self.output_dim or query_shape[-1]
        self.output_kernel = self._kernel(
            "output_kernel", self.num_heads * self._value_dim, out
        )
        self.output_bias = self._bias("output_bias", out)
        self.built = True

    # -- projections (the weights; the maths is in ka_ops) ------------------

    @staticmethod
    def _dense(x, kernel, bias, out_shape=None):
        """`x` `(B, T, ...)` flattened to `(B, T, Din)` times a 2-D kernel.

        Returns `(B, T, Dout)`, or `(B, T, *out_shape)` when given.
        """
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        if len(x.shape) > 3:
            x = ops.reshape(x, (batch, length, math.prod(x.shape[2:])))
        y = ops.matmul(x, kernel)
        if bias is not None:
            y = y + bias
        if out_shape is not None:
            y = ops.reshape(y, (batch, length) + tuple(out_shape))
        return y

    def _heads(self, value=False):
        return (self.num_heads, self._value_dim if value else self.key_dim)

    def _project_query(self, query):
        return self._dense(query, self.query_kernel, self.query_bias, self._heads())

    def _project_key_value(self, key, value):
        k = self._dense(key, self.key_kernel, self.key_bias, self._heads())
        v = self._dense(
            value, self.value_kernel, self.value_bias, self._heads(value=True)
        )
        return k, v  # (B, S, N, H), (B, S, N, Hv)

    def compute_cache(self, value, key=None):
        """Project a fixed key/value sequence once: `(B, 2, S, N, H)`.

        Used for cross-attention while decoding: pass the result as `cache`
        with `cache_index=None` at every step.
        """
        if self.value_dim not in (None, self.key_dim):
            raise ValueError(
                "A cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )
        k, v = self._project_key_value(value if key is None else key, value)
        return ops.stack([k, v], axis=1)

    # -- call --------------------------------------------------------------

    def _check_width(self, name, x, expected):
        check_rank(name, tuple(x.shape), 3)
        if x.shape[-1] is not None and x.shape[-1] != expected:
            raise ValueError(
                f"The last dimension of `{name}` must be {expected} (the width "
                f"the layer was built with). Received: {name}.shape="
                f"{tuple(x.shape)}"
            )

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
        cache_index=None,
    ):
        self._check_width("query", query, self._query_dim)
        q = self._project_query(query)  # (B, T, N, H)
        if cache is not None and cache_index is None:
            k = v = None  # read the cache as is
        else:
            if value is None:
                raise ValueError(
                    "`value` is required unless a `cache` is read without "
                    "`cache_index`. Received: value=None"
                )
            key = value if key is None else key
            self._check_width("value", value, self._value_input_dim)
            self._check_width("key", key, self._key_input_dim)
            check_same("key", key.shape[1], "value", value.shape[1], "length")
            check_same("query", query.shape[0], "value", value.shape[0], "batch size")
            k, v = self._project_key_value(key, value)
        return self._attend(
            query,
            q,
            k,
            v,
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=cache,
            cache_index=cache_index,
        )

    def _attend(
        self,
        query,
        q,
        k,
        v,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        return_attention_scores,
        training,
        cache,
        cache_index,
    ):
        """Shared by the self-attention subclass: cache, masks, attention."""
        causal_offset = 0
        valid_keys = None
        if cache is not None:
            if self.value_dim not in (None, self.key_dim):
                raise ValueError(
                    "A cache needs `value_dim == key_dim`. Received: "
                    f"key_dim={self.key_dim}, value_dim={self.value_dim}"
                )
            check_cache(cache, query.shape[0], self.num_heads, self.key_dim)
            if cache_index is None:
                k, v = cache[:, 0], cache[:, 1]  # (B, S_max, N, H)
            else:
                check_index(
                    "cache_index",
                    cache_index,
                    q.shape[1],
                    cache.shape[2],
                    "cache.shape[2]",
                )
                cache_index = ops.cast(cache_index, "int32")
                kv = ops.cast(ops.stack([k, v], axis=1), cache.dtype)
                if q.shape[1] == 1:
                    # One new token (a decoding step): the new key and value
                    # are selected in at their position, elementwise, not
                    # written with an update. Under XLA the select fuses into
                    # the attention's own pass over the cache and into
                    # `TransformerDecoder`'s stack of the layers' caches (one
                    # elementwise pass), so no per-layer cache is copied.
                    here = ops.arange(ops.shape(cache)[2], dtype="int32")
                    here = ops.equal(here, cache_index)[None, None, :, None, None]
                    cache = ops.where(here, kv, cache)  # (B, 2, S, N, H)
                else:
                    cache = ops.slice_update(cache, [0, 0, cache_index, 0, 0], kv)
                k, v = cache[:, 0], cache[:, 1]
                causal_offset = cache_index
                if not use_causal_mask:
                    # Positions not written yet hold no key.
                    written = ops.shape(q)[1] + cache_index
                    positions = ops.arange(ops.shape(k)[1], dtype="int32")
                    valid_keys = ops.less(positions, written)[None, :]  # (1, S)
        elif cache_index is not None:
            raise ValueError(
                "`cache_index` needs a `cache`. Received: cache=None, "
                f"cache_index={cache_index}"
            )
        heads, weights = ka_ops.multi_head_attention(
            q,
            k,
            v,
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=ka_ops.merge_masks(key_mask, valid_keys),
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            causal_offset=causal_offset,
            attention_impl=self.attention_impl,
            return_weights=return_attention_scores,
            dropout_rate=self.attention_dropout,
            seed=self.seed_generator,
            training=training,
        )  # (B, T, N, Hv), (B, N, T, S) or None
        output = self._dense(
            heads, self.output_kernel, self.output_bias
        )  # (B, T, output_dim)
        if training and self.dropout > 0:
            output = keras.random.dropout(
                output, self.dropout, seed=self.seed_generator
            )
        outputs = (output,)
        if return_attention_scores:
            outputs += (weights,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_mask(self, query, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "use_bias": self.use_bias,
            "output_dim": self.output_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
            "attention_impl": self.attention_impl,
        }
