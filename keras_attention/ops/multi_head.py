"""`multi_head_attention`: the one entry point of the layers, on three paths.

The top of `ops`: it asks the dispatch for a plan (`ops/dispatch/`:
`plan_attention`), records it (`recording_attention_plans`) and runs the
path the plan names: dense (`ops/dense/`: `dot_product_attention`),
chunked (`ops/chunked/`: `chunked_attention`), fused (`ops/fused/`:
`fused_attention`), or, for a TensorFlow graph traced with an unknown
length, dense or chunked chosen when the graph runs (`_runtime_choice`).
"""

import keras
from keras import ops

from keras_attention.ops.boolean_masks import check_attention_masks
from keras_attention.ops.boolean_masks import compute_attention_mask
from keras_attention.ops.boolean_masks import merge_masks
from keras_attention.ops.chunked.chunked_attention import chunked_attention
from keras_attention.ops.dense.dot_product_attention import check_key_value_heads
from keras_attention.ops.dense.dot_product_attention import dot_product_attention
from keras_attention.ops.dense.dot_product_attention import repeat_key_value_heads
from keras_attention.ops.dispatch import attention_plan as dispatch
from keras_attention.ops.dispatch.plan_recording import record
from keras_attention.ops.fused.fused_attention import fused_attention
from keras_attention.ops.loops import tensorflow_xla_context


def multi_head_attention(
    query,
    key,
    value,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    causal_offset=0,
    sliding_window=None,
    attention_impl="auto",
    return_weights=False,
    dropout_rate=0.0,
    seed=None,
    training=False,
    validate=True,
    score_modifier=None,
    mask_modifier=None,
    flash_attention=None,
):
    """Multi-head attention with its masks, on the path `plan_attention`
    chooses: `dot_product_attention` (dense, O(T S) memory),
    `chunked_attention` (exact, O(T + S)) or `fused_attention` (Keras'
    fused kernel where it has one). All give the same output and gradients
    (to rounding); the plan goes to `recording_attention_plans`.

    Args:
        query: `(B, T, N, H)`.
        key: `(B, S, G, H)`, `G` dividing `N` (grouped-query attention when
            `G < N`, see `dot_product_attention`).
        value: `(B, S, G, Hv)`.
        query_mask: `(B, T)`; padded queries attend to nothing (output 0).
        value_mask, key_mask: `(B, S)` (or `(1, S)`); padded keys get zero
            weight.
        attention_mask: any pattern, `(T, S)`, `(B, T, S)` or per head
            `(B, N, T, S)`; dimensions of size 1 broadcast.
        use_causal_mask: query `i` sees keys `j <= causal_offset + i`.
        causal_offset: absolute position of the first query.
        sliding_window: `None` or an int `w`: query `i` sees keys
            `|j - (causal_offset + i)| < w`.
        attention_impl: `"auto"`, `"dense"`, `"chunked"` or `"fused"`.
        return_weights: also return the weights (dense path only).
        dropout_rate, seed, training: attention dropout: dense with
            `keras.random.dropout`, chunked with a hash of the coordinates
            (same distribution); the fused path has none (a ValueError).
        validate: check the masks (the layers check theirs and pass `False`).
        score_modifier, mask_modifier: see `keras_attention.ops.modifier_calls`;
            query positions offset by `causal_offset` (fused: biases only).
        flash_attention: Keras' switch, see `plan_attention`.

    Returns:
        `(output, weights)`: `(B, T, N, Hv)` and float32 `(B, N, T, S)`,
        or `None` for the weights when they were not asked for.
    """
    masks = dict(
        query_mask=query_mask,
        value_mask=value_mask,
        key_mask=key_mask,
        attention_mask=attention_mask,
    )
    positional = dict(use_causal_mask=use_causal_mask, causal_offset=causal_offset)
    positional["sliding_window"] = sliding_window
    modifiers = dict(score_modifier=score_modifier, mask_modifier=mask_modifier)
    plan = _plan(
        attention_impl,
        (query, key, value),
        masks,
        positional,
        modifiers,
        return_weights=return_weights,
        dropout=dropout_rate > 0 and bool(training),
        flash_attention=flash_attention,
    )
    if validate:
        check_attention_masks(query, key, **masks, num_heads=query.shape[2])
    args = (query, key, value, masks, positional)
    return _follow(
        plan, args, (dropout_rate, seed, training), modifiers, return_weights
    )


