import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.keras_compat import first_mask
from keras_attention.keras_compat import trace_output_spec
from keras_attention.layers.fine_tuning import FineTuningMixin
from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.modified_attention import OPEN_CORE_ARGS
from keras_attention.layers.transformer.modified_attention import ModifiedAttentionMixin
from keras_attention.layers.transformer.modified_attention import open_core_config
from keras_attention.ops.cache import cache_entries
from keras_attention.ops.dispatch.attention_plan import check_fused_options
from keras_attention.validation import build_key_shape
from keras_attention.validation import check_attention_inputs
from keras_attention.validation import check_cache_arguments
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rate
from keras_attention.validation import input_widths

# Arguments of keras_attention 0.1.0 whose meaning moved; passing them is an
# error rather than a silent change of behaviour.
_RENAMED = {
    "attention_dropout": (
        "`dropout` is now the dropout on the attention weights, as in "
        "keras.layers.MultiHeadAttention; pass dropout=<rate>"
    ),
    "output_dim": "use `output_shape` (an int or a tuple), as in Keras",
}


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(
    ModifiedAttentionMixin, FineTuningMixin, keras.layers.MultiHeadAttention
):
    """Multi-head attention of a query sequence over a key/value sequence.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_N) W^O` with
    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(H)) V W_i^V`
    (Vaswani et al., 2017). A drop-in subclass of
    `keras.layers.MultiHeadAttention`: it accepts every argument Keras' layer
    accepts, with Keras' meaning (`dropout` is dropout on the attention
    weights), has the same weights in the same layout (the sublayers
    `query`, `key`, `value`, `gate`, `attention_output`, so `set_weights`
    and checkpoints convert both ways; see `from_keras` and `to_keras`),
    and supports LoRA,
    int8 quantization and `DTypePolicyMap`s as Keras' does. On top of it:

    - the maths is `keras_attention.ops.multi_head_attention`: softmax in
      float32 whatever the dtype policy, and an exact memory-efficient path
      (`attention_impl`) that never holds the `(T, S)` weights;
    - a key/value cache for autoregressive decoding, with keras-hub's
      `CachedMultiHeadAttention` arguments (`cache`, `cache_update_index`);
    - masked keys get exactly zero weight and a query that sees no key at
      all (a padded query) gets a zero attention output, not an average;
    - an open attention core: score and mask modifiers
      (`keras_attention.modifiers`: ALiBi, T5 relative bias, soft-capping,
      sliding windows with sinks, prefix-LM, ... or your own function),
      rotary position embedding of queries and keys (`rope_max_wavelength`)
      and grouped-query attention (`num_key_value_heads`), on the dense,
      chunked and cached paths alike.

    Masks are boolean (or 0/1 numbers), True = may attend: `value_mask` /
    `key_mask` `(B, S)` hide padded keys, `query_mask` `(B, T)` zeroes the
    attention of padded queries, `attention_mask` is any pattern, `(T, S)`,
    `(B, T, S)` or per head `(B, N, T, S)`; `use_causal_mask` lets query `i`
    see keys `j <= i` and `sliding_window=w` keys `|i - j| < w`. Keras masks
    (from `Embedding(mask_zero=True)`) fill the first three automatically,
    on every backend and under `jit`, and the query's mask is passed on.

    Key/value cache: `cache` is a fixed-size tensor `(B, 2, S_max, N, H)`
    holding the projected keys (`cache[:, 0]`) and values (`cache[:, 1]`).
    With `cache_update_index` (an int or a traced int tensor) the keys and
    values of the new `key`/`value` tokens are written at
    `[cache_update_index, cache_update_index + T)` and the queries attend to
    the positions written so far (causally from `cache_update_index` with
    `use_causal_mask=True`); with `cache_update_index=None` the cache is read
    as is and `key`/`value` are ignored (a precomputed cross-attention cache,
    see `compute_cache`). A cache needs `value_dim == key_dim` and inputs of
    rank 3.

    Inputs of rank > 3 and `attention_axes` (attention over several axes)
    run Keras' own computation, with Keras' masking (no cache, no chunked
    path there).

    Args:
        num_heads: number of heads `N`.
        key_dim: size `H` of each head for queries and keys.
        value_dim: size of each head for values; `key_dim` when `None`.
        dropout: dropout rate on the attention weights while training.
        use_bias: whether the projections have biases.
        output_shape: the output's feature shape (an int or a tuple); the
            query's width when `None`.
        attention_axes: the axes attention runs over (Keras' meaning).
        sliding_window: `None` or an int `w`: query `i` sees keys with
            `|i - j| < w` (positions offset by `cache_update_index`).
        flash_attention: Keras' flash-attention switch, with Keras' meaning:
            `None` (default) lets `attention_impl` decide (`"auto"` takes
            the GPU's fused kernel where the call can use it),
            `False` keeps `"auto"` off the fused kernels, `True` runs the
            fused path (`attention_impl` `"auto"` or `"fused"`) and raises
            Keras' error where its kernel cannot take the inputs.
        kernel_initializer: initializer of the projection kernels; every
            projection draws its own values, also from a seeded initializer
            (`keras.layers.MultiHeadAttention` gives its query, key and
            value kernels equal values in that case).
        bias_initializer: initializer of the biases.
        kernel_regularizer: as in Keras (every projection kernel).
        bias_regularizer: as in Keras.
        activity_regularizer: as in Keras.
        kernel_constraint: as in Keras.
        bias_constraint: as in Keras.
        use_gate: gated attention (Qiu et al., 2025), as in Keras.
        seed: seed of the dropout.
        num_key_value_heads: `None` (= `num_heads`) or the number `G` of
            key/value heads, dividing `num_heads` (grouped-query attention,
            Ainslie et al., 2023; 1 is multi-query attention): query head
            `n` uses key/value head `n // (num_heads / G)`, and a cache holds
            `G` heads.
        score_modifier: `None` or `f(score, batch, head, query, key)`
            rewriting each scaled logit from its absolute positions (see
            `keras_attention.ops.modifier_calls`); a layer such as
            `keras_attention.modifiers.RelativePositionBias` is tracked and
            trained with this layer.
        mask_modifier: `None` or `f(batch, head, query, key) -> bool`,
            True = may attend, combined with the other masks.
        rope_max_wavelength: `None`, or rotate queries and keys by their
            absolute positions (RoPE, `keras_attention.ops.rotary_embedding`)
            with this maximum wavelength (10000 in the paper).
        rope_scaling_factor: positions are divided by it (linear position
            interpolation); only with `rope_max_wavelength`.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`.
            `"chunked"` is exact attention in O(T + S) memory instead of
            O(T S) (`keras_attention.ops.chunked_attention`: an online
            softmax over key blocks, recomputation in the backward pass); it
            handles every mask and the dropout but cannot return attention
            scores (a ValueError says so). `"fused"` runs
            `keras.ops.dot_product_attention`: cuDNN's flash attention
            under JAX on a GPU (float16/bfloat16), Keras' composition
            elsewhere (on a TPU too: Keras 3.15's splash path gives wrong
            results, so it is never used); it takes every mask and the
            additive-bias modifiers (ALiBi, T5's relative bias), but no
            attention dropout and no attention scores.
            `"auto"` takes the fused path on a GPU when the call can use
            its kernel; otherwise the chunked path when
            `T * S >= keras_attention.ops.CHUNKED_MIN_SIZE` (2048 * 2048),
            the dense path below; when a length is unknown while a
            TensorFlow graph is traced (`keras.Input((None, d))`,
            variable-length batches), the graph decides each time it runs.
            `keras_attention.ops.recording_attention_plans` shows the path
            each call takes, and why.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, T, Dq)`.
        value: `(B, S, Dv)`; may be `None` only when a `cache` is read
            without `cache_update_index`.
        key: `(B, S, Dk)`; `value` when `None`.
        query_mask, value_mask, key_mask, attention_mask: masks (with a
            cache, `S` is the cache length `S_max`).
        return_attention_scores: also return the post-softmax per-head
            weights, float32 `(B, N, T, S)`.
        training: bool, whether dropout is active.
        use_causal_mask: bool.
        cache: `None` or `(B, 2, S_max, N, H)`.
        cache_update_index: `None` or the int position of the first new
            token.

    Returns:
        `output` `(B, T, *output_shape)`, then the weights if asked, then
        the updated cache if one was passed: `output`, `(output, weights)`,
        `(output, cache)` or `(output, weights, cache)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> query = np.random.rand(2, 3, 16).astype("float32")
    >>> value = np.random.rand(2, 5, 8).astype("float32")
    >>> layer = ka.layers.MultiHeadAttention(num_heads=4, key_dim=4)
    >>> output, weights = layer(query, value, return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 3, 16), (2, 4, 3, 5))

    Grouped-query attention with rotary positions, a causal sliding window
    and ALiBi biases:

    >>> layer = ka.layers.MultiHeadAttention(
    ...     num_heads=4, key_dim=4, num_key_value_heads=2,
    ...     rope_max_wavelength=10000,
    ...     mask_modifier=ka.modifiers.SlidingWindow(2),
    ...     score_modifier=ka.modifiers.ALiBi(num_heads=4))
    >>> tuple(layer(query, query).shape)
    (2, 3, 16)

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        attention_impl="auto",
        num_key_value_heads=None,
        score_modifier=None,
        mask_modifier=None,
        rope_max_wavelength=None,
        rope_scaling_factor=1.0,
        **kwargs,
    ):
        for name, advice in _RENAMED.items():
            if name in kwargs:
                raise TypeError(
                    f"`{name}` is not an argument of MultiHeadAttention since "
                    f"keras_attention 0.2.0: {advice}. Received: "
                    f"{name}={kwargs[name]!r}"
                )
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_rate("dropout", dropout)
        ka_ops.check_attention_impl(attention_impl)
        check_fused_options(attention_impl, dropout, flash_attention)
        super().__init__(
            num_heads=num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            use_bias=use_bias,
            output_shape=output_shape,
            attention_axes=attention_axes,
            sliding_window=sliding_window,
            flash_attention=flash_attention,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
            use_gate=use_gate,
            seed=seed,
            **kwargs,
        )
        if flash_attention is False:  # Keras' `False or <global None>` is None
            self._flash_attention = False
        self.attention_impl = attention_impl
        self._init_modifiers(
            num_key_value_heads=num_key_value_heads,
            score_modifier=score_modifier,
            mask_modifier=mask_modifier,
            rope_max_wavelength=rope_max_wavelength,
            rope_scaling_factor=rope_scaling_factor,
        )

    # -- build -------------------------------------------------------------

    def build(self, query_shape, value_shape=None, key_shape=None):
        key_shape = build_key_shape(value_shape, key_shape)
        if tuple(value_shape[1:-1]) != tuple(key_shape[1:-1]):
            raise ValueError(
                "All dimensions of `value` and `key`, except the last one, must "
                f"be equal. Received: value.shape={tuple(value_shape)}, "
                f"key.shape={tuple(key_shape)}"
            )
        self._check_build_shapes(query_shape, value_shape, key_shape)
        self._sublayer_index = 0
        if self._kv_heads == self._num_heads:
            super().build(query_shape, value_shape, key_shape)
        else:
            self._build_grouped(query_shape, value_shape, key_shape)
        self._input_widths = input_widths(query_shape, value_shape, key_shape)
        self._after_build(len(query_shape))

    def _check_build_shapes(self, *shapes):
        for name, shape in zip(("query", "value", "key"), shapes, strict=False):
            if shape is None:
                continue
            if len(shape) < 3 or shape[-1] is None:
                raise ValueError(
                    f"`{name}` must have rank >= 3 `(B, ..., D)` and a known last "
                    f"dimension. Received: {name}.shape={tuple(shape)}"
                )

    def _after_build(self, query_rank):
        # Padding masks pass through a position-wise projection unchanged;
        # saying so keeps Keras from warning that the mask is dropped.
        for layer in self._flatten_layers(include_self=False):
            layer.supports_masking = True
        # This package's kernels cover attention over the sequence axis of
        # (B, T, D) inputs; other layouts run Keras' own computation.
        self._sequence_attention = query_rank == 3 and self._attention_axes == (1,)
        self._check_modifier_layout()
        self._build_score_modifier()

    def _get_common_kwargs_for_sublayer(self):
        """Keras' sublayer arguments, with initializers that draw distinct
        values for each sublayer (`fresh_initializer`)."""
        kwargs = super()._get_common_kwargs_for_sublayer()
        index = self._sublayer_index
        self._sublayer_index += 1
        kwargs["kernel_initializer"] = fresh_initializer(
            self._kernel_initializer, index
        )
        kwargs["bias_initializer"] = fresh_initializer(self._bias_initializer, index)
        return kwargs

    # -- weights -----------------------------------------------------------

    @classmethod
    def from_keras(cls, layer, **kwargs):
        """A copy of a built `keras.layers.MultiHeadAttention` (same
        config, same weights), running this package's kernels.

        `**kwargs` override config entries (e.g. `attention_impl`).
        """
        if not layer.built:
            raise ValueError(
                "`layer` must be built (called once) so that its weights can "
                f"be copied. Received: an unbuilt {layer.__class__.__name__}"
            )
        config = {**layer.get_config(), **kwargs}
        ours = cls.from_config(config)
        shapes = layer._build_shapes_dict
        ours.build(**shapes)
        ours.set_weights(layer.get_weights())
        return ours

    def to_keras(self):
        """A `keras.layers.MultiHeadAttention` with this layer's config and
        weights (this layer must be built)."""
        if not self.built:
            raise ValueError(
                "Build the layer (or call it once) before `to_keras`. "
                f"Received: an unbuilt {self.__class__.__name__}"
            )
        self._check_keras_expressible()
        config = self.get_config()
        config.pop("attention_impl")
        for name in OPEN_CORE_ARGS:
            config.pop(name)
        layer = keras.layers.MultiHeadAttention.from_config(config)
        layer.build(**self._build_shapes_dict)
        layer.set_weights(self.get_weights())
        return layer

    def compute_cache(self, value, key=None):
        """Project a fixed key/value sequence once: `(B, 2, S, N, H)`.

        Used for cross-attention while decoding: pass the result as `cache`
        with `cache_update_index=None` at every step.
        """
        self._check_cache_layout()
        k, v = self._project_key_value(value if key is None else key, value)
        return ops.stack([k, v], axis=1)

    def _check_cache_layout(self):
        if self._value_dim != self._key_dim:
            raise ValueError(
                "A cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self._key_dim}, value_dim={self._value_dim}"
            )
        if not self._sequence_attention:
            raise ValueError(
                "A cache needs inputs of rank 3 and attention over axis 1. "
                f"Received: attention_axes={self._attention_axes}"
            )

    # -- projections (the sublayers; the maths is in ka_ops) ----------------

    def _project_key_value(self, key, value):
        return self._key_dense(key), self._value_dense(value)  # (B, S, N, H)

    def _project(self, query, key, value, read_cache):
        """`(q, k, v)`, `(B, T|S, N, H)`; `k, v` are `None` when a cache is
        read as is."""
        q = self._query_dense(query)
        if read_cache:
            return q, None, None
        k, v = self._project_key_value(value if key is None else key, value)
        return q, k, v

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
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        if not self._sequence_attention:
            self._check_no_cache(cache, cache_update_index)
            return super().call(
                query,
                value,
                key,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                use_causal_mask=use_causal_mask,
            )
        self._check_inputs(query, value, key, cache, cache_update_index)
        masks = dict(
            query_mask=first_mask(query_mask, query),
            value_mask=first_mask(value_mask, value),
            key_mask=first_mask(key_mask, key),
            attention_mask=attention_mask,
        )
        self._check_masks(query, value if cache is None else cache[:, 0], **masks)
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

    def _check_no_cache(self, cache, cache_update_index):
        if cache is not None or cache_update_index is not None:
            self._check_cache_layout()

    def _check_inputs(self, query, value, key, cache, cache_update_index):
        """Each argument checked once, with its name (static shapes only)."""
        if value is None and (cache is None or cache_update_index is not None):
            raise ValueError(
                "`value` is required unless a `cache` is read without "
                "`cache_update_index`. Received: value=None"
            )
        check_attention_inputs(query, value, key, self._input_widths)
        if cache is not None:
            self._check_cache_layout()
        check_cache_arguments(
            cache, cache_update_index, query, self._kv_heads, self._key_dim
        )

    def _check_masks(self, query, keys, **masks):
        """The masks of a call, under their names; `keys` `(B, S, ...)`."""
        ka_ops.check_attention_masks(query, keys, **masks, num_heads=self._num_heads)

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
        """Projections, cache, attention, output projection: a `LayerResult`.

        Arguments as `call`, already checked, with the masks in one dict
        `masks` (`query_mask`, `value_mask`, `key_mask`, `attention_mask`;
        any left out is `None`): by `call`, or by the blocks, which call
        this directly after checking their own arguments under their own
        names (each argument is checked once).
        """
        read_cache = cache is not None and cache_update_index is None
        q, k, v = self._project(query, key, value, read_cache)
        q, k = self._rotate(q, k, cache_update_index)
        causal_offset = 0
        caches, entries = (), ()
        if cache is not None:
            if read_cache:
                k, v = cache[:, 0], cache[:, 1]  # (B, S_max, N, H)
                entries = (None,)
            else:
                new_keys = ops.shape(k)[1]
                entries = (cache_entries(cache, k, v),)  # (B, 2, T, G, H)
                cache, k, v = ka_ops.update_cache(cache, k, v, cache_update_index)
                causal_offset = cache_update_index
                if not use_causal_mask:  # positions not written yet hold no key
                    written = ka_ops.written_positions_mask(
                        ops.shape(k)[1], cache_update_index, new_keys
                    )
                    key_mask = ka_ops.merge_masks(masks.get("key_mask"), written)
                    masks = {**masks, "key_mask": key_mask}
            caches = (cache,)
        heads, scores = self._attend(
            q,
            k,
            v,
            masks=masks,
            use_causal_mask=use_causal_mask,
            causal_offset=causal_offset,
            return_attention_scores=return_attention_scores,
            training=training,
        )  # (B, T, N, Hv), (B, N, T, S) or None
        if self._use_gate:
            heads = heads * self._gate_dense(query)
        output = self._output_dense(heads)  # (B, T, *output_shape)
        return LayerResult(output, scores, caches, entries)

    def _attend(
        self,
        q,
        k,
        v,
        masks,
        use_causal_mask,
        causal_offset,
        return_attention_scores,
        training,
    ):
        if self._overrides_compute_attention():
            # A subclass' own `_compute_attention` (Keras' documented hook)
            # takes one merged mask.
            mask = ka_ops.compute_attention_mask(
                q,
                k,
                **masks,
                use_causal_mask=use_causal_mask,
                causal_offset=causal_offset,
                sliding_window=self._sliding_window,
                num_heads=self._num_heads,
                validate=False,
            )
            repeats = ka_ops.check_key_value_heads(q, k, v)
            return self._compute_attention(
                q,
                ka_ops.repeat_key_value_heads(k, repeats),
                ka_ops.repeat_key_value_heads(v, repeats),
                mask,
                training,
                return_attention_scores,
            )
        return ka_ops.multi_head_attention(
            q,
            k,
            v,
            **masks,
            use_causal_mask=use_causal_mask,
            causal_offset=causal_offset,
            sliding_window=self._sliding_window,
            attention_impl=self.attention_impl,
            return_weights=return_attention_scores,
            dropout_rate=self._dropout,
            seed=self._dropout_seed(),
            training=training,
            validate=False,  # checked by `call`, or by the blocks
            score_modifier=self.score_modifier,
            mask_modifier=self.mask_modifier,
            flash_attention=self._flash_attention,
        )

    def _dropout_seed(self):
        return getattr(self._dropout_layer, "seed_generator", None)

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        """Keras' override point, on this package's kernels.

        `query` `(B, T, N, H)`, `key` `(B, S, N, H)`, `value` `(B, S, N, Hv)`,
        one boolean `attention_mask` (`(T, S)`, `(B, T, S)` or
        `(B, N, T, S)`); returns `(output, scores or None)`. Other ranks
        run Keras' implementation.
        """
        if len(query.shape) != 4:
            return super()._compute_attention(
                query,
                key,
                value,
                attention_mask,
                training,
                return_attention_scores,
                use_causal_mask=use_causal_mask,
            )
        return ka_ops.multi_head_attention(
            query,
            key,
            value,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            attention_impl=self.attention_impl,
            return_weights=return_attention_scores,
            dropout_rate=self._dropout,
            seed=self._dropout_seed(),
            training=training,
            flash_attention=self._flash_attention,
        )

    # What `ModifiedAttentionMixin._overrides_compute_attention` compares a
    # subclass' `_compute_attention` with.
    _kernel_compute_attention = _compute_attention

    def compute_output_spec(self, *args, **kwargs):
        # Traced from `call`: the cache, float32 scores `(B, N, T, S)`.
        if not self.built:
            self._build_from_specs(*args, **kwargs)
        return trace_output_spec(self, *args, **kwargs)

    def _build_from_specs(self, query, value=None, key=None, **kwargs):
        self.build(
            query.shape,
            None if value is None else value.shape,
            None if key is None else key.shape,
        )

    def get_config(self):
        return {
            **super().get_config(),
            # Keras' config leaves it out; it is a constructor argument.
            "flash_attention": self._flash_attention,
            "attention_impl": self.attention_impl,
            **open_core_config(self),
            "dtype": self._dtype_config(),
        }
