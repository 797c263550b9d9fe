import functools
import importlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.ops.chunked import block_plan
from keras_attention.ops.chunked.block_plan import plan_blocks
from keras_attention.ops.chunked.blocks import Blocks
from keras_attention.ops.chunked.chunked_attention import chunked_attention
from keras_attention.ops.hashing import dropout_keep_mask
from keras_attention.testing import input_gradients

B, T, S, N, H, HV = 2, 23, 17, 3, 8, 5


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = ops.convert_to_tensor(rng.normal(size=(B, T, N, H)).astype("float32"))
    k = ops.convert_to_tensor(rng.normal(size=(B, S, N, H)).astype("float32"))
    v = ops.convert_to_tensor(rng.normal(size=(B, S, N, HV)).astype("float32"))
    key_mask = np.ones((B, S), bool)
    key_mask[1, 11:] = False  # the second example has 11 real keys
    return q, k, v, key_mask


def _value_and_grads(fn, q, k, v):
    def loss(q, k, v):
        out = fn(q, k, v)
        return ops.sum(out * ops.cos(out))  # a non-trivial upstream gradient

    return [fn(q, k, v), *input_gradients(loss, [q, k, v])]


def _jit(fn):
    """`fn` compiled with XLA on the current backend."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn, static_argnums=0)
    import tensorflow as tf

    return tf.function(fn, jit_compile=True, reduce_retracing=True)


@pytest.mark.parametrize(
    "mode, causal, offset",
    [
        ("eager", False, 0),
        ("eager", True, 0),
        ("eager", True, -8),  # rows that see no key at all
        ("xla", True, 6),
    ],
)
def test_equals_dense_forward_and_gradients(mode, causal, offset):
    q, k, v, key_mask = _inputs()
    _assert_equals_dense(
        mode,
        (q, k, v),
        key_mask=key_mask,
        causal=causal,
        causal_offset=offset,
        query_chunk_size=8,  # 23 and 17 are not multiples of the chunks
        key_chunk_size=6,
    )


def _assert_equals_dense(mode, qkv, key_mask=None, **kwargs):
    """`chunked_attention(*qkv, key_mask, **kwargs)` (eager or under XLA)
    and dense attention with the same mask built by hand give the same
    outputs and input gradients."""
    mask = np.ones((1, 1, T, S), bool)
    if key_mask is not None:
        mask = mask & key_mask[:, None, None, :]
    if kwargs.get("causal"):
        causal = ka_ops.causal_mask(T, S, kwargs.get("causal_offset", 0))
        mask = mask & np.array(causal)[None, None]

    def dense(q, k, v):
        return ka_ops.dot_product_attention(q, k, v, mask=mask)[0]

    def chunked(q, k, v):
        return chunked_attention(q, k, v, key_mask=key_mask, **kwargs)

    run = _jit(_value_and_grads) if mode == "xla" else _value_and_grads
    got = run(chunked, *qkv)
    want = _value_and_grads(dense, *qkv)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(
            np.array(a), np.array(b), rtol=1e-5, atol=2e-6, err_msg=name
        )


def test_fully_masked_rows_give_zeros():
    q, k, v, _ = _inputs()
    out = chunked_attention(
        q, k, v, causal=True, causal_offset=-T, query_chunk_size=4, key_chunk_size=4
    )
    np.testing.assert_array_equal(np.array(out), 0.0)


def test_one_chunk_covering_everything_matches_small_chunks():
    q, k, v, key_mask = _inputs(seed=1)
    big = chunked_attention(q, k, v, key_mask=key_mask, query_chunk_size=64)
    small = chunked_attention(
        q, k, v, key_mask=key_mask, query_chunk_size=5, key_chunk_size=3
    )
    np.testing.assert_allclose(np.array(big), np.array(small), rtol=1e-5, atol=1e-6)


def _dense_with(mask, keep=None, rate=0.0):
    """Dense reference: masked softmax, optional fixed dropout mask, then V."""

    def dense(q, k, v):
        _, weights = ka_ops.dot_product_attention(q, k, v, mask=mask)
        if keep is not None:
            weights = weights * ops.cast(keep, "float32") / (1.0 - rate)
        return ops.einsum("bnts,bsnh->btnh", weights, v)

    return dense


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_explicit_mask_equals_dense_forward_and_gradients(mode):
    q, k, v, key_mask = _inputs(seed=2)
    explicit = np.random.default_rng(3).random((B, T, S)) < 0.5
    explicit[1, 4] = False  # a query row that sees nothing
    causal = np.array(ka_ops.causal_mask(T, S, 3))
    mask = key_mask[:, None, None, :] & explicit[:, None] & causal[None, None]

    def chunked(q, k, v):
        return chunked_attention(
            q,
            k,
            v,
            key_mask=key_mask,
            causal=True,
            causal_offset=3,
            attention_mask=explicit,
            query_chunk_size=8,
            key_chunk_size=6,
        )

    run = _jit(_value_and_grads) if mode == "xla" else _value_and_grads
    got = run(chunked, q, k, v)
    want = _value_and_grads(_dense_with(mask), q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(
            np.array(a), np.array(b), rtol=1e-5, atol=2e-6, err_msg=name
        )
    np.testing.assert_array_equal(np.array(got[0])[1, 4], 0.0)


def test_broadcast_explicit_mask():
    q, k, v, _ = _inputs(seed=4)
    explicit = np.random.default_rng(5).random((1, T, S)) < 0.5
    got = chunked_attention(
        q, k, v, attention_mask=explicit, query_chunk_size=4, key_chunk_size=4
    )
    want = _dense_with(explicit[:, None])(q, k, v)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize(
    "mode, causal, q_chunk, k_chunk",
    [("eager", False, 8, 6), ("eager", True, 5, 4), ("xla", True, 8, 6)],
)
def test_dropout_equals_dense_with_the_same_keep_mask(mode, causal, q_chunk, k_chunk):
    """Forward and gradients with dropout equal the dense formula
    `((softmax * Z) V)` with `Z` the full keep mask drawn by
    `dropout_keep_mask`; the mask does not depend on the chunk sizes."""
    q, k, v, key_mask = _inputs(seed=6)
    rate = 0.4
    seed = ops.convert_to_tensor([123, 456], "int32")
    keep = dropout_keep_mask(
        seed, B, N, ops.arange(T, dtype="int32"), ops.arange(S, dtype="int32"), rate
    )
    mask = key_mask[:, None, None, :]
    if causal:
        mask = mask & np.array(ka_ops.causal_mask(T, S, 2))[None, None]

    def chunked(q, k, v):
        return chunked_attention(
            q,
            k,
            v,
            key_mask=key_mask,
            causal=causal,
            causal_offset=2,
            dropout_rate=rate,
            dropout_seed=seed,
            query_chunk_size=q_chunk,
            key_chunk_size=k_chunk,
        )

    run = _jit(_value_and_grads) if mode == "xla" else _value_and_grads
    got = run(chunked, q, k, v)
    want = _value_and_grads(_dense_with(mask, keep, rate), q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(
            np.array(a), np.array(b), rtol=1e-5, atol=2e-6, err_msg=name
        )
    no_dropout = _dense_with(mask)(q, k, v)
    assert not np.allclose(np.array(got[0]), np.array(no_dropout), atol=1e-3)


def _np_keep_mask(seed, batch, heads, t, s, rate):
    """`dropout_keep_mask` written again in numpy (uint64 arithmetic)."""
    full = 0xFFFFFFFF

    def mix(x):
        x = x ^ (x >> 16)
        x = (x * 0x7FEB352D) & full
        x = x ^ (x >> 15)
        x = (x * 0x846CA68B) & full
        return x ^ (x >> 16)

    seed = np.asarray(seed, np.int64).astype(np.uint64) & full
    head = np.arange(batch * heads, dtype=np.uint64).reshape(batch, heads, 1, 1)
    rows = mix(mix((head + seed[0]) & full) ^ np.arange(t, dtype=np.uint64)[:, None])
    cols = mix((np.arange(s, dtype=np.uint64) * 0x9E3779B9 + seed[1]) & full)
    bits = mix(rows ^ cols) >> 8
    return bits >= round(rate * (1 << 24))


def test_keep_mask_matches_numpy_and_has_the_right_statistics():
    rate = 0.3
    seed = [7, -9]  # negative seeds wrap around to uint32
    got = np.array(
        dropout_keep_mask(
            ops.convert_to_tensor(seed, "int32"),
            2,
            4,
            ops.arange(256, dtype="int32"),
            ops.arange(512, dtype="int32"),
            rate,
        )
    )
    np.testing.assert_array_equal(got, _np_keep_mask(seed, 2, 4, 256, 512, rate))
    # 1M Bernoulli(0.7) draws: the mean within 5 standard deviations.
    assert abs(got.mean() - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / got.size)
    # No structure along rows, columns, heads or examples.
    for axis in range(4):
        means = got.mean(axis=tuple(a for a in range(4) if a != axis))
        assert np.all(np.abs(means - (1 - rate)) < 0.05), axis
    flat = got.reshape(-1, 512).astype(float)
    assert abs(np.corrcoef(flat[:-1].ravel(), flat[1:].ravel())[0, 1]) < 0.01
    assert abs(np.corrcoef(flat[:, :-1].ravel(), flat[:, 1:].ravel())[0, 1]) < 0.01
    other = np.array(
        dropout_keep_mask(
            ops.convert_to_tensor([8, -9], "int32"),
            2,
            4,
            ops.arange(256, dtype="int32"),
            ops.arange(512, dtype="int32"),
            rate,
        )
    )
    assert 0.35 < np.mean(got != other) < 0.5  # 2 * 0.3 * 0.7 = 0.42


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dropout_rate=1.0, dropout_seed=[1, 2]), "dropout_rate=1.0"),
        (dict(dropout_rate=-0.1, dropout_seed=[1, 2]), "dropout_rate=-0.1"),
        (dict(dropout_rate=0.1), "dropout_seed=None"),
    ],
)
def test_bad_dropout_arguments_raise(kwargs, match):
    q, k, v, _ = _inputs()
    with pytest.raises(ValueError, match=match):
        chunked_attention(q, k, v, **kwargs)


@pytest.mark.tf_only
def test_graph_mode_loops_run_one_iteration_at_a_time():
    """TensorFlow's graph-mode loops default to 10 iterations in flight, each
    with its own block temporaries (1.6 GiB instead of 0.18 GiB for a
    forward+backward at L=4096); every loop of the chunked path, forward and
    backward, must run its iterations one at a time."""
    import tensorflow as tf

    q, k, v, key_mask = _inputs()

    @tf.function
    def step(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = chunked_attention(
                q, k, v, key_mask=key_mask, query_chunk_size=8, key_chunk_size=6
            )
            loss = tf.reduce_sum(out)
        return tape.gradient(loss, [q, k, v])

    graph = step.get_concrete_function(q, k, v).graph
    loops = []

    def visit(g):
        for op in g.get_operations():
            if op.type in ("While", "StatelessWhile"):
                loops.append(op.get_attr("parallel_iterations"))
                for name in ("body", "cond"):
                    visit(graph._functions[op.get_attr(name).name].graph)

    visit(graph)
    assert len(loops) >= 4  # map + inner loop forward, two nested backward
    assert set(loops) == {1}


def test_default_block_is_256_under_tensorflow_xla_and_512_otherwise():
    """The planner reads how the call is traced (`devices.runtime`):
    TensorFlow's XLA runs 256-blocks faster, its graph mode and JAX
    512-blocks (`block_plan`'s rule 1)."""
    seen = []

    def probe(x):
        seen.append(plan_blocks(None, None, None, 2, 4).query_block)
        return x

    probe(ops.zeros((1,)))
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.function(probe)(tf.zeros((1,)))
        tf.function(probe, jit_compile=True)(tf.zeros((1,)))
        assert seen == [512, 512, 256]
    else:
        _jit(lambda _, x: probe(x))(None, ops.zeros((1,)))
        assert seen == [512, 512]


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow's XLA default"
)
def test_chunked_attention_picks_its_block_size_from_the_static_lengths(monkeypatch):
    """The op passes its static lengths to `plan_blocks`: with the
    sizes scaled down (16-blocks, 32-blocks from 64 positions on), a
    64-long causal call under XLA takes 32-blocks, a 48-long one
    16-blocks, and the results match the dense reference."""
    import tensorflow as tf

    monkeypatch.setattr(block_plan, "MAX_DIAGONAL_WASTE", 1 / 2)
    monkeypatch.setattr(block_plan, "XLA_BLOCK", 16)
    monkeypatch.setattr(block_plan, "XLA_LONG_BLOCK", 32)
    seen = []
    original = Blocks.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append((self.cq, self.ck))

    monkeypatch.setattr(Blocks, "__init__", record)
    rng = np.random.default_rng(0)
    for length, size in ((64, 32), (48, 16)):
        seen.clear()
        q, k, v = (
            rng.normal(size=(1, length, 2, 8)).astype("float32") for _ in range(3)
        )
        xla = tf.function(
            lambda q, k, v: chunked_attention(q, k, v, causal=True), jit_compile=True
        )
        out = xla(q, k, v)
        assert set(seen) == {(size, size)}
        logits = np.einsum("tnh,snh->nts", q[0], k[0]) / np.sqrt(8.0)
        logits[:, ~np.tril(np.ones((length, length), bool))] = -np.inf
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected = np.einsum("nts,snh->tnh", weights, v[0])[None]
        np.testing.assert_allclose(out, expected, atol=1e-5)


