import keras
from keras import ops

from keras_attention.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_attention.layers.transformer_layer_utils import block_config
from keras_attention.layers.transformer_layer_utils import check_attention_impl
from keras_attention.layers.transformer_layer_utils import check_block_arguments
from keras_attention.layers.transformer_layer_utils import offset_seed
from keras_attention.layers.validation import check_positive_int
from keras_attention.layers.validation import get_activation


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoder(keras.layers.Layer):
    """A stack of `num_layers` `TransformerEncoderBlock`s.

    As `torch.nn.TransformerEncoder`: every block has the same arguments;
    with `normalize_first=True` (pre-LN) a final LayerNorm follows the
    stack, since pre-LN blocks leave their output unnormalized. Position
    information must already be in `inputs` (see
    `SinusoidalPositionEncoding`).

    Args:
        num_layers: number of blocks.
        num_heads, intermediate_dim, dropout, attention_dropout: as
            `TransformerEncoderBlock`.
        activation, normalize_first, layer_norm_epsilon: as
            `TransformerEncoderBlock`.
        kernel_initializer, bias_initializer, seed, attention_impl: as
            `TransformerEncoderBlock`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`.
        padding_mask: `(B, T)` boolean, True = real token; filled from the
            Keras mask of `inputs`.
        return_attention_scores: also return the weights of every block,
            float32 `(B, num_layers, N, T, T)`.
        training: bool, whether dropout is active.

    Returns:
        `(B, T, D)`, and the attention weights when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> encoder = ka.layers.TransformerEncoder(2, num_heads=4, intermediate_dim=32)
    >>> y, w = encoder(x, return_attention_scores=True)
    >>> y.shape, w.shape
    (TensorShape([2, 5, 16]), TensorShape([2, 2, 4, 5, 5]))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    def __init__(
        self,
        num_layers,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=None,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_attention_impl(attention_impl)
        self.attention_impl = attention_impl
        check_positive_int("num_layers", num_layers)
        check_block_arguments(num_heads, intermediate_dim, dropout, attention_dropout)
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = get_activation(activation)
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.supports_masking = True
        config = block_config(self)
        self.blocks = []
        for i in range(num_layers):
            config["seed"] = offset_seed(seed, 10 * i)
            self.blocks.append(
                TransformerEncoderBlock(
                    **config, dtype=self.dtype_policy, name=f"block_{i}"
                )
            )
        self.final_norm = (
            keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )
            if normalize_first
            else None
        )

    def build(self, inputs_shape):
        for block in self.blocks:
            block.build(inputs_shape)
        if self.final_norm is not None:
            self.final_norm.build(inputs_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        if padding_mask is None:
            padding_mask = getattr(inputs, "_keras_mask", None)
        x = inputs  # (B, T, D)
        weights = []
        for block in self.blocks:
            x = block(
                x,
                padding_mask=padding_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                x, w = x
                weights.append(w)  # (B, N, T, T)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if return_attention_scores:
            return x, ops.stack(weights, axis=1)  # (B, L, N, T, T)
        return x

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            **block_config(self),
            "num_layers": self.num_layers,
        }
