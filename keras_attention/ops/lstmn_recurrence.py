"""`lstmn_recurrence`: the LSTMN loop (`lstmn.py`) with an `O(T)` gradient.

Differentiating the loop would store what every step read, a copy of the
`(B, T + 1, .)` tapes per step: `O(T^2)` memory. But step `t` reads only
slots `0 .. t`, and a slot never changes once written, so the final tapes
hold every step's inputs. The backward pass here walks the steps from the
last to the first over the final tapes: it recomputes step `t` and takes
its vector-Jacobian product, with the gradients of the slots it wrote
complete by then (only later steps read them). It keeps the tapes and
their gradients, `O(T (U + A))` per sequence. Measured under XLA on a CPU
(B = 16, T = 128, U = A = 128), forward and backward take 0.23 s against
0.05 s for the forward alone on TensorFlow, 0.53 s against 0.10 s on JAX
(where differentiating the loop takes 1.0 s and `O(T^2)` memory). Keras
has no backend-neutral vector-Jacobian product, so one step's
is taken with `jax.vjp` or a `tf.GradientTape` (`_pullback`); other backends
differentiate the loop itself.

`lstmn_fusion_recurrence` is the same loop with deep fusion's
inter-attention over an encoder's tapes (`lstmn.py`): the source tapes are
read by every step and never written, so the backward pass adds up their
gradients step by step, `O(S (Us + U + A'))` more memory.
"""

import contextlib
import functools

import keras
from keras import ops

from keras_attention.ops.loops import sequential_fori_loop
from keras_attention.ops.loops import tensorflow_xla_context
from keras_attention.ops.lstmn import SOURCE_STEP_INPUTS
from keras_attention.ops.lstmn import SOURCE_TAPES
from keras_attention.ops.lstmn import STEP_INPUTS
from keras_attention.ops.lstmn import LSTMNActivations
from keras_attention.ops.lstmn import LSTMNWeights
from keras_attention.ops.lstmn import lstmn_forward
from keras_attention.ops.lstmn import lstmn_step
from keras_attention.ops.lstmn import read_slot
from keras_attention.ops.lstmn import source_tapes
from keras_attention.ops.lstmn import step_inputs
from keras_attention.ops.lstmn import write_slot

_BACKENDS_WITH_PULLBACK = ("tensorflow", "jax")
# The tapes each step writes one slot of (besides `projected`), and the
# step outputs, in the order of `_step_function`'s outputs.
_WRITTEN = ("hidden", "cell", "summary", "source_summary")
_OUTPUTS = (
    "hidden",
    "cell",
    "summary",
    "attention",
    "source_summary",
    "source_attention",
)
_FUSION_FIELDS = ("source_summary_kernel", "source_vector", "source_gate_kernel")


def lstmn_recurrence(
    inputs,
    weights,
    activations=None,
    return_attention=False,
    memory_efficient=True,
):
    """Run the LSTMN over whole sequences.

    Args:
        inputs: a dict of float32 tensors: `gate_inputs (B, T, 4U)`
            (`W x_t + b`), `attention_inputs (B, T, A)` (`W_x x_t`),
            `step_mask (B, T)` (1 = a real step, 0 = a padded one, carried
            over and never attended to), `initial_hidden` and
            `initial_cell` `(B, U)` (slot 0 of the tapes) and, optionally,
            `recurrent_dropout_mask (B, U)`.
        weights: `LSTMNWeights`, float32.
        activations: `LSTMNActivations` (default: Keras' LSTM's, tanh and
            sigmoid).
        return_attention: also return every step's weights over the slots.
        memory_efficient: the `O(T)`-memory gradient (TensorFlow and JAX);
            `False` differentiates the loop itself (`O(T^2)` memory), the
            reference the tests compare it to.

    Returns:
        `(hidden, cell, attention)`: the tapes `(B, T + 1, U)` (slot 0 the
        initial state, slot `t` the state after step `t`) and the weights
        `(B, T, T + 1)` (row `t - 1` of step `t` over the slots; zeros for a
        padded step), or `None`.
    """
    if weights.source_vector is not None or "source_hidden" in inputs:
        raise ValueError(
            "`lstmn_recurrence` runs the LSTMN alone: use "
            "`lstmn_fusion_recurrence` with deep fusion's source tapes and "
            "weights. Received: weights.source_vector="
            f"{weights.source_vector is not None}, "
            f"source_hidden in inputs={'source_hidden' in inputs}"
        )
    outputs = _recurrence(
        inputs, weights, activations, return_attention, memory_efficient
    )
    return outputs["hidden"], outputs["cell"], outputs.get("attention")


