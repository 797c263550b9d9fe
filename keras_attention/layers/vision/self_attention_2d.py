import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank


@keras.saving.register_keras_serializable(package="keras_attention")
class SelfAttention2D(keras.layers.Layer):
    """Self-attention over the pixels of a feature map (SAGAN).

    For `x (B, H, W, C)` with `N = H W` positions (Zhang et al., 2018):
    `f(x) = W_f x`, `g(x) = W_g x` (1x1 convolutions to `C / k` channels),
    `h(x) = W_h x` (to `C / k_v` channels),
    `beta_{j,i} = softmax_i(f(x_j)^T g(x_i))` (query pixel `j` over key
    pixels `i`), `o_j = W_o sum_i beta_{j,i} h(x_i)` (1x1 convolution back
    to `C`), and `y = gamma * o + x` with `gamma` initialised to 0, so the
    block starts as the identity and learns how much non-local evidence to
    use.

    With `pool_keys=True`, keys and values are 2x2 max-pooled (as in the
    official SAGAN code and BigGAN): `N' = N / 4` key positions, 4x less
    attention memory, and the map must have even height and width.

    Memory: the attention map holds `B * N * N'` floats, and one forward and
    backward pass peaks at about 8 such maps. For a 64x64x64 feature map that
    is 16 MiB per image with pooling (about 120 MiB measured for forward and
    backward, bounded by 160 MiB in the tests) and 64 MiB without.

    Args:
        channels_reduction: `k`, query/key channels are `C // k` (8 in the
            paper).
        value_channels_reduction: `k_v`, value channels are `C // k_v`
            (2 in the official code and BigGAN; 1 for the paper's `C`).
        pool_keys: max-pool keys and values 2x2.
        use_spectral_norm: wrap every 1x1 convolution in
            `keras.layers.SpectralNormalization`, as SAGAN does in both the
            generator and the discriminator.
        kernel_initializer: initializer of the convolutions.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(B, H, W, C)`.
        return_attention_scores: also return `beta`, `(B, H*W, H'*W')`.
        training: passed to spectral normalization (power iteration).

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 8, 8, 32).astype("float32")
    >>> y, beta = ka.layers.SelfAttention2D()(x, return_attention_scores=True)
    >>> tuple(y.shape), tuple(beta.shape)
    ((2, 8, 8, 32), (2, 64, 16))

    References:
        - Zhang et al., 2018, Self-Attention GANs: https://arxiv.org/abs/1805.08318
        - Brock et al., 2018, BigGAN: https://arxiv.org/abs/1809.11096
    """

    def __init__(
        self,
        channels_reduction=8,
        value_channels_reduction=2,
        pool_keys=True,
        use_spectral_norm=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("channels_reduction", channels_reduction)
        check_positive_int("value_channels_reduction", value_channels_reduction)
        self.channels_reduction = channels_reduction
        self.value_channels_reduction = value_channels_reduction
        self.pool_keys = pool_keys
        self.use_spectral_norm = use_spectral_norm
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _conv(self, filters, name, index):
        conv = keras.layers.Conv2D(
            filters,
            1,
            use_bias=False,
            # Each convolution draws its own values, also from a seeded
            # initializer (a copy with the same seed would repeat them).
            kernel_initializer=fresh_initializer(self.kernel_initializer, index),
            dtype=self.dtype_policy,
            name=name,
        )
        if self.use_spectral_norm:
            return keras.layers.SpectralNormalization(
                conv, dtype=self.dtype_policy, name=f"{name}_sn"
            )
        return conv

    def _check_shape(self, shape):
        check_rank("inputs", shape, 4)
        channels = shape[-1]
        for name, k in (
            ("channels_reduction", self.channels_reduction),
            ("value_channels_reduction", self.value_channels_reduction),
        ):
            if channels is not None and channels // k < 1:
                raise ValueError(
                    f"`{name}` must leave at least one channel: C // {name} >= 1. "
                    f"Received: C={channels}, {name}={k}"
                )
        if self.pool_keys:
            for axis, size in (("height", shape[1]), ("width", shape[2])):
                if size is not None and size % 2:
                    raise ValueError(
                        f"`inputs` must have an even {axis} with `pool_keys=True`. "
                        f"Received: inputs.shape={tuple(shape)}"
                    )

    def build(self, input_shape):
        self._check_shape(input_shape)
        channels = input_shape[-1]
        qk = channels // self.channels_reduction
        v = channels // self.value_channels_reduction
        self.query_conv = self._conv(qk, "query", 0)  # f
        self.key_conv = self._conv(qk, "key", 1)  # g
        self.value_conv = self._conv(v, "value", 2)  # h
        self.output_conv = self._conv(channels, "output", 3)  # W_o
        self.query_conv.build(input_shape)
        self.key_conv.build(input_shape)
        self.value_conv.build(input_shape)
        self.output_conv.build(tuple(input_shape[:-1]) + (v,))
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="zeros")
        self.built = True

    def call(self, inputs, return_attention_scores=False, training=None):
        self._check_shape(tuple(inputs.shape))
        batch = ops.shape(inputs)[0]
        height, width = ops.shape(inputs)[1], ops.shape(inputs)[2]
        query = self.query_conv(inputs, training=training)  # (B, H, W, C/k)
        key = self.key_conv(inputs, training=training)
        value = self.value_conv(inputs, training=training)  # (B, H, W, C/kv)
        if self.pool_keys:
            key = ops.max_pool(key, 2, strides=2)  # (B, H/2, W/2, C/k)
            value = ops.max_pool(value, 2, strides=2)
        query = ops.reshape(query, (batch, -1, ops.shape(query)[-1]))  # (B, N, C/k)
        key = ops.reshape(key, (batch, -1, ops.shape(key)[-1]))  # (B, N', C/k)
        value = ops.reshape(value, (batch, -1, ops.shape(value)[-1]))
        logits = ops.matmul(
            ops.cast(query, "float32"), ops.swapaxes(ops.cast(key, "float32"), 1, 2)
        )  # (B, N, N')
        beta = ka_ops.masked_softmax(logits)
        attended = ka_ops.weighted_sum(beta, value)  # (B, N, C/kv)
        attended = ops.reshape(
            attended, (batch, height, width, ops.shape(attended)[-1])
        )
        output = self.output_conv(attended, training=training)  # (B, H, W, C)
        output = ops.cast(self.gamma, output.dtype) * output + inputs
        if return_attention_scores:
            return output, beta
        return output

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "channels_reduction": self.channels_reduction,
            "value_channels_reduction": self.value_channels_reduction,
            "pool_keys": self.pool_keys,
            "use_spectral_norm": self.use_spectral_norm,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
