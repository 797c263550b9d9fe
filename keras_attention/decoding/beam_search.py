"""Beam search with the GNMT length penalty over a cached step function.

Why not `keras_hub.samplers.BeamSampler`: it ranks hypotheses by their raw
log-probability (no length penalty), keeps extending (and re-scoring) beams
that have already produced the end token, and its `next(prompt, cache,
index) -> (logits, hidden_states, cache)` callback has no way to hand back
per-step values such as cross-attention weights. `GreedySampler` has the
same last limitation. This module keeps their good parts: one
`ops.while_loop` over fixed-size buffers and caches, so the whole search
compiles once under XLA, and it stops as soon as every hypothesis ended.
"""

from typing import Any
from typing import NamedTuple

import keras
from keras import ops

from keras_attention.ops.softmax import MASK_VALUE
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank


def length_penalty(lengths, alpha):
    """GNMT length penalty `lp(Y) = ((5 + |Y|) / 6) ** alpha` (Wu et al., 2016)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def _take_rows(x, rows):
    return ops.take(x, rows, axis=0)


def beam_search(
    step_fn,
    start_tokens,
    state,
    max_length,
    end_token=None,
    pad_token=0,
    num_beams=4,
    length_penalty_alpha=0.6,
    return_all_beams=False,
):
    """Decode with beam search; `num_beams=1` is greedy search.

    Every example keeps `num_beams` hypotheses. At each step each live
    hypothesis is extended by every token; a hypothesis that has produced
    `end_token` is finished and can only be extended by `pad_token` at no
    cost. Candidates are ranked by `log P(Y) / lp(Y)` with the GNMT length
    penalty `lp(Y) = ((5 + |Y|) / 6) ** length_penalty_alpha` (`|Y|` counts
    the end token), and the best `num_beams` survive; the step's cache rows
    follow their hypotheses. `length_penalty_alpha=0` ranks by plain
    log-probability.

    The loop runs at most `max_length` steps over fixed-size buffers (it
    compiles once under `tf.function(jit_compile=True)` or `jax.jit`) and
    stops early once every hypothesis has ended.

    Args:
        step_fn: `step_fn(tokens, state, index) -> (logits, state, aux)`:
            `tokens` int32 `(B * num_beams,)` the previous tokens, `state`
            any nested structure of tensors whose first axis is the batch
            (e.g. a key/value cache), `index` the int32 position being
            decoded, `logits` `(B * num_beams, V)`, `aux` a nested
            structure of per-step tensors to collect (e.g. attention
            weights) or `None`. Rows are example-major: row `b * num_beams + k`
            is beam `k` of example `b`; anything `step_fn` closes over that
            has a batch axis must be repeated `num_beams` times
            (`ops.repeat(x, num_beams, axis=0)`).
        start_tokens: int `(B,)`, the first input tokens.
        state: the initial state for `B` examples (repeated here).
        max_length: int, number of tokens to generate.
        end_token: optional int id that finishes a hypothesis.
        pad_token: int id written after `end_token`.
        num_beams: beam width.
        length_penalty_alpha: `alpha` of the length penalty.
        return_all_beams: return every beam, best first, instead of the
            best one.

    Returns:
        `(tokens, aux, scores)`: int32 `(B, max_length)`, `aux` stacked
        along axis 1 (`(B, max_length, ...)`; `None` if `step_fn` returns
        `None`), and the float32 length-normalized log-probabilities `(B,)`.
        With `return_all_beams=True` a beam axis follows the batch axis:
        `(B, num_beams, max_length)`, `(B, num_beams, max_length, ...)`,
        `(B, num_beams)`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attention.decoding import beam_search
    >>> def step_fn(tokens, state, index):  # likes tokens + 1, then token 0
    ...     logits = 3.0 * ops.one_hot(tokens + 1, 10) + ops.one_hot(0, 10)
    ...     return logits, state, None
    >>> tokens, _, scores = beam_search(
    ...     step_fn, np.array([2, 5]), (), max_length=3, num_beams=2)
    >>> ops.convert_to_numpy(tokens).tolist()
    [[3, 4, 5], [6, 7, 8]]

    References:
        - Wu et al., 2016 (GNMT, length penalty): https://arxiv.org/abs/1609.08144
    """
    check_positive_int("max_length", max_length)
    check_positive_int("num_beams", num_beams)
    if not isinstance(length_penalty_alpha, (int, float)) or length_penalty_alpha < 0:
        raise ValueError(
            "`length_penalty_alpha` must be a number >= 0. "
            f"Received: length_penalty_alpha={length_penalty_alpha!r}"
        )
    start_tokens = ops.cast(start_tokens, "int32")
    check_rank("start_tokens", start_tokens.shape, 1)
    search = _Search(
        step_fn,
        ops.shape(start_tokens)[0],
        num_beams,
        end_token,
        pad_token,
        length_penalty_alpha,
    )
    beams = _initial_beams(search, start_tokens, state)
    buffers, beams, aux = _first_step(search, beams, max_length)
    if max_length > 1:
        buffers, beams = _search_loop(search, max_length, buffers, beams)
    return _best_first(search, beams, buffers, aux, return_all_beams)


class _Search(NamedTuple):
    """What stays the same through one search."""

    step_fn: Any
    batch: Any  # B, an int or a scalar tensor
    k: int  # the number of beams
    end_token: Any
    pad_token: int
    alpha: float  # of the length penalty


class _Beams(NamedTuple):
    """The `K` hypotheses of every example; rows `(B * K, ...)` are
    example-major (row `b * K + k` is beam `k` of example `b`)."""

    tokens: Any  # int32 (B * K,), the last token of each hypothesis
    state: Any  # step_fn's state, tensors (B * K, ...)
    log_probs: Any  # float32 (B, K)
    lengths: Any  # int32 (B, K), the end token counted
    finished: Any  # bool (B, K)


def _initial_beams(search, start_tokens, state):
    batch, k = search.batch, search.k

    def repeat(x):
        return ops.repeat(x, k, axis=0)  # (B, ...) -> (B * K, ...)

    # Only beam 0 is alive at first, so the K beams do not start identical.
    log_probs = ops.tile(
        ops.convert_to_tensor([[0.0] + [MASK_VALUE] * (k - 1)], "float32"), (batch, 1)
    )  # (B, K)
    return _Beams(
        tokens=repeat(start_tokens),
        state=keras.tree.map_structure(repeat, state),
        log_probs=log_probs,
        lengths=ops.zeros((batch, k), "int32"),
        finished=ops.zeros((batch, k), "bool"),
    )


def _extend(search, index, beams):
    """Step `index`: every hypothesis extended by every token, the best `K`
    of each example kept. Returns `(rows, beams, aux)`: `rows` `(B * K,)`
    the parent row of every surviving hypothesis, `aux` the step's values
    of those rows."""
    batch, k = search.batch, search.k
    logits, state, aux = search.step_fn(beams.tokens, beams.state, index)
    vocab = ops.shape(logits)[-1]
    step_log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    step_log_probs = ops.reshape(step_log_probs, (batch, k, vocab))
    # A finished hypothesis continues with `pad_token` only, at no cost.
    pad_only = ops.where(
        ops.equal(ops.arange(vocab, dtype="int32"), search.pad_token), 0.0, MASK_VALUE
    )
    step_log_probs = ops.where(beams.finished[..., None], pad_only, step_log_probs)
    candidates = beams.log_probs[..., None] + step_log_probs  # (B, K, V)
    new_lengths = beams.lengths + ops.cast(ops.logical_not(beams.finished), "int32")
    ranked = candidates / length_penalty(new_lengths, search.alpha)[..., None]
    _, best = ops.top_k(ops.reshape(ranked, (batch, k * vocab)), k)  # (B, K)
    beam = best // vocab
    new_tokens = ops.cast(best % vocab, "int32")
    log_probs = ops.take_along_axis(
        ops.reshape(candidates, (batch, k * vocab)), best, axis=1
    )
    finished = ops.take_along_axis(beams.finished, beam, axis=1)
    if search.end_token is not None:
        finished = ops.logical_or(finished, ops.equal(new_tokens, search.end_token))
    rows = ops.reshape(
        ops.arange(batch, dtype="int32")[:, None] * k + ops.cast(beam, "int32"),
        (-1,),
    )  # (B * K,)

    def take(structure):
        return keras.tree.map_structure(lambda x: _take_rows(x, rows), structure)

    beams = _Beams(
        tokens=ops.reshape(new_tokens, (-1,)),
        state=take(state),
        log_probs=log_probs,
        lengths=ops.take_along_axis(new_lengths, beam, axis=1),
        finished=finished,
    )
    return rows, beams, None if aux is None else take(aux)


def _write(buffer, index, rows, value):
    """`buffer` `(B * K, L, ...)` with its rows following their hypotheses
    (`rows`) and `value` written at position `index`."""
    buffer = _take_rows(buffer, rows)
    start = [0, index] + [0] * (len(buffer.shape) - 2)
    return ops.slice_update(
        buffer, start, ops.expand_dims(ops.cast(value, buffer.dtype), 1)
    )


def _write_step(buffers, index, rows, beams, aux):
    """The token buffer and the aux buffers (a list) after a step."""
    token_buf, aux_bufs = buffers
    new_aux = [] if aux is None else keras.tree.flatten(aux)
    aux_bufs = [
        _write(buf, index, rows, a) for buf, a in zip(aux_bufs, new_aux, strict=True)
    ]
    return _write(token_buf, index, rows, beams.tokens), aux_bufs


def _first_step(search, beams, max_length):
    """Step 0 runs outside the loop: it tells the shapes of the aux buffers.
    Returns `(buffers, beams, aux)`, `buffers` the token and aux buffers
    `(B * K, max_length, ...)`."""
    zero = ops.convert_to_tensor(0, "int32")
    rows, beams, aux = _extend(search, zero, beams)
    rows_count = search.batch * search.k
    token_buf = ops.full((rows_count, max_length), search.pad_token, dtype="int32")
    aux_bufs = [
        ops.zeros((rows_count, max_length) + tuple(ops.shape(a)[1:]), a.dtype)
        for a in ([] if aux is None else keras.tree.flatten(aux))
    ]
    buffers = _write_step((token_buf, aux_bufs), zero, rows, beams, aux)
    return buffers, beams, aux


def _search_loop(search, max_length, buffers, beams):
    """Steps 1 to `max_length - 1`, in one `while_loop` that stops once
    every hypothesis has ended (nothing changes any more)."""

    def cond(index, buffers, beams):
        return ops.logical_and(
            index < max_length, ops.logical_not(ops.all(beams.finished))
        )

    def body(index, buffers, beams):
        rows, beams, aux = _extend(search, index, beams)
        buffers = _write_step(buffers, index, rows, beams, aux)
        return index + 1, buffers, beams

    one = ops.convert_to_tensor(1, "int32")
    _, buffers, beams = ops.while_loop(cond, body, (one, buffers, beams))
    return buffers, beams


def _best_first(search, beams, buffers, aux, return_all_beams):
    """`(tokens, aux, scores)` of `beam_search`, the beams ranked."""
    batch, k = search.batch, search.k
    # Hypotheses that never ended are scored at their full length.
    scores = beams.log_probs / length_penalty(beams.lengths, search.alpha)  # (B, K)
    order = ops.argsort(-scores, axis=-1)  # best first
    scores = ops.take_along_axis(scores, order, axis=1)
    rows = ops.reshape(ops.arange(batch, dtype="int32")[:, None] * k + order, (-1,))

    def select(x):
        x = _take_rows(x, rows)
        x = ops.reshape(x, (batch, k) + tuple(ops.shape(x)[1:]))
        return x if return_all_beams else x[:, 0]

    token_buf, aux_bufs = buffers
    aux_out = None
    if aux is not None:
        aux_out = keras.tree.pack_sequence_as(aux, [select(b) for b in aux_bufs])
    return select(token_buf), aux_out, scores if return_all_beams else scores[:, 0]
