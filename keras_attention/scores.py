"""Score functions `s(k, q)`: how well key `k` matches query `q`.

Each score is a small Keras layer mapping `query (B, T, Dq)` and
`key (B, S, Dk)` to float32 scores `(B, T, S)`. Scores that have weights
(additive, general, location, a learned cosine sharpness) create them in
`build()`, so the attention layer that owns a score saves them with its own.

Use them by name, as objects or as config dicts, like `keras.activations`:

>>> import keras_attention as ka
>>> ka.scores.get("scaled_dot")
<ScaledDot ...>
>>> ka.scores.get({"class_name": "Additive", "config": {"units": 32}}).units
32

Write your own by subclassing `Score` and implementing `call(query, key)`
(and `build` if it has weights); register it with
`keras.saving.register_keras_serializable` so models using it can be saved.
"""

import math

import keras
from keras import ops

from keras_attention.initializers import fresh_initializer
from keras_attention.ops.addressing import cosine_similarity
from keras_attention.validation import check_positive_int


def _check_rank3(name, shape):
    if len(shape) != 3:
        raise ValueError(
            f"`{name}` must have rank 3 (batch, length, features). "
            f"Received: {name}.shape={tuple(shape)}"
        )


def _project(x, kernel):
    """`x @ kernel` for `x (B, T, D)`, `kernel (D, U)`, as an einsum.

    `ops.matmul` of a rank-3 by a rank-2 tensor is a `tf.tensordot` on
    TensorFlow, whose permutation becomes a loop-carried value in the
    gradient of a `while` loop with a dynamic batch size, which XLA cannot
    compile (an RNN decoder scoring inside its time loop hits this).
    """
    return ops.einsum("btd,du->btu", x, kernel)


