import keras
from keras import ops

from keras_attention.decoding.sampling import check_sampling_arguments
from keras_attention.decoding.sampling import sample as sample_tokens
from keras_attention.decoding.sampling import seed_tensor
from keras_attention.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attention.models._block_arguments import block_arguments
from keras_attention.models._block_arguments import block_config
from keras_attention.models._block_arguments import check_attention_options
from keras_attention.models._block_arguments import check_heads_divide
from keras_attention.models._block_arguments import set_block_arguments
from keras_attention.models._compiled_loop import run_compiled
from keras_attention.modifiers import BlockLocal2D
from keras_attention.modifiers.base import deserialize
from keras_attention.modifiers.base import serialize
from keras_attention.validation import check_int
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_attention")
class ImageTransformer(keras.Model):
    """A decoder-only Image Transformer (Parmar et al., 2018): the pixels of
    an image, in raster order, modelled one after the other.

    Each pixel holds one of `num_levels` intensities. Pixel `t` is predicted
    from the pixels before it: the input at position `t` is the embedding of
    pixel `t - 1` (a start symbol at `t = 0`) plus the learned embeddings of
    the row and the column of pixel `t`,

        h_t = E[x_{t-1}] + R[t // W] + C[t mod W],
        p(x_t | x_<t) = softmax(W_o Decoder(h)_t),

    through a stack of `TransformerDecoderBlock`s (decoder-only: no
    cross-attention). `mask_modifier` chooses what a pixel attends to:
    `None` is full causal attention (every earlier pixel);
    `BlockLocal2D(W, query_block, memory_flange)` is the paper's local 2D
    attention (a query block sees the rows above it and the columns around
    it) and `BlockLocal1D(query_block, memory_flange)` its local 1D
    attention (the previous `memory_flange` pixels in raster order). The
    mask is always combined with the causal mask. With
    `attention_impl="chunked"` (or `"auto"` on long images) the blocks
    that a block-local mask hides are skipped: memory and time follow the
    memory block, not the whole image.

    The outputs are float32 logits `(B, H, W, num_levels)`; fit them with
    `SparseCategoricalCrossentropy(from_logits=True)` against the input
    images; the loss in nats divided by `ln 2` is the negative
    log-likelihood in bits per dimension. `sample` draws new images pixel
    by pixel with the key/value cache (each step costs one row of
    attention).

    Args:
        image_shape: `(H, W)`, the image size.
        num_levels: number of intensity levels of a pixel (the classes of
            each prediction), at least 2.
        hidden_dim: model width `D`.
        num_heads: attention heads; must divide `hidden_dim`.
        intermediate_dim: feed-forward width.
        num_layers: decoder blocks.
        mask_modifier: `None` (full causal attention) or a causal mask
            modifier, e.g. `keras_attention.modifiers.BlockLocal2D` (its
            `image_width` must be `W`) or `BlockLocal1D`.
        dropout: residual and embedding dropout rate.
        attention_dropout: dropout on attention weights; `dropout` if `None`.
        activation: feed-forward activation.
        normalize_first: pre-LN blocks (the default) or post-LN.
        layer_norm_epsilon: epsilon of the layer normalizations.
        seed: seed of the dropouts.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`,
            passed to every attention layer (see
            `keras_attention.ops.plan_attention`; `"fused"` needs
            `attention_dropout=0`).
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        images: int `(B, H, W)` in `[0, num_levels)`.
        training: bool, whether dropout is active.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> local = ka.modifiers.BlockLocal2D(6, query_block=(2, 3), memory_flange=(2, 3))
    >>> model = ka.models.ImageTransformer((6, 6), num_levels=4, hidden_dim=16,
    ...     num_heads=2, intermediate_dim=32, num_layers=1, mask_modifier=local)
    >>> images = np.random.randint(0, 4, size=(2, 6, 6))
    >>> tuple(model(images).shape)
    (2, 6, 6, 4)
    >>> tuple(model.sample(3, seed=1).shape)
    (3, 6, 6)

    References:
        - Parmar et al., 2018: https://arxiv.org/abs/1802.05751
    """

    def __init__(
        self,
        image_shape,
        num_levels,
        hidden_dim=256,
        num_heads=4,
        intermediate_dim=1024,
        num_layers=4,
        mask_modifier=None,
        dropout=0.0,
        attention_dropout=None,
        activation="relu",
        normalize_first=True,
        layer_norm_epsilon=1e-5,
        seed=None,
        attention_impl="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        image_shape = _check_image_shape(image_shape)
        check_int("num_levels", num_levels, 2, meaning="intensity levels of a pixel")
        for name, value in (
            ("hidden_dim", hidden_dim),
            ("num_heads", num_heads),
            ("intermediate_dim", intermediate_dim),
            ("num_layers", num_layers),
        ):
            check_positive_int(name, value)
        check_heads_divide(hidden_dim, num_heads)
        check_rate("dropout", dropout)
        check_attention_options(attention_impl, dropout, attention_dropout)
        mask_modifier = deserialize(mask_modifier)
        _check_mask_modifier(mask_modifier, image_shape)
        self.image_shape = image_shape
        self.num_levels = num_levels
        self.num_layers = num_layers
        self.mask_modifier = mask_modifier
        set_block_arguments(self, locals())
        height, width = image_shape
        policy = self.dtype_policy
        # Level `num_levels` is the start symbol in front of the first pixel.
        self.pixel_embedding = keras.layers.Embedding(
            num_levels + 1, hidden_dim, dtype=policy, name="pixel_embedding"
        )
        self.row_embedding = keras.layers.Embedding(
            height, hidden_dim, dtype=policy, name="row_embedding"
        )
        self.column_embedding = keras.layers.Embedding(
            width, hidden_dim, dtype=policy, name="column_embedding"
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, seed=seed, dtype=policy)
        self.decoder = TransformerDecoder(
            num_layers,
            mask_modifier=mask_modifier,
            name="decoder",
            **block_arguments(self),
        )
        self.output_projection = keras.layers.Dense(
            num_levels, dtype=policy, name="output_projection"
        )
        self._sample_functions = {}

    @property
    def sequence_length(self):
        """`H * W`, the number of pixels."""
        return self.image_shape[0] * self.image_shape[1]

    def build(self, images_shape=None):
        shape = (None, None, self.hidden_dim)
        for layer in (self.pixel_embedding, self.row_embedding, self.column_embedding):
            layer.build((None, None))
        self.decoder.build(shape)
        self.output_projection.build(shape)
        self.built = True

    def _embed(self, tokens, start_index=0, training=None):
        """Pixel embeddings of `tokens` `(B, T)` plus the row and column
        embeddings of positions `[start_index, start_index + T)`."""
        positions = start_index + ops.arange(ops.shape(tokens)[1], dtype="int32")
        width = self.image_shape[1]
        x = self.pixel_embedding(tokens)  # (B, T, D)
        x = x + self.row_embedding(positions // width)[None]  # (1, T, D)
        x = x + self.column_embedding(positions % width)[None]
        return self.embedding_dropout(x, training=training)

    def _logits(self, x):
        return ops.cast(self.output_projection(x), "float32")

    def call(self, images, training=None):
        height, width = self.image_shape
        images = ops.convert_to_tensor(images, "int32")
        if tuple(images.shape[1:]) != (height, width):
            raise ValueError(
                f"`images` must have shape (batch, {height}, {width}) (int "
                f"levels). Received: images.shape={tuple(images.shape)}"
            )
        pixels = ops.reshape(images, (-1, height * width))  # (B, L)
        start = ops.full_like(pixels[:, :1], self.num_levels)
        inputs = ops.concatenate([start, pixels[:, :-1]], axis=1)  # shifted right
        x = self._embed(inputs, training=training)
        x = self.decoder(x, use_causal_mask=True, training=training)  # (B, L, D)
        logits = self._logits(x)
        return ops.reshape(logits, (-1, height, width, self.num_levels))

    # -- sampling -----------------------------------------------------------

    def _sample(self, start, seed, temperature, top_k):
        cache = self.decoder.init_cache(ops.shape(start)[0], self.sequence_length)

        def step_fn(tokens, cache, index):
            x = self._embed(tokens[:, None], start_index=index)  # (B, 1, D)
            x, cache = self.decoder(x, cache=cache, cache_update_index=index)
            return self._logits(x)[:, 0], cache, None  # (B, levels)

        pixels, _ = sample_tokens(
            step_fn,
            start,
            cache,
            self.sequence_length,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
        )
        return ops.reshape(pixels, (-1, *self.image_shape))

    def sample(self, num_images, temperature=1.0, top_k=None, seed=None):
        """Draw `num_images` images, pixel by pixel in raster order, each
        from `softmax(logits / temperature)` (among the `top_k` likeliest
        levels when given), with the key/value cache. The same int `seed`
        gives the same images (see `keras_attention.decoding.sample`); on
        TensorFlow the loop is compiled with XLA.

        Returns:
            int32 `(num_images, H, W)` levels.
        """
        check_positive_int("num_images", num_images)
        check_sampling_arguments(temperature, top_k, None, seed)
        if not self.built:
            self.build()
        start = ops.full((num_images,), self.num_levels, dtype="int32")
        seed = seed_tensor(seed)
        args = (float(temperature), top_k)
        return run_compiled(self._sample_functions, args, self._sample, start, seed)

    def get_config(self):
        return {
            **super().get_config(),
            "image_shape": self.image_shape,
            "num_levels": self.num_levels,
            "num_layers": self.num_layers,
            "mask_modifier": serialize(self.mask_modifier),
            **block_config(self),
        }


def _check_image_shape(image_shape):
    shape = tuple(image_shape) if isinstance(image_shape, (tuple, list)) else None
    if (
        shape is None
        or len(shape) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in shape)
    ):
        raise ValueError(
            "Invalid argument `image_shape`: `image_shape` must be two positive "
            f"integers (height, width). Received: image_shape={image_shape!r}"
        )
    return shape


def _check_mask_modifier(mask_modifier, image_shape):
    """A generative model must not see later pixels: the modifier must be
    causal, and a `BlockLocal2D` must know the image's width."""
    if mask_modifier is None:
        return
    if not callable(mask_modifier):
        raise ValueError(
            "`mask_modifier` must be None or a mask modifier "
            "(`keras_attention.modifiers`). Received: "
            f"mask_modifier={mask_modifier!r}"
        )
    if getattr(mask_modifier, "causal", True) is False:
        raise ValueError(
            "`mask_modifier` must be causal: an autoregressive image model "
            "must not see the pixels it predicts. Received: "
            f"mask_modifier={mask_modifier!r}"
        )
    if (
        isinstance(mask_modifier, BlockLocal2D)
        and mask_modifier.image_width != image_shape[1]
    ):
        raise ValueError(
            "The `BlockLocal2D` mask modifier's `image_width` must be the "
            f"image width {image_shape[1]}. Received: "
            f"image_shape={image_shape}, mask_modifier={mask_modifier!r}"
        )
