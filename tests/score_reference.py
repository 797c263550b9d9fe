"""NumPy references of every score of `keras_attention.scores.ALL_SCORES`.

`REFERENCES[name](score, query, key)` is `s(k, q)`, `(B, T, S)` in float64,
computed from the paper's formula with the score object's settings and
weights. A score added to `ALL_SCORES` needs an entry here:
`tests/test_scores.py` fails until it has one.
"""

import inspect

import numpy as np
from keras import ops

from keras_attention import scores


def _np(x):
    return np.asarray(ops.convert_to_numpy(x), "float64")


def _scaled(score, s):
    """`g s` with the learned scalar `g` of `use_scale=True`."""
    return s * _np(score.scale) if score.use_scale else s


def dot(score, query, key):
    """`k^T q`."""
    return _scaled(score, np.einsum("btd,bsd->bts", query, key))


def scaled_dot(score, query, key):
    """`k^T q / sqrt(d)`, `d` the key width."""
    logits = np.einsum("btd,bsd->bts", query, key) / np.sqrt(key.shape[-1])
    return _scaled(score, logits)


def general(score, query, key):
    """`k^T W q`, with `W` stored as its transpose `kernel (Dq, Dk)`."""
    w = _np(score.kernel).T  # (Dk, Dq)
    return _scaled(score, np.einsum("bsk,kq,btq->bts", key, w, query))


def additive(score, query, key):
    """`v^T tanh(W k + U q)`; normalised: `g v / ||v||` and a bias."""
    w, u, v = _np(score.key_kernel), _np(score.query_kernel), _np(score.v)
    hidden = (key @ w)[:, None, :, :] + (query @ u)[:, :, None, :]  # (B, T, S, U)
    if score.normalize:
        hidden = hidden + _np(score.bias)
        v = _np(score.g) * v / np.linalg.norm(v)
    return np.tanh(hidden) @ v


def cosine(score, query, key):
    """`beta k^T q / ((|k| + eps) (|q| + eps))`."""
    beta = _np(score.beta_weight) if score.trainable_beta else score.beta
    eps = score.epsilon
    q = query / (np.linalg.norm(query, axis=-1, keepdims=True) + eps)
    k = key / (np.linalg.norm(key, axis=-1, keepdims=True) + eps)
    return beta * np.einsum("btd,bsd->bts", q, k)


def location(score, query, key):
    """`(W_a q + b)_n` for the key positions `n < S`: the keys are unused."""
    logits = query @ _np(score.kernel) + _np(score.bias)  # (B, T, max_length)
    return logits[:, :, : key.shape[1]]


REFERENCES = {
    "dot": dot,
    "scaled_dot": scaled_dot,
    "general": general,
    "bilinear": general,
    "additive": additive,
    "concat": additive,
    "cosine": cosine,
    "content": cosine,
    "location": location,
}

# Settings worth a case of their own, per class (the defaults always run).
OPTIONS = {
    scores.Dot: [{"use_scale": True}],
    scores.ScaledDot: [{"use_scale": True}],
    scores.General: [{"use_scale": True}],
    scores.Additive: [{"units": 7}, {"normalize": True}],
    scores.Cosine: [{"beta": 3.0, "epsilon": 1e-3}, {"trainable_beta": True}],
}

MAX_LENGTH = 8  # of the location score


def make(name, **options):
    """The score `name` of `ALL_SCORES` (`max_length=8` for `location`)."""
    cls = scores.ALL_SCORES[name]
    if "max_length" in inspect.signature(cls.__init__).parameters:
        options = {"max_length": MAX_LENGTH, **options}
    return cls(**options)


def cases():
    """`(name, options)`: every name with its defaults, then each class's
    `OPTIONS` under its first name."""
    found = [(name, {}) for name in sorted(scores.ALL_SCORES)]
    first = {}
    for name, cls in scores.ALL_SCORES.items():
        first.setdefault(cls, name)
    for cls, name in first.items():
        found += [(name, options) for options in OPTIONS.get(cls, [])]
    return found


def case_id(case):
    name, options = case
    return "-".join([name, *(f"{k}={v}" for k, v in options.items())])


def randomize(score, rng):
    """Every weight of a built score to new random values, so that none
    stays at an initial value (0 or 1) that would hide it from a test:
    arrays `N(0, 0.5)`, scalars (scale, sharpness, gain) in `[0.5, 1.5]`."""
    score.set_weights(
        [
            np.asarray(
                rng.normal(0.0, 0.5, w.shape) if w.shape else rng.uniform(0.5, 1.5),
                "float32",
            )
            for w in score.weights
        ]
    )


def needs_same_width(name):
    """Whether the score `name` refuses a query and a key of different widths."""
    try:
        make(name).build((1, 1, 3), (1, 1, 2))
    except ValueError:
        return True
    return False
