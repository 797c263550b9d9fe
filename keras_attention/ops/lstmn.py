"""The recurrence of the Long Short-Term Memory-Network (Cheng et al., 2016).

An LSTM whose single memory cell is replaced by tapes of every earlier
hidden state and memory, read by attention at each step (§3.1 of the
paper). Step `t` (1-based; `h~`, `c~` the read, `h~_0 = 0`):

    a_i = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1}),  i < t
    s = softmax_i(a),  [h~_t; c~_t] = sum_i s_i [h_i; c_i]
    [i, f, c^, o] = [sigma, sigma, tanh, sigma](W x_t + U h~_t + b)
    c_t = f * c~_t + i * c^,  h_t = o * tanh(c_t)

The tapes have `T + 1` slots: slot 0 holds the initial state `(h_0, c_0)`
(zeros unless given), slot `t` the state after step `t`, so step `t`
attends to slots `0 .. t - 1`. A step whose `step_mask` is False attends
to nothing and carries the state over (as `keras.layers.LSTM` does); its
slot holds the carried state but no later step attends to it.

`lstmn_recurrence` (`lstmn_recurrence.py`) runs the loop; its gradient walks
the steps backwards over the final tapes, which hold every step's inputs
(an entry never changes once written), so training keeps `O(T)` tapes, not
the `O(T^2)` that differentiating the loop would store (a copy of the tapes
per step). The forward costs `O(T^2 (U + A))` per sequence.

Deep fusion (§3.3, the decoder of an encoder-decoder): with the source
tapes of an encoder, its hidden states `gamma_j` and memory cells
`alpha_j` (`j = 1 .. S`), step `t` also reads them (inter-attention, the
paper's equations 10-15; `gamma~_0 = 0`):

    b_j = u^T tanh(W_gamma gamma_j + W_x' x_t + W_gamma~ gamma~_{t-1})
    p = softmax_j(b),  [gamma~_t; alpha~_t] = sum_j p_j [gamma_j; alpha_j]
    r_t = sigma(W_r [gamma~_t; x_t] + b_r)
    c_t = r_t * alpha~_t + f * c~_t + i * c^,  h_t = o * tanh(c_t)

(`lstmn_step` with `source`; `lstmn_fusion_recurrence` runs the loop).

Shapes: `B` batch, `T` steps, `U` units, `A` attention units, `S` source
steps, `Us` source width, `A'` inter-attention units. Everything runs in
float32 (pass float32 tensors).
"""

from typing import Any
from typing import NamedTuple

from keras import ops

from keras_attention.ops.loops import sequential_fori_loop
from keras_attention.ops.softmax import masked_softmax


class LSTMNWeights(NamedTuple):
    """The weights the loop uses (the input projections are done before)."""

    recurrent_kernel: Any  # (U, 4U): U, the read h~_t into the gates
    memory_kernel: Any  # (U, A): W_h, each tape entry into the score
    attention_vector: Any  # (A,): v
    summary_kernel: Any = None  # (U, A): W_h~ h~_{t-1}; None leaves it out
    # Deep fusion (None without it): the inter-attention's W_gamma~ (Us, A')
    # and u (A',), and W_r's block applied to gamma~_t (Us, U).
    source_summary_kernel: Any = None
    source_vector: Any = None
    source_gate_kernel: Any = None


class LSTMNStep(NamedTuple):
    """What `lstmn_step` returns (`None` for a part the step does not have)."""

    hidden: Any  # (B, U): h_t (carried over at a masked step)
    cell: Any  # (B, U): c_t (carried over at a masked step)
    summary: Any  # (B, U): the read h~_t, with W_h~
    attention: Any  # (B, T + 1): the intra-attention weights over the slots
    source_summary: Any = None  # (B, Us): the read gamma~_t (deep fusion)
    source_attention: Any = None  # (B, S): the inter-attention weights p


class LSTMNActivations(NamedTuple):
    """The LSTM's two activations (Python functions, as in `keras.layers.LSTM`)."""

    activation: Any = ops.tanh  # of the candidate c^ and of c_t in h_t
    recurrent_activation: Any = ops.sigmoid  # of the gates i, f, o


