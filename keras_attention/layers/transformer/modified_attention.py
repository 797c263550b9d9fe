"""What `MultiHeadAttention` adds to Keras' layer for the open attention core:
grouped key/value heads, rotary positions and score/mask modifiers.

The checks and config of these arguments are plain functions
(`checked_open_core_arguments`, `open_core_config`, `uses_open_core`), so
that the Transformer blocks, which take the same arguments for their
attention, use them too."""

import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.keras_compat import build_proj_equation
from keras_attention.keras_compat import get_output_shape
from keras_attention.modifiers.base import deserialize
from keras_attention.modifiers.base import serialize
from keras_attention.validation import check_positive_int


def _check_modifier(name, modifier):
    if modifier is not None and not callable(modifier):
        raise TypeError(
            f"`{name}` must be None or a callable (a function or one of "
            "keras_attention.modifiers). Received: "
            f"{name} of type {type(modifier).__name__}"
        )


def _nested_layers(modifier):
    """The Keras layers in a modifier and in the modifiers it combines."""
    if isinstance(modifier, keras.layers.Layer):
        return [modifier]
    found = []
    for name in ("modifiers", "masks"):
        for inner in getattr(modifier, name, None) or []:
            found.extend(_nested_layers(inner))
    inner = getattr(modifier, "mask", None)
    if inner is not None and not isinstance(inner, (bool, int)):
        found.extend(_nested_layers(inner))
    return found


# The open core's constructor arguments, shared by the attention layers,
# the Transformer blocks and their stacks.
OPEN_CORE_ARGS = (
    "num_key_value_heads",
    "score_modifier",
    "mask_modifier",
    "rope_max_wavelength",
    "rope_scaling_factor",
)


def checked_open_core_arguments(
    num_heads,
    key_dim,
    num_key_value_heads,
    score_modifier,
    mask_modifier,
    rope_max_wavelength,
    rope_scaling_factor,
):
    """The `OPEN_CORE_ARGS` as a dict, checked against `num_heads` and
    `key_dim` (`None` when not known yet: an odd head size with RoPE then
    fails at build time), the modifiers deserialized."""
    check_positive_int("num_key_value_heads", num_key_value_heads, allow_none=True)
    if num_key_value_heads is not None and num_heads % num_key_value_heads:
        raise ValueError(
            "`num_key_value_heads` must divide `num_heads`. Received: "
            f"num_heads={num_heads}, num_key_value_heads={num_key_value_heads}"
        )
    check_positive_int("rope_max_wavelength", rope_max_wavelength, allow_none=True)
    if rope_max_wavelength is not None and key_dim is not None and key_dim % 2:
        raise ValueError(
            "Rotary embedding needs an even `key_dim` (it rotates pairs of "
            f"features). Received: key_dim={key_dim}"
        )
    if not isinstance(rope_scaling_factor, (int, float)) or rope_scaling_factor <= 0:
        raise ValueError(
            "`rope_scaling_factor` must be a positive number. Received: "
            f"rope_scaling_factor={rope_scaling_factor!r}"
        )
    score_modifier, mask_modifier = map(deserialize, (score_modifier, mask_modifier))
    _check_modifier("score_modifier", score_modifier)
    _check_modifier("mask_modifier", mask_modifier)
    return dict(
        num_key_value_heads=num_key_value_heads,
        score_modifier=score_modifier,
        mask_modifier=mask_modifier,
        rope_max_wavelength=rope_max_wavelength,
        rope_scaling_factor=float(rope_scaling_factor),
    )


def open_core_config(layer):
    """The `OPEN_CORE_ARGS` of `layer` (an attention layer or a block) as
    `get_config` entries."""
    return {
        "num_key_value_heads": layer.num_key_value_heads,
        "score_modifier": serialize(layer.score_modifier),
        "mask_modifier": serialize(layer.mask_modifier),
        "rope_max_wavelength": layer.rope_max_wavelength,
        "rope_scaling_factor": layer.rope_scaling_factor,
    }


def uses_open_core(layer):
    """Whether `layer` (an attention layer or a block) uses anything that
    Keras' and keras-hub's layers do not have."""
    return (
        layer.num_key_value_heads not in (None, layer.num_heads)
        or layer.score_modifier is not None
        or layer.mask_modifier is not None
        or layer.rope_max_wavelength is not None
    )


