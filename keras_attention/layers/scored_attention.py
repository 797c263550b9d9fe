import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention import scores
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_rate
from keras_attention.validation import check_same


@keras.saving.register_keras_serializable(package="keras_attention")
class ScoredAttention(keras.layers.Layer):
    """Soft attention with a pluggable score function.

    `att((K, V), q) = sum_n softmax(s(k_n, q))_n v_n`: each query scores
    every key with `s`, the scores become a distribution over the keys, and
    the output is the matching average of the values.

    The query may be one vector per example `(B, D)` (the decoder state of a
    seq2seq model) or a sequence `(B, T, D)`; keys and values are `(B, S, D)`
    sequences, and `value` doubles as `key` when `key` is omitted.

    Masks are boolean, True = may attend. `value_mask`/`key_mask` `(B, S)`
    remove padded keys for every query; `query_mask` `(B, T)` zeroes the
    output of padded queries; `attention_mask` `(B, T, S)` is any pattern;
    `use_causal_mask` lets query `i` see keys `j <= i`. Keras masks (from
    `Embedding(mask_zero=True)`) fill the first three automatically. A
    query with no visible key gets zero weights and a zero output.

    Args:
        score: the score `s(k, q)`: a name (`"scaled_dot"`, `"dot"`,
            `"general"`, `"additive"`, `"cosine"`), a
            `keras_attention.scores.Score` object (e.g.
            `scores.Location(max_length=50)`) or its config dict.
        probability: `"softmax"`, or `"hardmax"` for hard attention: a
            one-hot choice of the best key in the forward pass with a
            straight-through softmax gradient.
        window: `None`, or a half-width `D`: query `t` attends only to keys
            `t - D .. t + D` (local-m attention of Luong et al., 2015).
            Needs a sequence query.
        dropout: dropout rate on the attention weights while training.
        seed: seed of the dropout.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, T, Dq)` or `(B, Dq)`.
        value: `(B, S, Dv)`.
        key: `(B, S, Dk)`; `value` when `None`.
        query_mask, value_mask, key_mask, attention_mask: boolean masks.
        use_causal_mask: bool.
        return_attention_scores: also return the weights, `(B, T, S)` (or
            `(B, S)` for a vector query), post-softmax.
        training: bool, whether dropout is active.

    Returns:
        `(B, T, Dv)` (or `(B, Dv)`), and the weights when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> query = np.random.rand(2, 3, 8).astype("float32")
    >>> value = np.random.rand(2, 5, 8).astype("float32")
    >>> layer = ka.layers.ScoredAttention(score="additive")
    >>> output, weights = layer(query, value, return_attention_scores=True)
    >>> output.shape, weights.shape
    (TensorShape([2, 3, 8]), TensorShape([2, 3, 5]))

    References:
        - Bahdanau et al., 2015: https://arxiv.org/abs/1409.0473
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
        - Graves et al., 2014: https://arxiv.org/abs/1410.5401
    """

    def __init__(
        self,
        score="scaled_dot",
        probability="softmax",
        window=None,
        dropout=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.score = scores.get(score)
        if probability not in ("softmax", "hardmax"):
            raise ValueError(
                "`probability` must be 'softmax' or 'hardmax'. "
                f"Received: probability={probability!r}"
            )
        check_positive_int("window", window, allow_none=True)
        check_rate("dropout", dropout)
        self.probability = probability
        self.window = window
        self.dropout = dropout
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    def _check_shapes(self, query_shape, value_shape, key_shape):
        check_rank("query", query_shape, (2, 3))
        check_rank("value", value_shape, 3)
        check_same("query", query_shape[0], "value", value_shape[0], "batch size")
        if key_shape is not None:
            check_rank("key", key_shape, 3)
            check_same("key", key_shape[1], "value", value_shape[1], "length")
            check_same("key", key_shape[0], "value", value_shape[0], "batch size")
        if self.window is not None and len(query_shape) == 2:
            raise ValueError(
                "`window` needs a sequence query (B, T, D) to know each query's "
                f"position. Received: query.shape={tuple(query_shape)}, "
                f"window={self.window}"
            )

    def build(self, query_shape, value_shape, key_shape=None):
        self._check_shapes(query_shape, value_shape, key_shape)
        if len(query_shape) == 2:
            query_shape = (query_shape[0], 1, query_shape[1])
        # A score revived from a config (or passed in already built) keeps
        # its weights; building it again would try to create them twice.
        if not self.score.built:
            key_shape = value_shape if key_shape is None else key_shape
            self.score.build(query_shape, key_shape)
        self.built = True

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        self._check_shapes(
            tuple(query.shape),
            tuple(value.shape),
            None if key is None else tuple(key.shape),
        )
        key = value if key is None else key
        single = len(query.shape) == 2
        if single and use_causal_mask:
            raise ValueError(
                "`use_causal_mask` needs a sequence query (B, T, D): a single "
                "query vector has no position (mask the future keys with "
                f"`value_mask` instead). Received: query.shape={tuple(query.shape)}, "
                "use_causal_mask=True"
            )
        if single:
            query = query[:, None, :]  # (B, 1, Dq)
            if attention_mask is not None and len(attention_mask.shape) == 2:
                attention_mask = attention_mask[:, None, :]
        mask = ka_ops.compute_attention_mask(
            query,
            value,
            query_mask=None if single else query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
        )
        if self.window is not None:
            band = ka_ops.band_mask(ops.shape(query)[1], ops.shape(key)[1], self.window)
            mask = ka_ops.merge_masks(mask, band[None])
        output, weights = ka_ops.attention(
            query,
            key,
            value,
            self.score,
            mask=mask,
            probability=self.probability,
            dropout_rate=self.dropout,
            seed=self.seed_generator,
            training=training,
        )
        if single:
            output, weights = output[:, 0], weights[:, 0]
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, query, previous_mask=None):
        if len(query.shape) == 2:
            return None
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            "score": scores.serialize(self.score),
            "probability": self.probability,
            "window": self.window,
            "dropout": self.dropout,
            "seed": self.seed,
        }
