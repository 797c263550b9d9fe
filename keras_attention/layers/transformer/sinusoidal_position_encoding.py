import math

import keras
import numpy as np
from keras import ops

from keras_attention.validation import check_index


def _static_dim(dim):
    """`dim` as a Python int, or `None` when it is unknown or symbolic."""
    return dim if isinstance(dim, int) and not isinstance(dim, bool) else None


def _is_concrete_tensor(value):
    """Whether `value` is a backend tensor whose values can be read now (an
    eager TensorFlow tensor, a JAX array that is not a tracer)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.is_tensor(value) and not tf.is_symbolic_tensor(value)
    if backend == "jax":
        import jax

        return isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer)
    return False


def _static_values(value):
    """The integer values of `value` as a NumPy array when they are known
    without running anything (Python ints, lists, NumPy arrays, eager
    tensors), else `None` (e.g. a tensor traced by `tf.function`/`jax.jit`)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer, list, tuple, np.ndarray)):
        values = np.asarray(value)
    elif _is_concrete_tensor(value):
        values = ops.convert_to_numpy(value)
    else:
        return None
    return values if values.dtype.kind in "iu" else None


def _received(name, values):
    """`name=[...]` for a few values, their range for many."""
    if values.size <= 16:
        return f"{name}={values.tolist()}"
    return f"{name} of shape {values.shape} in [{values.min()}, {values.max()}]"


def _check_inputs_rank(shape):
    if len(shape) < 2:
        raise ValueError(
            "`inputs` must have rank >= 2: `(..., sequence, features)`, the "
            "sequence on the second-to-last axis. "
            f"Received: inputs.shape={tuple(shape)}"
        )


def _check_start_index(inputs_shape, start_index, limit=None, limit_name=None):
    """ValueError for a `start_index` of the wrong rank, batch or range."""
    shape = tuple(getattr(start_index, "shape", np.shape(start_index)))
    rank = len(shape)
    batch = _static_dim(inputs_shape[0])
    length = _static_dim(inputs_shape[-2])
    if rank > 1 or (rank == 1 and len(inputs_shape) < 3):
        raise ValueError(
            "`start_index` must be a scalar, or of shape `(B,)` (one start per "
            "example of the first axis) for `inputs` of rank >= 3. Received: "
            f"start_index.shape={shape}, "
            f"inputs.shape={tuple(inputs_shape)}"
        )
    if rank == 1:
        size = _static_dim(shape[0])
        if size is not None and batch is not None and size not in (1, batch):
            raise ValueError(
                "`start_index` of shape `(B,)` must have one start per example "
                f"(B={batch}). Received: start_index.shape={(size,)}"
            )
    values = _static_values(start_index)
    if values is None:
        return
    if values.ndim == 0:
        check_index("start_index", values, length, limit, limit_name)
    elif values.size and values.min() < 0:
        raise ValueError(
            f"`start_index` must be >= 0. Received: {_received('start_index', values)}"
        )
    elif values.size and None not in (length, limit) and values.max() + length > limit:
        raise ValueError(
            f"`start_index` + the {length} new position(s) must not exceed "
            f"`{limit_name}`={limit}: every `start_index` must be <= "
            f"{limit - length}. Received: {_received('start_index', values)}"
        )


def _check_positions(inputs_shape, positions):
    """ValueError unless `positions` is `(T,)`, `(B, T)` or `inputs.shape[:-1]`."""
    shape = tuple(positions.shape)
    ranks = sorted(
        {1, len(inputs_shape) - 1} | ({2} if len(inputs_shape) > 2 else set())
    )
    length = _static_dim(inputs_shape[-2])
    batch = _static_dim(inputs_shape[0])
    problem = None
    if len(shape) not in ranks:
        problem = f"rank {' or '.join(str(r) for r in ranks)}"
    elif None not in (_static_dim(shape[-1]), length) and shape[-1] != length:
        problem = f"a last axis of size T={length} (one position per step)"
    elif (
        len(shape) > 1
        and None not in (_static_dim(shape[0]), batch)
        and shape[0] not in (1, batch)
    ):
        problem = f"a first axis of size B={batch} or 1"
    if problem is not None:
        raise ValueError(
            f"`positions` must be `(T,)`, `(B, T)` or `inputs.shape[:-1]`: {problem}. "
            f"Received: positions.shape={shape}, inputs.shape={tuple(inputs_shape)}"
        )


