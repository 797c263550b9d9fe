import keras
from keras import ops

from keras_attention.initializers import BlockInitializer
from keras_attention.keras_compat import first_mask
from keras_attention.layers.transformer.multi_head_attention import MultiHeadAttention
from keras_attention.ops.loops import tensorflow_xla_context
from keras_attention.validation import check_rank


def _projection_equation(rank):
    """`"abc,cd->abd"` for rank 3: a dense map of the last axis."""
    free = "abcdefgh"[: rank - 1]
    return f"{free}y,yz->{free}z"


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadSelfAttention(MultiHeadAttention):
    """Multi-head self-attention with one fused Q/K/V projection.

    The same maths as `MultiHeadAttention(query=x, value=x)`, but the three
    projections are one `EinsumDense` sublayer, `qkv`, with the kernel
    `(D, N H + G H + G Hv)` = `[W^Q | W^K | W^V]` (each block head-major,
    `(D, N, H)` flattened; `G = num_key_value_heads`, `N` by default)
    applied in one matmul under TensorFlow's XLA (it reads `x` once), as
    three matmuls on the kernel's blocks elsewhere (measured faster there:
    `_project_qkv`).
    Each block is initialized as `keras.layers.MultiHeadAttention`
    initializes its query, key and value kernels (shape `(D, N, H)`, its
    own draw), so both layers start from the same distribution.
    `from_multi_head_attention` converts the weights of a Keras (or this
    package's) `MultiHeadAttention`.

    Masks are boolean, True = may attend. `query_mask` `(B, T)` (filled from
    a Keras mask) marks padded positions: they are hidden as keys and their
    own output is zero attention. `key_mask` `(B, S)` overrides the key
    padding (needed with a cache, where `S` is the cache length);
    `attention_mask` is any pattern (`(T, S)`, `(B, T, S)`, `(B, N, T, S)`);
    `use_causal_mask` lets position `i` see `j <= i`.

    The key/value cache works as in `MultiHeadAttention`: `cache`
    `(B, 2, S_max, N, H)` and `cache_update_index` (int or traced int
    tensor) write the new tokens' keys/values at
    `[cache_update_index, cache_update_index + T)`.

    Args:
        num_heads: number of heads `N`.
        key_dim: size `H` of each head for queries and keys.
        **kwargs: the other `MultiHeadAttention` arguments (`value_dim`,
            `dropout`, `use_bias`, `output_shape`, `sliding_window`,
            `use_gate`, initializers, regularizers, constraints, `seed`,
            `attention_impl`, `num_key_value_heads`, `score_modifier`,
            `mask_modifier`, `rope_max_wavelength`, `rope_scaling_factor`)
            and base layer arguments. `attention_axes`
            is not one: the input is a `(B, T, D)` sequence.

    Call arguments:
        query: `(B, T, D)`, the sequence attending to itself.
        query_mask: `(B, T)` padding mask.
        key_mask: `(B, S)`; `query_mask` when `None` and there is no cache.
        attention_mask: `(T, S)`, `(B, T, S)` or `(B, N, T, S)`.
        return_attention_scores: also return float32 `(B, N, T, S)` weights.
        training: bool, whether dropout is active.
        use_causal_mask: bool.
        cache: `None` or `(B, 2, S_max, G, H)`.
        cache_update_index: `None` or the int position of the first token of
            `query`.

    Returns:
        As `MultiHeadAttention`: `output` `(B, T, *output_shape)`, then the
        weights if asked, then the updated cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> layer = ka.layers.MultiHeadSelfAttention(num_heads=4, key_dim=4)
    >>> y, w = layer(x, use_causal_mask=True, return_attention_scores=True)
    >>> tuple(y.shape), tuple(w.shape)
    ((2, 5, 16), (2, 4, 5, 5))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(self, num_heads, key_dim, **kwargs):
        if kwargs.get("attention_axes") is not None:
            raise ValueError(
                "`attention_axes` is not an argument of MultiHeadSelfAttention: it "
                "attends over the sequence axis of a "
                "(B, T, D) input; use MultiHeadAttention for other axes. "
                f"Received: attention_axes={kwargs['attention_axes']!r}"
            )
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)

    def build(self, query_shape):
        check_rank("query", tuple(query_shape), 3)
        self._check_build_shapes(query_shape)
        width = query_shape[-1]
        n, h, hv = self._num_heads, self._key_dim, self._value_dim
        g = self._kv_heads
        self._sublayer_index = 0
        common = self._get_common_kwargs_for_sublayer()
        blocks = [(width, n, h), (width, g, h), (width, g, hv)]
        common["kernel_initializer"] = BlockInitializer(
            self._kernel_initializer, blocks
        )
        self._sublayer_index = len(blocks)
        self._qkv_dense = keras.layers.EinsumDense(
            _projection_equation(3),
            output_shape=(None, n * h + g * (h + hv)),
            bias_axes="z" if self._use_bias else None,
            name="qkv",
            **common,
        )
        self._qkv_dense.build(query_shape)
        if self._use_gate:
            self._gate_dense = keras.layers.EinsumDense(
                "abc,cde->abde",
                output_shape=(None, n, hv),
                bias_axes="de" if self._use_bias else None,
                activation="sigmoid",
                name="gate",
                **self._get_common_kwargs_for_sublayer(),
            )
            self._gate_dense.build(query_shape)
        self._build_attention(4)
        self._output_dense = self._make_output_dense(
            query_shape, self._get_common_kwargs_for_sublayer(), "attention_output"
        )
        self._output_dense.build(tuple(query_shape[:-1]) + (n, hv))
        self._input_widths = {"query": width, "value": width, "key": width}
        self._after_build(3)
        self._check_modifier_layout()
        self._build_score_modifier()

    def _build_from_specs(self, query, *args, **kwargs):
        self.build(query.shape)

    @property
    def qkv_dense(self):
        return self._qkv_dense

    @classmethod
    def from_multi_head_attention(cls, layer, **kwargs):
        """A fused copy of a built (Keras or this package's)
        `MultiHeadAttention` whose query, key and value have one width:
        its config, its weights (Q/K/V kernels and biases concatenated).
        `**kwargs` override config entries."""
        if not layer.built:
            raise ValueError(
                "`layer` must be built (called once) so that its weights can "
                f"be copied. Received: an unbuilt {layer.__class__.__name__}"
            )
        config = {**layer.get_config(), **kwargs}
        config.pop("attention_axes", None)
        ours = cls.from_config(config)
        ours.build(layer._build_shapes_dict["query_shape"])
        ours.copy_multi_head_attention_weights(layer)
        return ours

    def copy_multi_head_attention_weights(self, layer):
        """Set this layer's weights from a built `MultiHeadAttention` (Keras'
        or this package's, e.g. the self-attention of keras-hub's blocks):
        its query, key and value kernels `(D, N, H)` and biases `(N, H)`
        concatenated into the fused `qkv` ones."""
        denses = (layer._query_dense, layer._key_dense, layer._value_dense)
        width = self._input_widths["query"]
        weights = [
            ops.concatenate(
                [ops.reshape(d.kernel, (width, -1)) for d in denses], axis=-1
            )
        ]
        if self._use_bias:
            weights.append(
                ops.concatenate([ops.reshape(d.bias, (-1,)) for d in denses], axis=-1)
            )
        self._qkv_dense.set_weights(weights)
        self._output_dense.set_weights(layer._output_dense.get_weights())
        if self._use_gate:
            self._gate_dense.set_weights(layer._gate_dense.get_weights())

    def to_multi_head_attention(self):
        """An unfused `MultiHeadAttention` (this package's) with the same
        config and weights; `.to_keras()` on it gives Keras' layer."""
        if not self.built:
            raise ValueError(
                "Build the layer (or call it once) before converting it. "
                "Received: an unbuilt MultiHeadSelfAttention"
            )
        layer = MultiHeadAttention.from_config(self.get_config())
        shape = self._build_shapes_dict["query_shape"]
        layer.build(shape, shape)
        self.copy_weights_to_multi_head_attention(layer)
        return layer

    def copy_weights_to_multi_head_attention(self, layer):
        """Split the fused weights into a built `MultiHeadAttention`'s (Keras'
        or this package's) query, key and value kernels and biases."""
        n, h, hv = self._num_heads, self._key_dim, self._value_dim
        g = self._kv_heads
        sizes = [n * h, n * h + g * h]
        kernels = ops.split(self._qkv_dense.kernel, sizes, axis=-1)
        biases = ops.split(self._qkv_dense.bias, sizes) if self._use_bias else None
        denses = (layer._query_dense, layer._key_dense, layer._value_dense)
        heads = (n, g, g)
        for i, (dense, size) in enumerate(zip(denses, (h, h, hv), strict=True)):
            weights = [ops.reshape(kernels[i], (-1, heads[i], size))]
            if biases is not None:
                weights.append(ops.reshape(biases[i], (heads[i], size)))
            dense.set_weights(weights)
        layer._output_dense.set_weights(self._output_dense.get_weights())
        if self._use_gate:
            layer._gate_dense.set_weights(self._gate_dense.get_weights())

    def _project_qkv(self, x):
        n, h, hv = self._num_heads, self._key_dim, self._value_dim
        g = self._kv_heads
        sizes = [n * h, n * h + g * h]
        if tensorflow_xla_context() or self._qkv_dense.quantization_mode:
            qkv = self._qkv_dense(x)  # (B, T, N H + G (H + Hv))
            # `split` (backward: one concat), not strided slices of a
            # (B, T, 3, N, H) tensor (backward: three zero-filled full-size
            # gradients added up; measurable in graph mode).
            q, k, v = ops.split(qkv, sizes, axis=-1)
        else:
            q, k, v = self._project_by_blocks(x, sizes)
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return (
            ops.reshape(q, (batch, length, n, h)),
            ops.reshape(k, (batch, length, g, h)),
            ops.reshape(v, (batch, length, g, hv)),
        )  # (B, T, N, H), (B, T, G, H), (B, T, G, Hv)

    def _project_by_blocks(self, x, sizes):
        """`qkv`'s einsum, one matmul per block of its kernel (`W^Q`, `W^K`,
        `W^V`). Under JAX (0.10, CPU) a profile of this layer's backward
        showed each matmul on one core (the fused `dx`: 9.4 ms, 170
        GFLOP/s, where the same matmul alone runs at 310 on two), so three
        matmuls keep two cores busy where one fused matmul keeps one;
        TensorFlow's graph mode also ran them faster. The
        forward+backward of this layer against Keras' at L = 128, 256,
        512: JAX 1.12, 1.11, 0.71 fused and 1.00, 0.90, 0.66 by blocks; TF
        graph 1.03, 0.94, 0.90 and 0.99, 0.89, 0.87; under TF's XLA the
        fused matmul was as fast or faster, so it stays there
        (benchmarks/RESULTS.md, 2026-12-02 14:00, "The JAX backend"). A
        quantized `qkv` runs its own call (its kernel is not a float
        matrix)."""
        dense = self._qkv_dense
        kernels = ops.split(dense.kernel, sizes, axis=-1)
        biases = [None] * 3 if dense.bias is None else ops.split(dense.bias, sizes)
        parts = []
        for kernel, bias in zip(kernels, biases, strict=True):
            part = ops.einsum(dense.equation, x, kernel)
            parts.append(part if bias is None else part + bias)
        return parts

    def _project_key_value(self, key, value):
        if key is not value:
            raise ValueError(
                "Self-attention projects its keys and values from one "
                "sequence. Received: different `key` and `value` tensors"
            )
        return self._project_qkv(value)[1:]

    def _project(self, query, key, value, read_cache):
        return self._project_qkv(query)

    def call(
        self,
        query,
        query_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        if cache is not None and cache_update_index is None:
            raise ValueError(
                "Self-attention writes its new keys into the cache, so "
                "`cache_update_index` is required with a `cache`. Received: "
                "cache_update_index=None"
            )
        self._check_inputs(query, query, None, cache, cache_update_index)
        query_mask = first_mask(query_mask, query)
        if key_mask is None and cache is None:
            key_mask = query_mask
        masks = dict(
            query_mask=query_mask, key_mask=key_mask, attention_mask=attention_mask
        )
        self._check_masks(query, query if cache is None else cache[:, 0], **masks)
        result = self._attention(
            query,
            query,
            None,
            masks,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=cache,
            cache_update_index=cache_update_index,
        )
        return result.keras_outputs(return_attention_scores)

    def get_config(self):
        config = super().get_config()
        del config["attention_axes"]
        return config
