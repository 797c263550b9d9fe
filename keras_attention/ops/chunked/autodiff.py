"""Vector-Jacobian products of a user function inside a hand-written backward.

The chunked attention (`chunked_attention.py`) has its own backward pass, so
the gradient of a score modifier has to be taken there, block by block: the
gradient with respect to the score itself (a soft-cap is not additive) and
with respect to the parameters the modifier closes over (a learned bias
table). Keras has no backend-neutral `vjp`, and the two backends see closed-
over parameters differently:

- TensorFlow: the parameters are `tf.Variable`s read inside the function.
  `tf.custom_gradient` hands them to the backward pass (`variables=`), and a
  `GradientTape` there gives their gradients.
- JAX: under `jit` and Keras' stateless training the parameters are tracers,
  and `jax.custom_vjp` refuses to differentiate closed-over tracers.
  `jax.closure_convert` hoists them into explicit arguments, which the
  custom gradient then returns gradients for.
"""

import contextlib

import keras


def hoist_parameters(fn, *example_args):
    """`(fn_with_params, params)`: `fn(*args) == fn_with_params(*args, *params)`.

    On JAX `params` are the differentiable values `fn` closes over (see the
    module docstring); elsewhere `params` is empty and `fn` reads its
    variables itself.
    """
    if keras.backend.backend() == "jax":
        import jax

        # A fresh function object each call: `closure_convert` caches its
        # result per function, and the values it does not hoist (concrete
        # arrays, outside any trace) are baked into that result, so a
        # variable assigned after the first eager call would be read stale.
        converted, consts = jax.closure_convert(lambda *a: fn(*a), *example_args)
        return converted, list(consts)
    return (lambda *args: fn(*args)), []


def linearize(fn, x, params, variables=()):
    """`(fn(x, *params), pullback)`; `pullback(ct) -> (dx, dparams, dvars)`.

    `params` are explicit arguments (JAX, `hoist_parameters`); `variables`
    are TensorFlow variables `fn` reads (`tf.custom_gradient`'s
    `variables=`). Gradients of parameters or variables that `fn` does not
    use are zeros.
    """
    if keras.backend.backend() == "jax":
        import jax

        y, vjp = jax.vjp(fn, x, *params)

        def pullback(ct):
            dx, *dparams = vjp(ct)
            return dx, dparams, []

        return y, pullback
    if keras.backend.backend() != "tensorflow":
        raise NotImplementedError(
            "Score modifiers on the chunked path need a vector-Jacobian product, "
            "implemented for the TensorFlow and JAX backends. Received: "
            f"backend={keras.backend.backend()!r}"
        )
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x, *params)

    def pullback(ct):
        grads = tape.gradient(
            y,
            [x, *variables],
            output_gradients=ct,
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
        )
        # A gather's gradient is an IndexedSlices: made dense to accumulate.
        grads = [tf.convert_to_tensor(g) for g in grads]
        return grads[0], [], grads[1:]

    return y, pullback


def unrecorded():
    """A context in which TensorFlow's gradient tapes record nothing.

    The forward pass of an op with its own backward (`ops.custom_gradient`)
    runs under it in eager mode: TensorFlow's eager `custom_gradient` would
    otherwise record every op of the forward on the active tape, and the
    tape keeps their inputs alive until it is deleted, which for the
    chunked attention is every block, the O(T S) memory it exists to avoid.
    Keras has no public equivalent (`tf.GradientTape.stop_recording` needs
    the tape object, which a layer does not have), hence the internal
    module. Variable reads are not recorded either, so a forward that reads
    variables whose gradients the backward returns must not use it. Other
    backends, and TensorFlow graphs, which record nothing, get a no-op.
    """
    if keras.backend.backend() != "tensorflow":
        return contextlib.nullcontext()
    import tensorflow as tf
    from tensorflow.python.eager import record

    if not tf.executing_eagerly():
        return contextlib.nullcontext()
    return record.stop_recording()
