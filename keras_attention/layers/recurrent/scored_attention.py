import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention import scores
from keras_attention.initializers import fresh_initializer
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
            `scores.Location(max_length=50)`; the layer works on a copy, so
            layers given one object do not share its weights) or its config
            dict.
        probability: `"softmax"`, or `"hardmax"` for hard attention: a
            one-hot choice of the best key in the forward pass with a
            straight-through softmax gradient.
        window: `None`, or a half-width `D`: local attention over the keys
            `p_t - D .. p_t + D` around an aligned position `p_t`.
        alignment: how `p_t` is chosen when `window` is set:
            `"monotonic"` (default; local-m of Luong et al., 2015):
            `p_t = t`, needs a sequence query; `"predictive"` (local-p):
            `p_t = S sigmoid(v_p^T tanh(W_p q_t))` with `S` the number of
            valid keys, and the weights are multiplied by the Gaussian
            `exp(-(s - p_t)^2 / (2 sigma^2))`, `sigma = D / 2`, after the
            softmax over the window (not renormalised, as in the paper;
            `keras_attention.ops.local_predictive_weights`). Works for a
            single query vector too (inside `AttentionRNNCell`).
        alignment_units: width of `W_p` for `alignment="predictive"` (the
            query width when `None`).
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
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 3, 8), (2, 3, 5))

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
        alignment="monotonic",
        alignment_units=None,
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
        _check_alignment(alignment, alignment_units, window, probability)
        self.probability = probability
        self.window = window
        self.alignment = alignment
        self.alignment_units = alignment_units
        self.predictive = window is not None and alignment == "predictive"
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
        if self.window is not None and not self.predictive and len(query_shape) == 2:
            raise ValueError(
                "`window` with alignment='monotonic' needs a sequence query "
                "(B, T, D) to know each query's position (alignment='predictive' "
                f"does not). Received: query.shape={tuple(query_shape)}, "
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
        if self.predictive:
            units = self.alignment_units or query_shape[-1]
            # W_p and v_p of p_t = S sigmoid(v_p^T tanh(W_p q_t)).
            self.alignment_kernel = self.add_weight(
                name="alignment_kernel",
                shape=(query_shape[-1], units),
                initializer=fresh_initializer("glorot_uniform", 0),
            )
            self.alignment_vector = self.add_weight(
                name="alignment_vector",
                shape=(units,),
                initializer=fresh_initializer("glorot_uniform", 1),
            )
        self.built = True

    def alignment_weights(self, query, scores, mask=None, key_mask=None, training=None):
        """Attention weights `(B, T, S)` (float32) from the scores.

        The softmax (or hardmax) of the masked scores; with
        `alignment="predictive"`, local-p weights around the position each
        query predicts (`key_mask` `(B, S)`, when given, tells which keys
        count as the source). Dropout while training.
        """
        if not self.predictive:
            return ka_ops.attention_weights(
                scores,
                mask,
                self.probability,
                self.dropout,
                self.seed_generator,
                training,
            )
        key_positions, length = ka_ops.source_positions(key_mask, ops.shape(scores)[-1])
        kernel = ops.cast(self.alignment_kernel, query.dtype)
        hidden = ops.tanh(ops.einsum("btd,du->btu", query, kernel))
        vector = ops.cast(self.alignment_vector, hidden.dtype)
        logits = ops.einsum("btu,u->bt", hidden, vector)
        predicted = ka_ops.predicted_positions(logits, length)  # (B, T)
        weights = ka_ops.local_predictive_weights(
            scores, predicted, key_positions, self.window, mask
        )
        if training and self.dropout > 0:
            weights = keras.random.dropout(
                weights, self.dropout, seed=self.seed_generator
            )
        return weights

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
        if self.window is not None and not self.predictive:
            band = ka_ops.band_mask(ops.shape(query)[1], ops.shape(key)[1], self.window)
            mask = ka_ops.merge_masks(mask, band[None])
        key_valid = key_mask if key_mask is not None else value_mask
        scores = self.score(query, key)  # (B, T, S)
        weights = self.alignment_weights(query, scores, mask, key_valid, training)
        output = ka_ops.weighted_sum(weights, value)
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
            "alignment": self.alignment,
            "alignment_units": self.alignment_units,
        }


def _check_alignment(alignment, alignment_units, window, probability):
    if alignment not in ("monotonic", "predictive"):
        raise ValueError(
            "`alignment` must be 'monotonic' or 'predictive'. "
            f"Received: alignment={alignment!r}"
        )
    check_positive_int("alignment_units", alignment_units, allow_none=True)
    if alignment == "predictive" and window is None:
        raise ValueError(
            "`alignment='predictive'` (local-p) needs a `window` half-width D. "
            "Received: window=None"
        )
    if alignment_units is not None and alignment != "predictive":
        raise ValueError(
            "`alignment_units` applies to alignment='predictive' only. "
            f"Received: alignment={alignment!r}, alignment_units={alignment_units}"
        )
    if alignment == "predictive" and probability != "softmax":
        raise ValueError(
            "`alignment='predictive'` weights a softmax over the window; "
            f"it takes probability='softmax'. Received: probability={probability!r}"
        )
