"""Sampling: temperature, top-k and top-p (nucleus) draws, seeded.

Why not `keras_hub.samplers.TopKSampler` / `TopPSampler`: keras-hub is an
optional dependency here (the `nlp` extra); their `next(prompt, cache,
index) -> (logits, hidden_states, cache)` callback cannot hand back per-step
values such as attention weights, nor pad a sequence after its end token;
and their randomness is a `keras.random.SeedGenerator`, a variable. Its
state advances on every call under `tf.function` (the same call with the
same seed gives different tokens) and cannot advance inside a `jax.jit`
loop unless a `StatelessScope` is threaded through it (keras-hub's
`Sampler.run_loop` does that; without it every step repeats the first
draw). `keras.random` takes no seed tensor either, so a per-step seed
cannot be derived from the loop index. `TopPSampler` also keeps one token
too many when a cumulative probability equals `p` exactly.

So the draw here is stateless: a Gumbel-max draw whose uniforms are an
integer hash of `(seed, step index, row, token id)`. It is reproducible
under `tf.function(jit_compile=True)` and `jax.jit` (the seed may be a
tensor argument of the compiled function), and the same seed gives the
same tokens on TensorFlow and JAX.
"""

import random

import numpy as np
from keras import ops

from keras_attention.decoding.greedy import decode
from keras_attention.ops.hashing import GOLDEN
from keras_attention.ops.hashing import mix32
from keras_attention.ops.softmax import MASK_VALUE
from keras_attention.validation import check_positive_int


def _check_number(name, value, rule, ok):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(
            f"Invalid argument `{name}`: `{name}` must be a number ({rule}). "
            f"Received: {name}={value!r} of type {type(value).__name__}"
        )
    if not ok(float(value)):
        raise ValueError(
            f"Invalid argument `{name}`: `{name}` must be {rule}. "
            f"Received: {name}={value!r}"
        )


def check_sampling_arguments(temperature=1.0, top_k=None, top_p=None, seed=None):
    """Raise unless the arguments of `sample` are valid (eagerly, no tensors
    are read)."""
    _check_number(
        "temperature",
        temperature,
        "finite and > 0; greedy search is the limit at 0",
        lambda t: 0 < t < np.inf,
    )
    check_positive_int("top_k", top_k, allow_none=True)
    if top_p is not None:
        _check_number("top_p", top_p, "in (0, 1]", lambda p: 0.0 < p <= 1.0)
    if seed is not None and (isinstance(seed, bool) or not _is_int_like(seed)):
        raise TypeError(
            "Invalid argument `seed`: `seed` must be an int, an integer scalar "
            f"tensor or None. Received: seed={seed!r}"
        )


def _is_int_like(seed):
    if isinstance(seed, (int, np.integer)):
        return True
    dtype = getattr(seed, "dtype", None)
    shape = getattr(seed, "shape", None)
    return dtype is not None and "int" in str(dtype) and len(shape) == 0


def _keep_largest(logits, threshold, count):
    """True for the `count` largest logits of each row, given `threshold`
    `(..., 1)`, the `count`-th largest value: of the logits equal to it, the
    lowest token ids are kept (the order of `ops.top_k`)."""
    greater = ops.greater(logits, threshold)
    equal = ops.equal(logits, threshold)
    room = count - ops.sum(ops.cast(greater, "int32"), axis=-1, keepdims=True)
    rank = ops.cumsum(ops.cast(equal, "int32"), axis=-1)  # 1, 2, ... among ties
    return ops.logical_or(greater, ops.logical_and(equal, rank <= room))


