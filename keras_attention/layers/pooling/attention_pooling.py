import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.keras_compat import first_mask
from keras_attention.validation import check_mask
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_attention")
class AttentionPooling(keras.layers.Layer):
    """Attention pooling of a sequence with learned context vectors.

    The pooling of the hierarchical attention network (Yang et al., 2016):
    each element `h_t` of the sequence gets a hidden representation, a
    learned context vector `u_w` (a query that belongs to the layer, not to
    the input) scores it, and the output is the weighted average of the
    sequence:

        u_t = tanh(W h_t + b),   alpha_t = softmax_t(u_t^T u_w),
        output = sum_t alpha_t h_t.

    With `num_contexts=K > 1` there are K context vectors, each giving its
    own weights and average (the K "hops" of Lin et al., 2017's structured
    self-attentive embedding).

    Masks: the Keras mask of the input (from `Embedding(mask_zero=True)` or
    a masking RNN) or `mask` `(B, T)`, True = keep, removes padded elements
    before the softmax; a sequence with no element left pools to zeros.
    The output has no time axis, so it carries no mask.

    Args:
        units: width of `u_t` (the input width when `None`).
        num_contexts: the number K of context vectors.
        use_bias: whether `u_t` has the bias `b`.
        dropout: dropout on the weights `alpha` while training.
        seed: seed of the dropout.
        kernel_initializer: initializer of `W` and of the context vectors.
        bias_initializer: initializer of `b`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)`.
        mask: boolean `(B, T)`; the input's Keras mask when `None`.
        return_attention_scores: also return the weights `alpha`.
        training: whether dropout is active.

    Returns:
        `(B, D)` for one context vector, `(B, K, D)` for K; with
        `return_attention_scores=True`, `(output, weights)` with float32
        weights `(B, T)` or `(B, K, T)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> words = np.random.rand(2, 7, 16).astype("float32")
    >>> pooled, weights = ka.layers.AttentionPooling(units=8)(
    ...     words, return_attention_scores=True)
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 16), (2, 7))

    References:
        - Yang et al., 2016, Hierarchical Attention Networks for Document
          Classification: https://aclanthology.org/N16-1174/
        - Lin et al., 2017, A Structured Self-attentive Sentence Embedding:
          https://arxiv.org/abs/1703.03130
    """

    def __init__(
        self,
        units=None,
        num_contexts=1,
        use_bias=True,
        dropout=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units, allow_none=True)
        check_positive_int("num_contexts", num_contexts)
        check_rate("dropout", dropout)
        self.units = units
        self.num_contexts = num_contexts
        self.use_bias = use_bias
        self.dropout = dropout
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    def build(self, input_shape):
        check_rank("inputs", input_shape, 3)
        width = input_shape[-1]
        units = self.units or width
        self.kernel = self.add_weight(
            name="kernel",
            shape=(width, units),
            initializer=fresh_initializer(self.kernel_initializer, 0),
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(units,), initializer=self.bias_initializer
            )
        # u_w: one column per context vector.
        self.context = self.add_weight(
            name="context",
            shape=(units, self.num_contexts),
            initializer=fresh_initializer(self.kernel_initializer, 1),
        )
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False, training=None):
        check_rank("inputs", tuple(inputs.shape), 3)
        mask = first_mask(mask, inputs)
        if mask is not None:
            check_mask("mask", mask, tuple(inputs.shape[:2]))
            mask = ops.cast(mask, "bool")[:, None, :]  # (B, 1, T)
        hidden = ops.einsum("btd,du->btu", inputs, self.kernel)
        if self.bias is not None:
            hidden = hidden + self.bias
        hidden = ops.tanh(hidden)  # u_t, (B, T, U)
        scores = ops.einsum("btu,uk->bkt", hidden, self.context)  # (B, K, T)
        weights = ka_ops.attention_weights(
            scores,
            mask,
            dropout_rate=self.dropout,
            seed=self.seed_generator,
            training=training,
        )  # (B, K, T), float32
        output = ka_ops.weighted_sum(weights, inputs)  # (B, K, D)
        if self.num_contexts == 1:
            output, weights = output[:, 0], weights[:, 0]
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_contexts": self.num_contexts,
            "use_bias": self.use_bias,
            "dropout": self.dropout,
            "seed": self.seed,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
