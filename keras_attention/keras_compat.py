"""The Keras internals the package relies on, in one place.

Keras 3 has no public function to read the mask that
`Embedding(mask_zero=True)` puts on a tensor. `keras.src.backend.get_keras_mask`
is what Keras' own layers (`MultiHeadAttention`) and keras-hub's use: it
reads the tensor's attribute or, for tensors that cannot carry attributes
(JAX tracers under `jit`, i.e. compiled `fit` and `predict` on JAX), Keras'
side table. Reading `x._keras_mask` by hand misses the side table, which is
how padding leaked into compiled JAX models before 0.2.0.

`trace_output_spec` is the base `Operation.compute_output_spec`: it infers
a layer's outputs by running `call` on symbolic tensors. Keras'
`MultiHeadAttention` overrides it with a formula that knows nothing of a
cache and says the scores have the compute dtype; ours are float32.

`build_proj_equation` and `get_output_shape` are the helpers with which
Keras' `MultiHeadAttention` builds its `EinsumDense` projections: the
grouped key/value projections of `MultiHeadAttention` are built the same
way, so that their weights keep Keras' shapes.

`current_name_scope` (the layer a call is traced in, for
`recording_attention_plans`) and `keras_can_use_flash_attention` (Keras'
own test of cuDNN's kernel, for the dispatch) are asked only when needed,
and say "unknown" (`""`, `None`) on a Keras without them.

`tests/test_architecture.py` checks that no other module of the package
imports `keras.src`.
"""

import keras
from keras.src.backend import get_keras_mask as _get_keras_mask
from keras.src.layers.attention import multi_head_attention as _keras_mha
from keras.src.ops.operation import Operation as _Operation


def get_keras_mask(x):
    """The Keras mask attached to `x`, or `None` (also for `x=None`)."""
    return None if x is None else _get_keras_mask(x)


def first_mask(explicit, tensor):
    """`explicit` when given, else the Keras mask of `tensor`."""
    return explicit if explicit is not None else get_keras_mask(tensor)


def build_proj_equation(free_dims, bound_dims, output_dims):
    """`(equation, bias_axes, output_rank)` of an `EinsumDense` projection,
    as Keras' `MultiHeadAttention` builds its own."""
    return _keras_mha._build_proj_equation(free_dims, bound_dims, output_dims)


def get_output_shape(output_rank, known_last_dims):
    """The `output_shape` of that `EinsumDense`: `None` for the free
    dimensions, then `known_last_dims`."""
    return _keras_mha._get_output_shape(output_rank, known_last_dims)


def trace_output_spec(layer, *args, **kwargs):
    """The output spec of `layer.call(*args, **kwargs)`, found by tracing.

    Floating inputs are taken in the layer's compute dtype, as
    `Layer.__call__` casts them before `call` (so a direct
    `compute_output_spec` call on float32 data under a mixed policy
    describes what calling the layer gives).
    """

    def spec(x):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            return x
        dtype = keras.backend.standardize_dtype(x.dtype)
        if layer.autocast and "float" in dtype:
            dtype = layer.compute_dtype
        return keras.KerasTensor(tuple(x.shape), dtype=dtype)

    args, kwargs = keras.tree.map_structure(spec, (args, kwargs))
    return _Operation.compute_output_spec(layer, *args, **kwargs)


def current_name_scope():
    """The path of Keras' current name scope (`"encoder/block_0/..."`),
    `""` on a Keras without it."""
    try:
        from keras.src.backend.common.name_scope import current_path
    except ImportError:
        return ""
    return current_path()


def keras_can_use_flash_attention(query, key, value, bias=None):
    """Keras' own test of cuDNN's flash attention under JAX for these
    inputs (`jax.ShapeDtypeStruct`s are enough): `True` or `False`, `None`
    on a Keras without it (`keras.src.backend.jax.nn.
    _can_use_flash_attention`, 3.15; it imports JAX)."""
    try:
        from keras.src.backend.jax.nn import _can_use_flash_attention
    except ImportError:
        return None
    return bool(_can_use_flash_attention(query, key, value, bias))
