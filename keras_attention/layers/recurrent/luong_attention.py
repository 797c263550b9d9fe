import inspect

import keras

from keras_attention import scores
from keras_attention.layers.recurrent.scored_attention import ScoredAttention
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongAttention(ScoredAttention):
    """Multiplicative ("global") attention of Luong et al. (2015).

    The current decoder state `h_t` (the query) scores each source state
    `h_s` (keys = values) with a score of `keras_attention.scores`; the
    paper's are:

    - `"dot"`: `h_t^T h_s`
    - `"general"`: `h_t^T W_a h_s`
    - `"concat"`: `v_a^T tanh(W_a [h_t; h_s])` (additive)
    - `scores.Location(max_length)`: `W_a h_t`, one logit per source
      position

    Any other score of `keras_attention.scores` works too (`"scaled_dot"`,
    `"cosine"`, or a `Score` subclass of your own): each compares one decoder
    state with each source state. `"dot"`, `"scaled_dot"` and `"cosine"`
    need `h_t` and `h_s` of one width (a `ValueError` when the layer is
    built otherwise); `"general"`, `"concat"` and the location score do not.

    Args:
        score: the score: a name (`"general"`, the default, `"dot"`,
            `"concat"`, or any name of `keras_attention.scores.ALL_SCORES`
            but `"location"`, which needs `max_length`), a
            `keras_attention.scores.Score` object or its config dict.
        scale: multiply the score by a learned scalar `g` (init 1), as the
            scaled Luong attention of TensorFlow's seq2seq: for a score named
            by a string that takes `use_scale` (`dot`, `scaled_dot`,
            `general`). Set `use_scale` on a score object instead.
        units: hidden width of the `concat` score (the key width if None),
            for the score named `"concat"` or `"additive"`; set it on a
            `scores.Additive` object instead.
        **kwargs: `ScoredAttention` arguments (`probability`, `window`,
            `dropout`, `seed`) and base layer arguments.

    Call arguments: as `ScoredAttention`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> h_t = np.random.rand(2, 4, 16).astype("float32")
    >>> h_s = np.random.rand(2, 9, 16).astype("float32")
    >>> tuple(ka.layers.LuongAttention(score="dot")(h_t, h_s).shape)
    (2, 4, 16)
    >>> location = ka.scores.Location(max_length=12)
    >>> tuple(ka.layers.LuongAttention(score=location)(h_t, h_s).shape)
    (2, 4, 16)

    References:
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
    """

    def __init__(self, score="general", scale=False, units=None, **kwargs):
        check_positive_int("units", units, allow_none=True)
        super().__init__(score=_luong_score(score, scale, units), **kwargs)
        # A score named by a string is saved by its name with `scale` and
        # `units` (as release 0.2.0 did); any other as its config.
        self.score_name = score if isinstance(score, str) else None
        self.scale = scale
        self.units = units

    def get_config(self):
        config = super().get_config()
        if self.score_name is not None:
            config["score"] = self.score_name
        return {**config, "scale": self.scale, "units": self.units}


def _luong_score(score, scale, units):
    """The score object for `score` with Luong's `scale` and `units`."""
    if not isinstance(score, str):
        for name, value, default in (("scale", scale, False), ("units", units, None)):
            if value != default:
                raise ValueError(
                    f"`{name}` applies to a score given by name; set it on the "
                    "score object (`use_scale` for `scale`, `Additive(units)` "
                    f"for `units`). Received: score={score!r}, {name}={value}"
                )
        return scores.get(score)
    named = scores.get(score)  # checks the name
    arguments = inspect.signature(type(named).__init__).parameters
    if scale and "use_scale" not in arguments:
        raise ValueError(
            "`scale` applies to the scores with a learned scale "
            "('dot', 'scaled_dot', 'general'). "
            f"Received: score={score!r}, scale={scale}"
        )
    if units is not None and "units" not in arguments:
        raise ValueError(
            "`units` applies to the 'concat' (alias 'additive') score only, "
            f"the width of its hidden layer. Received: score={score!r}, units={units}"
        )
    options = {"use_scale": scale} if "use_scale" in arguments else {}
    if "units" in arguments:
        options["units"] = units
    return type(named).from_config({**named.get_config(), **options})
