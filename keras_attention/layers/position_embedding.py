import keras
from keras import ops

from keras_attention.layers.sinusoidal_position_encoding import _positions
from keras_attention.layers.validation import check_index
from keras_attention.layers.validation import check_positive_int
from keras_attention.layers.validation import check_rank


@keras.saving.register_keras_serializable(package="keras_attention")
class PositionEmbedding(keras.layers.Layer):
    """A learned position embedding: one trained vector per position.

    The alternative to `SinusoidalPositionEncoding` that Vaswani et al.
    (2017) found to perform nearly identically (Table 3, row E). Like it,
    the layer **returns the embedding alone**, broadcast to the input's
    shape; add it yourself: `x = x + PositionEmbedding(64)(x)`.

    Positions are gathered (not sliced) from the table, so `start_index`
    may be a traced tensor in a compiled decoding loop. Positions must stay
    below `sequence_length`.

    Args:
        sequence_length: the number of positions that have an embedding.
        initializer: initializer of the `(sequence_length, D)` table.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`; only its shape is used.
        start_index: int or int tensor, scalar or `(B,)`: position of the
            first step of `inputs`.

    Returns:
        `(B, T, D)`: the embeddings of positions
        `[start_index, start_index + T)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.zeros((2, 3, 4), "float32")
    >>> ka.layers.PositionEmbedding(sequence_length=10)(x).shape
    TensorShape([2, 3, 4])

    References:
        - Gehring et al., 2017: https://arxiv.org/abs/1705.03122
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        check_rank("inputs", tuple(inputs_shape), 3)
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
        )

    def call(self, inputs, start_index=0):
        length = inputs.shape[1]
        if length is not None and length > self.sequence_length:
            raise ValueError(
                "`inputs` must not be longer than `sequence_length`="
                f"{self.sequence_length}. Received: inputs.shape="
                f"{tuple(inputs.shape)}"
            )
        check_index(
            "start_index", start_index, length, self.sequence_length, "sequence_length"
        )
        positions = _positions(inputs, start_index)  # ([B,] T)
        embedding = ops.take(self.embeddings, positions, axis=0)
        return ops.broadcast_to(
            ops.cast(embedding, self.compute_dtype), ops.shape(inputs)
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }
