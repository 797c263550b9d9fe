"""`recording_attention_plans`: which path each attention call of a model took.

`multi_head_attention` hands every plan it follows to `record`; the plans
reach each open `recording_attention_plans` block with the Keras name
scope of the call (the layer).
"""

import contextlib
import dataclasses

from keras_attention.keras_compat import current_name_scope

_RECORDERS = []


@contextlib.contextmanager
def recording_attention_plans():
    """Collect the `AttentionPlan` of every attention call traced (or run
    eagerly) inside the block, in order, each with the name scope of its
    layer (`plan.where`).

    A compiled function that was traced before the block is not traced
    again, so its calls are not seen: call the model directly (eagerly)
    or build it anew inside the block.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> layer = ka.layers.MultiHeadSelfAttention(num_heads=2, key_dim=4)
    >>> with ka.ops.recording_attention_plans() as plans:
    ...     _ = layer(np.zeros((1, 6, 8), "float32"))
    >>> plans[0].impl
    'dense'
    """
    plans = []
    _RECORDERS.append(plans)
    try:
        yield plans
    finally:
        _RECORDERS.remove(plans)


def record(plan):
    """Hand `plan` to the open `recording_attention_plans` blocks."""
    if _RECORDERS:
        plan = dataclasses.replace(plan, where=current_name_scope())
        for plans in _RECORDERS:
            plans.append(plan)
    return plan
