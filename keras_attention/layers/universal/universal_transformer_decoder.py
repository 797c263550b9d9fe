import keras
from keras import ops

from keras_attention.layers.transformer.block_base import DecoderCaches
from keras_attention.layers.transformer.block_base import DecoderMasks
from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.layers.universal.universal_base import UniversalTransformerBase
from keras_attention.ops.cache import write_cache_entries
from keras_attention.validation import check_cache
from keras_attention.validation import check_cache_index


@keras.saving.register_keras_serializable(package="keras_attention")
class UniversalTransformerDecoder(UniversalTransformerBase):
    """The Universal Transformer decoder: one shared decoder block, recurrent.

    As `UniversalTransformerEncoder`, with one `TransformerDecoderBlock`
    (causal self-attention, cross-attention to `encoder_sequence`, FFN)
    shared across up to `max_steps` steps; position and timestep encodings
    are added before every step:

        s^n = Block(s^{n-1} + P + S^n, encoder_sequence),  s^0 = decoder_sequence

    With `halting=True` each position halts with Adaptive Computation Time
    (see `UniversalTransformerEncoder` for the formulas and the ponder cost
    added with `add_loss`). Halting is per position and a halted position
    keeps its state, so with the causal mask output `t` depends on no
    decoder position after `t`, whatever the later positions do. When the
    first call has no `encoder_sequence`, the block has no cross-attention
    (decoder-only). The encoder output is the same at every step (the
    paper's decoder attends to the final encoder representation).

    Cached decoding: `self_attention_cache` `(B, max_steps, 2, T_max, N,
    H)` holds the keys and values of every step (`[:, n]` is step `n`'s
    `(B, 2, T_max, N, H)` cache, as keras-hub's); with
    `self_attention_cache_update_index` the new positions are written at
    that index at every step, the position encoding starts there, and the
    layer returns the updated cache after the output. Every step reads
    every position, halted or not (a halted one as its kept state), so
    decoding one token at a time gives the full pass's outputs and halting.
    Cross-attention projects `encoder_sequence` again at each call.

    Masks: `decoder_padding_mask` `(B, T)` and `encoder_padding_mask`
    `(B, S)` (True = real token), filled from the Keras masks of the two
    sequences; padded decoder positions take no step with halting and do
    not count in the ponder cost.

    Args:
        num_heads: number of heads; must divide the width `D`.
        intermediate_dim: hidden width of the block's feed-forward net.
        max_steps: the most steps a position may take.
        halting: Adaptive Computation Time (`True`) or exactly `max_steps`
            steps (`False`).
        halting_threshold: `1 - epsilon` of ACT, in (0, 1].
        ponder_cost_weight: `tau`, the weight of the ponder cost (0: none).
        max_wavelength: of the position and timestep encodings.
        freeze_halted: whether a halted position's state stops changing
            (`True`) or goes on being transformed for the others' attention
            (`False`, tensor2tensor's code); see `UniversalTransformerEncoder`.
        **kwargs: the block's arguments (see `TransformerDecoderBlock`)
            and base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or `None`.
        decoder_padding_mask: `(B, T)`; filled from the Keras mask.
        encoder_padding_mask: `(B, S)`; filled from the Keras mask.
        use_causal_mask: bool, `True` by default.
        training: bool, whether dropout is active.
        self_attention_cache: `(B, max_steps, 2, T_max, N, H)` or `None`.
        self_attention_cache_update_index: int (or int tensor) position of
            the first new token in the cache; needs `self_attention_cache`.
        return_halting: also return the dict `{"steps", "remainders"}` of
            float32 `(B, T)` tensors (see `UniversalTransformerEncoder`).

    Returns:
        `(B, T, D)`; then the halting dict when asked; then the updated
        `self_attention_cache` when one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> source = np.random.rand(2, 6, 16).astype("float32")
    >>> decoder = ka.layers.UniversalTransformerDecoder(
    ...     num_heads=4, intermediate_dim=32, max_steps=3
    ... )
    >>> tuple(decoder(target, source).shape)
    (2, 4, 16)

    References:
        - Dehghani et al., 2019, Universal Transformers:
          https://arxiv.org/abs/1807.03819
        - Graves, 2016: https://arxiv.org/abs/1603.08983
    """

    block_class = TransformerDecoderBlock

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self.block.build(decoder_sequence_shape, encoder_sequence_shape)
        self._build_own(decoder_sequence_shape)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
        return_halting=False,
    ):
        self._check_cache(
            decoder_sequence, self_attention_cache, self_attention_cache_update_index
        )
        masks = DecoderMasks.filled(
            decoder_sequence,
            encoder_sequence,
            decoder_padding_mask,
            encoder_padding_mask,
        )
        self.block._check_has_encoder(
            encoder_sequence is not None, owner="decoder", inputs="`encoder_sequence`"
        )
        self.block._check_decoder_masks(
            decoder_sequence, encoder_sequence, masks, DecoderCaches()
        )
        new_entries = []

        def block_step(x, n, training):
            cache = None if self_attention_cache is None else self_attention_cache[:, n]
            caches = DecoderCaches(cache, self_attention_cache_update_index)
            result = self.block._forward(
                x, encoder_sequence, masks, caches, use_causal_mask, training
            )
            new_entries.extend(result.cache_entries)
            return result.output

        start = self_attention_cache_update_index
        result = self._recur(
            decoder_sequence,
            masks.decoder_padding,
            block_step,
            training,
            start_index=0 if start is None else start,
        )
        if self_attention_cache is not None:
            cache = self_attention_cache  # read as is without an index
            if start is not None:
                # Only the new entries, in place (as `TransformerDecoder`).
                entries = ops.stack(new_entries, axis=1)  # (B, steps, 2, T, N, H)
                cache = write_cache_entries(cache, entries, start, after=result.output)
            result = result._replace(caches=(cache,))
        return result.keras_outputs(return_halting)

    def _check_cache(self, decoder_sequence, cache, index):
        """The cache's rank and step axis here; the rest of its shape by the
        block's check on one step's slice."""
        check_cache_index(cache, index, prefix="self_attention_")
        if cache is None:
            return
        shape = tuple(cache.shape)
        if len(shape) != 6 or shape[1] not in (None, self.max_steps):
            raise ValueError(
                "`self_attention_cache` must have shape (batch, max_steps, 2, "
                f"max_length, num_heads, key_dim) with max_steps={self.max_steps}. "
                f"Received: self_attention_cache.shape={shape}"
            )
        check_cache(
            "self_attention_cache",
            cache[:, 0],
            decoder_sequence.shape[0],
            self.block.kv_heads,
            self.block.key_dim,
        )
