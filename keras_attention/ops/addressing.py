"""Memory addressing of the Neural Turing Machine (Graves et al., 2014, §3).

A head produces a weighting `w` over the `N` rows of a memory `M (N, M)`
in four steps, each a function here:

1. `content_weights`: `w^c(i) = softmax_i(beta * K(k, M(i)))`, with `K` the
   cosine similarity (the same function as the `cosine` score) (eq. 5-6);
2. `interpolate`: `w^g = g w^c + (1 - g) w_{t-1}` (eq. 7);
3. `circular_shift`: `w~(i) = sum_j w^g(j) s(i - j)`, a circular
   convolution with a distribution `s` over the shifts `-R..R` (eq. 8);
4. `sharpen`: `w(i) = w~(i)^gamma / sum_j w~(j)^gamma` (eq. 9).

`address` composes them; `read_memory` and `write_memory` use the weightings
(eq. 2-4). The functions take the head parameters already constrained
(`beta > 0`, `0 <= g <= 1`, `s` a distribution, `gamma >= 1`, `0 <= e <= 1`):
the layer applies the activations (softplus, sigmoid, softmax, 1 + softplus)
that put its raw outputs in those ranges.

Shapes: `B` batch, `H` heads, `N` memory rows, `M` row width, `K = 2R + 1`
shifts. Everything runs in float32.
"""

from keras import ops

# `sharpen` works in log space: `log(w + SHARPEN_EPSILON)` is finite where a
# weight underflowed to 0, whose `w ** gamma` would have a NaN gradient with
# respect to gamma (`0 * log 0`).
SHARPEN_EPSILON = 1e-12


def cosine_similarity(x, y, epsilon=1e-8):
    """Cosine similarity of every row of `x (..., T, D)` with every row of
    `y (..., S, D)`: `(..., T, S)`, `x.y / ((|x| + eps) (|y| + eps))`.

    The content score of `keras_attention.scores.Cosine` and of the Neural
    Turing Machine's content addressing. Computed in float32. `epsilon`
    keeps a zero vector's similarity finite (0), and its gradient is 0, not
    NaN: an untrained NTM controller whose output is exactly 0 (zero input,
    zero state, zero biases) emits an exactly zero key.
    """
    x = ops.cast(x, "float32")
    y = ops.cast(y, "float32")
    x = x / (_safe_norm(x) + epsilon)
    y = y / (_safe_norm(y) + epsilon)
    return ops.matmul(x, ops.swapaxes(y, -1, -2))


def _safe_norm(x):
    """`|x|` over the last axis, keepdims, with a finite gradient at 0.

    `sqrt` has an infinite derivative at 0, so `ops.norm`'s gradient at a
    zero vector is `0 * inf = NaN`. The floor `1e-30` (far below any squared
    norm that matters: `|x| >= 1e-15`) changes no other value, and its
    gradient is 0.
    """
    squared = ops.sum(ops.square(x), axis=-1, keepdims=True)
    return ops.sqrt(ops.maximum(squared, 1e-30))


def content_weights(memory, key, strength, epsilon=1e-8):
    """Focus by content (eq. 5-6): `softmax_i(beta K(k, M(i)))`.

    Args:
        memory: `(B, N, M)`.
        key: `(B, H, M)`, one key per head.
        strength: `(B, H)`, the key strength `beta > 0`.
        epsilon: see `cosine_similarity`.

    Returns:
        `(B, H, N)` float32 weightings, each row a distribution.
    """
    memory = ops.cast(memory, "float32")
    key = ops.cast(key, "float32")
    similarity = cosine_similarity(key, memory, epsilon)  # (B, H, N)
    strength = ops.cast(strength, "float32")[..., None]  # (B, H, 1)
    return ops.softmax(strength * similarity, axis=-1)


def interpolate(content, previous, gate):
    """Interpolation gate (eq. 7): `g w^c + (1 - g) w_{t-1}`.

    Args:
        content: `(B, H, N)` content weightings `w^c`.
        previous: `(B, H, N)` last step's weightings `w_{t-1}`.
        gate: `(B, H)`, `g` in `[0, 1]`.
    """
    gate = ops.cast(gate, "float32")[..., None]  # (B, H, 1)
    return gate * ops.cast(content, "float32") + (1.0 - gate) * ops.cast(
        previous, "float32"
    )


