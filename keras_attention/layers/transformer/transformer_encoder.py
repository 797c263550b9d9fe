import keras
from keras import ops

from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.block_base import EncoderCallMixin
from keras_attention.layers.transformer.stack_base import TransformerStackBase
from keras_attention.layers.transformer.transformer_encoder_block import (
    TransformerEncoderBlock,
)


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoder(EncoderCallMixin, TransformerStackBase):
    """A stack of `num_layers` `TransformerEncoderBlock`s.

    As `torch.nn.TransformerEncoder`: every block has the same arguments
    (its own initial weights and dropout seeds); with `normalize_first=True`
    (pre-LN) a final LayerNorm follows the stack, since pre-LN blocks leave
    their output unnormalized. Position information must already be in
    `inputs` (see `SinusoidalPositionEncoding`).

    Args:
        num_layers: number of blocks (the one argument that may come by
            position).
        num_heads, intermediate_dim: keyword only, as in
            `TransformerEncoderBlock`.
        dropout, attention_dropout: as `TransformerEncoderBlock`.
        activation, normalize_first, layer_norm_epsilon: as
            `TransformerEncoderBlock`.
        kernel_initializer, bias_initializer, seed, attention_impl: as
            `TransformerEncoderBlock`.
        num_key_value_heads, score_modifier, mask_modifier: as
            `TransformerEncoderBlock`; each block gets its own copy of a modifier.
        rope_max_wavelength, rope_scaling_factor: as `TransformerEncoderBlock`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`.
        padding_mask: `(B, T)` boolean, True = real token; filled from the
            Keras mask of `inputs`.
        attention_mask: `(T, T)`, `(B, T, T)` or `(B, N, T, T)`, for every
            block.
        training: bool, whether dropout is active.
        return_attention_scores: also return the weights of every block,
            float32 `(B, num_layers, N, T, T)`.

    Returns:
        as `TransformerEncoderBlock`: the output, then the weights if asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> encoder = ka.layers.TransformerEncoder(2, num_heads=4, intermediate_dim=32)
    >>> y, w = encoder(x, return_attention_scores=True)
    >>> tuple(y.shape), tuple(w.shape)
    ((2, 5, 16), (2, 2, 4, 5, 5))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    block_class = TransformerEncoderBlock

    def build(self, inputs_shape):
        for block in self.blocks:
            block.build(inputs_shape)
        if self.final_norm is not None:
            self.final_norm.build(inputs_shape)

    def _forward(
        self, inputs, padding_mask, attention_mask, training, return_attention_scores
    ):
        """The blocks in turn on checked arguments, as `call` runs them: a
        `LayerResult` with the weights of every block."""
        x = inputs  # (B, T, D)
        weights = []
        for block in self.blocks:
            result = block._forward(
                x, padding_mask, attention_mask, training, return_attention_scores
            )
            x = result.output
            weights.append(result.scores)  # (B, N, T, T) or None
        if self.final_norm is not None:
            x = self.final_norm(x)
        if return_attention_scores:
            weights = ops.stack(weights, axis=1)  # (B, L, N, T, T)
        return LayerResult(x, weights)
