import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.ops.chunked_attention import chunked_attention
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
    mask = key_mask[:, None, None, :]
    if causal:
        mask = mask & np.array(ka_ops.causal_mask(T, S, offset))[None, None]

    def dense(q, k, v):
        return ka_ops.dot_product_attention(q, k, v, mask=mask)[0]

    def chunked(q, k, v):
        return chunked_attention(
            q,
            k,
            v,
            key_mask=key_mask,
            causal=causal,
            causal_offset=offset,
            query_chunk_size=8,  # 23 and 17 are not multiples of the chunks
            key_chunk_size=6,
        )

    run = _jit(_value_and_grads) if mode == "xla" else _value_and_grads
    got = run(chunked, q, k, v)
    want = _value_and_grads(dense, q, k, v)
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
