import keras
from keras import ops

from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.validation import check_rank


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadSelfAttention(MultiHeadAttention):
    """Multi-head self-attention with one fused Q/K/V projection.

    The same maths as `MultiHeadAttention(query=x, value=x)`, but the three
    projections are one kernel `(D, 3 * N * H)` = `[W^Q | W^K | W^V]`
    (each block head-major, `(D, N * H)`) applied in one matmul, which
    reads `x` once. Weights convert from `MultiHeadAttention` by
    concatenating its query, key and value kernels on axis 1.

    Masks are boolean, True = may attend. `query_mask` `(B, T)` (filled from
    a Keras mask) marks padded positions: they are hidden as keys and their
    own output is zero attention. `key_mask` `(B, S)` overrides the key
    padding (needed with a cache, where `S` is the cache length);
    `attention_mask` `(B, T, S)` is any pattern; `use_causal_mask` lets
    position `i` see `j <= i`.

    The key/value cache works as in `MultiHeadAttention`: `cache`
    `(B, 2, S_max, N, H)` and `cache_index` (int or traced int tensor)
    write the new tokens' keys/values at `[cache_index, cache_index + T)`.

    Args:
        num_heads: number of heads `N`.
        key_dim: size `H` of each head (queries, keys and values).
        **kwargs: the other `MultiHeadAttention` arguments (`dropout`,
            `attention_dropout`, `use_bias`, `output_dim`,
            `kernel_initializer`, `bias_initializer`, `seed`) and base layer
            arguments. `value_dim`, if given, must equal `key_dim`.

    Call arguments:
        query: `(B, T, D)`, the sequence attending to itself.
        query_mask: `(B, T)` padding mask.
        key_mask: `(B, S)`; `query_mask` when `None` and there is no cache.
        attention_mask: `(B, T, S)`.
        use_causal_mask: bool.
        return_attention_scores: also return float32 `(B, N, T, S)` weights.
        training: bool, whether dropout is active.
        cache: `None` or `(B, 2, S_max, N, H)`.
        cache_index: `None` or the int position of the first token of
            `query`.

    Returns:
        As `MultiHeadAttention`: `output` `(B, T, output_dim)`, then the
        weights if asked, then the updated cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> layer = ka.layers.MultiHeadSelfAttention(num_heads=4, key_dim=4)
    >>> y, w = layer(x, use_causal_mask=True, return_attention_scores=True)
    >>> y.shape, w.shape
    (TensorShape([2, 5, 16]), TensorShape([2, 4, 5, 5]))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(self, num_heads, key_dim, **kwargs):
        value_dim = kwargs.pop("value_dim", None)
        if value_dim not in (None, key_dim):
            raise ValueError(
                "`value_dim` must equal `key_dim` in the fused projection of "
                f"MultiHeadSelfAttention. Received: value_dim={value_dim}, "
                f"key_dim={key_dim}"
            )
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)

    def build(self, query_shape):
        check_rank("query", query_shape, 3)
        if query_shape[-1] is None:
            raise ValueError(
                "The last dimension of `query` must be known. "
                f"Received: query.shape={tuple(query_shape)}"
            )
        n, h = self.num_heads, self.key_dim
        self._query_dim = query_shape[-1]
        self.qkv_kernel = self._kernel("qkv_kernel", query_shape[-1], n * h, blocks=3)
        self.qkv_bias = self._bias("qkv_bias", 3 * n * h)
        self._build_output(query_shape)

    def _project_qkv(self, x):
        n, h = self._heads()
        qkv = self._dense(x, self.qkv_kernel, self.qkv_bias)  # (B, T, 3 N H)
        # `split` (backward: one concat), not strided slices of a
        # (B, T, 3, N, H) tensor (backward: three zero-filled full-size
        # gradients added up; measurable in graph mode).
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return tuple(
            ops.reshape(part, (batch, length, n, h))
            for part in ops.split(qkv, 3, axis=-1)
        )  # 3 x (B, T, N, H)

    def _projection(self, x, i):
        """Block `i` (0 = Q, 1 = K, 2 = V) of the fused projection alone."""
        size = self.num_heads * self.key_dim
        kernel = self.qkv_kernel[:, i * size : (i + 1) * size]
        bias = None
        if self.qkv_bias is not None:
            bias = self.qkv_bias[i * size : (i + 1) * size]
        return self._dense(x, kernel, bias, self._heads())

    def _project_query(self, query):
        return self._projection(query, 0)

    def _project_key_value(self, key, value):
        return self._projection(key, 1), self._projection(value, 2)

    def call(
        self,
        query,
        query_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_index=None,
    ):
        self._check_width("query", query, self._query_dim)
        if cache is not None and cache_index is None:
            raise ValueError(
                "Self-attention writes its new keys into the cache, so "
                "`cache_index` is required with a `cache`. Received: "
                "cache_index=None"
            )
        q, k, v = self._project_qkv(query)  # (B, T, N, H) each
        if key_mask is None and cache is None:
            key_mask = query_mask
        return self._attend(
            query,
            q,
            k,
            v,
            query_mask=query_mask,
            value_mask=None,
            key_mask=key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=cache,
            cache_index=cache_index,
        )

    def get_config(self):
        config = super().get_config()
        del config["value_dim"]
        return config
