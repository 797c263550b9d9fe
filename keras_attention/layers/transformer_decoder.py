import keras
from keras import ops

from keras_attention.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_attention.layers.transformer_layer_utils import block_config
from keras_attention.layers.transformer_layer_utils import check_attention_impl
from keras_attention.layers.transformer_layer_utils import check_block_arguments
from keras_attention.layers.transformer_layer_utils import head_size
from keras_attention.layers.transformer_layer_utils import offset_seed
from keras_attention.layers.validation import check_positive_int
from keras_attention.layers.validation import get_activation


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoder(keras.layers.Layer):
    """A stack of `num_layers` `TransformerDecoderBlock`s with one KV cache.

    As `torch.nn.TransformerDecoder`: every block has the same arguments;
    with `normalize_first=True` a final LayerNorm follows the stack. Without
    `encoder_sequence` on the first call the blocks are decoder-only.

    Cached decoding: `cache = decoder.init_cache(batch_size, max_length)`
    is one fixed-size tensor `(B, num_layers, 2, max_length, N, H)`; call
    with `cache=cache, cache_index=t` and the new token(s), get the updated
    cache back. `cross_attention_cache =
    decoder.compute_cross_attention_cache(encoder_output)`
    `(B, num_layers, 2, S, N, H)` projects the encoder output once. The
    cache never changes shape, so a generation loop compiles once.

    Args:
        num_layers: number of blocks.
        num_heads, intermediate_dim, dropout, attention_dropout: as
            `TransformerDecoderBlock`.
        activation, normalize_first, layer_norm_epsilon: as
            `TransformerDecoderBlock`.
        kernel_initializer, bias_initializer, seed, attention_impl: as
            `TransformerDecoderBlock`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or `None`.
        decoder_padding_mask: `(B, T)`; filled from the Keras mask.
        encoder_padding_mask: `(B, S)`; filled from the Keras mask.
        cache: `None` or `(B, num_layers, 2, T_max, N, H)`.
        cache_index: int (or traced int) position of the first new token.
        cross_attention_cache: `None` or `(B, num_layers, 2, S, N, H)`.
        use_causal_mask: bool, `True` by default.
        return_attention_scores: also return a dict of float32 weights of
            every block: `"self_attention"` `(B, num_layers, N, T, T_max)`
            and, with an encoder, `"cross_attention"`
            `(B, num_layers, N, T, S)`.
        training: bool, whether dropout is active.

    Returns:
        `output` `(B, T, D)`, then the weights dict if asked, then the
        updated cache if one was passed.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> target = np.random.rand(2, 4, 16).astype("float32")
    >>> source = np.random.rand(2, 6, 16).astype("float32")
    >>> decoder = ka.layers.TransformerDecoder(2, num_heads=4, intermediate_dim=32)
    >>> decoder(target, source).shape
    TensorShape([2, 4, 16])

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
                TransformerDecoderBlock(
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

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self.key_dim = head_size(
            "decoder_sequence", decoder_sequence_shape, self.num_heads
        )
        for block in self.blocks:
            block.build(decoder_sequence_shape, encoder_sequence_shape)
        if self.final_norm is not None:
            self.final_norm.build(decoder_sequence_shape)

    def init_cache(self, batch_size, max_length):
        """An empty self-attention cache `(B, L, 2, max_length, N, H)`."""
        shape = (batch_size, self.num_layers, 2, max_length, self.num_heads)
        return ops.zeros(shape + (self.key_dim,), dtype=self.compute_dtype)

    def compute_cross_attention_cache(self, encoder_sequence):
        """The encoder output projected by every block: `(B, L, 2, S, N, H)`."""
        return ops.stack(
            [b.compute_cross_attention_cache(encoder_sequence) for b in self.blocks],
            axis=1,
        )

    def _check_cache(self, name, cache, batch):
        shape = tuple(cache.shape)
        expected = (batch, self.num_layers, 2, None, self.num_heads, self.key_dim)
        ok = len(shape) == 6 and all(
            want is None or got is None or got == want
            for got, want in zip(shape, expected, strict=True)
        )
        if not ok:
            raise ValueError(
                f"`{name}` must have shape (batch, num_layers, 2, length, "
                f"num_heads, key_dim) = {expected}. Received: {name}.shape={shape}"
            )

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        cache=None,
        cache_index=None,
        cross_attention_cache=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
    ):
        if decoder_padding_mask is None:
            decoder_padding_mask = getattr(decoder_sequence, "_keras_mask", None)
        if encoder_padding_mask is None and encoder_sequence is not None:
            encoder_padding_mask = getattr(encoder_sequence, "_keras_mask", None)
        if cache is not None:
            self._check_cache("cache", cache, decoder_sequence.shape[0])
        elif cache_index is not None:
            raise ValueError(
                "`cache_index` needs a `cache`. Received: cache=None, "
                f"cache_index={cache_index}"
            )
        if cross_attention_cache is not None:
            self._check_cache(
                "cross_attention_cache",
                cross_attention_cache,
                decoder_sequence.shape[0],
            )
        x = decoder_sequence  # (B, T, D)
        weights, caches = {}, []
        for i, block in enumerate(self.blocks):
            outputs = block(
                x,
                encoder_sequence,
                decoder_padding_mask=decoder_padding_mask,
                encoder_padding_mask=encoder_padding_mask,
                self_attention_cache=None if cache is None else cache[:, i],
                self_attention_cache_index=cache_index,
                cross_attention_cache=(
                    None
                    if cross_attention_cache is None
                    else cross_attention_cache[:, i]
                ),
                use_causal_mask=use_causal_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if not isinstance(outputs, tuple | list):
                outputs = (outputs,)
            outputs = list(outputs)
            x = outputs.pop(0)
            if return_attention_scores:
                for key, w in outputs.pop(0).items():
                    weights.setdefault(key, []).append(w)
            if cache is not None:
                caches.append(outputs.pop(0))
        if self.final_norm is not None:
            x = self.final_norm(x)
        outputs = (x,)
        if return_attention_scores:
            outputs += ({k: ops.stack(w, axis=1) for k, w in weights.items()},)
        if cache is not None:
            outputs += (self._updated_cache(cache, caches, cache_index),)
        return outputs[0] if len(outputs) == 1 else outputs

    def _updated_cache(self, cache, layer_caches, cache_index):
        """The stack's updated cache: the layers' caches stacked again.

        With one new token, each layer's cache is the old one with the new
        key and value selected in (`MultiHeadAttention`), so under XLA the
        stack is one elementwise pass over the cache that also fuses those
        selects; no per-layer cache is materialised.
        """
        if cache_index is None:
            return cache  # read as is: nothing was written
        return ops.stack(layer_caches, axis=1)

    def compute_mask(self, decoder_sequence, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            **block_config(self),
            "num_layers": self.num_layers,
        }