def intra_attention_logits(projected, query, attention_vector):
    """`a_i = v^T tanh(P_i + q)`: `projected (B, S, A)` (`W_h h_i`), `query
    (B, A)` (`W_x x_t + W_h~ h~_{t-1}`), `attention_vector (A,)` -> `(B, S)`."""
    hidden = ops.tanh(projected + query[:, None, :])  # (B, S, A)
    return ops.matmul(hidden, attention_vector[:, None])[..., 0]


def lstmn_gates(
    gate_input,
    hidden_read,
    cell_read,
    recurrent_kernel,
    activations,
    dropout_mask,
    extra_cell=None,
):
    """The LSTM update from the read `(h~, c~)` instead of `(h_{t-1}, c_{t-1})`.

    `gate_input (B, 4U)` is `W x_t + b`; the gates come in Keras' order
    `[i, f, c, o]` (`keras.layers.LSTMCell`'s kernel layout); `dropout_mask`
    `(B, U)` (or `None`) multiplies `h~` before `U` (recurrent dropout);
    `extra_cell` `(B, U)` (or `None`) is added to `c_t` (deep fusion's
    `r_t * alpha~_t`). Returns `(h, c)`, each `(B, U)`.
    """
    if dropout_mask is not None:
        hidden_read = hidden_read * dropout_mask
    z = gate_input + ops.matmul(hidden_read, recurrent_kernel)  # (B, 4U)
    z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
    gate, activation = activations.recurrent_activation, activations.activation
    cell = gate(z_f) * cell_read + gate(z_i) * activation(z_c)
    if extra_cell is not None:
        cell = cell + extra_cell
    return gate(z_o) * activation(cell), cell


def source_read(source, query, attention_vector):
    """Deep fusion's inter-attention read, the paper's equations 10-12.

    `source`: a dict of `hidden (B, S, Us)` (`gamma_j`), `cell (B, S, U)`
    (`alpha_j`), `projected (B, S, A')` (`W_gamma gamma_j`) and `mask
    (B, S)` (float, 1 = a real source step: padding gets weight 0);
    `query (B, A')`: `W_x' x_t + W_gamma~ gamma~_{t-1}`. Returns
    `(gamma~ (B, Us), alpha~ (B, U), p (B, S))`; a source with no real step
    reads zeros.
    """
    logits = intra_attention_logits(source["projected"], query, attention_vector)
    weights = masked_softmax(logits, source["mask"] > 0.5)  # (B, S)
    hidden = ops.einsum("bs,bsu->bu", weights, source["hidden"])
    cell = ops.einsum("bs,bsu->bu", weights, source["cell"])
    return hidden, cell, weights


def _fused_cell(source, tapes, t, inputs, weights, activations):
    """`(r_t * alpha~_t, gamma~_t, gamma~_{t-1}, p)` of step `t` (eqs. 10-13)."""
    attention_input, gate_input = inputs  # W_x' x_t (B, A'); W_r x_t + b_r (B, U)
    previous = read_slot(tapes["source_summary"], t)  # gamma~_{t-1} (B, Us)
    query = attention_input + ops.matmul(previous, weights.source_summary_kernel)
    hidden, cell, attention = source_read(source, query, weights.source_vector)
    gate = activations.recurrent_activation(
        gate_input + ops.matmul(hidden, weights.source_gate_kernel)
    )
    return gate * cell, hidden, previous, attention


