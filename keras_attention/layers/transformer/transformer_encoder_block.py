import keras

from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.block_base import EncoderCallMixin
from keras_attention.layers.transformer.block_base import TransformerBlockBase


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoderBlock(EncoderCallMixin, TransformerBlockBase):
    """One Transformer encoder layer: self-attention and a feed-forward net.

    Post-LN (the paper, default): `x = LayerNorm(x + Dropout(MHA(x)))`, then
    `x = LayerNorm(x + Dropout(FFN(x)))`. Pre-LN with `normalize_first=True`:
    `x = x + Dropout(MHA(LayerNorm(x)))`, `x = x + Dropout(FFN(LayerNorm(x)))`
    (more stable for deep stacks; add a final LayerNorm after the stack).
    The attention is `MultiHeadSelfAttention` with `key_dim = D // num_heads`.

    A drop-in for `keras_hub.layers.TransformerEncoder`: the same arguments
    by name (`num_heads` and `intermediate_dim` are keyword only: keras-hub
    takes them by position as `(intermediate_dim, num_heads)`, Keras'
    attention puts `num_heads` first, so a positional call raises a
    `TypeError`), the same defaults, call arguments, sublayer names and
    outputs. It differs in
    the fused Q/K/V projection (4 attention weights instead of 8) and in
    giving padded queries a zero attention output.

    Masks: `padding_mask` `(B, T)` (True = real token; filled from the
    Keras mask of `inputs`, on every backend and under `jit`) hides padded
    positions from every query; `attention_mask` (`(T, T)`, `(B, T, T)` or
    per head `(B, N, T, T)`) is any extra pattern. The Keras mask is passed
    on to the output.

    Args:
        num_heads: number of attention heads; must divide the input width.
        intermediate_dim: hidden width of the feed-forward net.
        dropout: rate of the residual dropouts (and of the attention
            weights unless `attention_dropout` is given).
        attention_dropout: rate of the dropout on the attention weights;
            `dropout` when `None` (keras-hub uses `dropout` for both).
        activation: activation of the feed-forward net.
        normalize_first: pre-LN (`True`) or post-LN (`False`).
        layer_norm_epsilon: epsilon of the layer normalizations.
        kernel_initializer: initializer of every kernel (each kernel draws
            its own values, also from a seeded initializer).
        bias_initializer: initializer of every bias.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` (exact,
            O(L)-memory attention) or `"fused"` (`keras.ops.dot_product_attention`:
            the GPU's fused kernel; no attention dropout), passed to the attention
            sublayer; see `MultiHeadAttention`.
        num_key_value_heads: key/value heads of the attention (grouped-
            query attention); see `MultiHeadAttention`.
        score_modifier: the self-attention's score modifier; see
            `MultiHeadAttention`.
        mask_modifier: the self-attention's mask modifier.
        rope_max_wavelength: rotary positions in the self-attention.
        rope_scaling_factor: linear position interpolation of the rotary
            positions.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`.
        padding_mask: `(B, T)` boolean.
        attention_mask: `(T, T)`, `(B, T, T)` or `(B, N, T, T)` boolean.
        training: bool, whether dropout is active.
        return_attention_scores: also return the `(B, N, T, T)` weights.

    Returns:
        `(B, T, D)`, and the attention weights when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> block = ka.layers.TransformerEncoderBlock(num_heads=4, intermediate_dim=32)
    >>> tuple(block(x).shape)
    (2, 5, 16)

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
        - Xiong et al., 2020 (pre-LN): https://arxiv.org/abs/2002.04745
    """

    _input_name = "inputs"
    _keras_hub_name = "TransformerEncoder"

    def build(self, inputs_shape):
        self._build_self_attention(inputs_shape)
        self._build_feedforward(inputs_shape)

    def _forward(
        self, inputs, padding_mask, attention_mask, training, return_attention_scores
    ):
        """The block on checked arguments: a `LayerResult` (`call` and the
        stacks call this)."""
        scores = None

        def self_attention(x):
            nonlocal scores
            masks = dict(
                query_mask=padding_mask,
                key_mask=padding_mask,
                attention_mask=attention_mask,
            )
            result = self._self_attention_layer._attention(
                x,
                x,
                None,
                masks,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            scores = result.scores
            return result.output

        x = self._residual("self_attention", inputs, self_attention, training)
        x = self._residual("feedforward", x, self._feedforward, training)
        return LayerResult(x, scores)