def top_k_filter(logits, k):
    """Keep the `k` largest logits of each row; set the others to `MASK_VALUE`.

    Exactly `k` tokens survive: among logits tied with the `k`-th largest,
    the lowest token ids are kept. `k` at least the vocabulary size keeps
    everything.

    Args:
        logits: float `(..., V)`.
        k: positive int.

    Returns:
        float32 `(..., V)`, the kept logits unchanged, the others
        `keras_attention.ops.softmax.MASK_VALUE` (-1e30).

    Example:

    >>> from keras import ops
    >>> from keras_attention.decoding import top_k_filter
    >>> logits = [[1.0, 3.0, 2.0, 3.0, 2.0]]  # a tie at the 3rd largest
    >>> ops.convert_to_numpy(top_k_filter(logits, 3)) > -1e9
    array([[False,  True,  True,  True, False]])
    """
    check_positive_int("k", k)
    logits = ops.cast(logits, "float32")
    vocab = logits.shape[-1]
    if vocab is not None and k >= vocab:
        return logits
    threshold = ops.top_k(logits, k)[0][..., -1:]  # (..., 1) the k-th largest
    return ops.where(_keep_largest(logits, threshold, k), logits, MASK_VALUE)


def top_p_filter(logits, p):
    """Keep the nucleus of each row: the most likely tokens whose probability
    reaches `p`; set the others to `MASK_VALUE`.

    The nucleus is the smallest set of most likely tokens whose total
    probability (softmax of `logits`) is at least `p`: tokens are taken in
    order of decreasing probability while the mass before them is below
    `p`, so the most likely token is always kept; ties are ordered by
    token id. `p=1` keeps everything.

    Args:
        logits: float `(..., V)`.
        p: float in `(0, 1]`.

    Returns:
        float32 `(..., V)`, the kept logits unchanged, the others
        `keras_attention.ops.softmax.MASK_VALUE` (-1e30).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attention.decoding import top_p_filter
    >>> logits = np.log([[0.1, 0.5, 0.3, 0.1]])
    >>> ops.convert_to_numpy(top_p_filter(logits, 0.7)) > -1e9
    array([[False,  True,  True, False]])

    References:
        - Holtzman et al., 2020 (nucleus sampling): https://arxiv.org/abs/1904.09751
    """
    _check_number("p", p, "in (0, 1]", lambda value: 0.0 < value <= 1.0)
    logits = ops.cast(logits, "float32")
    if p >= 1.0:
        return logits
    ordered = ops.flip(ops.sort(logits, axis=-1), axis=-1)  # (..., V) descending
    probs = ops.softmax(ordered, axis=-1)
    # The mass before each token: an exclusive cumulative sum, 0 first.
    before = ops.cumsum(probs, axis=-1)[..., :-1]
    before = ops.concatenate([ops.zeros_like(probs[..., :1]), before], axis=-1)
    count = ops.sum(ops.cast(before < p, "int32"), axis=-1, keepdims=True)  # >= 1
    threshold = ops.take_along_axis(ordered, count - 1, axis=-1)  # (..., 1)
    return ops.where(_keep_largest(logits, threshold, count), logits, MASK_VALUE)


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """`logits / temperature`, then `top_k_filter`, then `top_p_filter` (the
    nucleus of the distribution left by top-k, as in Hugging Face
    `generate`): the logits `sample` draws from, float32 `(..., V)`."""
    logits = ops.cast(logits, "float32") / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits


def seed_tensor(seed=None):
    """A uint32 scalar seed: an int (taken modulo 2**32), an integer scalar
    tensor (cast), or `None` for a fresh one from Python's `random` (which
    `keras.utils.set_random_seed` seeds, as it does Keras' default seeds)."""
    if seed is None:
        seed = random.randint(0, 2**32 - 1)
    if isinstance(seed, (int, np.integer)):
        return ops.convert_to_tensor(int(seed) % 2**32, "uint32")
    return ops.cast(seed, "uint32")