def _follow(plan, args, dropout, modifiers, return_weights):
    """`(output, weights)` on the path of `plan`."""
    if plan.impl == "dense":
        return _dense(*args, dropout, modifiers, return_weights)
    if plan.impl == "fused":
        output = _fused(*args, modifiers, plan.flash_attention)
    elif plan.impl == "chunked":
        output = _chunked_path(*args, dropout, modifiers)
    else:
        output = _runtime_choice(*args, dropout, modifiers)
    # Padded queries: zeros (the dense path's weights are already all zero
    # there). Outside the `cond`: under XLA, a branch's intermediates reach
    # its gradient through placeholders of unknown shape, and the gradient
    # of this product would read the length of one.
    query_mask = args[3]["query_mask"]
    if query_mask is not None:
        output = output * ops.cast(query_mask, output.dtype)[:, :, None, None]
    return output, None


def _plan(attention_impl, qkv, masks, positional, modifiers, **options):
    """The recorded `plan_attention` of the call."""
    query, key, value = qkv
    # Query padding never reaches a kernel (padded rows are zeroed).
    masked = any(
        masks[name] is not None for name in ("value_mask", "key_mask", "attention_mask")
    )
    plan = dispatch.plan_attention(
        attention_impl,
        tuple(query.shape),
        tuple(key.shape),
        value.shape[-1],
        query.dtype,
        masked=masked,
        **options,
        **positional,
        **modifiers,
    )
    return record(plan)


def _fused(query, key, value, masks, positional, modifiers, flash_attention):
    """`fused_attention` with the key padding merged into one `(B, S)` mask;
    padded queries are zeroed by the caller."""
    return fused_attention(
        query,
        key,
        value,
        key_mask=merge_masks(masks["value_mask"], masks["key_mask"]),
        attention_mask=masks["attention_mask"],
        **positional,
        **modifiers,
        flash_attention=flash_attention,
    )


def _dense(query, key, value, masks, positional, dropout, modifiers, return_weights):
    """`dot_product_attention` with the masks merged into one."""
    mask = compute_attention_mask(query, key, **masks, **positional, validate=False)
    if mask is not None and len(mask.shape) == 3:
        mask = mask[:, None]  # (B, 1, T, S): the same for every head
    dropout_rate, seed, training = dropout
    return dot_product_attention(
        query,
        key,
        value,
        mask=mask,
        dropout_rate=dropout_rate,
        seed=seed,
        training=training,
        return_weights=return_weights,
        query_offset=positional["causal_offset"],
        **modifiers,
    )


def _chunked_path(query, key, value, masks, positional, dropout, modifiers):
    """`chunked_attention` with grouped heads repeated; the `(B, T, S)` mask
    is never built. Padded queries are zeroed by the caller."""
    groups = check_key_value_heads(query, key, value)
    key = repeat_key_value_heads(key, groups)
    value = repeat_key_value_heads(value, groups)
    return _chunked(query, key, value, masks, positional, dropout, modifiers)


def _runtime_choice(query, key, value, masks, positional, dropout, modifiers):
    """The dense or the chunked output, chosen from the lengths at run time
    (TensorFlow graphs traced for an unknown length).

    Both paths are in the graph and `ops.cond` runs one. Outside XLA its
    gradient runs that path's backward only. Under XLA see `_recomputed`.
    """
    t_len, s_len = ops.shape(query)[1], ops.shape(key)[1]
    large = ops.greater_equal(
        ops.cast(t_len, "int64") * ops.cast(s_len, "int64"),
        dispatch.CHUNKED_MIN_SIZE,
    )
    if not tensorflow_xla_context():
        args = (query, key, value, masks, positional, dropout, modifiers)
        return ops.cond(
            large,
            lambda: _chunked_path(*args),
            lambda: _dense(*args, return_weights=False)[0],
        )
    dropout = _fixed_dropout(dropout)

    def chunked(q, k, v):
        return _chunked_path(q, k, v, masks, positional, dropout, modifiers)

    def dense(q, k, v):
        return _dense(q, k, v, masks, positional, dropout, modifiers, False)[0]

    return _recomputed(large, chunked, dense, query, key, value)


