import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.block_base import DecoderCaches
from keras_attention.layers.transformer.block_base import DecoderMasks
from keras_attention.layers.transformer.sequence_layer import head_size
from keras_attention.layers.transformer.stack_base import TransformerStackBase
from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.validation import check_cache_index
from keras_attention.validation import check_shape


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoder(TransformerStackBase):
    """A stack of `num_layers` `TransformerDecoderBlock`s with one KV cache.

    As `torch.nn.TransformerDecoder`: every block has the same arguments
    (its own initial weights and dropout seeds); with `normalize_first=True`
    a final LayerNorm follows the stack. Without `encoder_sequence` on the
    first call the blocks are decoder-only.

    Cached decoding: `cache = decoder.init_cache(batch_size, max_length)`
    is one fixed-size tensor `(B, num_layers, 2, max_length, N, H)`; call
    with `cache=cache, cache_update_index=t` and the new token(s), get the
    updated cache back. `cross_attention_cache =
    decoder.compute_cross_attention_cache(encoder_output)`
    `(B, num_layers, 2, S, N, H)` projects the encoder output once and is
    read as is at every step. The cache never changes shape, so a
    generation loop compiles once.

    Args:
        num_layers, **kwargs: as `TransformerEncoder`, with the arguments
            of `TransformerDecoderBlock` (`num_heads`, `intermediate_dim`,
            ...) for every block.

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or `None`.
        decoder_padding_mask: `(B, T)`; filled from the Keras mask.
        encoder_padding_mask: `(B, S)`; filled from the Keras mask.
        cache: `None` or `(B, num_layers, 2, T_max, N, H)`.
        cache_update_index: int (or traced int) position of the first new
            token.
        cross_attention_cache: `None` or `(B, num_layers, 2, S, N, H)`.
        use_causal_mask: bool, `True` by default.
        training: bool, whether dropout is active.
        return_attention_scores: also return a dict of float32 weights of
            every block: `"self_attention"` `(B, num_layers, N, T, T_max)`
            and, with an encoder, `"cross_attention"`
            `(B, num_layers, N, T, S)`.

    Returns:
        `output` `(B, T, D)`, then the weights dict if asked, then the
        updated cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> source = np.random.rand(2, 6, 16).astype("float32")
    >>> decoder = ka.layers.TransformerDecoder(2, num_heads=4, intermediate_dim=32)
    >>> tuple(decoder(target, source).shape)
    (2, 4, 16)

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    block_class = TransformerDecoderBlock

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self.key_dim = head_size(
            "decoder_sequence", decoder_sequence_shape, self.num_heads
        )
        for block in self.blocks:
            block.build(decoder_sequence_shape, encoder_sequence_shape)
        if self.final_norm is not None:
            self.final_norm.build(decoder_sequence_shape)

    def init_cache(self, batch_size, max_length):
        """An empty self-attention cache `(B, L, 2, max_length, G, H)`, `G`
        the key/value heads (`num_key_value_heads`, or `num_heads`)."""
        shape = (batch_size, self.num_layers, 2, max_length, self.kv_heads)
        return ops.zeros(shape + (self.key_dim,), dtype=self.compute_dtype)

    def compute_cross_attention_cache(self, encoder_sequence):
        """The encoder output projected by every block: `(B, L, 2, S, N, H)`."""
        return ops.stack(
            [b.compute_cross_attention_cache(encoder_sequence) for b in self.blocks],
            axis=1,
        )

    def _check_cache(self, name, cache, batch):
        expected = (batch, self.num_layers, 2, None, self.kv_heads, self.key_dim)
        layout = "(batch, num_layers, 2, length, num_key_value_heads, key_dim)"
        check_shape(name, cache, expected, layout)

    def _check_call_arguments(
        self,
        decoder_sequence,
        encoder_sequence,
        masks,
        cache,
        cache_update_index,
        cross,
    ):
        """The stack's caches here; the rest as its first block checks it
        (every block sees the same masks and encoder)."""
        batch = decoder_sequence.shape[0]
        check_cache_index(cache, cache_update_index)
        if cache is not None:
            self._check_cache("cache", cache, batch)
        if cross is not None:
            self._check_cache("cross_attention_cache", cross, batch)
        has_encoder = encoder_sequence is not None or cross is not None
        for block in self.blocks:
            block._check_has_encoder(has_encoder, owner="decoder")
        caches = DecoderCaches(
            None if cache is None else cache[:, 0],
            cross_attention=None if cross is None else cross[:, 0],
        )
        self.blocks[0]._check_decoder_masks(
            decoder_sequence, encoder_sequence, masks, caches
        )

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        cache=None,
        cache_update_index=None,
        cross_attention_cache=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
    ):
        masks = DecoderMasks.filled(
            decoder_sequence,
            encoder_sequence,
            decoder_padding_mask,
            encoder_padding_mask,
        )
        self._check_call_arguments(
            decoder_sequence,
            encoder_sequence,
            masks,
            cache,
            cache_update_index,
            cross_attention_cache,
        )
        x = decoder_sequence  # (B, T, D)
        weights, entries = {}, []
        for i, block in enumerate(self.blocks):
            caches = DecoderCaches(
                None if cache is None else cache[:, i],
                cache_update_index,
                None if cross_attention_cache is None else cross_attention_cache[:, i],
            )
            result = block._forward(
                x,
                encoder_sequence,
                masks,
                caches,
                use_causal_mask,
                training,
                return_attention_scores,
            )
            x = result.output
            for key, w in (result.scores or {}).items():
                weights.setdefault(key, []).append(w)
            if cache is not None:
                entries.append(result.cache_entries[0])  # the self-attention's
        if self.final_norm is not None:
            x = self.final_norm(x)
        weights = self._stack_scores(weights)
        new_caches = ()
        if cache is not None:
            new_caches = (self._updated_cache(cache, entries, cache_update_index, x),)
        return LayerResult(x, weights, new_caches).keras_outputs(
            return_attention_scores
        )

    def _stack_scores(self, weights):
        """`{name: [per block (B, N, T, S)]}` -> `{name: (B, L, N, T, S)}`."""
        return {key: ops.stack(w, axis=1) for key, w in weights.items()}

    def _updated_cache(self, cache, layer_entries, cache_update_index, output):
        """The stack's cache with each layer's new keys and values written in.

        `layer_entries` are what each layer wrote into its own cache
        (`(B, 2, T, N, H)`, `LayerResult.cache_entries`). They are written
        into `cache` at `cache_update_index` with one update that XLA does
        in place, ordered after the stack's `output`
        (`keras_attention.ops.write_cache_entries` says why). Stacking the
        layers' updated caches instead rewrote the whole cache at every
        decoding step. Slicing the new entries back out of the layers'
        updated caches made XLA copy each layer's cache out of the stack at
        every step (the in-place update may not read the buffer it writes
        at other positions), which took 20% of a batch-16 decoding step
        (benchmarks/RESULTS.md, section 4).
        """
        if cache_update_index is None:
            return cache  # read as is: nothing was written
        index = ops.cast(cache_update_index, "int32")
        entries = ops.stack(layer_entries, axis=1)  # (B, L, 2, T, N, H)
        return ka_ops.write_cache_entries(cache, entries, index, after=output)
