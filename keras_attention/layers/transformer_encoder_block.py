import keras

from keras_attention.layers.multi_head_self_attention import MultiHeadSelfAttention
from keras_attention.layers.transformer_layer_utils import FeedForward
from keras_attention.layers.transformer_layer_utils import block_config
from keras_attention.layers.transformer_layer_utils import check_attention_impl
from keras_attention.layers.transformer_layer_utils import check_block_arguments
from keras_attention.layers.transformer_layer_utils import clone_initializer
from keras_attention.layers.transformer_layer_utils import head_size
from keras_attention.layers.transformer_layer_utils import offset_seed
from keras_attention.layers.validation import get_activation
from keras_attention.ops.masks import check_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoderBlock(keras.layers.Layer):
    """One Transformer encoder layer: self-attention and a feed-forward net.

    Post-LN (the paper, default): `x = LayerNorm(x + Dropout(MHA(x)))`, then
    `x = LayerNorm(x + Dropout(FFN(x)))`. Pre-LN with `normalize_first=True`:
    `x = x + Dropout(MHA(LayerNorm(x)))`, `x = x + Dropout(FFN(LayerNorm(x)))`
    (more stable for deep stacks; add a final LayerNorm after the stack).
    The attention is `MultiHeadSelfAttention` with `key_dim = D // num_heads`.

    Masks: `padding_mask` `(B, T)` (True = real token; filled from the
    Keras mask of `inputs`) hides padded positions from every query;
    `attention_mask` `(B, T, T)` is any extra pattern. The Keras mask is
    passed on to the output.

    Args:
        num_heads: number of attention heads; must divide the input width.
        intermediate_dim: hidden width of the feed-forward net.
        dropout: rate of the residual dropouts.
        attention_dropout: rate of the dropout on the attention weights;
            `dropout` when `None`.
        activation: activation of the feed-forward net.
        normalize_first: pre-LN (`True`) or post-LN (`False`).
        layer_norm_epsilon: epsilon of the layer normalizations.
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"` or `"chunked"` (exact,
            O(L)-memory attention), passed to the attention sublayers; see
            `MultiHeadAttention`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`.
        padding_mask: `(B, T)` boolean.
        attention_mask: `(B, T, T)` boolean.
        return_attention_scores: also return the `(B, N, T, T)` weights.
        training: bool, whether dropout is active.

    Returns:
        `(B, T, D)`, and the attention weights when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> block = ka.layers.TransformerEncoderBlock(num_heads=4, intermediate_dim=32)
    >>> block(x).shape
    TensorShape([2, 5, 16])

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
        - Xiong et al., 2020 (pre-LN): https://arxiv.org/abs/2002.04745
    """

    def __init__(
        self,
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
        check_block_arguments(num_heads, intermediate_dim, dropout, attention_dropout)
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

    def _attention_rate(self):
        if self.attention_dropout is None:
            return self.dropout
        return self.attention_dropout

    def build(self, inputs_shape):
        key_dim = head_size("inputs", inputs_shape, self.num_heads)
        init = dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
        )
        self.self_attention = MultiHeadSelfAttention(
            self.num_heads,
            key_dim,
            attention_dropout=self._attention_rate(),
            seed=self.seed,
            attention_impl=self.attention_impl,
            name="self_attention",
            **init,
        )
        self.self_attention.build(inputs_shape)
        self.feedforward = FeedForward(
            self.intermediate_dim,
            self.activation,
            name="feedforward",
            **init,
        )
        self.feedforward.build(inputs_shape)
        self.attention_norm, self.feedforward_norm = (
            keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )
            for name in ("attention_norm", "feedforward_norm")
        )
        self.attention_norm.build(inputs_shape)
        self.feedforward_norm.build(inputs_shape)
        self.attention_dropout_layer = keras.layers.Dropout(
            self.dropout, seed=offset_seed(self.seed, 1), dtype=self.dtype_policy
        )
        self.feedforward_dropout_layer = keras.layers.Dropout(
            self.dropout, seed=offset_seed(self.seed, 2), dtype=self.dtype_policy
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        if padding_mask is None:
            padding_mask = getattr(inputs, "_keras_mask", None)
        if padding_mask is not None:
            check_mask("padding_mask", padding_mask, tuple(inputs.shape[:2]))
        x = inputs  # (B, T, D)
        residual = x
        if self.normalize_first:
            x = self.attention_norm(x)
        x = self.self_attention(
            x,
            query_mask=padding_mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        if return_attention_scores:
            x, weights = x
        x = residual + self.attention_dropout_layer(x, training=training)
        if not self.normalize_first:
            x = self.attention_norm(x)
        residual = x
        if self.normalize_first:
            x = self.feedforward_norm(x)
        x = self.feedforward(x)
        x = residual + self.feedforward_dropout_layer(x, training=training)
        if not self.normalize_first:
            x = self.feedforward_norm(x)
        if return_attention_scores:
            return x, weights
        return x

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {**super().get_config(), **block_config(self)}
