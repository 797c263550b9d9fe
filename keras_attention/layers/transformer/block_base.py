"""`TransformerBlockBase`: what the encoder and decoder blocks share
(private), with the call conventions of the blocks that their stacks keep
(`EncoderCallMixin`, `DecoderMasks`, `DecoderCaches`)."""

from typing import Any
from typing import NamedTuple

import keras

from keras_attention.initializers import fresh_initializer
from keras_attention.keras_compat import first_mask
from keras_attention.layers.fine_tuning import FineTuningMixin
from keras_attention.layers.transformer.modified_attention import (
    checked_open_core_arguments,
)
from keras_attention.layers.transformer.modified_attention import open_core_config
from keras_attention.layers.transformer.modified_attention import uses_open_core
from keras_attention.layers.transformer.multi_head_attention import MultiHeadAttention
from keras_attention.layers.transformer.multi_head_self_attention import (
    MultiHeadSelfAttention,
)
from keras_attention.layers.transformer.sequence_layer import SequenceLayerMixin
from keras_attention.layers.transformer.sequence_layer import filled_padding_mask
from keras_attention.layers.transformer.sequence_layer import head_size
from keras_attention.layers.transformer.sequence_layer import offset_seed
from keras_attention.ops import check_attention_impl
from keras_attention.ops.dispatch.attention_plan import check_fused_options
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rate
from keras_attention.validation import get_activation
from keras_attention.validation import get_initializer

# Initializer offsets (see `fresh_initializer`) of the sublayers of a block,
# far enough apart that the attention layers' own offsets never meet.
_SELF_ATTENTION, _CROSS_ATTENTION, _FEEDFORWARD = 0, 10, 20


# The arguments keras-hub's blocks take under the same names and meanings.
_KERAS_HUB_ARGS = (
    "intermediate_dim",
    "num_heads",
    "dropout",
    "activation",
    "layer_norm_epsilon",
    "kernel_initializer",
    "bias_initializer",
    "normalize_first",
)


def reject_positional_heads(cls, args, positional=()):
    """A `TypeError` when `num_heads` or `intermediate_dim` came by position.

    keras-hub's blocks take `(intermediate_dim, num_heads, ...)` and Keras'
    attention `(num_heads, key_dim, ...)`: a positional call cannot mean
    the same in both, so this package takes the two by keyword only.
    `positional` names the arguments that may come first (a stack's
    `num_layers`).
    """
    if len(args) <= len(positional):
        return
    first = "".join(f"{name}, " for name in positional)
    raise TypeError(
        f"`{cls.__name__}` takes `num_heads` and `intermediate_dim` by "
        f"keyword only: {cls.__name__}({first}num_heads=..., "
        "intermediate_dim=..., ...). keras_hub.layers.TransformerEncoder and "
        "TransformerDecoder take them by position in the other order, "
        "(intermediate_dim, num_heads, ...), so a positional call would mean "
        "different things in the two libraries. Received: positional "
        f"arguments {tuple(args)!r}"
    )


class EncoderCallMixin:
    """The `call` of `TransformerEncoderBlock` and `TransformerEncoder`:
    the same arguments (a stack is a drop-in for one block), masks filled
    and checked once, then the layer's `_forward` on checked arguments."""

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        padding_mask = filled_padding_mask(
            inputs, padding_mask, attention_mask, self.num_heads
        )
        result = self._forward(
            inputs, padding_mask, attention_mask, training, return_attention_scores
        )
        return result.keras_outputs(return_attention_scores)


class DecoderMasks(NamedTuple):
    """The masks of a decoder call (boolean, True = attend), handed from
    the decoder layers to `TransformerDecoderBlock._forward` as one value."""

    decoder_padding: Any = None  # (B, T)
    encoder_padding: Any = None  # (B, S)
    decoder_attention: Any = None  # (T, T), (B, T, T) or (B, N, T, T)
    encoder_attention: Any = None  # (T, S), (B, T, S) or (B, N, T, S)

    @classmethod
    def filled(cls, decoder_sequence, encoder_sequence, *masks):
        """`masks` in field order, the padding masks filled from the Keras
        masks of the two sequences (as every decoder layer's call does)."""
        masks = cls(*masks)
        return masks._replace(
            decoder_padding=first_mask(masks.decoder_padding, decoder_sequence),
            encoder_padding=first_mask(masks.encoder_padding, encoder_sequence),
        )


class DecoderCaches(NamedTuple):
    """One decoder block's caches and where to write into them: the
    self-attention's `(B, 2, T_max, G, H)` and the cross-attention's
    `(B, 2, S, N, H)`, each with an int update index or `None` (read as
    is)."""

    self_attention: Any = None
    self_attention_update_index: Any = None
    cross_attention: Any = None
    cross_attention_update_index: Any = None