def test_default_blocks_under_xla_equal_dense_past_one_block():
    """Causal, padded keys, 300 positions: two default blocks under
    TensorFlow's XLA (the last one padded), one block elsewhere."""
    rng = np.random.default_rng(1)
    q, k, v = (
        ops.convert_to_tensor(rng.normal(size=(1, 300, 2, 4)).astype("float32"))
        for _ in range(3)
    )
    key_mask = np.arange(300)[None] < 290
    mask = key_mask[:, None, None, :] & np.tril(np.ones((300, 300), bool))

    def chunked(_, q, k, v):
        return chunked_attention(q, k, v, key_mask=key_mask, causal=True)

    got = ops.convert_to_numpy(_jit(chunked)(None, q, k, v))
    want = ka_ops.dot_product_attention(q, k, v, mask=mask)[0]
    np.testing.assert_allclose(got, ops.convert_to_numpy(want), atol=1e-5)


def _record_head_groups(monkeypatch):
    """The number of heads of each group `chunked_attention` attends."""
    module = importlib.import_module("keras_attention.ops.chunked.chunked_attention")
    attend, sizes = module._attention, []

    def spy(query, *args, **kwargs):
        sizes.append(query.shape[2])
        return attend(query, *args, **kwargs)

    monkeypatch.setattr(module, "_attention", spy)
    # Blocks of (B=2, heads, 8, 6), H=8: two heads per group fit the cache.
    per_head = 4 * B * (8 * 6 + (8 + 2 * 6) * H)
    monkeypatch.setattr(block_plan, "WORKING_SET_BYTES", 2 * per_head + 1)
    return sizes