def gumbel_noise(seed, index, shape):
    """Standard Gumbel noise `(B, V)`, a pure function of the uint32 `seed`,
    the step `index` and each row and column: no state, so it compiles and
    repeats exactly. Uniforms have 24 bits, so the noise lies in about
    [-2.9, 17.3]: a logit at `MASK_VALUE` never wins."""
    rows, vocab = shape[0], shape[1]
    golden = ops.convert_to_tensor(GOLDEN, "uint32")
    step = mix32(ops.bitwise_xor(seed, mix32(ops.cast(index, "uint32") + golden)))
    row = ops.cast(ops.arange(rows, dtype="int32"), "uint32")[:, None]  # (B, 1)
    row = mix32(step + mix32(row))
    col = ops.cast(ops.arange(vocab, dtype="int32"), "uint32")[None, :]  # (1, V)
    bits = mix32(ops.bitwise_xor(mix32(ops.bitwise_xor(row, col)), step))  # (B, V)
    uniform = (ops.cast(ops.right_shift(bits, 8), "float32") + 0.5) * 2.0**-24
    return -ops.log(-ops.log(uniform))


def sample(
    step_fn,
    start_tokens,
    state,
    max_length,
    end_token=None,
    pad_token=0,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
):
    """Decode `max_length` tokens, each drawn from `step_fn`'s distribution.

    Each step draws from `softmax(logits / temperature)` restricted to the
    `top_k` most likely tokens, then to the nucleus of mass `top_p` of what
    is left (see `top_k_filter`, `top_p_filter`). A higher `temperature`
    flattens the distribution; as it approaches 0 sampling approaches
    greedy search (use `greedy_search` for that limit). `top_k=1` is greedy
    search.

    The draw is a Gumbel-max draw from a hash of `(seed, step, row, token
    id)`: no random state, so the same `seed` gives the same tokens eagerly,
    under `tf.function(jit_compile=True)` and under `jax.jit`, on
    TensorFlow and JAX alike, and a row's draws do not depend on the other
    rows. The loop is `greedy_search`'s: fixed-size buffers, at most
    `max_length` steps, an early stop once every sequence has produced
    `end_token`, then `pad_token` and zero `aux`.

    Args:
        step_fn, start_tokens, state: as `greedy_search`.
        max_length, end_token, pad_token: as `greedy_search`.
        temperature: float > 0, divides the logits.
        top_k: optional positive int, sample among the `top_k` most likely
            tokens only.
        top_p: optional float in `(0, 1]`, sample in the nucleus: the
            smallest set of most likely tokens whose probability reaches
            `top_p` (always at least the most likely token).
        seed: an int, an integer scalar tensor (e.g. an argument of a
            compiled function, so that new seeds do not retrace it), or
            `None` to draw a seed from Python's `random` when `sample` runs
            (inside a compiled function: once, when it is traced).

    Returns:
        `(tokens, aux)` as `greedy_search`: int32 `(B, max_length)` and
        `aux` stacked along axis 1, `None` if `step_fn` returns `None`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attention.decoding import sample
    >>> def step_fn(tokens, state, index):  # tokens 3 and 7 only, 7 likelier
    ...     logits = np.log([[1e-3] * 3 + [0.4] + [1e-3] * 3 + [0.6]] * 2)
    ...     return ops.convert_to_tensor(logits, "float32"), state, None
    >>> tokens, _ = sample(step_fn, np.array([0, 0]), (), 6, top_k=2, seed=1)
    >>> sorted(set(ops.convert_to_numpy(tokens).ravel().tolist()))
    [3, 7]
    >>> again, _ = sample(step_fn, np.array([0, 0]), (), 6, top_k=2, seed=1)
    >>> bool(ops.all(tokens == again))
    True

    References:
        - Holtzman et al., 2020 (nucleus sampling): https://arxiv.org/abs/1904.09751
        - Fan et al., 2018 (top-k sampling): https://arxiv.org/abs/1805.04833
    """
    check_sampling_arguments(temperature, top_k, top_p, seed)
    seed = seed_tensor(seed)

    def choose(logits, index):
        logits = filter_logits(logits, temperature, top_k, top_p)  # (B, V)
        noise = gumbel_noise(seed, index, ops.shape(logits))
        return ops.argmax(logits + noise, axis=-1)

    return decode(
        step_fn, choose, start_tokens, state, max_length, end_token, pad_token
    )