def lstmn_fusion_recurrence(
    inputs,
    weights,
    activations=None,
    return_attention=False,
    memory_efficient=True,
):
    """Run the LSTMN with deep fusion (§3.3) over whole sequences.

    Args:
        inputs: `lstmn_recurrence`'s, and deep fusion's: per step
            `source_attention_inputs (B, T, A')` (`W_x' x_t`) and
            `source_gate_inputs (B, T, U)` (`W_r`'s block applied to `x_t`,
            plus `b_r`); the source tapes `source_hidden (B, S, Us)`
            (`gamma_j`), `source_cell (B, S, U)` (`alpha_j`),
            `source_projected (B, S, A')` (`W_gamma gamma_j`) and
            `source_mask (B, S)` (float, 1 = a real source step).
        weights: `LSTMNWeights` with `source_summary_kernel`,
            `source_vector` and `source_gate_kernel`, float32.
        activations: as `lstmn_recurrence`.
        return_attention: also return every step's weights over the slots
            and over the source.
        memory_efficient: as `lstmn_recurrence`.

    Returns:
        `(hidden, cell, attention, source_attention)`: as
        `lstmn_recurrence`, and the inter-attention weights `(B, T, S)`
        (zeros for a padded step) or `None`.
    """
    missing = [f for f in _FUSION_FIELDS if getattr(weights, f) is None]
    missing += [f"source_{n}" for n in SOURCE_TAPES if f"source_{n}" not in inputs]
    missing += [n for n in SOURCE_STEP_INPUTS if n not in inputs]
    if missing:
        raise ValueError(
            "`lstmn_fusion_recurrence` needs deep fusion's weights and source "
            f"inputs. Received: none for {missing}"
        )
    outputs = _recurrence(
        inputs, weights, activations, return_attention, memory_efficient
    )
    return (
        outputs["hidden"],
        outputs["cell"],
        outputs.get("attention"),
        outputs.get("source_attention"),
    )


def _recurrence(inputs, weights, activations, return_attention, memory_efficient):
    """Both loops: a dict of `hidden`, `cell` and (when asked) the weights."""
    inputs = {name: value for name, value in inputs.items() if value is not None}
    activations = activations or LSTMNActivations()
    if not memory_efficient or keras.backend.backend() not in _BACKENDS_WITH_PULLBACK:
        tapes, attention = lstmn_forward(inputs, weights, activations, return_attention)
        return {"hidden": tapes["hidden"], "cell": tapes["cell"], **attention}
    names = tuple(inputs)
    fields = tuple(f for f in LSTMNWeights._fields if getattr(weights, f) is not None)
    values = [inputs[n] for n in names] + [getattr(weights, f) for f in fields]
    key = (names, fields, activations, bool(return_attention))
    try:
        run = _compiled_recurrence(*key)
    except TypeError:  # an unhashable activation: built for this call
        run = _compiled_recurrence.__wrapped__(*key)
    outputs = run(*values)
    keys = ["hidden", "cell"]
    if return_attention:
        keys.append("attention")
        keys += ["source_attention"] if "source_hidden" in inputs else []
    return dict(zip(keys, outputs, strict=True))