@pytest.mark.parametrize("causal, offset", [(True, 3), (False, 0)])
def test_heads_in_groups_on_a_cpu_equal_dense(monkeypatch, causal, offset):
    """On a CPU, under TensorFlow's XLA or JAX, the heads are attended in
    groups whose block tensors stay small (`_head_groups`); outputs and
    gradients still equal dense attention."""
    sizes = _record_head_groups(monkeypatch)
    q, k, v, key_mask = _inputs(seed=3)
    _assert_equals_dense(
        "xla",
        (q, k, v),
        key_mask=key_mask,
        causal=causal,
        causal_offset=offset,
        query_chunk_size=8,
        key_chunk_size=6,
    )
    assert sizes and sizes == [1, 2] * (len(sizes) // 2)


@pytest.mark.tf_only(reason="graph mode is TensorFlow's")
def test_tensorflow_graph_mode_attends_all_heads_at_once(monkeypatch):
    """Outside XLA TensorFlow runs one kernel per op: more, smaller blocks
    would only add per-op overhead."""
    import tensorflow as tf

    sizes = _record_head_groups(monkeypatch)
    q, k, v, _ = _inputs(seed=3)
    tf.function(chunked_attention)(q, k, v, query_chunk_size=8, key_chunk_size=6)
    assert sizes == [N]


def test_heads_stay_in_one_group_with_dropout_or_an_explicit_mask(monkeypatch):
    """Dropout's keep mask hashes the head's index within the call, and each
    group would chunk its own copy of an explicit mask: all heads go at
    once."""
    sizes = _record_head_groups(monkeypatch)
    q, k, v, _ = _inputs(seed=4)
    variants = [
        dict(dropout_rate=0.5, dropout_seed=ops.convert_to_tensor([1, 2], "int32")),
        dict(attention_mask=np.tril(np.ones((B, T, S), bool), 2)),
    ]
    for kwargs in variants:
        attend = functools.partial(chunked_attention, **kwargs)
        _jit(lambda _, q, k, v, attend=attend: attend(q, k, v))(None, q, k, v)
    assert sizes == [N] * len(variants)


def _head_modifiers(slopes):
    """A per-head bias `slopes[h] * (q - k) / T` and a mask through which
    head `h` sees `2 h` keys ahead: both read the head index."""

    def score(s, b, h, qi, ki):
        return s + ops.take(slopes, h) * ops.cast(qi - ki, s.dtype) / T

    def mask(b, h, qi, ki):
        return qi + 2 * h >= ki

    return dict(score_modifier=score, mask_modifier=mask)


def test_grouped_heads_with_modifiers_equal_dense(monkeypatch):
    """Heads in groups, compiled on either backend: a per-head bias and a
    mask that differs by head see each head's index among all heads (JAX
    hoists the slopes the bias closes over)."""
    sizes = _record_head_groups(monkeypatch)
    q, k, v, _ = _inputs(seed=6)
    slopes = ops.convert_to_tensor(np.array([-1.0, 0.5, 2.0], "float32"))
    modifiers = _head_modifiers(slopes)

    def chunked(q, k, v):
        return chunked_attention(
            q, k, v, query_chunk_size=8, key_chunk_size=6, **modifiers
        )

    def dense(q, k, v):
        return ka_ops.multi_head_attention(
            q, k, v, attention_impl="dense", **modifiers
        )[0]

    got = _jit(_value_and_grads)(chunked, q, k, v)
    want = _value_and_grads(dense, q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5, err_msg=name)
    assert sizes and sizes == [1, 2] * (len(sizes) // 2)


@pytest.mark.tf_only(reason="the bias's gradient is taken with tf.GradientTape")
def test_grouped_heads_give_modifiers_their_index_in_the_whole_call(monkeypatch):
    """Heads in groups: a learned per-head bias (a variable) and a mask that
    differs by head see each head's index among all heads, so the output
    and the gradients, the bias's too, equal dense attention's."""
    import tensorflow as tf

    sizes = _record_head_groups(monkeypatch)
    q, k, v, _ = _inputs(seed=5)
    slopes = keras.Variable(np.array([-1.0, 0.5, 2.0], "float32"))
    modifiers = _head_modifiers(slopes)

    def grads(attend):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = attend(q, k, v, **modifiers)
            loss = tf.reduce_sum(out * tf.cos(out))
        return [out, *tape.gradient(loss, [q, k, v, slopes])]

    chunked = functools.partial(chunked_attention, query_chunk_size=8, key_chunk_size=6)
    got = tf.function(lambda: grads(chunked), jit_compile=True)()
    dense = functools.partial(ka_ops.multi_head_attention, attention_impl="dense")
    want = grads(lambda *args, **kwargs: dense(*args, **kwargs)[0])
    for name, a, b in zip(("out", "dq", "dk", "dv", "dslopes"), got, want, strict=True):
        np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5, err_msg=name)
    assert sizes == [1, 2]


@pytest.mark.parametrize(
    "mode, causal, offset, q_chunk, k_chunk",
    [
        ("eager", False, 0, 8, 6),  # the last key chunk is padded
        ("eager", False, 0, 5, 17),
        ("eager", True, 0, 4, 4),
        ("eager", True, 6, 8, 6),  # queries past the last key
        ("eager", True, -8, 3, 5),  # rows that see no key at all
        ("xla", True, 3, 4, 3),
        ("xla", False, 0, 7, 4),
    ],
)
def test_without_masks_equals_dense(mode, causal, offset, q_chunk, k_chunk):
    """No key mask: the blocks the causal mask and the key padding leave
    whole run without a mask (`Blocks.maskless`); outputs and gradients
    still equal dense attention."""
    q, k, v, _ = _inputs(seed=2)
    _assert_equals_dense(
        mode,
        (q, k, v),
        causal=causal,
        causal_offset=offset,
        query_chunk_size=q_chunk,
        key_chunk_size=k_chunk,
    )


@pytest.mark.parametrize(
    "causal, offset", [(False, 0), (True, 0), (True, 5), (True, -7)]
)
def test_whole_blocks_are_exactly_those_every_query_sees_whole(causal, offset):
    """`Blocks.whole_key_chunks` (forward) and `whole_query_chunks_from`
    (backward) against a brute-force reading of the mask: block (i, j) runs
    without a mask only if all its queries see all its keys and key chunk j
    is not padded; and it is left masked only if it is not whole."""

    t_len, s_len, cq, ck = 23, 17, 4, 3
    q = ops.zeros((1, t_len, 1, 2))
    k = ops.zeros((1, s_len, 1, 2))
    blocks = Blocks(q, k, None, causal, offset, None, None, None, cq, ck)
    n_q, n_k = -(-t_len // cq), -(-s_len // ck)
    query = offset + np.arange(n_q * cq)[:, None]
    key = np.arange(n_k * ck)[None, :]
    seen = (key < s_len) & ((key <= query) | (not causal))  # (T', S')
    whole = seen.reshape(n_q, cq, n_k, ck).all(axis=(1, 3))  # (n_q, n_k)
    for i in range(n_q):
        first, stop = (int(x) for x in blocks.key_chunks(i))
        split = int(blocks.whole_key_chunks(i, first, stop))
        assert whole[i, first:split].all() and not whole[i, split:stop].any()
    for j in range(n_k):
        first = int(blocks.query_chunks_from(j))
        split = int(blocks.whole_query_chunks_from(j, first))
        assert whole[split:, j].all() and not whole[first:split, j].any()
