import keras

from keras_attention.layers.transformer.block_base import _SELF_ATTENTION
from keras_attention.layers.transformer.memory_compressed_attention import (
    MemoryCompressedAttention,
)
from keras_attention.layers.transformer.sequence_layer import head_size
from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.validation import check_positive_int

# What `MemoryCompressedAttention` has no place for: its keys and values are
# convolved over all heads at once (no grouped heads, no rotation before the
# compression), and its mask is the compressed memory's own.
_REFUSED = (
    "num_key_value_heads",
    "score_modifier",
    "mask_modifier",
    "rope_max_wavelength",
)


@keras.saving.register_keras_serializable(package="keras_attention")
class MemoryCompressedDecoderBlock(TransformerDecoderBlock):
    """A Transformer decoder block whose self-attention is memory-compressed.

    The "M" layer of Liu et al.'s T-DMCA decoder (2018): a
    `TransformerDecoderBlock` (residuals, LayerNorms, feed-forward,
    optional cross-attention: the same arguments, call and caches) whose
    causal self-attention is `MemoryCompressedAttention`: every query reads
    the first position's key and value and the complete slots of
    `compression_factor` keys each, compressed by learned strided
    convolutions, `T (1 + ceil(T / f))` scores instead of `T^2`.
    `MemoryCompressedDecoder` alternates it with block-local layers.

    Its self-attention cache has the layout of the other blocks', `(B, 2,
    T_max, N, H)`: the keys and values before compression (see
    `MemoryCompressedAttention`'s `cache`), so a stack keeps one cache for
    blocks of either kind. Cached steps equal the full pass.

    Args:
        compression_factor: `f`, the compressing convolutions' kernel size
            and stride (3 in the paper).
        **kwargs: as `TransformerDecoderBlock` (`num_heads`,
            `intermediate_dim`, ...), less `num_key_value_heads`,
            `score_modifier`, `mask_modifier` and `rope_max_wavelength`
            (a `ValueError` names them): the keys and values are convolved
            over all heads at once and the mask is the compressed memory's
            own. `attention_impl` chooses the path of the attention over
            the memory.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 12, 16).astype("float32")
    >>> block = ka.layers.MemoryCompressedDecoderBlock(
    ...     num_heads=4, intermediate_dim=32, compression_factor=3)
    >>> y, w = block(x, return_attention_scores=True)
    >>> tuple(y.shape), tuple(w["self_attention"].shape)  # 1 + 12 / 3 memory
    ((2, 12, 16), (2, 4, 12, 5))

    References:
        - Liu et al., 2018, Generating Wikipedia by Summarizing Long
          Sequences: https://arxiv.org/abs/1801.10198
    """

    def __init__(self, *, compression_factor=3, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("compression_factor", compression_factor)
        for name in _REFUSED:
            if getattr(self, name) is not None:
                raise ValueError(
                    f"`{name}` is not supported by memory-compressed "
                    "self-attention (its keys and values are convolved over "
                    "all heads, and it masks the compressed memory). "
                    f"Received: {name}={kwargs.get(name)!r}"
                )
        self.compression_factor = compression_factor

    def _build_self_attention(self, shape):
        self.key_dim = head_size(self._input_name, shape, self.num_heads)
        self._self_attention_layer = MemoryCompressedAttention(
            self.num_heads,
            self.key_dim,
            compression_factor=self.compression_factor,
            name="self_attention",
            **self._attention_kwargs(_SELF_ATTENTION),
        )
        self._self_attention_layer.build(shape, shape)
        self._build_residual("self_attention", shape, _SELF_ATTENTION)

    @classmethod
    def from_keras_hub(cls, layer, **kwargs):
        raise ValueError(
            "keras-hub has no memory-compressed attention to convert from. "
            f"Received: {layer.__class__.__name__}"
        )

    def to_keras_hub(self):
        raise ValueError(
            "keras-hub has no memory-compressed attention to convert to. "
            f"Received: a {self.__class__.__name__}"
        )

    def get_config(self):
        return {**super().get_config(), "compression_factor": self.compression_factor}
