import keras
from keras import ops

from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.modifiers import BlockLocal1D
from keras_attention.modifiers import BlockLocal2D
from keras_attention.validation import check_rank

_BASE_LAYER_ARGS = ("name", "dtype", "trainable", "autocast")


@keras.saving.register_keras_serializable(package="keras_attention")
class ImageTransformerBlock(keras.layers.Layer):
    """One Image Transformer layer over a feature map (Parmar et al., 2018).

    The pixels of `(B, H, W, D)` are read in raster order, `p = r W + c`,
    and go through one decoder-only `TransformerDecoderBlock` (self-attention
    and feed-forward net, no cross-attention) whose self-attention is local:

    - `query_block=(b_h, b_w)`: local 2D attention,
      `BlockLocal2D(W, query_block, memory_flange)`: a query block of
      `b_h x b_w` pixels sees itself widened by `memory_flange = (f_h, f_w)`
      rows above and columns either side;
    - `query_block=l_q` (an int): local 1D attention,
      `BlockLocal1D(l_q, memory_flange)`: blocks of `l_q` positions, each
      seeing the `memory_flange` positions before it;
    - `query_block=None`: full attention (`memory_flange` is ignored).

    With `causal=True` (generation) no pixel sees the pixels after it in
    raster order; `causal=False` is the bidirectional (encoder) variant. The
    width `W` comes from the input, in `build()`. On the chunked path
    (`attention_impl="chunked"`) the key blocks a query block cannot see are
    skipped. There is no padding: the layer takes no Keras mask.

    Args:
        num_heads: number of heads; must divide the width `D`.
        intermediate_dim: hidden width of the feed-forward net.
        query_block: `(rows, cols)` (local 2D), an int (local 1D) or `None`
            (full attention).
        memory_flange: `(rows, cols)` for local 2D, an int for local 1D.
        causal: whether a pixel sees only the pixels before it (and itself).
        **kwargs: the other `TransformerDecoderBlock` arguments (`dropout`,
            `attention_dropout`, `activation`, `normalize_first`,
            `layer_norm_epsilon`, initializers, `seed`, `attention_impl`,
            `num_key_value_heads`, `score_modifier`, `rope_max_wavelength`,
            ...; not `mask_modifier`, which `query_block` sets) and base
            layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, H, W, D)`.
        training: bool, whether dropout is active.

    Returns:
        `(B, H, W, D)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 6, 8, 16).astype("float32")
    >>> block = ka.layers.ImageTransformerBlock(num_heads=4, intermediate_dim=32,
    ...     query_block=(2, 4), memory_flange=(2, 2))
    >>> tuple(block(x).shape)
    (2, 6, 8, 16)
    >>> block.mask_modifier
    BlockLocal2D(image_width=8, query_block=(2, 4), memory_flange=(2, 2), causal=True)

    References:
        - Parmar et al., 2018: https://arxiv.org/abs/1802.05751
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        query_block=(8, 16),
        memory_flange=(8, 8),
        causal=True,
        **kwargs,
    ):
        base = {k: kwargs.pop(k) for k in _BASE_LAYER_ARGS if k in kwargs}
        super().__init__(**base)
        if kwargs.get("mask_modifier") is not None:
            raise ValueError(
                "ImageTransformerBlock sets its own mask modifier from "
                "`query_block` and `memory_flange`; use TransformerDecoderBlock "
                "for another mask. Received: "
                f"mask_modifier={kwargs['mask_modifier']!r}"
            )
        kwargs.pop("mask_modifier", None)
        if isinstance(query_block, list):
            query_block = tuple(query_block)
        if isinstance(memory_flange, list):
            memory_flange = tuple(memory_flange)
        self.query_block = query_block
        self.memory_flange = memory_flange
        self.causal = bool(causal)
        self._make_mask_modifier(1)  # checks query_block and memory_flange
        # A block made now checks the other arguments and holds their config.
        template = TransformerDecoderBlock(
            num_heads=num_heads, intermediate_dim=intermediate_dim, **kwargs
        )
        self._block_kwargs = template.get_config()
        for key in ("name", "trainable", "dtype", "mask_modifier"):
            self._block_kwargs.pop(key, None)
        self.num_heads, self.intermediate_dim = num_heads, intermediate_dim
        self.mask_modifier = None
        self._block = None

    def _make_mask_modifier(self, image_width):
        if self.query_block is None:
            return None
        if isinstance(self.query_block, tuple):
            return BlockLocal2D(
                image_width, self.query_block, self.memory_flange, causal=self.causal
            )
        if isinstance(self.query_block, int) and not isinstance(self.query_block, bool):
            return BlockLocal1D(self.query_block, self.memory_flange, self.causal)
        raise ValueError(
            "`query_block` must be (rows, cols) for local 2D attention, an int "
            "for local 1D attention or None for full attention. Received: "
            f"query_block={self.query_block!r}"
        )

    def build(self, inputs_shape):
        check_rank("inputs", tuple(inputs_shape), 4)
        _, height, width, channels = inputs_shape
        if width is None or channels is None:
            raise ValueError(
                "`inputs` must have a known width and channel axis (B, H, W, D). "
                f"Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.mask_modifier = self._make_mask_modifier(width)
        self._block = TransformerDecoderBlock(
            **self._block_kwargs,
            mask_modifier=self.mask_modifier,
            dtype=self.dtype_policy,
            name="block",
        )
        length = None if height is None else height * width
        self._block.build((inputs_shape[0], length, channels))

    @property
    def block(self):
        """The `TransformerDecoderBlock` over the raster order."""
        return self._block

    def call(self, inputs, training=None):
        height, width, channels = ops.shape(inputs)[1], inputs.shape[2], inputs.shape[3]
        x = ops.reshape(inputs, (ops.shape(inputs)[0], -1, channels))  # (B, HW, D)
        x = self._block(x, use_causal_mask=self.causal, training=training)
        return ops.reshape(x, (-1, height, width, channels))  # (B, H, W, D)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "query_block": self.query_block,
            "memory_flange": self.memory_flange,
            "causal": self.causal,
            **{
                k: v
                for k, v in self._block_kwargs.items()
                if k not in ("num_heads", "intermediate_dim")
            },
        }
