"""Initializers for the sublayers and weight blocks of a layer (private)."""

import keras


def fresh_initializer(initializer, index=0):
    """A copy of `initializer` that draws values of its own.

    A Keras initializer returns the same values every time it is called
    (an unseeded one fixes a seed when it is made), so two weights made by
    one instance, or by two copies of a seeded one, start equal: the fused
    Q/K/V kernel of 0.1.0 started with W_Q = W_K = W_V, and
    `keras.layers.MultiHeadAttention` still gives its query, key and value
    kernels the same values when its initializer is seeded. Every weight or
    weight block therefore gets its own copy: an unseeded initializer is
    cloned (the copy picks a new seed), a seeded one gets the seed
    `seed + 7919 * index`, so a seeded layer stays reproducible while its
    `index`-numbered blocks differ.
    """
    initializer = keras.initializers.get(initializer)
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer  # a plain function: the caller's responsibility
    config = initializer.get_config()
    if isinstance(config.get("seed"), int):
        config["seed"] = (config["seed"] + 7919 * index) % (2**31 - 1)
    return initializer.__class__.from_config(config)


class BlockInitializer:
    """Initializes a kernel made of `blocks` side-by-side blocks, each drawn
    by its own copy of `initializer` with `block_shape` (private; e.g. the
    fused Q/K/V kernel `(D, 3 N H)` drawn as three `(D, N, H)` kernels, the
    way `keras.layers.MultiHeadAttention` draws its query, key and value
    kernels, so both layers start from the same distribution)."""

    def __init__(self, initializer, block_shapes, index=0):
        self.initializers = [
            fresh_initializer(initializer, index + i) for i in range(len(block_shapes))
        ]
        self.block_shapes = block_shapes

    def __call__(self, shape, dtype=None):
        blocks = [
            keras.ops.reshape(init(block, dtype=dtype), (shape[0], -1))
            for init, block in zip(self.initializers, self.block_shapes, strict=True)
        ]
        return keras.ops.concatenate(blocks, axis=-1)
