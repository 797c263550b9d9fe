"""Greedy search: pick the arg-max token at every step."""

import keras
from keras import ops

from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank


def _write(buffer, index, value):
    """`buffer[:, index] = value` for a `(B, L, ...)` buffer, as a new tensor."""
    length = ops.shape(buffer)[1]
    hit = ops.equal(ops.arange(length, dtype="int32"), index)  # (L,)
    hit = ops.reshape(hit, (1, -1) + (1,) * (len(buffer.shape) - 2))
    return ops.where(hit, ops.expand_dims(ops.cast(value, buffer.dtype), 1), buffer)


def _mask_finished(value, finished):
    """Zero `value` `(B, ...)` where `finished` `(B,)` is True."""
    keep = ops.reshape(ops.logical_not(finished), (-1,) + (1,) * (len(value.shape) - 1))
    return ops.where(keep, value, ops.zeros_like(value))


def greedy_search(
    step_fn, start_tokens, state, max_length, end_token=None, pad_token=0
):
    """Decode `max_length` tokens, each the arg-max of `step_fn`'s logits.

    The loop runs at most `max_length` steps over fixed-size buffers (it
    compiles under `tf.function(jit_compile=True)` and `jax.jit`) and stops
    as soon as every sequence has produced `end_token`; after `end_token`
    a sequence's tokens are `pad_token` and its `aux` values are zeros.

    Args:
        step_fn: `step_fn(tokens, state, index) -> (logits, state, aux)`;
            see `keras_attention.decoding`.
        start_tokens: int `(B,)`, the first input tokens (e.g. `<start>`).
        state: the initial decoder state, any nested structure of tensors.
        max_length: int, number of tokens to generate.
        end_token: optional int id that ends a sequence (it is kept in the
            output).
        pad_token: int id written after `end_token`.

    Returns:
        `(tokens, aux)`: int32 `(B, max_length)` and `aux` stacked along
        axis 1 (`(B, max_length, ...)` for each tensor), `None` if
        `step_fn` returns `None` as `aux`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attention.decoding import greedy_search
    >>> def step_fn(tokens, state, index):  # always predicts tokens + 1
    ...     return ops.one_hot(tokens + 1, 10), state, None
    >>> tokens, _ = greedy_search(step_fn, np.array([0, 3]), (), max_length=4)
    >>> ops.convert_to_numpy(tokens).tolist()
    [[1, 2, 3, 4], [4, 5, 6, 7]]
    """

    def choose(logits, index):
        return ops.argmax(logits, axis=-1)

    return decode(
        step_fn, choose, start_tokens, state, max_length, end_token, pad_token
    )


def decode(step_fn, choose, start_tokens, state, max_length, end_token, pad_token):
    """The loop of `greedy_search` with the token choice left open.

    `choose(logits, index) -> tokens` picks the next tokens `(B,)` from the
    logits `(B, V)` of step `index` (a scalar int32 tensor): the arg-max for
    greedy search, a random draw for `sample`. Everything else (buffers,
    early stop, `pad_token` and zero `aux` after `end_token`) is shared.
    """
    check_positive_int("max_length", max_length)
    start_tokens = ops.cast(start_tokens, "int32")
    check_rank("start_tokens", start_tokens.shape, 1)
    batch_size = ops.shape(start_tokens)[0]

    def next_tokens(logits, index, finished):
        tokens = ops.cast(choose(logits, index), "int32")  # (B,)
        return ops.where(finished, ops.cast(pad_token, "int32"), tokens)

    def is_end(tokens):
        if end_token is None:
            return ops.zeros_like(tokens, dtype="bool")
        return ops.equal(tokens, end_token)

    # Step 0 runs outside the loop: it tells the shapes of the aux buffers.
    zero = ops.convert_to_tensor(0, "int32")
    finished = ops.zeros((batch_size,), dtype="bool")
    logits, state, aux = step_fn(start_tokens, state, zero)
    tokens = next_tokens(logits, zero, finished)
    aux_flat = keras.tree.flatten(aux) if aux is not None else []
    token_buf = _write(
        ops.full((batch_size, max_length), pad_token, dtype="int32"), 0, tokens
    )
    aux_bufs = [
        _write(
            ops.zeros((batch_size, max_length) + tuple(ops.shape(a)[1:]), a.dtype), 0, a
        )
        for a in aux_flat
    ]
    finished = is_end(tokens)

    def body(index, carry):
        token_buf, aux_bufs, tokens, state, finished = carry
        logits, state, aux = step_fn(tokens, state, index)
        new_tokens = next_tokens(logits, index, finished)
        new_aux = keras.tree.flatten(aux) if aux is not None else []
        aux_bufs = [
            _write(buf, index, _mask_finished(a, finished))
            for buf, a in zip(aux_bufs, new_aux, strict=True)
        ]
        token_buf = _write(token_buf, index, new_tokens)
        finished = ops.logical_or(finished, is_end(new_tokens))
        return token_buf, aux_bufs, new_tokens, state, finished

    if max_length > 1:
        # Stops early once every sequence has ended (a data-dependent trip
        # count still compiles: XLA and `jax.jit` lower it to a while loop).
        def cond(index, token_buf, aux_bufs, tokens, state, finished):
            return ops.logical_and(
                index < max_length, ops.logical_not(ops.all(finished))
            )

        def loop_body(index, *carry):
            return (index + 1, *body(index, carry))

        one = ops.convert_to_tensor(1, "int32")
        carry = (one, token_buf, aux_bufs, tokens, state, finished)
        _, token_buf, aux_bufs, *_ = ops.while_loop(cond, loop_body, carry)
    if aux is None:
        return token_buf, None
    return token_buf, keras.tree.pack_sequence_as(aux, list(aux_bufs))
