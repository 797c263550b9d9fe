import keras

from keras_attention import scores
from keras_attention.layers.recurrent.scored_attention import ScoredAttention
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauAttention(ScoredAttention):
    """Additive attention of Bahdanau et al. (2015).

    `e_tj = v^T tanh(W s_{t-1} + U h_j)`, `alpha_t = softmax(e_t)`,
    `c_t = sum_j alpha_tj h_j`: the decoder state `s_{t-1}` (the query)
    scores every encoder annotation `h_j` (keys = values) through a one
    hidden-layer network. This is `ScoredAttention(score=Additive(units))`.

    Args:
        units: width of the hidden layer (`W` and `U` project to it).
        normalize: weight-normalised `v` and a bias inside the tanh, as in
            GNMT ("normalized Bahdanau").
        **kwargs: `ScoredAttention` arguments (`probability`, `window`,
            `dropout`, `seed`) and base layer arguments.

    Call arguments: as `ScoredAttention`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> state = np.random.rand(2, 16).astype("float32")        # s_{t-1}
    >>> annotations = np.random.rand(2, 7, 32).astype("float32")  # h_j
    >>> context, alpha = ka.layers.BahdanauAttention(units=8)(
    ...     state, annotations, return_attention_scores=True)
    >>> tuple(context.shape), tuple(alpha.shape)
    ((2, 32), (2, 7))

    References:
        - Bahdanau et al., 2015: https://arxiv.org/abs/1409.0473
    """

    def __init__(self, units, normalize=False, **kwargs):
        check_positive_int("units", units)
        if "score" in kwargs:
            raise ValueError(
                "`BahdanauAttention` always uses the additive score; use "
                "`ScoredAttention(score=...)` for another one. "
                f"Received: score={kwargs['score']!r}"
            )
        super().__init__(
            score=scores.Additive(units=units, normalize=normalize), **kwargs
        )
        self.units = units
        self.normalize = normalize

    def get_config(self):
        config = super().get_config()
        del config["score"]
        return {**config, "units": self.units, "normalize": self.normalize}
