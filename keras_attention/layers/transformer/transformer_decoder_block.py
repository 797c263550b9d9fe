import keras

from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.block_base import DecoderCaches
from keras_attention.layers.transformer.block_base import DecoderMasks
from keras_attention.layers.transformer.block_base import TransformerBlockBase
from keras_attention.validation import check_attention_mask
from keras_attention.validation import check_cache
from keras_attention.validation import check_cache_index
from keras_attention.validation import check_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoderBlock(TransformerBlockBase):
    """One Transformer decoder layer: causal self-attention, cross-attention, FFN.

    Post-LN (the paper, default), with `y` the encoder output:
    `x = LN(x + Drop(SelfMHA(x, causal)))`, `x = LN(x + Drop(MHA(x, y)))`,
    `x = LN(x + Drop(FFN(x)))`; `normalize_first=True` gives the pre-LN
    variant `x = x + Drop(Sublayer(LN(x)))`. When the first call has no
    `encoder_sequence`, the block is built without cross-attention
    (decoder-only, GPT style). `key_dim = D // num_heads`.

    A drop-in for `keras_hub.layers.TransformerDecoder`: the same arguments
    by name (`num_heads` and `intermediate_dim` are keyword only, as in
    `TransformerEncoderBlock`), defaults, call
    arguments (`self_attention_cache_update_index`, ...), sublayer names and
    outputs; it differs in the fused self-attention Q/K/V projection and in
    giving padded queries a zero attention output, and adds
    `return_attention_scores` and `attention_dropout`.

    Masks (boolean, True = real token / may attend): the self-attention is
    causal (`use_causal_mask=True`) and hides `decoder_padding_mask`
    `(B, T)`; the cross-attention hides the ENCODER's padded positions,
    `encoder_padding_mask` `(B, S)`. Both padding masks are filled from the
    Keras masks of `decoder_sequence` and `encoder_sequence`.
    `decoder_attention_mask` (`(B, T, T)`) and `encoder_attention_mask`
    (`(B, T, S)`, queries against encoder positions) add any pattern.

    Cached decoding, as keras-hub's: `self_attention_cache`
    `(B, 2, T_max, N, H)` with `self_attention_cache_update_index` (int or
    traced int tensor) feeds the new token(s) in `decoder_sequence`, so
    step `t` costs O(t). `cross_attention_cache` `(B, 2, S, N, H)` holds the
    projected encoder output: with `cross_attention_cache_update_index`
    (usually 0) it is computed from `encoder_sequence` and written there;
    without, it is read as is (`encoder_sequence` may then be `None`);
    `compute_cross_attention_cache(encoder_sequence)` makes one. Cached
    steps equal the full pass.

    Args:
        num_heads, intermediate_dim, dropout, attention_dropout: as
            `TransformerEncoderBlock` (both blocks take the same arguments).
        activation, normalize_first, layer_norm_epsilon: as
            `TransformerEncoderBlock`.
        kernel_initializer, bias_initializer, seed: as
            `TransformerEncoderBlock`; the cross-attention's kernels draw
            values of their own too.
        attention_impl: as `TransformerEncoderBlock`, for both attention
            sublayers.
        num_key_value_heads: as `TransformerEncoderBlock`; the
            cross-attention takes it too.
        score_modifier, mask_modifier: as `TransformerEncoderBlock`, for
            the self-attention only.
        rope_max_wavelength, rope_scaling_factor: as
            `TransformerEncoderBlock`, for the self-attention only.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or `None`.
        decoder_padding_mask: `(B, T)`.
        decoder_attention_mask: `(T, T)`, `(B, T, T)` or `(B, N, T, T)`.
        encoder_padding_mask: `(B, S)`.
        encoder_attention_mask: `(T, S)`, `(B, T, S)` or `(B, N, T, S)`.
        self_attention_cache: `(B, 2, T_max, G, H)` or `None` (`G` key/value
            heads).
        self_attention_cache_update_index: int position of the first new
            token.
        cross_attention_cache: `(B, 2, S, N, H)` or `None`.
        cross_attention_cache_update_index: `None` (read the cross cache)
            or an int (write the projected `encoder_sequence` there).
        use_causal_mask: bool, `True` by default.
        training: bool, whether dropout is active.
        return_attention_scores: also return a dict with the float32
            weights, `"self_attention"` `(B, N, T, T_max)` and, with an
            encoder, `"cross_attention"` `(B, N, T, S)`.

    Returns:
        `output` `(B, T, D)`, then the weights dict if asked, then the
        updated self-attention cache if one was passed, then the
        cross-attention cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> source = np.random.rand(2, 6, 16).astype("float32")
    >>> block = ka.layers.TransformerDecoderBlock(num_heads=4, intermediate_dim=32)
    >>> y, w = block(target, source, return_attention_scores=True)
    >>> tuple(y.shape), tuple(w["cross_attention"].shape)
    ((2, 4, 16), (2, 4, 4, 6))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
    """

    _input_name = "decoder_sequence"
    _keras_hub_name = "TransformerDecoder"

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self._build_self_attention(decoder_sequence_shape)
        self._cross_attention_layer = None
        if encoder_sequence_shape is not None:
            self._build_cross_attention(decoder_sequence_shape, encoder_sequence_shape)
        self._build_feedforward(decoder_sequence_shape)

    @property
    def cross_attention(self):
        """The cross-attention `MultiHeadAttention`, `None` without one."""
        return self._cross_attention_layer

    def compute_cross_attention_cache(self, encoder_sequence):
        """Project the encoder output once: `(B, 2, S, N, H)`."""
        self._require_cross_attention()
        return self._cross_attention_layer.compute_cache(encoder_sequence)

    def _require_cross_attention(self):
        if not self.built:
            raise ValueError(
                "Build the block (or call it once) before reading its "
                "cross-attention. Received: an unbuilt TransformerDecoderBlock"
            )
        if self._cross_attention_layer is None:
            raise ValueError(
                "This block was built without cross-attention (its first call "
                "had no `encoder_sequence`). Received: an encoder_sequence or "
                "cross_attention_cache"
            )

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
    ):
        masks = DecoderMasks.filled(
            decoder_sequence,
            encoder_sequence,
            decoder_padding_mask,
            encoder_padding_mask,
            decoder_attention_mask,
            encoder_attention_mask,
        )
        caches = DecoderCaches(
            self_attention_cache,
            self_attention_cache_update_index,
            cross_attention_cache,
            cross_attention_cache_update_index,
        )
        self._check_call_arguments(decoder_sequence, encoder_sequence, caches)
        self._check_decoder_masks(decoder_sequence, encoder_sequence, masks, caches)
        result = self._forward(
            decoder_sequence,
            encoder_sequence,
            masks,
            caches,
            use_causal_mask=use_causal_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        return result.keras_outputs(return_attention_scores)

    def _check_decoder_masks(self, decoder_sequence, encoder_sequence, masks, caches):
        """The masks, under the names the caller used: the self-attention's
        keys are the decoder positions (or the cache's), the
        cross-attention's the encoder positions (or the cross cache's)."""
        batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
        if masks.decoder_padding is not None:
            check_mask("decoder_padding_mask", masks.decoder_padding, (batch, length))
        for name, mask, keys in (
            ("decoder", masks.decoder_attention, caches.self_attention),
            ("encoder", masks.encoder_attention, caches.cross_attention),
        ):
            if keys is None:
                keys = decoder_sequence if name == "decoder" else encoder_sequence
            else:
                keys = keys[:, 0]  # (B, S_max, N, H)
            padding = masks.encoder_padding if name == "encoder" else None
            if padding is not None and keys is not None:
                check_mask("encoder_padding_mask", padding, (batch, keys.shape[1]))
            if mask is not None and keys is not None:
                check_attention_mask(
                    f"{name}_attention_mask",
                    mask,
                    batch,
                    self.num_heads,
                    length,
                    keys.shape[1],
                )

    def _check_call_arguments(self, decoder_sequence, encoder_sequence, caches):
        """Each argument checked once, under the name the caller used."""
        batch = decoder_sequence.shape[0]
        self._check_has_encoder(
            encoder_sequence is not None or caches.cross_attention is not None,
            owner="block",
        )
        for name in ("self_attention", "cross_attention"):
            cache = getattr(caches, name)
            index = getattr(caches, f"{name}_update_index")
            check_cache_index(cache, index, prefix=f"{name}_")
            if cache is not None:
                check_cache(f"{name}_cache", cache, batch, self.kv_heads, self.key_dim)
        index = caches.cross_attention_update_index
        if index is not None and encoder_sequence is None:
            raise ValueError(
                "Writing the cross-attention cache needs the `encoder_sequence`. "
                f"Received: encoder_sequence=None, cross_attention_cache_update_index="
                f"{index}"
            )

    def _check_has_encoder(
        self,
        has_encoder,
        owner,
        inputs="`encoder_sequence` or `cross_attention_cache`",
    ):
        """A call has an encoder exactly when the block was built with
        cross-attention; `owner` and `inputs` name what the caller called."""
        if has_encoder:
            self._require_cross_attention()
        elif self._cross_attention_layer is not None:
            raise ValueError(
                f"This {owner} has cross-attention: pass {inputs}. "
                "Received: encoder_sequence=None"
            )

    def _forward(
        self,
        decoder_sequence,
        encoder_sequence,
        masks,
        caches,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
    ):
        """The block on checked arguments (`masks` a `DecoderMasks`,
        `caches` a `DecoderCaches`; the stacks call this directly): a
        `LayerResult` whose `scores` is a dict and whose `caches` are the
        caches passed in, updated (and `cache_entries` what was written
        into them)."""
        scores, updated, entries = {}, [], []

        def attention(name, x, value, use_causal_mask=False, **own_masks):
            """The residual attention sublayer `name` (`"self_attention"`:
            `value` is `None`, the sublayer's own input; `"cross_attention"`),
            with its cache; `own_masks` are its masks besides the queries'."""

            def sublayer(y):
                result = getattr(self, f"_{name}_layer")._attention(
                    y,
                    y if value is None else value,
                    None,
                    dict(query_mask=masks.decoder_padding, **own_masks),
                    use_causal_mask=use_causal_mask,
                    cache=getattr(caches, name),
                    cache_update_index=getattr(caches, f"{name}_update_index"),
                    return_attention_scores=return_attention_scores,
                    training=training,
                )
                scores[name] = result.scores
                updated.extend(result.caches)
                entries.extend(result.cache_entries)
                return result.output

            return self._residual(name, x, sublayer, training)

        x = attention(
            "self_attention",
            decoder_sequence,
            None,
            # With a cache the keys are the cache's positions, not the queries'.
            key_mask=None
            if caches.self_attention is not None
            else masks.decoder_padding,
            attention_mask=masks.decoder_attention,
            use_causal_mask=use_causal_mask,
        )
        if self._cross_attention_layer is not None:
            x = attention(
                "cross_attention",
                x,
                encoder_sequence,
                value_mask=masks.encoder_padding,
                attention_mask=masks.encoder_attention,
            )
        x = self._residual("feedforward", x, self._feedforward, training)
        return LayerResult(
            x,
            scores if return_attention_scores else None,
            tuple(updated),
            tuple(entries),
        )
