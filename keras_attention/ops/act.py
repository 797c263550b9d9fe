"""Adaptive Computation Time (Graves, 2016): the halting maths, per position.

A recurrent step `n = 1, 2, ...` produces a state `s^n` and a halting
probability `h^n` in (0, 1) for every position. The position halts at the
first step `N` where the accumulated probability reaches the threshold
`1 - epsilon` (or at the last allowed step); its remainder is
`R = 1 - sum_{n < N} h^n`, its update weights are

    p^n = h^n  for n < N,    p^N = R,    p^n = 0  for n > N

(they sum to 1), its output is the mean state `sum_n p^n s^n`, and its
ponder cost is `N + R` (only `R` has a gradient: `N` is piecewise
constant). Graves' eq. (6)-(13); the Universal Transformer (Dehghani et
al., 2019) applies it to every position of a sequence.

The functions below are one step of that bookkeeping on fixed-shape
tensors, so a loop over a static maximum number of steps compiles under
XLA: a position that has halted keeps weight 0 and unchanged counters.
Shapes: `(B, T)` (any shape works, elementwise).
"""

from typing import Any
from typing import NamedTuple

from keras import ops


class HaltingState(NamedTuple):
    """The ACT counters of every position after some steps.

    `halting_probability`: `sum_n h^n` while running, exactly 1 once halted
    (so `halting_probability < 1` means "still running"). `remainders`: `R`
    once halted, 0 before. `steps`: the steps taken so far (`N` once
    halted), float. All float32.
    """

    halting_probability: Any
    remainders: Any
    steps: Any


def initial_halting_state(mask):
    """The counters before the first step. `mask` `(B, T)` boolean, True =
    real position; a padded position (False) starts as halted, so it never
    takes a step, gets weight 0 and costs nothing."""
    mask = ops.cast(mask, "bool")
    zeros = ops.zeros(ops.shape(mask), "float32")
    return HaltingState(ops.where(mask, 0.0, 1.0), zeros, zeros)


def halting_step(state, halting, threshold, force_halt=False):
    """One ACT step: which positions halt now and the weight of the new state.

    Args:
        state: the `HaltingState` before this step.
        halting: `h^n` `(B, T)`, the halting unit's output in (0, 1).
        threshold: `1 - epsilon`: a running position halts once
            `sum_n h^n >= threshold`.
        force_halt: bool (Python or tensor): halt every running position
            now (the last allowed step).

    Returns:
        `(new_state, update_weights, running)`: the counters after the step;
        `p^n` `(B, T)` float32 (`h^n` for a position that goes on, `R` for
        one that halts now, 0 for one halted before); and the boolean
        `(B, T)` mask of the positions that took this step.
    """
    halting = ops.cast(halting, "float32")
    running = ops.less(state.halting_probability, 1.0)
    total = state.halting_probability + halting
    halts = ops.logical_and(
        running,
        ops.logical_or(ops.greater_equal(total, threshold), force_halt),
    )
    goes_on = ops.logical_and(running, ops.logical_not(halts))
    remainder = ops.where(halts, 1.0 - state.halting_probability, 0.0)  # R
    update_weights = ops.where(goes_on, halting, remainder)
    new_state = HaltingState(
        halting_probability=ops.where(
            halts, 1.0, ops.where(goes_on, total, state.halting_probability)
        ),
        remainders=state.remainders + remainder,
        steps=state.steps + ops.cast(running, "float32"),
    )
    return new_state, update_weights, running


def ponder_cost(state, mask=None):
    """Graves' ponder cost `N + R`, averaged over the real positions.

    Args:
        state: the final `HaltingState`.
        mask: `(B, T)` boolean, True = real position, or `None` (all real).

    Returns:
        A float32 scalar (0 when no position is real).
    """
    cost = state.steps + state.remainders  # (B, T)
    if mask is None:
        return ops.mean(cost)
    mask = ops.cast(mask, "float32")
    return ops.sum(cost * mask) / ops.maximum(ops.sum(mask), 1.0)
