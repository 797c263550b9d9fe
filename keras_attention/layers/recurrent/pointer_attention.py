import keras

from keras_attention import ops as ka_ops
from keras_attention import scores
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_same


@keras.saving.register_keras_serializable(package="keras_attention")
class PointerAttention(keras.layers.Layer):
    """Pointer attention: a distribution over input positions as the output.

    `u_ij = v^T tanh(W1 e_j + W2 d_i)` and `p(C_i | C_<i, P) = softmax(u_i)`
    (Vinyals et al., 2015): decoder state `d_i` scores every encoder state
    `e_j`, and the normalised scores themselves are the prediction. The layer
    returns log-probabilities `(B, T_out, T_in)`, ready for a
    `sparse_categorical_crossentropy(from_logits=True)`-style loss or for
    beam search.

    Positions that may not be chosen are removed BEFORE the softmax, so the
    remaining positions share all the probability: padded inputs (`value_mask`,
    or the Keras mask of the encoder states) and positions already chosen
    (`attention_mask`, e.g. `keras_attention.ops.chosen_positions_mask`).
    Masked positions get a large finite negative log-probability (about
    -1e30), never -inf, so losses and gradients stay free of NaN.

    Args:
        units: width of the hidden layer of the additive score.
        **kwargs: base layer arguments.

    Call arguments:
        query: decoder states `(B, T_out, D)` or one step `(B, D)`.
        value: encoder states `(B, T_in, E)`.
        value_mask: `(B, T_in)`, padded inputs.
        attention_mask: `(B, T_out, T_in)` (or `(B, T_in)` for one step):
            True where step `i` may point to input `j`.
        projected_value: optional `project_inputs(value)` computed once per
            input sequence, so step-wise decoding does not redo `W1 e_j`.

    Returns:
        log-probabilities `(B, T_out, T_in)` (or `(B, T_in)`), float32. The
        Keras mask of `query` (padded decoder steps) is passed on to the
        output, so Keras losses skip those steps.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> enc = np.random.rand(2, 5, 16).astype("float32")
    >>> dec = np.random.rand(2, 5, 16).astype("float32")
    >>> chosen = ka.ops.chosen_positions_mask(np.array([[4, 2, 0, 1, 3]] * 2), 5)
    >>> log_p = ka.layers.PointerAttention(units=8)(dec, enc, attention_mask=chosen)
    >>> tuple(log_p.shape)
    (2, 5, 5)

    References:
        - Vinyals et al., 2015, Pointer Networks: https://arxiv.org/abs/1506.03134
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        self.units = units
        self.score = scores.Additive(units=units, name="score")
        self.supports_masking = True

    def _check_shapes(self, query_shape, value_shape):
        check_rank("query", query_shape, (2, 3))
        check_rank("value", value_shape, 3)

    def build(self, query_shape, value_shape):
        self._check_shapes(query_shape, value_shape)
        if len(query_shape) == 2:
            query_shape = (query_shape[0], 1, query_shape[1])
        self.score.build(query_shape, value_shape)
        self.built = True

    def project_inputs(self, value):
        """`W1 e_j`, `(B, T_in, units)`: compute once, reuse at every step."""
        return self.score.project_key(value)

    def call(
        self,
        query,
        value,
        value_mask=None,
        attention_mask=None,
        projected_value=None,
    ):
        self._check_shapes(tuple(query.shape), tuple(value.shape))
        single = len(query.shape) == 2
        if single:
            query = query[:, None, :]  # (B, 1, D)
            if attention_mask is not None and len(attention_mask.shape) == 2:
                attention_mask = attention_mask[:, None, :]
        if attention_mask is not None:
            check_same(
                "attention_mask",
                attention_mask.shape[-1],
                "value",
                value.shape[1],
                "length",
            )
        mask = ka_ops.compute_attention_mask(
            query,
            value,
            value_mask=value_mask,
            attention_mask=attention_mask,
        )
        if projected_value is None:
            projected_value = self.project_inputs(value)
        logits = self.score.score_projected(query, projected_value)  # (B, To, Ti)
        log_probs = ka_ops.masked_log_softmax(logits, mask)
        return log_probs[:, 0] if single else log_probs

    def compute_mask(self, query, previous_mask=None):
        return None if len(query.shape) == 2 else previous_mask

    def get_config(self):
        return {**super().get_config(), "units": self.units}
