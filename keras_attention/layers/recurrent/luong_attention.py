import keras

from keras_attention import scores
from keras_attention.layers.recurrent.scored_attention import ScoredAttention
from keras_attention.validation import check_positive_int

_LUONG_SCORES = ("general", "dot", "concat")


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongAttention(ScoredAttention):
    """Multiplicative ("global") attention of Luong et al. (2015).

    The current decoder state `h_t` (the query) scores each source state
    `h_s` (keys = values) with one of:

    - `"dot"`: `h_t^T h_s`
    - `"general"`: `h_t^T W_a h_s`
    - `"concat"`: `v_a^T tanh(W_a [h_t; h_s])` (additive)

    Args:
        score: `"general"` (default), `"dot"` or `"concat"`.
        scale: multiply the score by a learned scalar `g` (init 1), as the
            scaled Luong attention of TensorFlow's seq2seq; `dot`/`general`.
        units: hidden width of the `concat` score (the key width if None).
        **kwargs: `ScoredAttention` arguments (`probability`, `window`,
            `dropout`, `seed`) and base layer arguments.

    Call arguments: as `ScoredAttention`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> h_t = np.random.rand(2, 4, 16).astype("float32")
    >>> h_s = np.random.rand(2, 9, 16).astype("float32")
    >>> ka.layers.LuongAttention(score="dot")(h_t, h_s).shape
    TensorShape([2, 4, 16])

    References:
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
    """

    def __init__(self, score="general", scale=False, units=None, **kwargs):
        if score not in _LUONG_SCORES:
            raise ValueError(
                f"`score` must be one of {_LUONG_SCORES}. Received: score={score!r}"
            )
        check_positive_int("units", units, allow_none=True)
        if score == "concat":
            if scale:
                raise ValueError(
                    "`scale=True` applies to the 'dot' and 'general' scores only. "
                    f"Received: score={score!r}, scale={scale}"
                )
            score_obj = scores.Additive(units=units)
        else:
            if units is not None:
                raise ValueError(
                    "`units` applies to the 'concat' score only. "
                    f"Received: score={score!r}, units={units}"
                )
            cls = scores.General if score == "general" else scores.Dot
            score_obj = cls(use_scale=scale)
        super().__init__(score=score_obj, **kwargs)
        self.score_name = score
        self.scale = scale
        self.units = units

    def get_config(self):
        config = super().get_config()
        config["score"] = self.score_name
        return {**config, "scale": self.scale, "units": self.units}
