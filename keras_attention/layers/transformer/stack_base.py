"""`TransformerStackBase`: what the encoder and decoder stacks share
(private)."""

import keras

from keras_attention.initializers import fresh_initializer
from keras_attention.layers.fine_tuning import FineTuningMixin
from keras_attention.layers.transformer.block_base import reject_positional_heads
from keras_attention.layers.transformer.sequence_layer import SequenceLayerMixin
from keras_attention.layers.transformer.sequence_layer import offset_seed
from keras_attention.validation import check_positive_int

_BASE_LAYER_ARGS = ("name", "dtype", "trainable", "autocast")


class TransformerStackBase(SequenceLayerMixin, FineTuningMixin, keras.layers.Layer):
    """What the encoder and decoder stacks share (private base class):
    `num_layers` blocks of `block_class` with the same arguments, each with
    initializers and dropout seeds of its own, and a final LayerNorm after
    a pre-LN stack (pre-LN blocks leave their output unnormalized)."""

    block_class = None

    def __new__(cls, *args, **kwargs):
        # `num_layers` may come by position, the block's arguments may not.
        reject_positional_heads(cls, args, positional=("num_layers",))
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, num_layers, *, num_heads, intermediate_dim, **kwargs):
        base = {k: kwargs.pop(k) for k in _BASE_LAYER_ARGS if k in kwargs}
        super().__init__(**base)
        check_positive_int("num_layers", num_layers)
        self.num_layers = num_layers
        # One block made first validates the arguments and holds the config.
        template = self.block_class(
            num_heads=num_heads, intermediate_dim=intermediate_dim, **kwargs
        )
        self._block_kwargs = template.get_config()
        for key in ("name", "trainable", "dtype"):
            self._block_kwargs.pop(key, None)
        for key, value in self._block_kwargs.items():
            setattr(self, key, value)
        self.activation = template.activation
        self.kernel_initializer = template.kernel_initializer
        self.bias_initializer = template.bias_initializer
        self.supports_masking = True
        self.blocks = [self._make_block(i) for i in range(num_layers)]
        self.final_norm = None
        if self.normalize_first:
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="final_norm",
            )

    @property
    def kv_heads(self):
        """The key/value heads of the blocks' attention (and caches)."""
        return self.num_key_value_heads or self.num_heads

    def _make_block(self, i):
        kwargs = dict(self._block_kwargs)
        # Offsets far from the blocks' own (see `fresh_initializer`), so
        # that blocks of a stack made from a seeded initializer differ.
        kwargs["kernel_initializer"] = fresh_initializer(
            self.kernel_initializer, 1000 * (i + 1)
        )
        kwargs["bias_initializer"] = fresh_initializer(
            self.bias_initializer, 1000 * (i + 1)
        )
        kwargs["seed"] = offset_seed(self.seed, 100 * i)
        return self.block_class(**kwargs, dtype=self.dtype_policy, name=f"block_{i}")

    def get_config(self):
        return {
            **super().get_config(),
            **self._block_kwargs,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "num_layers": self.num_layers,
            "dtype": self._dtype_config(),
        }
