"""Score and mask modifiers: every built-in against NumPy, and the dense,
chunked and step-by-step cached paths against each other (forward and
gradients, eager and compiled)."""

import math

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention.ops.chunked.chunked_attention import chunked_attention

B, T, N, H = 2, 11, 4, 8


def _np_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's bucketing, written from the paper's description."""
    out = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        out += (rel > 0) * num_buckets
        n = np.abs(rel)
    else:
        n = np.maximum(-rel, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(n, 1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return out + np.where(n < max_exact, n, large)


def _np_slopes(n):
    def pow2(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return pow2(n)
    p = 2 ** math.floor(math.log2(n))
    return pow2(p) + pow2(2 * p)[0::2][: n - p]


SEGMENTS = np.array([[0] * 4 + [1] * 5 + [2] * 2, [0] * 7 + [1] * 4])
TABLE = np.random.default_rng(3).normal(size=(8, N)).astype("float32")


def _case(name):
    """`(score_modifier, mask_modifier, numpy bias(q, k) (N, T, S) or None,
    numpy mask(q, k) (B, N, T, S) or None)` for absolute positions."""
    causal = (lambda q, k: (q >= k)[None, None], km.CausalMask())
    cases = {
        "causal": (None, km.CausalMask(), None, causal[0]),
        "sliding_causal": (
            None,
            km.SlidingWindow(3),
            None,
            lambda q, k: ((q - k >= 0) & (q - k < 3))[None, None],
        ),
        "sliding_two_sided": (
            None,
            km.SlidingWindow(3, causal=False),
            None,
            lambda q, k: (np.abs(q - k) < 3)[None, None],
        ),
        "sinks": (
            None,
            km.AttentionSinks(2, km.SlidingWindow(3)),
            None,
            lambda q, k: (((q - k >= 0) & (q - k < 3)) | ((k < 2) & (q >= k)))[
                None, None
            ],
        ),
        "prefix_lm": (
            None,
            km.PrefixLM(4),
            None,
            lambda q, k: ((k <= q) | (k < 4))[None, None],
        ),
        "segments": (
            None,
            km.SegmentMask(SEGMENTS) & km.CausalMask(),
            None,
            lambda q, k: (
                (SEGMENTS[:, q[:, 0]][:, :, None] == SEGMENTS[:, k[0]][:, None, :])
                & (q >= k)
            )[:, None],
        ),
        "block_local_2d": (
            None,
            km.BlockLocal2D(4, query_block=(1, 2), memory_flange=(1, 1)),
            None,
            lambda q, k: (
                (k // 4 >= q // 4 - 1)
                & (k // 4 <= q // 4)
                & (k % 4 >= (q % 4) // 2 * 2 - 1)
                & (k % 4 < (q % 4) // 2 * 2 + 3)
                & (k <= q)
            )[None, None],
        ),
        "block_local_1d": (
            None,
            km.BlockLocal1D(query_block=3, memory_flange=2),
            None,
            lambda q, k: ((k >= q // 3 * 3 - 2) & (k <= q))[None, None],
        ),
        "alibi": (
            km.ALiBi(N),
            km.CausalMask(),
            lambda q, k: -np.array(_np_slopes(N))[:, None, None] * (q - k)[None],
            causal[0],
        ),
        "soft_cap": (km.SoftCap(0.5), None, "softcap", None),
        "t5_bias": (
            _t5_layer(),
            km.CausalMask(),
            lambda q, k: np.moveaxis(TABLE[_np_bucket(k - q, False, 8, 16)], -1, 0),
            causal[0],
        ),
        "user_written": (
            lambda s, b, h, q, k: (
                s
                + 0.1 * ops.cast(h + 1, "float32") * ops.sin(ops.cast(q - k, "float32"))
            ),
            lambda b, h, q, k: (q + k) % 3 != 1,
            lambda q, k: 0.1 * np.arange(1, N + 1)[:, None, None] * np.sin(q - k)[None],
            lambda q, k: ((q + k) % 3 != 1)[None, None],
        ),
    }
    return cases[name]


def _t5_layer():
    layer = km.RelativePositionBias(
        N, num_buckets=8, max_distance=16, bidirectional=False
    )
    layer.build()
    layer.table.assign(TABLE)
    return layer


CASES = [
    "causal",
    "sliding_causal",
    "sliding_two_sided",
    "sinks",
    "prefix_lm",
    "segments",
    "block_local_2d",
    "block_local_1d",
    "alibi",
    "soft_cap",
    "t5_bias",
    "user_written",
]


def _inputs(t=T, s=T, groups=N, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(B, t, N, H)).astype("float32")
    k = rng.normal(size=(B, s, groups, H)).astype("float32")
    v = rng.normal(size=(B, s, groups, H)).astype("float32")
    return q, k, v


def _np_attention(q, k, v, bias, mask, offset=0):
    t, s = q.shape[1], k.shape[1]
    qp = offset + np.arange(t)[:, None]
    kp = np.arange(s)[None, :]
    logits = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    if bias == "softcap":
        logits = 0.5 * np.tanh(logits / 0.5)
    elif bias is not None:
        logits = logits + bias(qp, kp)[None]
    allowed = np.ones(logits.shape, bool)
    if mask is not None:
        allowed = allowed & mask(qp, kp)
    logits = np.where(allowed, logits, -np.inf)
    top = np.max(logits, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    w = np.exp(logits - top) * allowed
    w = w / np.maximum(w.sum(-1, keepdims=True), 1e-30)
    return np.einsum("bnts,bsnh->btnh", w, v)


def _run(path, q, k, v, score, mask, compiled):
    def fn(q, k, v):
        if path == "chunked":
            return chunked_attention(
                q,
                k,
                v,
                score_modifier=score,
                mask_modifier=mask,
                query_chunk_size=4,
                key_chunk_size=3,
            )
        out, _ = ka.ops.multi_head_attention(
            q,
            k,
            v,
            attention_impl="dense",
            score_modifier=score,
            mask_modifier=mask,
        )
        return out

    return _compile(fn, compiled)(q, k, v)


def _compile(fn, compiled):
    if not compiled:
        return fn
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    import jax

    return jax.jit(fn)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("path", ["dense", "chunked"])
@pytest.mark.parametrize("name", CASES)
def test_matches_numpy(name, path, compiled):
    score, mask, np_bias, np_mask = _case(name)
    q, k, v = _inputs()
    expected = _np_attention(q, k, v, np_bias, np_mask)
    got = _run(path, q, k, v, score, mask, compiled)
    np.testing.assert_allclose(ops.convert_to_numpy(got), expected, atol=2e-5)


def _grads(path, score, mask, q, k, v, compiled):
    """Gradients of a fixed projection of the output w.r.t. q, k, v and
    the score modifier's variables."""
    weights = list(getattr(score, "trainable_variables", []))
    proj = np.random.default_rng(7).normal(size=(B, q.shape[1], N, H)).astype("float32")

    def loss(q, k, v):
        return ops.sum(_run(path, q, k, v, score, mask, False) * proj)

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def grads(q, k, v):
            q, k, v = (tf.convert_to_tensor(x) for x in (q, k, v))
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                value = loss(q, k, v)
            return tape.gradient(value, [q, k, v, *weights])

        return [ops.convert_to_numpy(g) for g in _compile(grads, compiled)(q, k, v)]
    import jax

    def stateless(values, q, k, v):
        mapping = list(zip(weights, values, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            return loss(q, k, v)

    values = [w.value for w in weights]
    fn = jax.grad(stateless, argnums=(0, 1, 2, 3))
    fn = jax.jit(fn) if compiled else fn
    d_w, *d_qkv = fn(values, q, k, v)
    return [np.asarray(g) for g in (*d_qkv, *d_w)]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", CASES)
def test_chunked_gradients_equal_dense(name, compiled):
    score, mask, _, _ = _case(name)
    q, k, v = _inputs()
    dense = _grads("dense", score, mask, q, k, v, compiled)
    chunked = _grads("chunked", score, mask, q, k, v, compiled)
    assert len(dense) == len(chunked) == 3 + (name == "t5_bias")
    for d, c in zip(dense, chunked, strict=True):
        np.testing.assert_allclose(c, d, atol=5e-5, rtol=1e-4)
    if name == "t5_bias":  # the table really receives a gradient
        assert np.abs(dense[3]).sum() > 1e-3


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", CASES)
def test_cached_decoding_equals_full_pass(name, compiled):
    """Token by token with the query at the (traced) cache index and the
    keys written so far visible: the rows of the full causal pass."""
    score, mask, _, _ = _case(name)
    mask = km.CausalMask() if mask is None else km.AndMask([mask, km.CausalMask()])
    q, k, v = _inputs()
    full, _ = ka.ops.multi_head_attention(
        q, k, v, attention_impl="dense", score_modifier=score, mask_modifier=mask
    )

    def step(q_step, index):
        written = ops.arange(T, dtype="int32")[None] <= index
        out, _ = ka.ops.multi_head_attention(
            q_step,
            k,
            v,
            key_mask=written,
            causal_offset=index,
            score_modifier=score,
            mask_modifier=mask,
        )
        return out

    step = _compile(step, compiled)
    for index in range(T):
        out = step(q[:, index : index + 1], ops.convert_to_tensor(index, "int32"))
        np.testing.assert_allclose(
            ops.convert_to_numpy(out)[:, 0],
            ops.convert_to_numpy(full)[:, index],
            atol=2e-5,
        )


def test_chunked_offset_matches_dense_offset():
    """A block of queries after a cache: positions offset on both paths."""
    score, mask, _, _ = _case("alibi")
    q, k, v = _inputs(t=5)
    dense, _ = ka.ops.multi_head_attention(
        q,
        k,
        v,
        causal_offset=6,
        attention_impl="dense",
        score_modifier=score,
        mask_modifier=mask,
    )
    chunked = chunked_attention(
        q,
        k,
        v,
        causal_offset=6,
        score_modifier=score,
        mask_modifier=mask,
        query_chunk_size=2,
        key_chunk_size=4,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(chunked), ops.convert_to_numpy(dense), atol=2e-5
    )


def test_alibi_slopes_match_the_paper():
    for n in (1, 2, 3, 4, 6, 8, 12, 16):
        np.testing.assert_allclose(ka.ops.alibi_slopes(n), _np_slopes(n))
    assert ka.ops.alibi_slopes(8) == [2.0**-i for i in range(1, 9)]


def test_relative_position_bucket_matches_numpy():
    rel = np.arange(-300, 300)
    for bidirectional in (True, False):
        got = ka.ops.relative_position_bucket(rel, bidirectional, 32, 128)
        np.testing.assert_array_equal(
            ops.convert_to_numpy(got), _np_bucket(rel, bidirectional, 32, 128)
        )


def test_t5_bias_reads_the_heads_it_is_given_from_any_index_shape():
    """The per-head row gather (indices shaped `(1, N, 1, 1)`, `(1, 1, T,
    1)`, `(1, 1, 1, S)`) and the general path (indices broadcast to the full
    grid) give the table's bias at each head's own index, here heads 1 and
    3 of 4 (as a group of heads attended apart sees them)."""
    layer = _t5_layer()
    q_pos, k_pos = np.arange(5, 12), np.arange(9)
    batch, head, query, key = ka.ops.modifier_calls.position_indices(1, 2, q_pos, k_pos)
    head = 2 * head + 1
    score = np.random.default_rng(0).normal(size=(1, 2, 7, 9)).astype("float32")
    expected = score + np.moveaxis(
        TABLE[_np_bucket(k_pos[None] - q_pos[:, None], False, 8, 16)][..., [1, 3]],
        -1,
        0,
    )
    rows = layer(score, batch, head, query, key)
    full = [ops.broadcast_to(x, (1, 2, 7, 9)) for x in (batch, head, query, key)]
    general = layer(score, *full)
    np.testing.assert_allclose(ops.convert_to_numpy(rows), expected, rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(general), expected, rtol=1e-6)


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("path", ["dense", "chunked", "single_query"])
def test_grouped_query_attention_equals_repeated_heads(groups, path):
    q, k, v = _inputs(t=1 if path == "single_query" else T, groups=groups)
    repeats = N // groups
    impl = "chunked" if path == "chunked" else "dense"
    grouped, _ = ka.ops.multi_head_attention(q, k, v, attention_impl=impl)
    full, _ = ka.ops.multi_head_attention(
        q,
        np.repeat(k, repeats, axis=2),
        np.repeat(v, repeats, axis=2),
        attention_impl="dense",
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(grouped), ops.convert_to_numpy(full), atol=2e-5
    )


def test_grouped_heads_must_divide():
    q, k, v = _inputs(groups=3)
    with pytest.raises(ValueError, match="divide the query heads"):
        ka.ops.dot_product_attention(q, k[:, :, :3], v[:, :, :3])


def test_modifiers_round_trip_through_keras_serialization():
    for name in CASES:
        score, mask, _, _ = _case(name)
        for modifier in (score, mask):
            if modifier is None or not hasattr(modifier, "get_config"):
                continue
            if isinstance(modifier, km.AndMask) and any(
                isinstance(m, km.SegmentMask) for m in modifier.masks
            ):
                with pytest.raises(TypeError, match="cannot be serialised"):
                    keras.saving.serialize_keras_object(modifier)
                continue
            config = keras.saving.serialize_keras_object(modifier)
            copy = keras.saving.deserialize_keras_object(config)
            assert type(copy) is type(modifier)
            assert copy.get_config() == modifier.get_config()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: km.SlidingWindow(0), "window"),
        (lambda: km.ALiBi(0), "num_heads"),
        (lambda: km.SoftCap(-1.0), "cap"),
        (lambda: km.AttentionSinks(0, km.CausalMask()), "num_sinks"),
        (lambda: km.BlockLocal2D(4, query_block=(0, 2)), "query_block"),
        (lambda: km.BlockLocal1D(query_block=0), "query_block"),
        (lambda: km.BlockLocal1D(memory_flange=-2), "memory_flange"),
        (lambda: km.RelativePositionBias(4, num_buckets=2), "num_buckets"),
    ],
)
def test_bad_arguments_name_themselves(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_chunked_path_reads_a_modifier_variable_assigned_after_a_call():
    """A learned bias updated between eager calls is read fresh (JAX's
    closure conversion caches per function)."""
    bias = _t5_layer()
    q, k, v = _inputs()

    def both():
        chunked = chunked_attention(q, k, v, score_modifier=bias, query_chunk_size=4)
        dense, _ = ka.ops.multi_head_attention(
            q, k, v, attention_impl="dense", score_modifier=bias
        )
        return ops.convert_to_numpy(chunked), ops.convert_to_numpy(dense)

    before, _ = both()
    bias.table.assign(TABLE * 3.0)
    after, dense = both()
    np.testing.assert_allclose(after, dense, atol=2e-5)
    assert np.abs(after - before).max() > 1e-3
