"""NumPy helpers shared by the LSTMN tests (`tests/layers/test_lstmn.py`,
`tests/layers/test_lstmn_decoder.py`): float64 conversion, the paper's
activations, weights moved off their initial values."""

import keras
import numpy as np
from keras import ops


def as_float64(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float64")


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def softmax(a):
    e = np.exp(a - a.max())
    return e / e.sum()


def randomize(layer, seed=0, scale=0.6):
    """Every weight moved off its initial value (zero biases, ...)."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [(scale * rng.normal(size=w.shape)).astype("float32") for w in layer.weights]
    )


def on_jax_compiled(fn):
    """`fn` under `jax.jit` on JAX (eager JAX compiles each op of a loop on
    its own, seconds); `fn` itself elsewhere."""
    if keras.backend.backend() != "jax":
        return fn
    import jax

    return jax.jit(fn)
