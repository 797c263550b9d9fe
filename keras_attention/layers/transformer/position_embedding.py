import keras
import numpy as np
from keras import ops

from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    _check_inputs_rank,
)
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    _check_positions,
)
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    _check_start_index,
)
from keras_attention.layers.transformer.sinusoidal_position_encoding import _positions
from keras_attention.layers.transformer.sinusoidal_position_encoding import _received
from keras_attention.layers.transformer.sinusoidal_position_encoding import _static_dim
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    _static_values,
)
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class PositionEmbedding(keras.layers.Layer):
    """A learned position embedding: one trained vector per position.

    The alternative to `SinusoidalPositionEncoding` that Vaswani et al.
    (2017) found to perform nearly identically (Table 3, row E). Like it,
    the layer **returns the embedding alone**, broadcast to the input's
    shape; add it yourself: `x = x + PositionEmbedding(64)(x)`. Keras masks
    pass through unchanged.

    The table is the weight `position_embeddings`, `(sequence_length, D)`
    (`embeddings` is a read-only alias). Positions are gathered (not sliced)
    from it, so `start_index` may be a traced tensor in a compiled decoding
    loop. Positions must stay below `sequence_length`; static ones are
    checked, positions only known at run time are not.

    A drop-in for `keras_hub.layers.PositionEmbedding`: the same arguments
    with the same meaning (`sequence_length`, `initializer`, `start_index`,
    `positions`, inputs of any rank with the sequence on the second-to-last
    axis, e.g. `(B, heads, T, D)`, any `dtype`), the same weight (name and
    attribute) and the same values. Where it goes further: a per-example
    `start_index` of shape `(B,)`, a traced `start_index` in a compiled
    loop, and ValueErrors naming the argument for inputs longer than
    `sequence_length` or positions out of range. For inputs of rank > 3,
    `(B, T)` positions and a `(B,)` start index belong to the FIRST (batch)
    axis; keras-hub broadcasts them against the trailing axes instead,
    which pairs `B` with the axis before `T`. For rank-3 inputs the two
    agree. keras-hub's vLLM serving hook (positions read from a serving
    context) is not reproduced: pass `positions` explicitly.

    Args:
        sequence_length: the number of positions that have an embedding.
        initializer: initializer of the `(sequence_length, D)` table.
            Default `"glorot_uniform"`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, ..., T, D)`, rank >= 2; only its shape is used.
        start_index: int or int tensor, scalar or `(B,)`: position of the
            first step of `inputs`. Default 0.
        positions: optional integer positions of every step: `(T,)`,
            `(B, T)` or `inputs.shape[:-1]`. When given, `start_index` is
            ignored (as in keras-hub).

    Returns:
        `inputs.shape`: the embeddings of positions
        `[start_index, start_index + T)` (or of `positions`).

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.zeros((2, 3, 4), "float32")
    >>> layer = ka.layers.PositionEmbedding(sequence_length=10)
    >>> tuple(layer(x).shape)
    (2, 3, 4)
    >>> table = layer.position_embeddings.numpy()
    >>> bool(np.all(layer(x, positions=[[4, 0, 4], [1, 2, 3]])[0, 2] == table[4]))
    True

    References:
        - Gehring et al., 2017: https://arxiv.org/abs/1705.03122
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if isinstance(sequence_length, np.integer):
            sequence_length = int(sequence_length)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        _check_inputs_rank(tuple(inputs_shape))
        if _static_dim(inputs_shape[-1]) is None:
            raise ValueError(
                "`inputs` must have a known last (feature) axis. "
                f"Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
        )

    @property
    def embeddings(self):
        """Read-only alias of `position_embeddings`."""
        return self.position_embeddings

    def _check_positions(self, inputs, positions):
        tensor = ops.convert_to_tensor(positions)
        _check_positions(tuple(inputs.shape), tensor)
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if "int" not in dtype:
            raise TypeError(
                "`positions` must be integers (rows of the table). "
                f"Received: positions.dtype={dtype}"
            )
        values = _static_values(positions)
        if values is not None and values.size:
            if values.min() < 0 or values.max() >= self.sequence_length:
                raise ValueError(
                    "`positions` must be in [0, `sequence_length`="
                    f"{self.sequence_length}). Received: "
                    f"{_received('positions', values)}"
                )

    def _check_start_index(self, inputs, start_index):
        length = _static_dim(inputs.shape[-2])
        if length is not None and length > self.sequence_length:
            raise ValueError(
                "`inputs` must not be longer than `sequence_length`="
                f"{self.sequence_length}. Received: inputs.shape="
                f"{tuple(inputs.shape)}"
            )
        _check_start_index(
            tuple(inputs.shape), start_index, self.sequence_length, "sequence_length"
        )

    def call(self, inputs, start_index=0, positions=None):
        _check_inputs_rank(tuple(inputs.shape))
        if positions is None:
            self._check_start_index(inputs, start_index)
        else:
            self._check_positions(inputs, positions)
        positions = _positions(inputs, start_index, positions)  # (..., T)
        embedding = ops.take(self.position_embeddings, positions, axis=0)
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
