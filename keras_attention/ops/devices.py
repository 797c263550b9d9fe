"""What the attention computes on, and how the call is traced.

The one place that asks the backend about the hardware. The dispatch
(`keras_attention.ops.dispatch.attention_plan`) reads `accelerator()`; the block planner
(`keras_attention.ops.chunked.block_plan`) reads `runtime()` and `device_kind()`.
Tests fake an accelerator by monkeypatching `accelerator` here.
"""

import dataclasses
import functools

import keras

from keras_attention.ops.loops import tensorflow_xla_context


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """The accelerator a backend computes on (see `accelerator`).

    `kind` is `"gpu"` or `"tpu"`; `compute_capability` a `(major, minor)`
    pair for NVIDIA GPUs (`None` when unknown).
    """

    kind: str
    name: str = ""
    compute_capability: tuple | None = None


def accelerator():
    """The `Accelerator` the current backend computes on, `None` on a CPU.

    The device query of the dispatch: tests fake an accelerator by
    monkeypatching this function.
    """
    return _detect_accelerator(keras.backend.backend())


@functools.cache
def _detect_accelerator(backend):
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform not in ("gpu", "tpu"):
            return None
        capability = getattr(device, "compute_capability", None)
        if capability:
            capability = tuple(int(x) for x in str(capability).split(".")[:2])
        return Accelerator(device.platform, device.device_kind, capability or None)
    if backend == "tensorflow":
        import tensorflow as tf

        for kind in ("TPU", "GPU"):
            if tf.config.list_logical_devices(kind):
                return Accelerator(kind.lower())
    return None


def device_kind():
    """`"gpu"`, `"tpu"` or `"cpu"`: where the current backend computes."""
    found = accelerator()
    return "cpu" if found is None else found.kind


def runtime():
    """How the current call is traced: `"tensorflow-xla"` (TensorFlow
    compiling for XLA), `"tensorflow"` (its graphs or eager ops), or the
    backend's name (`"jax"`, which always compiles; `"torch"`, `"numpy"`)."""
    backend = keras.backend.backend()
    if backend == "tensorflow" and tensorflow_xla_context():
        return "tensorflow-xla"
    return backend