class ModifiedAttentionMixin:
    """Mixed into `MultiHeadAttention` (before Keras' layer)."""

    def _init_modifiers(self, **open_core_arguments):
        checked = checked_open_core_arguments(
            self._num_heads, self._key_dim, **open_core_arguments
        )
        for name, value in checked.items():
            setattr(self, name, value)
        # Layers inside composite modifiers (a `RelativePositionBias` in a
        # `ScoreChain`), tracked so that they are built, saved and trained.
        self._nested_modifier_layers = [
            layer
            for modifier in (self.score_modifier, self.mask_modifier)
            for layer in _nested_layers(modifier)
            if layer is not modifier
        ]

    @property
    def _kv_heads(self):
        """`G`, the number of key/value heads."""
        return self.num_key_value_heads or self._num_heads

    def _overrides_compute_attention(self):
        """Whether a subclass replaced `_compute_attention` (Keras' hook).

        The layer using this mixin names its own implementation
        `_kernel_compute_attention`, so the mixin needs no import of it.
        """
        cls = type(self)
        return cls._compute_attention is not cls._kernel_compute_attention

    def _check_modifier_layout(self):
        """Called once built: the open core runs on this package's kernels."""
        if not uses_open_core(self):
            return
        overridden = self._overrides_compute_attention()
        keras_path = not self._sequence_attention
        if keras_path or (overridden and (self.score_modifier or self.mask_modifier)):
            raise ValueError(
                "`num_key_value_heads`, `score_modifier`, `mask_modifier` and "
                "`rope_max_wavelength` need inputs of rank 3, attention over "
                "axis 1 and no `_compute_attention` override with modifiers. "
                f"Received: attention_axes={self._attention_axes}"
            )

    def _check_keras_expressible(self):
        if uses_open_core(self):
            raise ValueError(
                "keras.layers.MultiHeadAttention has no grouped key/value heads, "
                "modifiers or rotary embedding, so this layer cannot be "
                f"converted. Received: {open_core_config(self)}"
            )

    def _build_score_modifier(self):
        for modifier in (self.score_modifier, *self._nested_modifier_layers):
            if isinstance(modifier, keras.layers.Layer) and not modifier.built:
                modifier.build()

    def _build_grouped(self, query_shape, value_shape, key_shape):
        """Keras' sublayers, with `G` heads for keys and values."""
        heads = self._num_heads
        specs = [("query", query_shape, heads, self._key_dim)]
        specs.append(("key", key_shape, self._kv_heads, self._key_dim))
        if self._use_gate:
            specs.append(("gate", query_shape, heads, self._value_dim))
        specs.append(("value", value_shape, self._kv_heads, self._value_dim))
        for name, shape, num, size in specs:
            equation, bias_axes, output_rank = build_proj_equation(
                len(shape) - 1, bound_dims=1, output_dims=2
            )
            dense = keras.layers.EinsumDense(
                equation,
                output_shape=get_output_shape(output_rank - 1, [num, size]),
                bias_axes=bias_axes if self._use_bias else None,
                activation="sigmoid" if name == "gate" else None,
                name=name,
                **self._get_common_kwargs_for_sublayer(),
            )
            dense.build(shape)
            setattr(self, f"_{name}_dense", dense)
        self._build_attention(output_rank)
        self._output_dense = self._make_output_dense(
            query_shape, self._get_common_kwargs_for_sublayer(), "attention_output"
        )
        heads_shape = list(self._query_dense.compute_output_shape(query_shape))
        heads_shape[-1] = self._value_dim
        self._output_dense.build(tuple(heads_shape))

    def _rotate(self, q, k, cache_update_index):
        """RoPE on queries and (new) keys at their absolute positions,
        `cache_update_index + [0, T)`; `k` is `None` when a cache is read."""
        if self.rope_max_wavelength is None:
            return q, k
        start = 0 if cache_update_index is None else cache_update_index
        start = ops.cast(start, "int32")

        def rotate(x):
            positions = start + ops.arange(ops.shape(x)[1], dtype="int32")
            return ka_ops.rotary_embedding(
                x, positions, self.rope_max_wavelength, self.rope_scaling_factor
            )

        return rotate(q), (None if k is None else rotate(k))