def lstmn_step(
    tapes, t, step_inputs, weights, activations, dropout_mask=None, source=None
):
    """Step `t` (0-based) over `tapes` whose slots `0 .. t` are written.

    Args:
        tapes: a dict of `(B, T + 1, .)` tensors: `hidden`, `cell`,
            `projected` (`hidden @ W_h`), `valid` (float, 1 = a slot steps
            may attend to), with `W_h~` `summary` (the read `h~` before
            each step) and, with `source`, `source_summary` (the read
            `gamma~` before each step). Slots after `t` are never read:
            their values do not matter.
        t: the step, an int scalar (a loop index).
        step_inputs: `(gate_input, attention_input, real)`: `W x_t + b`
            `(B, 4U)`, `W_x x_t` `(B, A)` and, `(B,)` float, 1 where step
            `t` is a real (unmasked) step; with `source`, then `W_x' x_t`
            `(B, A')` and `W_r`'s input part `x_t` plus `b_r` `(B, U)`.
        weights: `LSTMNWeights` (`memory_kernel` is not read: the tape
            `projected` holds its products).
        activations: `LSTMNActivations`.
        dropout_mask: see `lstmn_gates`.
        source: deep fusion's source tapes (see `source_read`), or `None`.

    Returns:
        An `LSTMNStep`: the state after the step `(B, U)` each (carried
        over where `real` is 0), the read `h~_t` (`None` without `W_h~`),
        the weights over the slots `(B, T + 1)` (zeros at a masked step)
        and, with `source`, the read `gamma~_t` and the weights over the
        source `(B, S)` (carried over and zeros at a masked step).
    """
    gate_input, attention_input, real = step_inputs[:3]
    hidden_prev = read_slot(tapes["hidden"], t)  # (B, U)
    cell_prev = read_slot(tapes["cell"], t)
    query = attention_input  # (B, A)
    if weights.summary_kernel is not None:
        summary_prev = read_slot(tapes["summary"], t)  # (B, U)
        query = query + ops.matmul(summary_prev, weights.summary_kernel)
    logits = intra_attention_logits(
        tapes["projected"], query, weights.attention_vector
    )  # (B, T + 1)
    slots = ops.arange(ops.shape(logits)[1], dtype="int32")
    allowed = ops.logical_and(tapes["valid"] > 0.5, slots[None, :] <= t)
    attention = masked_softmax(logits, allowed)  # (B, T + 1)
    hidden_read = ops.einsum("bs,bsu->bu", attention, tapes["hidden"])
    cell_read = ops.einsum("bs,bsu->bu", attention, tapes["cell"])
    fused = None
    if source is not None:
        fused = _fused_cell(source, tapes, t, step_inputs[3:], weights, activations)
    hidden, cell = lstmn_gates(
        gate_input,
        hidden_read,
        cell_read,
        weights.recurrent_kernel,
        activations,
        dropout_mask,
        None if fused is None else fused[0],
    )
    keep = real[:, None] > 0.5  # (B, 1)
    summary = None
    if weights.summary_kernel is not None:
        summary = ops.where(keep, hidden_read, summary_prev)
    extra = ()
    if fused is not None:
        _, source_hidden, source_prev, source_attention = fused
        extra = (
            ops.where(keep, source_hidden, source_prev),
            source_attention * ops.cast(keep, source_attention.dtype),
        )
    return LSTMNStep(
        ops.where(keep, hidden, hidden_prev),
        ops.where(keep, cell, cell_prev),
        summary,
        attention * ops.cast(keep, attention.dtype),
        *extra,
    )


def read_slot(tape, slot):
    """`tape[:, slot]` for a traced `slot`."""
    start = ops.stack([0 * slot, slot] + [0 * slot] * (len(tape.shape) - 2))
    shape = (ops.shape(tape)[0], 1, *ops.shape(tape)[2:])
    return ops.slice(tape, start, shape)[:, 0]


def write_slot(tape, slot, value):
    """`tape (B, S, .)` with `value (B, .)` at `slot` (a select, so that it
    costs what reading the tape costs and compiles anywhere)."""
    here = ops.arange(ops.shape(tape)[1], dtype="int32") == slot
    return ops.where(here[None, :, None], value[:, None, :], tape)


def initial_tapes(inputs, weights):
    """The tapes before step 1: the initial state in slot 0, zeros after."""
    zeros = ops.zeros_like(inputs["gate_inputs"][..., :1])  # (B, T, 1)
    hidden, cell = inputs["initial_hidden"], inputs["initial_cell"]

    def tape(first):  # (B, U) -> (B, T + 1, U)
        return ops.concatenate([first[:, None, :], zeros * first[:, None, :]], 1)

    valid = ops.concatenate([ops.ones_like(zeros[:, :1, 0]), inputs["step_mask"]], 1)
    tapes = {
        "hidden": tape(hidden),
        "cell": tape(cell),
        "projected": tape(ops.matmul(hidden, weights.memory_kernel)),
        "valid": valid,  # (B, T + 1)
    }
    if weights.summary_kernel is not None:
        tapes["summary"] = tape(ops.zeros_like(hidden))  # h~_0 = 0
    if "source_hidden" in inputs:  # gamma~_0 = 0
        tapes["source_summary"] = tape(ops.zeros_like(inputs["source_hidden"][:, 0]))
    return tapes