@functools.lru_cache(maxsize=64)
def _compiled_recurrence(names, fields, activations, return_attention):
    """The loop with its own gradient, as a function of the tensors
    `inputs[names] + weights[fields]`. On JAX it is also `jax.jit`-compiled
    and kept: outside a traced function (eager calls, tests), JAX would
    otherwise compile the loop anew at every call."""

    @ops.custom_gradient
    def run(*values):
        inputs = dict(zip(names, values[: len(names)], strict=True))
        weights = LSTMNWeights(**dict(zip(fields, values[len(names) :], strict=True)))
        with _unrecorded():
            tapes, attention = lstmn_forward(
                inputs, weights, activations, return_attention
            )
        outputs = (tapes["hidden"], tapes["cell"])
        outputs += tuple(attention[n] for n in _OUTPUTS if n in attention)

        def grad(*upstream, **_):
            if len(upstream) == 1:  # JAX hands the outputs' structure over
                upstream = tuple(upstream[0])
            grads = _in_xla(lstmn_backward)(
                inputs, weights, activations, tapes, upstream
            )
            return tuple(grads[name] for name in names + fields)

        return outputs, grad

    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(run)
    return run


def lstmn_backward(inputs, weights, activations, tapes, upstream):
    """The gradients of every input and weight, a dict by name.

    `tapes`: the forward's final tapes; `upstream`: the gradients of its
    outputs `(hidden, cell[, attention[, source_attention]])`.
    """
    accumulated = _zero_gradients(inputs, weights, tapes, upstream)
    memory_kernel_t = ops.transpose(weights.memory_kernel)  # (A, U)
    # The weights' gradients: as many as were returned.
    returned = ("attention", "source_attention")
    weights_ct = dict(zip(returned, upstream[2:], strict=False))
    per_step = STEP_INPUTS[:2] + (
        SOURCE_STEP_INPUTS if "source_hidden" in inputs else ()
    )
    steps = ops.shape(inputs["gate_inputs"])[1]

    def body(k, acc):
        t = steps - 1 - k
        fn, primals, names, outputs = _step_function(
            inputs, weights, activations, tapes, t
        )
        # The gradient of what step t wrote: its slot t + 1 as read later
        # and as returned (for h, also through the projected tape).
        cotangents = []
        for name in outputs:
            if name in _WRITTEN:
                cotangents.append(read_slot(acc[name], t + 1))
            elif name in weights_ct:
                cotangents.append(read_slot(weights_ct[name], t))
            else:  # weights nobody asked for
                like = tapes["valid"] if name == "attention" else inputs["source_mask"]
                cotangents.append(ops.zeros_like(like))
        cotangents[0] = cotangents[0] + ops.matmul(
            read_slot(acc["projected"], t + 1), memory_kernel_t
        )
        grads = dict(zip(names, _pullback(fn, primals, cotangents), strict=True))
        acc = dict(acc)
        for name in per_step:
            acc[name] = write_slot(acc[name], t, grads.pop(name))
        for name, grad in grads.items():
            acc[name] = acc[name] + grad
        return acc

    acc = sequential_fori_loop(0, steps, body, accumulated)
    projected_ct = acc.pop("projected")
    acc["memory_kernel"] = ops.einsum("bsu,bsa->ua", tapes["hidden"], projected_ct)
    hidden_ct, cell_ct = acc.pop("hidden"), acc.pop("cell")
    acc["initial_hidden"] = hidden_ct[:, 0] + ops.matmul(
        projected_ct[:, 0], memory_kernel_t
    )
    acc["initial_cell"] = cell_ct[:, 0]
    acc.pop("summary", None)
    acc.pop("source_summary", None)
    for name in ("step_mask", "recurrent_dropout_mask", "source_mask"):
        if name in inputs:  # constants: no gradient
            acc[name] = ops.zeros_like(inputs[name])
    return acc


def _zero_gradients(inputs, weights, tapes, upstream):
    """The backward loop's carry before the last step: the gradients of the
    returned tapes, zeros for everything else."""
    acc = {"hidden": upstream[0], "cell": upstream[1]}
    for name in ("projected", "summary", "source_summary"):
        if name in tapes:
            acc[name] = ops.zeros_like(tapes[name])
    names = STEP_INPUTS[:2] + SOURCE_STEP_INPUTS
    names += tuple(f"source_{n}" for n in SOURCE_TAPES[:3])
    for name in names:
        if name in inputs:
            acc[name] = ops.zeros_like(inputs[name])
    for field in LSTMNWeights._fields:
        value = getattr(weights, field)
        if value is not None and field != "memory_kernel":
            acc[field] = ops.zeros_like(value)
    return acc


