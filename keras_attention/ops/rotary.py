"""Rotary position embedding (RoPE; Su et al., 2021)."""

from keras import ops


def rotary_embedding(x, positions, max_wavelength=10000, scaling_factor=1.0):
    """Rotate each pair of features of `x` by an angle proportional to its
    position, so that `rope(q, i) . rope(k, j)` depends on `i - j` only.

    Feature `d` of the first half is paired with feature `d + H/2` (the
    "rotate half" layout of GPT-NeoX, LLaMA and
    `keras_hub.layers.RotaryEmbedding`) and rotated by
    `theta_d = (position / scaling_factor) * max_wavelength^(-2d / H)`;
    `scaling_factor > 1` is linear position interpolation (Chen et al.,
    2023), stretching the trained positions over a longer context.

    Args:
        x: `(B, T, N, H)`, `H` even.
        positions: absolute positions, `(T,)` or `(B, T)` (ints or floats),
            e.g. `cache_index + arange(T)` while decoding.
        max_wavelength: the longest wavelength, 10000 in the paper.
        scaling_factor: positions are divided by it.

    Returns:
        The rotated tensor, shape and dtype of `x`.
    """
    head_dim = x.shape[-1]
    if head_dim is not None and head_dim % 2:
        raise ValueError(
            "Rotary embedding rotates pairs of features: the head size must be "
            f"even. Received: x.shape={tuple(x.shape)}"
        )
    exponents = ops.arange(0, head_dim, 2, dtype="float32") / head_dim
    inverse_freq = ops.power(ops.cast(max_wavelength, "float32"), -exponents)
    positions = ops.cast(positions, "float32") / scaling_factor
    if len(positions.shape) == 1:
        positions = positions[None]  # (1, T)
    angles = positions[..., None] * inverse_freq  # (B|1, T, H/2)
    angles = ops.concatenate([angles, angles], axis=-1)[:, :, None, :]
    cos = ops.cast(ops.cos(angles), x.dtype)  # (B|1, T, 1, H)
    sin = ops.cast(ops.sin(angles), x.dtype)
    first, second = ops.split(x, 2, axis=-1)
    rotated_half = ops.concatenate([-second, first], axis=-1)
    return x * cos + rotated_half * sin