def _positions(inputs, start_index=0, positions=None):
    """The position of every step of `inputs` `(B, ..., T, D)`.

    Shaped to broadcast against `inputs.shape[:-1]`: `(T,)` for a scalar
    `start_index` or `(T,)` positions, `(B, 1, ..., 1, T)` for a per-example
    `start_index` `(B,)` or `(B, T)` positions (the batch is the first
    axis), `inputs.shape[:-1]` for positions of that shape.
    """
    rank = len(inputs.shape)
    if positions is None:
        steps = ops.arange(ops.shape(inputs)[-2], dtype="int32")  # (T,)
        start = ops.cast(start_index, "int32")
        if len(start.shape) == 0:
            return start + steps  # (T,)
        positions = start[:, None] + steps[None, :]  # (B, T)
    else:
        positions = ops.convert_to_tensor(positions)
    if len(positions.shape) == 2:
        for _ in range(rank - 3):  # (B, T) -> (B, 1, ..., 1, T)
            positions = ops.expand_dims(positions, axis=1)
    return positions


def _check_call(inputs, start_index, positions):
    _check_inputs_rank(tuple(inputs.shape))
    if positions is not None:
        _check_positions(tuple(inputs.shape), ops.convert_to_tensor(positions))
    else:
        _check_start_index(tuple(inputs.shape), start_index)


@keras.saving.register_keras_serializable(package="keras_attention")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The fixed sinusoidal position encoding of Vaswani et al. (2017).

    `PE(pos, 2i) = sin(pos / max_wavelength^(2i/d))` and
    `PE(pos, 2i+1) = cos(pos / max_wavelength^(2i/d))`, interleaved exactly
    as in the paper (even features are sines, odd features cosines), with
    `d` the width of the input.

    The layer **returns the encoding alone**, broadcast to the input's shape;
    add it yourself: `x = x + SinusoidalPositionEncoding()(x)`. It has no
    weights, so it works for any sequence length, including lengths never
    seen in training. Keras masks pass through unchanged.

    A drop-in for `keras_hub.layers.SinePositionEncoding`: the same
    arguments with the same meaning (`max_wavelength`, `start_index`,
    `positions`, inputs of any rank >= 3 with the sequence on the
    second-to-last axis, e.g. `(B, heads, T, D)`, and any `dtype`), and the
    same values. Where it goes further:

    - `start_index` may be a traced tensor (a compiled decoding loop encodes
      token `t` with `start_index=t` without recompiling) or one start per
      example, shape `(B,)`.
    - The angles are computed in float32 whatever the dtype policy, then
      cast: under `float16` the positions stay exact past 2048.
    - Bad arguments raise a ValueError naming them.
    - For inputs of rank > 3, `(B, T)` positions and a `(B,)` start index
      belong to the FIRST (batch) axis; keras-hub broadcasts them against
      the trailing axes instead, which pairs `B` with the axis before `T`.
      For rank-3 inputs the two agree.

    Args:
        max_wavelength: the base of the geometric progression of
            wavelengths (10000 in the paper).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, ..., T, D)`, rank >= 2; only its shape (and dtype) is
            used.
        start_index: int or int tensor, scalar or `(B,)`: position of the
            first step of `inputs` (for step-wise decoding). Default 0.
        positions: optional, the position of every step: `(T,)`, `(B, T)`
            or `inputs.shape[:-1]`, integer or float. When given,
            `start_index` is ignored (as in keras-hub).

    Returns:
        The encoding of positions `[start_index, start_index + T)` (or of
        `positions`), shape `inputs.shape`, in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.zeros((1, 3, 4), "float32")
    >>> pe = ka.layers.SinusoidalPositionEncoding()(x)
    >>> [round(float(v), 3) for v in pe[0, 1]]  # pos 1: sin, cos, sin, cos
    [0.841, 0.54, 0.01, 1.0]
    >>> pe = ka.layers.SinusoidalPositionEncoding()(x, positions=[2, 0, 1])
    >>> [round(float(v), 3) for v in pe[0, 2]]  # the step at position 1
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

    def call(self, inputs, start_index=0, positions=None):
        _check_call(inputs, start_index, positions)
        positions = ops.cast(_positions(inputs, start_index, positions), "float32")
        width = ops.shape(inputs)[-1]
        features = ops.arange(width, dtype="int32")
        even = ops.equal(features % 2, 0)  # sin on 2i, cos on 2i + 1
        two_i = ops.cast(features - features % 2, "float32")
        inverse_wavelength = ops.exp(
            -math.log(self.max_wavelength) * two_i / ops.cast(width, "float32")
        )  # 1 / max_wavelength^(2i/d), (D,)
        angles = positions[..., None] * inverse_wavelength  # (..., T, D)
        encoding = ops.where(even, ops.sin(angles), ops.cos(angles))
        encoding = ops.cast(encoding, self.compute_dtype)
        return ops.broadcast_to(encoding, ops.shape(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "max_wavelength": self.max_wavelength}