class TransformerBlockBase(SequenceLayerMixin, FineTuningMixin, keras.layers.Layer):
    """What the encoder and decoder blocks share (private base class).

    The constructor arguments and their config, the sublayers of the
    self-attention and feed-forward sublayers under keras-hub's names
    (`_self_attention_layer`, `_self_attention_layer_norm`,
    `_self_attention_dropout`, `_feedforward_intermediate_dense`,
    `_feedforward_output_dense`, `_feedforward_layer_norm`,
    `_feedforward_dropout`; the decoder adds `_cross_attention_*`), and the
    residual connection. The blocks differ only in cross-attention.
    """

    def __new__(cls, *args, **kwargs):
        # Before Python binds `__init__`'s arguments, so that a positional
        # call fails with the reason rather than a missing keyword.
        reject_positional_heads(cls, args)
        return super().__new__(cls, **kwargs)

    def __init__(
        self,
        *,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        attention_dropout=None,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        attention_impl="auto",
        num_key_value_heads=None,
        score_modifier=None,
        mask_modifier=None,
        rope_max_wavelength=None,
        rope_scaling_factor=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_rate("dropout", dropout)
        if attention_dropout is not None:
            check_rate("attention_dropout", attention_dropout)
        check_attention_impl(attention_impl)
        check_fused_options(
            attention_impl, dropout if attention_dropout is None else attention_dropout
        )
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = get_activation(activation)
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer, "bias_initializer")
        self.seed = seed
        self.attention_impl = attention_impl
        # Checked as the attention layer checks them (`key_dim` is known
        # only at build time: an odd head size with RoPE fails there).
        checked = checked_open_core_arguments(
            num_heads,
            None,
            num_key_value_heads=num_key_value_heads,
            score_modifier=score_modifier,
            mask_modifier=mask_modifier,
            rope_max_wavelength=rope_max_wavelength,
            rope_scaling_factor=rope_scaling_factor,
        )
        for name, value in checked.items():
            setattr(self, name, value)
        self.supports_masking = True

    @property
    def kv_heads(self):
        """The key/value heads of the attention (and of its caches)."""
        return self.num_key_value_heads or self.num_heads

    # -- building blocks ------------------------------------------------------

    def _sublayer_kwargs(self, offset):
        return dict(
            kernel_initializer=fresh_initializer(self.kernel_initializer, offset),
            bias_initializer=fresh_initializer(self.bias_initializer, offset),
            dtype=self.dtype_policy,
        )

    def _attention_kwargs(self, offset):
        rate = (
            self.dropout if self.attention_dropout is None else self.attention_dropout
        )
        return dict(
            dropout=rate,
            seed=offset_seed(self.seed, offset),
            attention_impl=self.attention_impl,
            **self._sublayer_kwargs(offset),
        )

    def _build_residual(self, prefix, shape, offset):
        """`_{prefix}_layer_norm` and `_{prefix}_dropout` (keras-hub names)."""
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=f"{prefix}_layer_norm",
        )
        norm.build(shape)
        dropout = keras.layers.Dropout(
            self.dropout,
            seed=offset_seed(self.seed, offset + 1),
            dtype=self.dtype_policy,
            name=f"{prefix}_dropout",
        )
        setattr(self, f"_{prefix}_layer_norm", norm)
        setattr(self, f"_{prefix}_dropout", dropout)

    def _build_self_attention(self, shape):
        self.key_dim = head_size(self._input_name, shape, self.num_heads)
        self._self_attention_layer = MultiHeadSelfAttention(
            self.num_heads,
            self.key_dim,
            name="self_attention",
            num_key_value_heads=self.num_key_value_heads,
            score_modifier=self.score_modifier,
            mask_modifier=self.mask_modifier,
            rope_max_wavelength=self.rope_max_wavelength,
            rope_scaling_factor=self.rope_scaling_factor,
            **self._attention_kwargs(_SELF_ATTENTION),
        )
        self._self_attention_layer.build(shape)
        self._build_residual("self_attention", shape, _SELF_ATTENTION)

    def _build_cross_attention(self, shape, encoder_shape):
        self._cross_attention_layer = MultiHeadAttention(
            self.num_heads,
            self.key_dim,
            name="cross_attention",
            num_key_value_heads=self.num_key_value_heads,
            **self._attention_kwargs(_CROSS_ATTENTION),
        )
        self._cross_attention_layer.build(shape, encoder_shape)
        self._build_residual("cross_attention", shape, _CROSS_ATTENTION)

    def _build_feedforward(self, shape):
        """`FFN(x) = activation(x W1 + b1) W2 + b2`."""
        self._feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            name="feedforward_intermediate_dense",
            **self._sublayer_kwargs(_FEEDFORWARD),
        )
        self._feedforward_intermediate_dense.build(shape)
        self._feedforward_output_dense = keras.layers.Dense(
            shape[-1],
            name="feedforward_output_dense",
            **self._sublayer_kwargs(_FEEDFORWARD + 1),
        )
        self._feedforward_output_dense.build(
            tuple(shape[:-1]) + (self.intermediate_dim,)
        )
        self._build_residual("feedforward", shape, _FEEDFORWARD)

    # -- the computation ----------------------------------------------------

    def _residual(self, prefix, x, sublayer, training):
        """`LN(x + Drop(f(x)))` (post-LN) or `x + Drop(f(LN(x)))` (pre-LN)."""
        norm = getattr(self, f"_{prefix}_layer_norm")
        dropout = getattr(self, f"_{prefix}_dropout")
        y = sublayer(norm(x) if self.normalize_first else x)
        x = x + dropout(y, training=training)
        return x if self.normalize_first else norm(x)

    def _feedforward(self, x):
        return self._feedforward_output_dense(self._feedforward_intermediate_dense(x))

    # -- conversion from and to keras-hub -------------------------------------

    # Sublayers whose weights copy as they are (the same layers in both).
    _SAME_SUBLAYERS = (
        "_self_attention_layer_norm",
        "_feedforward_intermediate_dense",
        "_feedforward_output_dense",
        "_feedforward_layer_norm",
    )
    _CROSS_SUBLAYERS = ("_cross_attention_layer", "_cross_attention_layer_norm")

    @classmethod
    def from_keras_hub(cls, layer, **kwargs):
        """A copy of a built keras-hub block (`keras_hub.layers.
        TransformerEncoder` for the encoder block, `TransformerDecoder` for
        the decoder block): its config and its weights, the self-attention's
        query, key and value kernels fused. `**kwargs` override arguments
        (e.g. `attention_impl`)."""
        if not layer.built:
            raise ValueError(
                "`layer` must be built (called once) so that its weights can "
                f"be copied. Received: an unbuilt {layer.__class__.__name__}"
            )
        config = layer.get_config()
        arguments = dict(
            num_heads=config["num_heads"],
            intermediate_dim=config["intermediate_dim"],
            dropout=config["dropout"],
            activation=config["activation"],
            layer_norm_epsilon=config["layer_norm_epsilon"],
            kernel_initializer=config["kernel_initializer"],
            bias_initializer=config["bias_initializer"],
            normalize_first=config["normalize_first"],
            name=config["name"],
            dtype=layer.dtype_policy,
        )
        ours = cls(**{**arguments, **kwargs})
        ours.build(**layer._build_shapes_dict)
        ours.copy_keras_hub_weights(layer)
        return ours

    def to_keras_hub(self):
        """The keras-hub block with this block's config and weights (needs
        `keras_hub`; the fused Q/K/V weights are split)."""
        import keras_hub

        if uses_open_core(self):
            raise ValueError(
                "keras-hub's blocks have no grouped key/value heads, modifiers "
                "or rotary embedding, so this block cannot be converted. "
                f"Received: {open_core_config(self)}"
            )
        if self.attention_dropout not in (None, self.dropout):
            raise ValueError(
                "keras-hub's blocks have one dropout rate for the residuals and "
                "the attention weights. Received: dropout="
                f"{self.dropout}, attention_dropout={self.attention_dropout}"
            )
        hub_class = getattr(keras_hub.layers, self._keras_hub_name)
        same = {name: getattr(self, name) for name in _KERAS_HUB_ARGS}
        layer = hub_class(**same, name=self.name, dtype=self.dtype_policy)
        layer.build(**self._build_shapes_dict)
        self.copy_weights_to_keras_hub(layer)
        return layer

    def copy_keras_hub_weights(self, layer):
        """Set this built block's weights to those of `layer`, a built
        keras-hub block of the same config and shapes (the self-attention's
        query, key and value kernels fused)."""
        self._self_attention_layer.copy_multi_head_attention_weights(
            layer._self_attention_layer
        )
        self._copy_same_sublayers(layer, self)

    def copy_weights_to_keras_hub(self, layer):
        """Set the weights of `layer`, a built keras-hub block of the same
        config and shapes, to this block's (the fused Q/K/V split)."""
        self._self_attention_layer.copy_weights_to_multi_head_attention(
            layer._self_attention_layer
        )
        self._copy_same_sublayers(self, layer)

    def _copy_same_sublayers(self, source, target):
        """The weights of the sublayers that are the same in both libraries,
        from the `source` block to the `target` block (either way round)."""
        for name in self._sublayers_to_copy():
            getattr(target, name).set_weights(getattr(source, name).get_weights())

    def _sublayers_to_copy(self):
        names = self._SAME_SUBLAYERS
        if getattr(self, "_cross_attention_layer", None) is not None:
            names += self._CROSS_SUBLAYERS
        return names

    # -- public conveniences ------------------------------------------------

    @property
    def self_attention(self):
        """The `MultiHeadSelfAttention` sublayer."""
        return self._self_attention_layer

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": keras.activations.serialize(self.activation),
            "normalize_first": self.normalize_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
            "attention_impl": self.attention_impl,
            **open_core_config(self),
            "dtype": self._dtype_config(),
        }
