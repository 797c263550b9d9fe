import math

import keras
from keras import ops

from keras_attention.layers.validation import check_index
from keras_attention.layers.validation import check_rank


def _positions(inputs, start_index):
    """Absolute positions `(T,)`, or `(B, T)` for a per-example start."""
    length = ops.shape(inputs)[1]
    positions = ops.arange(length, dtype="int32")
    start = ops.cast(start_index, "int32")
    if len(start.shape) == 1:
        return start[:, None] + positions[None, :]
    return start + positions


@keras.saving.register_keras_serializable(package="keras_attention")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The fixed sinusoidal position encoding of Vaswani et al. (2017).

    `PE(pos, 2i) = sin(pos / max_wavelength^(2i/d))` and
    `PE(pos, 2i+1) = cos(pos / max_wavelength^(2i/d))`, interleaved exactly
    as in the paper (even features are sines, odd features cosines), with
    `d` the width of the input.

    The layer **returns the encoding alone**, broadcast to the input's shape
    (as `keras_hub.layers.SinePositionEncoding` does); add it yourself:
    `x = x + SinusoidalPositionEncoding()(x)`. It has no weights, so it works
    for any sequence length, including lengths never seen in training.

    Positions are computed (no slicing of a table), so `start_index` may be
    a traced tensor: a compiled decoding loop encodes token `t` with
    `start_index=t` without recompiling.

    Args:
        max_wavelength: the base of the geometric progression of
            wavelengths (10000 in the paper).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`; only its shape (and dtype) is used.
        start_index: int or int tensor, scalar or `(B,)`: position of the
            first step of `inputs` (for step-wise decoding).

    Returns:
        The encoding of positions `[start_index, start_index + T)`, shape
        `(B, T, D)`, in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.zeros((1, 3, 4), "float32")
    >>> pe = ka.layers.SinusoidalPositionEncoding()(x)
    >>> [round(float(v), 3) for v in pe[0, 1]]  # pos 1: sin, cos, sin, cos
    [0.841, 0.54, 0.01, 1.0]

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        if (
            isinstance(max_wavelength, bool)
            or not isinstance(max_wavelength, (int, float))
            or max_wavelength <= 1
        ):
            raise ValueError(
                "`max_wavelength` must be a number > 1. "
                f"Received: max_wavelength={max_wavelength!r}"
            )
        self.max_wavelength = max_wavelength
        self.supports_masking = True
        self.built = True

    def call(self, inputs, start_index=0):
        check_rank("inputs", tuple(inputs.shape), 3)
        check_index("start_index", start_index, None, None, None)
        width = inputs.shape[-1]
        positions = ops.cast(_positions(inputs, start_index), "float32")
        features = ops.arange(width, dtype="int32")
        even = ops.equal(features % 2, 0)  # sin on 2i, cos on 2i + 1
        two_i = ops.cast(features - features % 2, "float32")
        inverse_wavelength = ops.exp(
            -math.log(self.max_wavelength) * two_i / float(width)
        )  # 1 / max_wavelength^(2i/d), (D,)
        angles = positions[..., None] * inverse_wavelength  # ([B,] T, D)
        encoding = ops.where(even, ops.sin(angles), ops.cos(angles))
        encoding = ops.cast(encoding, self.compute_dtype)
        return ops.broadcast_to(encoding, ops.shape(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "max_wavelength": self.max_wavelength}
