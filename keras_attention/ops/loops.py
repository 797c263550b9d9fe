"""Recurrences over a sequence that compile with XLA and train."""

import keras
from keras import ops


def recurrence(step_fn, initial_carry, sequence):
    """Run `carry = step_fn(carry, x_t)` over `sequence`; stack every carry.

    A scan whose per-step outputs are the carries themselves (put the step
    output in the carry). `keras.ops.scan` would do on JAX, but on
    TensorFlow its `while_loop` has no `maximum_iterations`, so its gradient
    cannot compile with XLA (`jit_compile=True`); `tf.scan` sets it.

    Args:
        step_fn: `(carry, x_t) -> carry`, the carry a nested structure of
            tensors with fixed shapes and dtypes.
        initial_carry: the carry before the first step.
        sequence: time-major tensor (or nested structure) `(T, ...)`.

    Returns:
        The carries after each step, stacked along a new leading axis `T`.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.scan(step_fn, sequence, initializer=initial_carry)

    def scan_fn(carry, x_t):
        carry = step_fn(carry, x_t)
        return carry, carry

    return ops.scan(scan_fn, initial_carry, sequence)[1]