@keras.saving.register_keras_serializable(package="keras_attention")
class Score(keras.layers.Layer):
    """Base class of score functions: `(query, key) -> scores (B, T, S)`.

    Subclasses implement `call(query, key)` returning float32 scores. Inputs
    arrive in float32 whatever the layer's dtype policy: raw dot products of
    float16 activations overflow long before the softmax could save them.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        # Keras masks on the inputs are the attention layer's business: accept
        # them silently and return none.
        self.supports_masking = True

    def build(self, query_shape, key_shape):
        _check_rank3("query", query_shape)
        _check_rank3("key", key_shape)
        self.built = True

    def __call__(self, query, key, **kwargs):
        query = ops.cast(query, "float32")
        key = ops.cast(key, "float32")
        return super().__call__(query, key, **kwargs)

    def call(self, query, key):
        raise NotImplementedError(
            f"{type(self).__name__} must implement `call(query, key)`."
        )

    def compute_mask(self, query, previous_mask=None):
        return None

    def compute_output_shape(self, query_shape, key_shape):
        return (query_shape[0], query_shape[1], key_shape[1])


class _Scaled(Score):
    """A score with an optional learned scalar multiplier `g` (init 1); a
    subclass that names itself in `same_width` needs `query` and `key` of
    one width."""

    same_width = None  # the score's name when it compares q and k directly

    def __init__(self, use_scale=False, **kwargs):
        super().__init__(**kwargs)
        self.use_scale = use_scale

    def build(self, query_shape, key_shape):
        if self.same_width is not None:
            _check_same_width(self.same_width, query_shape, key_shape)
        super().build(query_shape, key_shape)
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def _rescale(self, scores):
        return scores if self.scale is None else scores * self.scale

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale}


def _check_same_width(score, query_shape, key_shape):
    dq, dk = query_shape[-1], key_shape[-1]
    if dq is not None and dk is not None and dq != dk:
        raise ValueError(
            f"The `{score}` score needs `query` and `key` of the same width. "
            f"Received: query.shape[-1]={dq}, key.shape[-1]={dk}. "
            "Use the `general` or `additive` score for different widths."
        )


@keras.saving.register_keras_serializable(package="keras_attention")
class Dot(_Scaled):
    """Dot-product score `s(k, q) = k^T q` (Luong et al., 2015).

    Args:
        use_scale: multiply the score by a learned scalar (init 1).
    """

    same_width = "dot"

    def call(self, query, key):
        return self._rescale(ops.matmul(query, ops.swapaxes(key, -1, -2)))


@keras.saving.register_keras_serializable(package="keras_attention")
class ScaledDot(_Scaled):
    """Scaled dot-product score `s(k, q) = k^T q / sqrt(d)` (Vaswani et al.).

    Args:
        use_scale: as `Dot`.
    """

    same_width = "scaled_dot"

    def call(self, query, key):
        depth = ops.cast(ops.shape(key)[-1], "float32")
        scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / ops.sqrt(depth)
        return self._rescale(scores)


@keras.saving.register_keras_serializable(package="keras_attention")
class General(_Scaled):
    """Bilinear ("general") score `s(k, q) = k^T W q` (Luong et al., 2015).

    Query and key may have different widths; `W` is `(Dk, Dq)`, stored as
    its transpose `kernel (Dq, Dk)` so that `W q = q @ kernel`.

    Args:
        use_scale: multiply the score by a learned scalar (init 1).
        kernel_initializer: initializer of `W`.
    """

    def __init__(self, use_scale=False, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(use_scale=use_scale, **kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], key_shape[-1]),
            initializer=self.kernel_initializer,
        )

    def call(self, query, key):
        projected = _project(query, self.kernel)  # (B, T, Dk)
        return self._rescale(ops.matmul(projected, ops.swapaxes(key, -1, -2)))

    def get_config(self):
        return {
            **super().get_config(),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attention")
class Additive(Score):
    """Additive ("concat") score `s(k, q) = v^T tanh(W k + U q)` (Bahdanau).

    Args:
        units: width of the hidden layer `W k + U q`; the key width when
            `None`.
        normalize: weight-normalise `v` as `g v / ||v||` with a learned `g`
            and add a bias inside the tanh: weight normalisation (Salimans &
            Kingma, 2016), the "normalized Bahdanau" attention of GNMT.
        kernel_initializer: initializer of `W`, `U` and `v`.
    """

    def __init__(
        self, units=None, normalize=False, kernel_initializer="glorot_uniform", **kwargs
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units, allow_none=True)
        self.units = units
        self.normalize = normalize
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        units = self.units or key_shape[-1]
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(key_shape[-1], units),
            initializer=fresh_initializer(self.kernel_initializer, 0),
        )
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_shape[-1], units),
            initializer=fresh_initializer(self.kernel_initializer, 1),
        )
        # W, U and v each draw their own values: one initializer instance
        # returns the same ones every call (W = U when the widths match).
        self.v = self.add_weight(
            name="v",
            shape=(units,),
            initializer=fresh_initializer(self.kernel_initializer, 2),
        )
        if self.normalize:
            self.g = self.add_weight(
                name="g",
                shape=(),
                initializer=keras.initializers.Constant(math.sqrt(1.0 / units)),
            )
            self.bias = self.add_weight(
                name="bias", shape=(units,), initializer="zeros"
            )

    def project_key(self, key):
        """`W k`, `(B, S, units)`: constant over decoding steps, cache it."""
        return _project(ops.cast(key, "float32"), self.key_kernel)

    def score_projected(self, query, projected_key):
        """Scores from a query and an already projected key (`project_key`)."""
        q = _project(ops.cast(query, "float32"), self.query_kernel)  # (B, T, U)
        hidden = q[:, :, None, :] + projected_key[:, None, :, :]  # (B, T, S, U)
        v = self.v
        if self.normalize:
            hidden = hidden + self.bias
            v = self.g * v * ops.rsqrt(ops.sum(ops.square(v)))
        return ops.sum(ops.tanh(hidden) * v, axis=-1)  # (B, T, S)

    def call(self, query, key):
        return self.score_projected(query, self.project_key(key))

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "normalize": self.normalize,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attention")
class Cosine(Score):
    """Content-based score `s(k, q) = beta * cos(k, q)` (Graves et al., 2014).

    Args:
        beta: the sharpness (key strength); fixed unless `trainable_beta`.
        trainable_beta: learn `beta` (initialised to `beta`).
        epsilon: added to the norms to keep zero vectors finite.
    """

    def __init__(self, beta=1.0, trainable_beta=False, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        if beta <= 0:
            raise ValueError(f"`beta` must be positive. Received: beta={beta}")
        self.beta = float(beta)
        self.trainable_beta = trainable_beta
        self.epsilon = epsilon

    def build(self, query_shape, key_shape):
        _check_same_width("cosine", query_shape, key_shape)
        super().build(query_shape, key_shape)
        self.beta_weight = None
        if self.trainable_beta:
            self.beta_weight = self.add_weight(
                name="beta",
                shape=(),
                initializer=keras.initializers.Constant(self.beta),
            )

    def call(self, query, key):
        beta = self.beta if self.beta_weight is None else self.beta_weight
        return beta * cosine_similarity(query, key, self.epsilon)

    def get_config(self):
        return {
            **super().get_config(),
            "beta": self.beta,
            "trainable_beta": self.trainable_beta,
            "epsilon": self.epsilon,
        }


_TOO_MANY_KEYS = "The `location` score addresses at most `max_length` keys. Received: "


@keras.saving.register_keras_serializable(package="keras_attention")
class Location(Score):
    """Location-based score `s_t = W_a q_t` (Luong et al., 2015).

    The scores depend only on the query: one logit per key POSITION, so the
    keys' contents are ignored. `W_a` has `max_length` outputs; shorter key
    sequences use the first ones.

    Keys longer than `max_length` have no logit, and are an error: a
    ValueError naming `max_length` and the received length when the length
    is known while tracing (always on JAX and in eager mode; on TensorFlow
    whenever the graph has a static key length), else a run-time
    `InvalidArgumentError` with the same message (a TensorFlow graph traced
    with an unknown key length). XLA drops run-time assertions, so under
    `jit_compile=True` with an unknown traced length the scores (hence the
    attention outputs) of such a call are NaN instead: never silently
    truncated.

    Args:
        max_length: the largest number of keys this score can address.
        kernel_initializer: initializer of `W_a`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> score = ka.scores.Location(max_length=8)
    >>> tuple(score(np.ones((2, 3, 4)), np.ones((2, 5, 4))).shape)
    (2, 3, 5)
    >>> try:
    ...     score(np.ones((2, 3, 4)), np.ones((2, 9, 4)))
    ... except ValueError as error:
    ...     print("Received: key length 9 > max_length=8" in str(error))
    True
    """

    def __init__(self, max_length, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(
                "`max_length` must be a positive integer. "
                f"Received: max_length={max_length}"
            )
        self.max_length = max_length
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _check_length(self, key_shape):
        length = key_shape[1]
        if isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"{_TOO_MANY_KEYS}key length {length} > max_length={self.max_length}"
            )

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        self._check_length(key_shape)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], self.max_length),
            initializer=self.kernel_initializer,
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.max_length,), initializer="zeros"
        )

    def call(self, query, key):
        self._check_length(tuple(key.shape))
        logits = _project(query, self.kernel) + self.bias  # (B, T, max_length)
        if isinstance(key.shape[1], int):
            return logits[:, :, : key.shape[1]]  # (B, T, S)
        return self._dynamic_length_scores(logits, ops.shape(key)[1])

    def _dynamic_length_scores(self, logits, length):
        """`(B, T, S)` scores for a key length known only at run time.

        A gather (not a slice, which would clamp to `max_length` columns and
        fail later in the weighted sum): positions past `max_length` get NaN,
        and on TensorFlow an assertion fails first with a clear message.
        """
        positions = ops.arange(length, dtype="int32")  # (S,)
        in_range = ops.less(positions, self.max_length)
        columns = ops.minimum(positions, self.max_length - 1)
        scores = ops.where(
            in_range, ops.take(logits, columns, axis=-1), float("nan")
        )  # (B, T, S)
        if keras.backend.backend() != "tensorflow":
            return scores  # only shape inference has unknown lengths here
        import tensorflow as tf

        check = tf.debugging.Assert(
            tf.less_equal(length, self.max_length),
            [
                f"{_TOO_MANY_KEYS}key length",
                length,
                f"> max_length={self.max_length}",
            ],
        )
        with tf.control_dependencies([check]):
            return tf.identity(scores)

    def get_config(self):
        return {
            **super().get_config(),
            "max_length": self.max_length,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


ALL_SCORES = {
    "dot": Dot,
    "scaled_dot": ScaledDot,
    "general": General,
    "bilinear": General,
    "additive": Additive,
    "concat": Additive,
    "cosine": Cosine,
    "content": Cosine,
    "location": Location,
}
_CLASSES = {cls.__name__: cls for cls in (Score, *ALL_SCORES.values())}


def serialize(score):
    """Config dict of a score object (`keras.saving.serialize_keras_object`)."""
    return keras.saving.serialize_keras_object(score)


def deserialize(config, custom_objects=None):
    """A score object from its config dict."""
    return keras.saving.deserialize_keras_object(
        config, module_objects=_CLASSES, custom_objects=custom_objects
    )


def get(identifier):
    """A fresh score object from a name, a config dict or a score object.

    Names: `"dot"`, `"scaled_dot"`, `"general"` (alias `"bilinear"`),
    `"additive"` (alias `"concat"`), `"cosine"` (alias `"content"`).
    The `location` score needs `max_length`, so pass `Location(max_length)`
    or `{"class_name": "Location", "config": {"max_length": ...}}`.

    A score object is copied (from its config, with its weights if it is
    built), so that two layers given one object do not share weights.

    >>> import keras_attention as ka
    >>> score = ka.scores.Dot(use_scale=True)
    >>> copy = ka.scores.get(score)
    >>> copy is score, type(copy).__name__, copy.use_scale
    (False, 'Dot', True)
    """
    if isinstance(identifier, Score):
        return _copy(identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        name = identifier.lower()
        if name == "location":
            raise ValueError(
                "The `location` score needs a maximum key length, which "
                "`score` cannot give by name: pass "
                "`score=keras_attention.scores.Location(max_length=...)`. "
                f"Received: score={identifier!r}"
            )
        if name in ALL_SCORES:
            return ALL_SCORES[name]()
        raise ValueError(
            f"Unknown `score`: must be one of {sorted(ALL_SCORES)}, a "
            f"`Score` object or a config dict. Received: score={identifier!r}"
        )
    raise ValueError(
        "`score` must be a name, a `keras_attention.scores.Score` object or a "
        f"config dict. Received: score={identifier!r}"
    )


def _copy(score):
    """A new score object with `score`'s config (and weights, when built)."""
    try:
        copy = type(score).from_config(score.get_config())
    except Exception as error:
        raise ValueError(
            "A `score` object is copied from its config so that each layer "
            f"gets its own weights, and `{type(score).__name__}` cannot be "
            f"(a {type(error).__name__}, above): return every constructor "
            "argument from its `get_config()`. "
            f"Received: score={score!r}"
        ) from error
    build_config = score.get_build_config() if score.built else None
    if build_config is not None:
        copy.build_from_config(build_config)
        copy.set_weights(score.get_weights())
    return copy
