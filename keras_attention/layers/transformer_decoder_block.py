import keras

from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.multi_head_attention import check_cache
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
class TransformerDecoderBlock(keras.layers.Layer):
    """One Transformer decoder layer: causal self-attention, cross-attention, FFN.

    Post-LN (the paper, default), with `y` the encoder output:
    `x = LN(x + Drop(SelfMHA(x, causal)))`, `x = LN(x + Drop(MHA(x, y)))`,
    `x = LN(x + Drop(FFN(x)))`; `normalize_first=True` gives the pre-LN
    variant `x = x + Drop(Sublayer(LN(x)))`. When the first call has no
    `encoder_sequence`, the block is built without cross-attention
    (decoder-only, GPT style). `key_dim = D // num_heads`.

    Masks (boolean, True = real token / may attend): the self-attention is
    causal (`use_causal_mask=True`) and hides `decoder_padding_mask`
    `(B, T)`; the cross-attention hides the ENCODER's padded positions,
    `encoder_padding_mask` `(B, S)`. Both padding masks are filled from the
    Keras masks of `decoder_sequence` and `encoder_sequence`.

    Cached decoding: `self_attention_cache` `(B, 2, T_max, N, H)` with
    `self_attention_cache_index` (int or traced int tensor) feeds the new
    token(s) in `decoder_sequence` and returns the updated cache, so step
    `t` costs O(t). `cross_attention_cache` `(B, 2, S, N, H)` from
    `compute_cross_attention_cache(encoder_sequence)` replaces
    `encoder_sequence` at every step. Cached steps equal the full pass.

    Args:
        num_heads: number of heads; must divide the width `D`.
        intermediate_dim: hidden width of the feed-forward net.
        dropout: rate of the residual dropouts.
        attention_dropout: rate of the dropout on attention weights;
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
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or `None`.
        decoder_padding_mask: `(B, T)`.
        encoder_padding_mask: `(B, S)`.
        self_attention_cache: `(B, 2, T_max, N, H)` or `None`.
        self_attention_cache_index: int position of the first new token.
        cross_attention_cache: `(B, 2, S, N, H)` or `None`.
        use_causal_mask: bool, `True` by default.
        return_attention_scores: also return a dict with the float32
            weights, `"self_attention"` `(B, N, T, T_max)` and, with an
            encoder, `"cross_attention"` `(B, N, T, S)`.
        training: bool, whether dropout is active.

    Returns:
        `output` `(B, T, D)`, then the weights dict if asked, then the
        updated self-attention cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> source = np.random.rand(2, 6, 16).astype("float32")
    >>> block = ka.layers.TransformerDecoderBlock(num_heads=4, intermediate_dim=32)
    >>> y, w = block(target, source, return_attention_scores=True)
    >>> y.shape, w["cross_attention"].shape
    (TensorShape([2, 4, 16]), TensorShape([2, 4, 4, 6]))

    References:
        - Vaswani et al., 2017: https://arxiv.org/abs/1706.03762
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

    def _sublayer_kwargs(self, offset):
        return dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            seed=offset_seed(self.seed, offset),
        )

    def _norm_and_dropout(self, name, offset, shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=f"{name}_norm",
        )
        norm.build(shape)
        drop = keras.layers.Dropout(
            self.dropout, seed=offset_seed(self.seed, offset), dtype=self.dtype_policy
        )
        return norm, drop

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        key_dim = head_size("decoder_sequence", decoder_sequence_shape, self.num_heads)
        rate = (
            self.dropout if self.attention_dropout is None else self.attention_dropout
        )
        self.key_dim = key_dim
        self.self_attention = MultiHeadSelfAttention(
            self.num_heads,
            key_dim,
            attention_dropout=rate,
            attention_impl=self.attention_impl,
            name="self_attention",
            **self._sublayer_kwargs(1),
        )
        self.self_attention.build(decoder_sequence_shape)
        self.self_attention_norm, self.self_attention_dropout = self._norm_and_dropout(
            "self_attention", 2, decoder_sequence_shape
        )
        self.cross_attention = None
        if encoder_sequence_shape is not None:
            self.cross_attention = MultiHeadAttention(
                self.num_heads,
                key_dim,
                attention_dropout=rate,
                attention_impl=self.attention_impl,
                name="cross_attention",
                **self._sublayer_kwargs(3),
            )
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm, self.cross_attention_dropout = (
                self._norm_and_dropout("cross_attention", 4, decoder_sequence_shape)
            )
        kwargs = self._sublayer_kwargs(5)
        del kwargs["seed"]
        self.feedforward = FeedForward(
            self.intermediate_dim, self.activation, name="feedforward", **kwargs
        )
        self.feedforward.build(decoder_sequence_shape)
        self.feedforward_norm, self.feedforward_dropout = self._norm_and_dropout(
            "feedforward", 6, decoder_sequence_shape
        )

    def compute_cross_attention_cache(self, encoder_sequence):
        """Project the encoder output once: `(B, 2, S, N, H)`."""
        self._require_cross_attention()
        return self.cross_attention.compute_cache(encoder_sequence)

    def _require_cross_attention(self):
        if not self.built:
            raise ValueError(
                "Build the block (or call it once) before reading its "
                "cross-attention. Received: an unbuilt TransformerDecoderBlock"
            )
        if self.cross_attention is None:
            raise ValueError(
                "This block was built without cross-attention (its first call "
                "had no `encoder_sequence`). Received: an encoder_sequence or "
                "cross_attention_cache"
            )

    def _check_call_arguments(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask,
        encoder_padding_mask,
        self_attention_cache,
        cross_attention_cache,
    ):
        """Name the argument at fault (the sublayers only know their own)."""
        batch = decoder_sequence.shape[0]
        if decoder_padding_mask is not None:
            check_mask(
                "decoder_padding_mask",
                decoder_padding_mask,
                tuple(decoder_sequence.shape[:2]),
            )
        if encoder_padding_mask is not None and encoder_sequence is not None:
            check_mask(
                "encoder_padding_mask",
                encoder_padding_mask,
                tuple(encoder_sequence.shape[:2]),
            )
        for name, cache in (
            ("self_attention_cache", self_attention_cache),
            ("cross_attention_cache", cross_attention_cache),
        ):
            if cache is not None:
                check_cache(cache, batch, self.num_heads, self.key_dim, name=name)

    def _residual(self, x, norm, dropout, sublayer, training):
        """`LN(x + Drop(f(x)))` (post-LN) or `x + Drop(f(LN(x)))` (pre-LN)."""
        y = sublayer(norm(x) if self.normalize_first else x)
        x = x + dropout(y, training=training)
        return x if self.normalize_first else norm(x)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_index=None,
        cross_attention_cache=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
    ):
        if decoder_padding_mask is None:
            decoder_padding_mask = getattr(decoder_sequence, "_keras_mask", None)
        if encoder_padding_mask is None and encoder_sequence is not None:
            encoder_padding_mask = getattr(encoder_sequence, "_keras_mask", None)
        self._check_call_arguments(
            decoder_sequence,
            encoder_sequence,
            decoder_padding_mask,
            encoder_padding_mask,
            self_attention_cache,
            cross_attention_cache,
        )
        has_encoder = encoder_sequence is not None or cross_attention_cache is not None
        if has_encoder:
            self._require_cross_attention()
        elif self.cross_attention is not None:
            raise ValueError(
                "This block has cross-attention: pass `encoder_sequence` or "
                "`cross_attention_cache`. Received: encoder_sequence=None"
            )
        weights = {}
        new_cache = []

        def self_attention(x):
            outputs = self.self_attention(
                x,
                query_mask=decoder_padding_mask,
                use_causal_mask=use_causal_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                cache=self_attention_cache,
                cache_index=self_attention_cache_index,
            )
            if not isinstance(outputs, tuple | list):
                return outputs
            outputs = list(outputs)
            if return_attention_scores:
                weights["self_attention"] = outputs.pop(1)
            if self_attention_cache is not None:
                new_cache.append(outputs[1])
            return outputs[0]

        def cross_attention(x):
            outputs = self.cross_attention(
                x,
                encoder_sequence,
                query_mask=decoder_padding_mask,
                value_mask=encoder_padding_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                cache=cross_attention_cache,
            )
            if not isinstance(outputs, tuple | list):
                return outputs
            if return_attention_scores:
                weights["cross_attention"] = outputs[1]
            return outputs[0]

        def feedforward(x):
            return self.feedforward(x)

        x = decoder_sequence  # (B, T, D)
        x = self._residual(
            x,
            self.self_attention_norm,
            self.self_attention_dropout,
            self_attention,
            training,
        )
        if has_encoder:
            x = self._residual(
                x,
                self.cross_attention_norm,
                self.cross_attention_dropout,
                cross_attention,
                training,
            )
        x = self._residual(
            x, self.feedforward_norm, self.feedforward_dropout, feedforward, training
        )
        outputs = (x,)
        if return_attention_scores:
            outputs += (weights,)
        if self_attention_cache is not None:
            outputs += (new_cache[0],)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_mask(self, decoder_sequence, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {**super().get_config(), **block_config(self)}