# The per-step inputs of the loop, in `lstmn_step`'s order; the source
# ones with deep fusion only.
STEP_INPUTS = ("gate_inputs", "attention_inputs", "step_mask")
SOURCE_STEP_INPUTS = ("source_attention_inputs", "source_gate_inputs")
# Deep fusion's source tapes: `inputs[f"source_{name}"]` -> `source[name]`.
SOURCE_TAPES = ("hidden", "cell", "projected", "mask")


def step_inputs(inputs, t):
    """`lstmn_step`'s `step_inputs` of step `t` from the whole sequences."""
    names = STEP_INPUTS + (SOURCE_STEP_INPUTS if "source_hidden" in inputs else ())
    return tuple(read_slot(inputs[name], t) for name in names)


def source_tapes(inputs):
    """`lstmn_step`'s `source` from the loop's `inputs` (`None` without)."""
    if "source_hidden" not in inputs:
        return None
    return {name: inputs[f"source_{name}"] for name in SOURCE_TAPES}


def lstmn_forward(inputs, weights, activations, return_attention=False):
    """The loop: `(tapes, attention)`, `attention` a dict of the weights of
    every step (empty unless `return_attention`): `attention (B, T, T + 1)`
    and, with deep fusion, `source_attention (B, T, S)`.

    `inputs`: a dict with `gate_inputs (B, T, 4U)`, `attention_inputs
    (B, T, A)`, `step_mask (B, T)` (float), `initial_hidden` and
    `initial_cell` `(B, U)`, optionally `recurrent_dropout_mask (B, U)`
    and, for deep fusion, `source_attention_inputs (B, T, A')`,
    `source_gate_inputs (B, T, U)` and the source tapes `source_hidden`,
    `source_cell`, `source_projected`, `source_mask` (see `source_read`).
    Differentiable by autodiff (at `O(T^2)` memory); `lstmn_recurrence` is
    the same loop with an `O(T)` gradient.
    """
    tapes = initial_tapes(inputs, weights)
    source = source_tapes(inputs)
    carry = {"tapes": tapes, "attention": {}}
    if return_attention:
        rows = ops.transpose(ops.zeros_like(inputs["step_mask"]))[:, :, None]
        carry["attention"]["attention"] = rows * tapes["valid"][None]  # (T, B, T + 1)
        if source is not None:
            carry["attention"]["source_attention"] = rows * source["mask"][None]

    def body(t, carry):
        tapes = dict(carry["tapes"])
        step = lstmn_step(
            tapes,
            t,
            step_inputs(inputs, t),
            weights,
            activations,
            inputs.get("recurrent_dropout_mask"),
            source,
        )
        projected = ops.matmul(step.hidden, weights.memory_kernel)
        new = {"hidden": step.hidden, "cell": step.cell, "projected": projected}
        new.update(summary=step.summary, source_summary=step.source_summary)
        for name, value in new.items():
            if value is not None:
                tapes[name] = write_slot(tapes[name], t + 1, value)
        # A scatter (differentiable on every backend), not a select: a
        # select over the (T, B, T + 1) weights costs O(T^2) a step.
        row = ops.reshape(ops.cast(t, "int32"), (1, 1))
        attention = {
            name: ops.scatter_update(rows, row, getattr(step, name)[None])
            for name, rows in carry["attention"].items()
        }
        return {"tapes": tapes, "attention": attention}

    steps = ops.shape(inputs["gate_inputs"])[1]
    carry = sequential_fori_loop(0, steps, body, carry)
    attention = {
        name: ops.transpose(rows, (1, 0, 2))
        for name, rows in carry["attention"].items()
    }
    return carry["tapes"], attention
