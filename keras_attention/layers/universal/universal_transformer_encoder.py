import keras

from keras_attention.layers.transformer.sequence_layer import filled_padding_mask
from keras_attention.layers.transformer.transformer_encoder_block import (
    TransformerEncoderBlock,
)
from keras_attention.layers.universal.universal_base import UniversalTransformerBase


@keras.saving.register_keras_serializable(package="keras_attention")
class UniversalTransformerEncoder(UniversalTransformerBase):
    """The Universal Transformer encoder: one shared block, recurrent in depth.

    One `TransformerEncoderBlock` (weights shared across steps) is applied
    for up to `max_steps` steps; before every step the sinusoidal position
    encoding `P` and the timestep encoding `S^n` (the same sinusoid over the
    step index `n - 1`) are added (Dehghani et al., 2019, eq. 4-5):

        s^n = Block(s^{n-1} + P + S^n),    s^0 = inputs

    so do not add positions to `inputs` yourself. With `halting=True`
    (the paper's UT with ACT) every position halts on its own, with
    Graves' Adaptive Computation Time: `h^n = sigmoid(W_h s^n + b_h)`; a
    position halts at the first step `N` where `sum_{n<=N} h^n >=
    halting_threshold` (or at `max_steps`), its remainder is
    `R = 1 - sum_{n<N} h^n`, and its output is `sum_{n<N} h^n s^n + R s^N`.
    A halted position's output stops changing; its state is kept as it was
    (the other positions attend to that; `freeze_halted=True`, the paper's
    text) or, as in the paper's code (tensor2tensor), goes on being
    transformed by the block for the other positions to read
    (`freeze_halted=False`). The ponder cost
    `ponder_cost_weight * mean(N + R)` over the real positions is added
    with `add_loss`, so `model.fit` minimises it with the task loss. With
    `halting=False` the output is `s^max_steps` (a fixed-depth UT). The
    loop always runs `max_steps` steps (static shapes, so it compiles under
    XLA); positions that halted are left unchanged, which gives the same
    result as the paper's loop that stops once every position has halted.

    Masks: `padding_mask` `(B, T)` (True = real token, filled from the
    Keras mask of `inputs`) hides padded positions from every query at
    every step; padded positions take no step, get a zero output with
    halting, and do not count in the ponder cost. The Keras mask passes
    on to the output.

    Args:
        num_heads: number of attention heads; must divide the input width.
        intermediate_dim: hidden width of the block's feed-forward net.
        max_steps: the most steps a position may take (`T` in the paper).
        halting: Adaptive Computation Time (`True`) or exactly `max_steps`
            steps everywhere (`False`).
        halting_threshold: `1 - epsilon` of ACT, in (0, 1]; 0.99 in the
            paper.
        ponder_cost_weight: `tau`, the weight of the ponder cost added to
            the loss (0 adds none); 0.01 as in the paper's code.
        max_wavelength: of the position and timestep encodings.
        freeze_halted: with halting, whether a halted position's state
            stops changing (`True`: "its state is simply copied to the next
            step", section 2.2) or the block goes on transforming it for
            the others' attention (`False`: tensor2tensor's
            `adaptive_universal_transformer`); its output stops changing
            either way, and the steps and ponder cost are the same.
        **kwargs: the block's arguments (`dropout`, `attention_dropout`,
            `activation`, `normalize_first`, `layer_norm_epsilon`,
            `kernel_initializer`, `bias_initializer`, `seed`,
            `attention_impl`, ...; see `TransformerEncoderBlock`), and base
            layer arguments (`name`, `dtype`, ...). With
            `normalize_first=True` a final LayerNorm follows the recurrence.

    Call arguments:
        inputs, padding_mask, training: as `TransformerEncoder`.
        attention_mask: as `TransformerEncoder`, at every step.
        return_halting: also return a dict of float32 `(B, T)` tensors:
            `"steps"` (`N`, the steps each position took; `max_steps`
            everywhere without halting) and `"remainders"` (`R`; 0 without
            halting). Both are 0 at padded positions.

    Returns:
        `(B, T, D)`, and the halting dict when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> encoder = ka.layers.UniversalTransformerEncoder(
    ...     num_heads=4, intermediate_dim=32, max_steps=4
    ... )
    >>> y, halting = encoder(x, return_halting=True)
    >>> tuple(y.shape), tuple(halting["steps"].shape)
    ((2, 5, 16), (2, 5))
    >>> bool(np.all((halting["steps"] >= 1) & (halting["steps"] <= 4)))
    True

    References:
        - Dehghani et al., 2019, Universal Transformers:
          https://arxiv.org/abs/1807.03819
        - Graves, 2016, Adaptive Computation Time for Recurrent Neural
          Networks: https://arxiv.org/abs/1603.08983
    """

    block_class = TransformerEncoderBlock

    def build(self, inputs_shape):
        self.block.build(inputs_shape)
        self._build_own(inputs_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_halting=False,
    ):
        padding_mask = filled_padding_mask(
            inputs, padding_mask, attention_mask, self.num_heads
        )

        def block_step(x, n, training):
            return self.block._forward(
                x, padding_mask, attention_mask, training, False
            ).output

        result = self._recur(inputs, padding_mask, block_step, training)
        return result.keras_outputs(return_halting)