def _step_function(inputs, weights, activations, tapes, t):
    """`(fn, primals, names, outputs)`: step `t` as a function of what it
    is differentiated by (the tapes, its inputs, the source tapes, the
    weights), named like the backward's carry; `outputs` names what `fn`
    returns, in `_OUTPUTS`' order."""
    source = source_tapes(inputs)
    step_names = STEP_INPUTS + (SOURCE_STEP_INPUTS if source else ())
    step = dict(zip(step_names, step_inputs(inputs, t), strict=True))
    per_step = [n for n in step_names if n != "step_mask"]  # the mask: constant
    tape_names = [
        n for n in ("hidden", "cell", "projected") + _WRITTEN[2:] if n in tapes
    ]
    source_names = [f"source_{n}" for n in SOURCE_TAPES[:3]] if source else []
    fields = [f for f in LSTMNWeights._fields if getattr(weights, f) is not None]
    fields.remove("memory_kernel")  # the projected tape holds its products
    names = tape_names + per_step + source_names + fields
    primals = [tapes[n] for n in tape_names] + [step[n] for n in per_step]
    primals += [inputs[n] for n in source_names] + [getattr(weights, f) for f in fields]
    outputs = [n for n in _OUTPUTS if n in tape_names or n == "attention"]
    outputs += ["source_attention"] if source else []

    def fn(*values):
        named = dict(zip(names, values, strict=True))
        step_tapes = {name: named[name] for name in tape_names}
        step_tapes["valid"] = tapes["valid"]
        step_source = None
        if source:
            step_source = {n: named.get(f"source_{n}") for n in SOURCE_TAPES}
            step_source["mask"] = source["mask"]
        result = lstmn_step(
            step_tapes,
            t,
            tuple(named.get(n, step[n]) for n in step_names),
            LSTMNWeights(**{f: named.get(f) for f in LSTMNWeights._fields}),
            activations,
            inputs.get("recurrent_dropout_mask"),
            step_source,
        )
        return tuple(getattr(result, name) for name in outputs)

    return fn, primals, names, outputs


def _pullback(fn, primals, cotangents):
    """The gradients of `sum(fn(*primals) * cotangents)` by each primal."""
    if keras.backend.backend() == "jax":
        import jax

        _, vjp = jax.vjp(fn, *primals)
        return list(vjp(tuple(cotangents)))
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(primals)
        outputs = fn(*primals)
    grads = tape.gradient(
        outputs,
        primals,
        output_gradients=cotangents,
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    # A gather's gradient is an IndexedSlices: made dense to accumulate.
    return [tf.convert_to_tensor(g) for g in grads]


def _in_xla(function):
    """`function` compiled by XLA when TensorFlow traces a plain graph.

    Grappler rewrites plain graphs, and its rewrite of the backward loop's
    sums of tape-sized gradients (`AddOpsRewrite`, then a `TemporaryVariable`
    per sum) fails inside the loop at larger sizes with an
    `AlreadyExistsError` (TensorFlow issues 23780 and 38906; here from batch
    64, 256 steps, 100 units). Compiled by XLA (as under `jit_compile=True`,
    for each new shape), the loop never meets Grappler. Eager calls, XLA
    traces and other backends run `function` as it is.
    """
    if keras.backend.backend() != "tensorflow" or tensorflow_xla_context():
        return function
    import tensorflow as tf

    if tf.executing_eagerly():
        return function
    return tf.function(function, jit_compile=True, autograph=False)


def _unrecorded():
    """A context in which TensorFlow's eager gradient tapes record nothing.

    The forward runs under it: TensorFlow's eager `custom_gradient` would
    otherwise record every op of the loop on the active tape, which keeps
    their inputs alive (the `O(T^2)` memory this module avoids). The
    forward reads no variable (the layer passes tensors). A no-op on other
    backends and in TensorFlow graphs (the chunked attention's
    `unrecorded`, in `ops/chunked/autodiff.py`, does the same).
    """
    if keras.backend.backend() != "tensorflow":
        return contextlib.nullcontext()
    import tensorflow as tf
    from tensorflow.python.eager import record

    if not tf.executing_eagerly():
        return contextlib.nullcontext()
    return record.stop_recording()
