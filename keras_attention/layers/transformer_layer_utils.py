"""Pieces shared by the Transformer blocks (private)."""

import keras

from keras_attention.layers.validation import check_positive_int
from keras_attention.layers.validation import check_rank
from keras_attention.layers.validation import check_rate
from keras_attention.ops import check_attention_impl  # noqa: F401


def check_block_arguments(num_heads, intermediate_dim, dropout, attention_dropout):
    check_positive_int("num_heads", num_heads)
    check_positive_int("intermediate_dim", intermediate_dim)
    check_rate("dropout", dropout)
    if attention_dropout is not None:
        check_rate("attention_dropout", attention_dropout)


def head_size(name, shape, num_heads):
    """`key_dim = width // num_heads`; ValueError unless it divides."""
    check_rank(name, tuple(shape), 3)
    width = shape[-1]
    if width is None or width % num_heads:
        raise ValueError(
            f"The width of `{name}` must be known and divisible by "
            f"`num_heads`={num_heads}. Received: {name}.shape={tuple(shape)}"
        )
    return width // num_heads


def clone_initializer(initializer):
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


class FeedForward(keras.layers.Layer):
    """`FFN(x) = max(0, x W1 + b1) W2 + b2` (any activation): private."""

    def __init__(
        self,
        intermediate_dim,
        activation,
        kernel_initializer,
        bias_initializer,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = intermediate_dim
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, inputs_shape):
        common = dict(
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
        )
        self.intermediate = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            name="intermediate",
            **common,
        )
        self.intermediate.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            inputs_shape[-1],
            kernel_initializer=clone_initializer(self.kernel_initializer),
            name="output",
            **common,
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))

    def call(self, inputs):
        return self.output_dense(self.intermediate(inputs))


def block_config(layer):
    return {
        "num_heads": layer.num_heads,
        "intermediate_dim": layer.intermediate_dim,
        "dropout": layer.dropout,
        "attention_dropout": layer.attention_dropout,
        "activation": keras.activations.serialize(layer.activation),
        "normalize_first": layer.normalize_first,
        "layer_norm_epsilon": layer.layer_norm_epsilon,
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
        "bias_initializer": keras.initializers.serialize(layer.bias_initializer),
        "seed": layer.seed,
        "attention_impl": layer.attention_impl,
    }


def offset_seed(seed, offset):
    """Distinct but reproducible seeds for the sublayers of one block."""
    return None if seed is None else seed + offset
