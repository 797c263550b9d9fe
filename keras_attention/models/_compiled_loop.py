"""The compiled decoding loop of `Transformer` and `ImageTransformer`
(private)."""

import keras


def run_compiled(functions, args, loop, inputs, seed):
    """`loop(inputs, seed, *args)`, compiled once per `args` and kept in
    `functions`: with XLA through `tf.function` on TensorFlow (and with
    `jax.jit` on JAX); eagerly elsewhere. The seed is an
    input, so a new seed does not retrace."""
    backend = keras.config.backend()
    if args not in functions and backend == "tensorflow":
        import tensorflow as tf

        functions[args] = tf.function(
            lambda inputs, seed: loop(inputs, seed, *args),
            jit_compile=True,
            reduce_retracing=True,
            autograph=False,  # keras.ops code: nothing to convert
        )
    elif args not in functions and backend == "jax":
        import jax

        functions[args] = jax.jit(lambda inputs, seed: loop(inputs, seed, *args))
    if args not in functions:
        return loop(inputs, seed, *args)
    return functions[args](inputs, seed)
