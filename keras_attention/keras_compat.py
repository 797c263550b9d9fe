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
"""

import keras
from keras.src.backend import get_keras_mask as _get_keras_mask
from keras.src.ops.operation import Operation as _Operation


def get_keras_mask(x):
    """The Keras mask attached to `x`, or `None` (also for `x=None`)."""
    return None if x is None else _get_keras_mask(x)


def first_mask(explicit, tensor):
    """`explicit` when given, else the Keras mask of `tensor`."""
    return explicit if explicit is not None else get_keras_mask(tensor)


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