def _recomputed(large, chunked, dense, query, key, value):
    """`cond(large, chunked, dense)(query, key, value)` with a gradient XLA
    compiles when the lengths (and the batch size) were unknown at tracing.

    TensorFlow differentiates a `cond` by handing the taken branch's
    intermediates to a gradient `cond`; under XLA, intermediates of unknown
    shape become dynamic dimensions that XLA (TensorFlow 2.21) cannot
    compile (a `RET_CHECK` in its dynamic-dimension pass, even with the dense
    path in both branches). Here the backward is a `cond` too, but each
    branch recomputes its own forward from the inputs and differentiates
    it there, so no intermediate crosses a branch. It costs one more
    forward of the attention (not of the projections around it).
    """
    import tensorflow as tf

    @tf.custom_gradient
    def attend(q, k, v):
        output = tf.cond(large, lambda: chunked(q, k, v), lambda: dense(q, k, v))

        def grad(d_out, variables=None):
            variables = list(variables or ())

            def vjp(path):
                with tf.GradientTape() as tape:
                    tape.watch([q, k, v])
                    y = path(q, k, v)
                grads = tape.gradient(
                    y,
                    [q, k, v, *variables],
                    output_gradients=d_out,
                    unconnected_gradients=tf.UnconnectedGradients.ZERO,
                )
                # A gather's gradient (a bias table) is an IndexedSlices.
                return [tf.convert_to_tensor(g) for g in grads]

            grads = tf.cond(large, lambda: vjp(chunked), lambda: vjp(dense))
            if variables:
                return grads[:3], grads[3:]
            return grads[:3]

        return output, grad

    return attend(query, key, value)


class _FixedSeed(keras.random.SeedGenerator):
    """A seed generator that gives the same seed at every draw.

    `_recomputed` runs a path's forward twice (once for the output, once in
    the backward), and the dropout must drop the same weights both times.
    `keras.random.dropout` accepts only an int or a `SeedGenerator`, and a
    generator advances its state at each draw, so this one returns a seed
    tensor drawn once. It has no state of its own (its base class' variable
    is never created).
    """

    def __init__(self, seed):
        self._fixed = seed

    def next(self, ordered=True):
        return self._fixed


def _fixed_dropout(dropout):
    """`(rate, seed, training)` with the seed drawn once (`_FixedSeed`)."""
    rate, seed, training = dropout
    if not (training and rate > 0):
        return dropout
    drawn = keras.random.randint((2,), 0, 2**31 - 1, dtype="int32", seed=seed)
    return rate, _FixedSeed(drawn), training


def _chunked(query, key, value, masks, positional, dropout, modifiers):
    """`chunked_attention` with the key padding merged into one `(B, S)` mask
    and a fresh dropout seed drawn from the caller's generator."""
    dropout_rate, seed, training = dropout
    batch, s_len = ops.shape(key)[0], ops.shape(key)[1]
    key_mask = merge_masks(masks["value_mask"], masks["key_mask"])
    if key_mask is not None:
        key_mask = ops.logical_and(
            ops.cast(key_mask, "bool"), ops.ones((batch, s_len), dtype="bool")
        )  # (B, S)
    attention_mask = masks["attention_mask"]
    if attention_mask is not None and len(attention_mask.shape) == 2:
        attention_mask = attention_mask[None]  # (1, T, S)
    rate = dropout_rate if training else 0.0
    dropout_seed = None
    if rate > 0:
        # A fresh (2,) seed per call from the caller's generator; the hash
        # of the coordinates does the rest (see `dropout_keep_mask`).
        dropout_seed = keras.random.randint(
            (2,), 0, 2**31 - 1, dtype="int32", seed=seed
        )
    return chunked_attention(
        query,
        key,
        value,
        key_mask=key_mask,
        causal=positional["use_causal_mask"],
        causal_offset=positional["causal_offset"],
        sliding_window=positional["sliding_window"],
        attention_mask=attention_mask,
        dropout_rate=rate,
        dropout_seed=dropout_seed,
        **modifiers,
    )  # (B, T, N, Hv)
