"""ACT halting (`keras_attention.ops.act`) against Graves (2016), by hand.

The reference below follows the paper's definitions position by position,
with Python loops and no shared code: `N = min(M, min{n : sum_{n'<=n} h >=
1 - eps})`, `R = 1 - sum_{n<N} h`, weights `h^n` before `N`, `R` at `N`,
0 after; ponder cost `N + R`.
"""

import numpy as np
import pytest
from keras import ops

from keras_attention.ops import act

THRESHOLD = 0.99


def graves_reference(h, threshold, real=None):
    """Per position of `h` `(B, T, M)`: weights `(B, T, M)`, `N`, `R`."""
    b, t, m = h.shape
    weights = np.zeros_like(h, dtype="float64")
    steps = np.zeros((b, t))
    remainders = np.zeros((b, t))
    for i in range(b):
        for j in range(t):
            if real is not None and not real[i, j]:
                continue
            total, n_halt = 0.0, m
            for n in range(m):
                if total + h[i, j, n] >= threshold:
                    n_halt = n + 1
                    break
                total += h[i, j, n]
            else:
                total = float(np.sum(h[i, j, : m - 1], dtype="float64"))
            weights[i, j, : n_halt - 1] = h[i, j, : n_halt - 1]
            weights[i, j, n_halt - 1] = 1.0 - total
            steps[i, j] = n_halt
            remainders[i, j] = 1.0 - total
    return weights, steps, remainders


def run_ops(h, threshold, real):
    """`halting_step` over the `M` steps of `h`; the stacked weights, the
    halting probabilities after each step and the final state."""
    m = h.shape[-1]
    state = act.initial_halting_state(real)
    weights, probabilities, running = [], [], []
    for n in range(m):
        state, w, r = act.halting_step(state, h[..., n], threshold, n == m - 1)
        weights.append(ops.convert_to_numpy(w))
        probabilities.append(ops.convert_to_numpy(state.halting_probability))
        running.append(ops.convert_to_numpy(r))
    return (
        np.stack(weights, -1),
        np.stack(probabilities, -1),
        np.stack(running, -1),
        state,
    )


@pytest.mark.parametrize("scale", [0.1, 0.4, 0.9])
def test_halting_matches_graves_step_by_step(rng, scale):
    """Small `h` run to the last step (forced halt), large `h` halt early."""
    h = (rng.uniform(size=(3, 7, 5)) * scale + 0.02).astype("float32")
    real = rng.uniform(size=(3, 7)) > 0.2
    real[0] = True
    weights, probabilities, running, state = run_ops(h, THRESHOLD, real)
    ref_weights, ref_steps, ref_remainders = graves_reference(h, THRESHOLD, real)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(state.steps), ref_steps)
    np.testing.assert_allclose(
        ops.convert_to_numpy(state.remainders), ref_remainders, atol=1e-6
    )
    # The weights of a real position sum to 1; padding gets none.
    np.testing.assert_allclose(weights.sum(-1)[real], 1.0, atol=1e-6)
    assert np.all(weights[~real] == 0)
    # Halting probability: the running sum of h while running, exactly 1
    # from the halting step on; a position runs exactly N steps.
    n = np.arange(1, 6)
    halted = n[None, None, :] >= ref_steps[..., None]
    assert np.all(probabilities[halted] == 1.0)
    np.testing.assert_allclose(
        probabilities[~halted], np.cumsum(h, -1)[~halted], atol=1e-6
    )
    np.testing.assert_array_equal(running.sum(-1), ref_steps)
    # Ponder cost: mean of N + R over the real positions.
    expected = (ref_steps + ref_remainders)[real].mean()
    np.testing.assert_allclose(float(act.ponder_cost(state, real)), expected, rtol=1e-6)


def test_threshold_is_reached_inclusive_and_remainder_is_the_rest():
    """`h = 0.5, 0.49` reaches 0.99 at step 2: N = 2, R = 0.5."""
    h = np.array([[[0.5, 0.49, 0.3, 0.3]]], "float32")
    weights, _, _, state = run_ops(h, 0.99, np.ones((1, 1), bool))
    np.testing.assert_allclose(weights[0, 0], [0.5, 0.5, 0.0, 0.0], atol=1e-7)
    assert float(state.steps[0, 0]) == 2.0
    np.testing.assert_allclose(float(state.remainders[0, 0]), 0.5, atol=1e-7)


def test_forced_halt_at_the_last_step():
    h = np.full((1, 2, 3), 0.1, "float32")
    weights, _, _, state = run_ops(h, 0.99, np.ones((1, 2), bool))
    np.testing.assert_allclose(weights[0, 0], [0.1, 0.1, 0.8], atol=1e-7)
    np.testing.assert_array_equal(ops.convert_to_numpy(state.steps), [[3.0, 3.0]])


def test_ponder_cost_gradient_flows_through_the_remainder_only():
    """d(N + R)/dh^n = -1 for the steps before N (R = 1 - sum h), 0 after."""
    import keras

    from keras_attention.testing import input_gradients

    h = np.array([[[0.3, 0.3, 0.6, 0.2]]], "float32")  # halts at step 3

    def cost(h):
        state = act.initial_halting_state(np.ones((1, 1), bool))
        for n in range(4):
            state, _, _ = act.halting_step(state, h[..., n], 0.99, n == 3)
        return act.ponder_cost(state)

    (grad,) = input_gradients(cost, [h])
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(grad)[0, 0], [-1, -1, 0, 0], atol=1e-6
    )


def test_no_real_position_costs_nothing():
    state = act.initial_halting_state(np.zeros((2, 3), bool))
    assert float(act.ponder_cost(state, np.zeros((2, 3), bool))) == 0.0
