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


# TensorFlow's graph-mode `while_loop` (and `map_fn`) runs up to 10
# iterations at once (`parallel_iterations=10`), each holding its own
# temporaries. In the chunked attention's nested loops that multiplied the
# per-block memory by up to 100: 1.6 GiB at L=4096 in a plain `tf.function`,
# against 0.3 GiB under XLA, which (like JAX) runs iterations one at a time.
# `keras.ops.fori_loop` and `keras.ops.map` do not expose the setting.


def sequential_fori_loop(lower, upper, body_fun, init_val):
    """`keras.ops.fori_loop` whose iterations run one at a time everywhere."""
    if keras.backend.backend() != "tensorflow":
        return ops.fori_loop(lower, upper, body_fun, init_val)
    import tensorflow as tf

    return tf.while_loop(
        lambda i, val: i < upper,
        lambda i, val: (i + 1, body_fun(i, val)),
        (lower, init_val),
        parallel_iterations=1,
    )[1]


def sequential_map(f, xs, output_specs=None):
    """`keras.ops.map` whose iterations run one at a time everywhere.

    `output_specs`: a tuple of `(shape, dtype)` pairs, one per output of
    `f` (`None` dimensions allowed). Without it, TensorFlow learns the output
    signature by calling `f` once more outside the loop: unused, but its
    stateful ops (callbacks) still run in a `tf.function`.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.map(f, xs)
    import tensorflow as tf
    from keras import tree

    if output_specs is None:
        first = tree.map_structure(lambda x: x[0], xs)
        signature = tree.map_structure(tf.TensorSpec.from_tensor, f(first))
    else:
        signature = tuple(tf.TensorSpec(shape, dtype) for shape, dtype in output_specs)
    return tf.map_fn(f, xs, fn_output_signature=signature, parallel_iterations=1)


def tensorflow_xla_context():
    """Whether TensorFlow is tracing a function for XLA (`jit_compile`)."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    graph = tf.compat.v1.get_default_graph()
    return control_flow_util.GraphOrParentsInXlaContext(graph)