def circular_shift(weights, shift):
    """Rotation by a shift distribution (eq. 8), a circular convolution.

    `w~(i) = sum_j w(j) s(i - j)`, indices modulo `N`: entry `k` of `shift`
    is the probability of the offset `k - R` (`R = (K - 1) // 2`), so with
    `R = 1` the three entries move the focus one row back, keep it, or move
    it one row forward.

    Args:
        weights: `(B, H, N)`.
        shift: `(B, H, K)`, `K` odd and static, each row a distribution.

    Returns:
        `(B, H, N)`.
    """
    weights = ops.cast(weights, "float32")
    shift = ops.cast(shift, "float32")
    size = shift.shape[-1]
    if size is None or size % 2 != 1:
        raise ValueError(
            "`shift` must have a static odd last dimension 2R + 1 (offsets "
            f"-R..R). Received: shift.shape={tuple(shift.shape)}"
        )
    radius = size // 2
    # `ops.roll(w, o)[i] = w[i - o]`: the term of offset `o`, weighted by
    # its probability. K is small (3 in the paper): K rolls beat building an
    # (N, N) circulant matrix.
    return sum(
        ops.roll(weights, k - radius, axis=-1) * shift[..., k : k + 1]
        for k in range(size)
    )


def sharpen(weights, sharpness):
    """Sharpening (eq. 9): `w(i)^gamma / sum_j w(j)^gamma`, `gamma >= 1`.

    Computed as `softmax(gamma log w)`, the same value without the
    underflow of `w ** gamma` or its NaN gradient at `w = 0` (see
    `SHARPEN_EPSILON`).

    Args:
        weights: `(B, H, N)` non-negative weightings.
        sharpness: `(B, H)`, `gamma`.
    """
    logits = ops.log(ops.cast(weights, "float32") + SHARPEN_EPSILON)
    gamma = ops.cast(sharpness, "float32")[..., None]  # (B, H, 1)
    return ops.softmax(gamma * logits, axis=-1)


def address(memory, previous, key, strength, gate, shift, sharpness, epsilon=1e-8):
    """The full addressing of §3.3 (Figure 2): content, gate, shift, sharpen.

    Args:
        memory: `(B, N, M)`, the memory before this step's write.
        previous: `(B, H, N)`, each head's weighting at the previous step.
        key: `(B, H, M)`.
        strength: `(B, H)`, `beta > 0`.
        gate: `(B, H)`, `g` in `[0, 1]`.
        shift: `(B, H, K)`, a distribution over the offsets `-R..R`.
        sharpness: `(B, H)`, `gamma >= 1`.
        epsilon: see `cosine_similarity`.

    Returns:
        `(B, H, N)` float32 weightings: non-negative, each row sums to 1.
    """
    w = content_weights(memory, key, strength, epsilon)  # (B, H, N)
    w = interpolate(w, previous, gate)
    w = circular_shift(w, shift)
    return sharpen(w, sharpness)


def read_memory(memory, weights):
    """Reading (eq. 2): `r = sum_i w(i) M(i)`.

    Args:
        memory: `(B, N, M)`.
        weights: `(B, H, N)`, one weighting per read head.

    Returns:
        `(B, H, M)` float32 read vectors.
    """
    memory = ops.cast(memory, "float32")
    return ops.einsum("bhn,bnm->bhm", ops.cast(weights, "float32"), memory)


def write_memory(memory, weights, erase, add):
    """Writing (eq. 3-4): every head erases, then every head adds.

    `M~(i) = M(i) prod_h [1 - w_h(i) e_h]`, then
    `M'(i) = M~(i) + sum_h w_h(i) a_h`. The erasures multiply, so their order
    does not matter, and neither does the order of the additions.

    Args:
        memory: `(B, N, M)`.
        weights: `(B, H, N)`, one weighting per write head.
        erase: `(B, H, M)`, erase vectors in `[0, 1]`.
        add: `(B, H, M)`, add vectors.

    Returns:
        `(B, N, M)` float32, the new memory.
    """
    memory = ops.cast(memory, "float32")
    weights = ops.cast(weights, "float32")
    erase = ops.cast(erase, "float32")
    keep = 1.0 - weights[..., :, None] * erase[..., None, :]  # (B, H, N, M)
    added = ops.einsum("bhn,bhm->bnm", weights, ops.cast(add, "float32"))
    return memory * ops.prod(keep, axis=1) + added
