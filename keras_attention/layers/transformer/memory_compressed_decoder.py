import keras

from keras_attention.layers.transformer.memory_compressed_decoder_block import (
    MemoryCompressedDecoderBlock,
)
from keras_attention.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.modifiers import BlockLocal1D
from keras_attention.validation import check_int
from keras_attention.validation import check_positive_int

# The letters of `layer_pattern`.
LAYER_KINDS = {
    "L": "local: causal attention within blocks (`BlockLocal1D`)",
    "M": "memory-compressed causal attention (`MemoryCompressedDecoderBlock`)",
    "F": "full causal attention (`TransformerDecoderBlock`)",
}


@keras.saving.register_keras_serializable(package="keras_attention")
class MemoryCompressedDecoder(TransformerDecoder):
    """The T-DMCA decoder (Liu et al., 2018): local and memory-compressed
    attention layers, alternated, for sequences of thousands of tokens.

    One letter of `layer_pattern` per layer, bottom first:

    - `"L"`, local attention: a `TransformerDecoderBlock` whose causal
      self-attention is masked by `BlockLocal1D(local_block_size,
      local_memory_flange)`: the sequence is split into blocks of
      `local_block_size` positions, and a query sees the earlier positions
      of its own block and the `local_memory_flange` positions before it.
      The default flange, one whole block, is tensor2tensor's
      `local_mask_right`; `local_memory_flange=0` is the paper's
      within-block attention. On the chunked path (`attention_impl=
      "chunked"`, or `"auto"` on long sequences) a query block visits only
      its memory: `O(T b)` time and memory instead of `O(T^2)`.
    - `"M"`, memory-compressed attention (`MemoryCompressedDecoderBlock`):
      every query reads the first position and the complete slots of
      `compression_factor` keys, `O(T^2 / f)`: compression alone divides the
      quadratic cost by `f`, it does not remove it.
    - `"F"`, full causal attention (a plain `TransformerDecoderBlock`), for
      the T-D baseline (`"FFFFF"`) and mixed stacks.

    The paper's T-DMCA is `"LMLML"` with blocks of 256 and `f = 3`. The
    stack is a `TransformerDecoder` otherwise: the same call, masks,
    `normalize_first` final LayerNorm, optional encoder, and one cache
    `init_cache(batch_size, max_length)` `(B, L, 2, T_max, N, H)` for every
    kind of layer (memory-compressed layers cache their keys and values
    before compression); cached steps equal the full pass, also at the
    steps where a compressed slot completes. With `return_attention_scores`
    the weights are a dict of tuples, one entry per layer, since the
    layers' memories differ in length (`(B, N, T, T_max)` for "L" and "F",
    `(B, N, T, 1 + ceil(T_max / f))` for "M").

    Args:
        layer_pattern: a string of `"L"`, `"M"` and `"F"`, one per layer.
        compression_factor: `f` of the memory-compressed layers.
        local_block_size: the blocks of the local layers.
        local_memory_flange: how many positions before its block a local
            query sees; `local_block_size` when `None` (the previous
            block).
        **kwargs: the arguments of `TransformerDecoderBlock` for every
            layer (`num_heads`, `intermediate_dim`, `dropout`,
            `normalize_first`, `attention_impl`, ...), less
            `mask_modifier` (the pattern sets the masks); the
            memory-compressed layers refuse what `MemoryCompressedDecoderBlock`
            refuses.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> decoder = ka.layers.MemoryCompressedDecoder(
    ...     "LMLML", num_heads=4, intermediate_dim=32, compression_factor=3,
    ...     local_block_size=4)
    >>> x = np.random.rand(2, 12, 16).astype("float32")
    >>> tuple(decoder(x).shape)
    (2, 12, 16)
    >>> cache = decoder.init_cache(batch_size=2, max_length=12)
    >>> y, cache = decoder(x[:, :1], cache=cache, cache_update_index=0)
    >>> bool(np.allclose(y, decoder(x)[:, :1], atol=1e-5))
    True

    References:
        - Liu et al., 2018, Generating Wikipedia by Summarizing Long
          Sequences: https://arxiv.org/abs/1801.10198
    """

    block_class = TransformerDecoderBlock

    def __init__(
        self,
        layer_pattern="LMLML",
        *,
        num_heads,
        intermediate_dim,
        compression_factor=3,
        local_block_size=256,
        local_memory_flange=None,
        **kwargs,
    ):
        _check_pattern(layer_pattern)
        check_positive_int("compression_factor", compression_factor)
        check_positive_int("local_block_size", local_block_size)
        if local_memory_flange is None:
            local_memory_flange = local_block_size
        check_int("local_memory_flange", local_memory_flange, 0)
        if kwargs.get("mask_modifier") is not None:
            raise ValueError(
                "`mask_modifier` is set by `layer_pattern` in a "
                "MemoryCompressedDecoder (local layers: BlockLocal1D). "
                f"Received: mask_modifier={kwargs['mask_modifier']!r}"
            )
        kwargs.pop("num_layers", None)  # from a config: the pattern's length
        # Read by `_make_block`, which the base's `__init__` calls.
        self.layer_pattern = layer_pattern
        self.compression_factor = compression_factor
        self.local_block_size = local_block_size
        self.local_memory_flange = local_memory_flange
        super().__init__(
            len(layer_pattern),
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            **kwargs,
        )

    def _make_block(self, i):
        block = super()._make_block(i)  # the plain block, "F"
        kind = self.layer_pattern[i]
        if kind == "F":
            return block
        config = {**block.get_config(), "dtype": block.dtype_policy}
        if kind == "L":
            config["mask_modifier"] = BlockLocal1D(
                self.local_block_size, self.local_memory_flange, causal=True
            )
            return TransformerDecoderBlock(**config)
        return MemoryCompressedDecoderBlock(
            **config, compression_factor=self.compression_factor
        )

    def _stack_scores(self, weights):
        """One entry per layer: the memories differ in length."""
        return {key: tuple(w) for key, w in weights.items()}

    def get_config(self):
        config = super().get_config()
        config.pop("num_layers")
        config.pop("mask_modifier", None)
        return {
            **config,
            "layer_pattern": self.layer_pattern,
            "compression_factor": self.compression_factor,
            "local_block_size": self.local_block_size,
            "local_memory_flange": self.local_memory_flange,
        }


def _check_pattern(layer_pattern):
    if (
        not isinstance(layer_pattern, str)
        or not layer_pattern
        or set(layer_pattern) - set(LAYER_KINDS)
    ):
        kinds = ", ".join(f'"{k}" ({v})' for k, v in LAYER_KINDS.items())
        raise ValueError(
            "`layer_pattern` must be a non-empty string of the letters "
            f'{kinds}, one per layer, e.g. "LMLML". Received: '
            f"layer_pattern={layer_pattern!r}"
        )
