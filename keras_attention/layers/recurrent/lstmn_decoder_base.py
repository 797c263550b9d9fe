"""What the two LSTMN fusion decoders share (private): the `LSTMN` they run,
its growing tapes as the state of step-by-step decoding, shapes and masks."""

import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.recurrent.lstmn import LSTMN
from keras_attention.ops.lstmn import write_slot
from keras_attention.validation import check_below
from keras_attention.validation import check_last_dim
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_same
from keras_attention.validation import get_layer


def _lstmn(lstmn):
    """`lstmn` (or its config) checked: an `LSTMN` reading forwards."""
    lstmn = get_layer(
        "lstmn",
        lstmn,
        LSTMN,
        "a `keras_attention.layers.LSTMN` (the decoder's intra-attention)",
    )
    if lstmn.go_backwards:
        raise ValueError(
            "`lstmn` must read forwards: a decoder produces its targets left "
            "to right. Received: lstmn.go_backwards=True"
        )
    return lstmn


class LSTMNDecoderBase(keras.layers.Layer):
    """An `LSTMN` run as a decoder over an encoder's outputs (private base).

    Subclasses add the inter-attention: `_source_width` (the width of what
    the state keeps of the source per step, 0 for none),
    `_source_step_inputs`, `_loop_weights`, and the public `build`,
    `prepare_memory`, `step` and `call`.
    """

    def __init__(self, lstmn, **kwargs):
        super().__init__(**kwargs)
        self.lstmn = _lstmn(lstmn)
        self.supports_masking = True

    @property
    def units(self):
        return self.lstmn.units

    def _check_shapes(self, inputs_shape, memory_shape):
        check_rank("inputs", inputs_shape, 3)
        check_rank("memory", memory_shape, 3)
        check_same("inputs", inputs_shape[0], "memory", memory_shape[0], "batch size")
        if self.lstmn.built:
            check_last_dim("inputs", inputs_shape, self.lstmn.kernel.shape[0])

    def _build_lstmn(self, inputs_shape):
        if not self.lstmn.built:
            self.lstmn.build(inputs_shape)

    # -- step-by-step decoding ----------------------------------------------

    def _source_width(self):
        return 0

    def get_initial_state(self, batch_size, max_length, initial_state=None):
        """The state before the first `step`: the LSTMN's tapes, with room
        for `max_length` steps.

        The state of an LSTMN is its tapes of every earlier `h` and `c`
        (and what its scores need of them), so it grows by one slot a step.
        Decoding loops (`keras_attention.decoding`) carry fixed shapes, as
        the Transformer's key/value cache does (`init_cache(batch,
        max_length)`): the tapes are allocated once for `max_length + 1`
        slots (slot 0 the initial state) and step `t` writes slot `t + 1`.
        Pass the decoding call's `max_length`. A step past it raises a
        `ValueError` where the step count is known (eager calls); inside a
        compiled loop, which cannot raise, its outputs are NaN.

        Args:
            batch_size: int or scalar tensor.
            max_length: int, the most steps the state will take.
            initial_state: `[h_0, c_0]`, each `(B, units)` (e.g. an
                encoder's last state); zeros when `None`.

        Returns:
            A dict of tensors whose first axis is the batch (so that beam
            search reorders it): the tapes `(B, max_length + 1, .)` and
            `length` `(B,)` int32, the steps taken.
        """
        check_positive_int("max_length", max_length)
        hidden, cell = self.lstmn._initial_state(initial_state, batch_size)
        weights = self.lstmn.recurrent_weights()
        zeros = ops.zeros((batch_size, max_length + 1, 1), "float32")

        def tape(first):  # (B, W) -> (B, max_length + 1, W)
            return ops.concatenate(
                [first[:, None, :], zeros[:, 1:] * first[:, None]], 1
            )

        state = {
            "hidden": tape(hidden),
            "cell": tape(cell),
            "projected": tape(ops.matmul(hidden, weights.memory_kernel)),
            "valid": ops.ones_like(zeros[..., 0]),  # every step is real
            "length": ops.zeros((batch_size,), "int32"),
        }
        if weights.summary_kernel is not None:
            state["summary"] = tape(ops.zeros_like(hidden))  # h~_0 = 0
        if self._source_width():
            state["source_summary"] = ops.zeros(
                (batch_size, max_length + 1, self._source_width()), "float32"
            )
        return state

    def _lstmn_inputs(self, inputs):
        """`W x_t + b` and `W_x x_t` of one step `(B, D)`, in float32."""
        x = ops.cast(inputs, "float32")
        gate_input = ops.matmul(x, ops.cast(self.lstmn.kernel, "float32"))
        if self.lstmn.bias is not None:
            gate_input = gate_input + ops.cast(self.lstmn.bias, "float32")
        kernel = ops.cast(self.lstmn.attention_input_kernel, "float32")
        return x, gate_input, ops.matmul(x, kernel)

    def _source_step_inputs(self, x):
        """Deep fusion's inputs of the steps `x` `(B, [T,] D)` (float32)."""
        del x
        return ()

    def _advance(self, inputs, state, source=None):
        """One LSTMN step over the state's tapes: `(LSTMNStep, new state)`.

        `source`: deep fusion's source tapes (`ops.lstmn_step`'s)."""
        check_rank("inputs", inputs.shape, 2)
        check_last_dim("inputs", inputs.shape, self.lstmn.kernel.shape[0])
        t = state["length"][0]  # every row has taken the same steps
        capacity = state["hidden"].shape[1]
        capacity = None if capacity is None else capacity - 1
        check_below(
            "state['length']",
            t,
            capacity,
            "`get_initial_state`'s `max_length`: the tapes are full",
        )
        x, gate_input, attention_input = self._lstmn_inputs(inputs)
        tapes = {name: value for name, value in state.items() if name != "length"}
        real = ops.ones_like(x[:, 0])
        step_inputs = (gate_input, attention_input, real)
        step_inputs += self._source_step_inputs(x)
        weights = self._loop_weights()
        step = ka_ops.lstmn_step(
            tapes, t, step_inputs, weights, self.lstmn.activations(), source=source
        )
        new = {"hidden": step.hidden, "cell": step.cell}
        new["projected"] = ops.matmul(step.hidden, weights.memory_kernel)
        new.update(summary=step.summary, source_summary=step.source_summary)
        state = dict(state)
        for name, value in new.items():
            if value is not None:
                state[name] = write_slot(state[name], t + 1, value)
        state["length"] = state["length"] + 1
        # Past the tapes' end nothing is written: the outputs say so.
        inside = ops.arange(ops.shape(tapes["hidden"])[1] - 1) == t
        hidden = ops.where(ops.any(inside), step.hidden, float("nan"))
        return step._replace(hidden=hidden), state

    def _loop_weights(self):
        return self.lstmn.recurrent_weights()

    # -- teacher forcing ----------------------------------------------------

    def _check_call(self, inputs, memory, inputs_mask, memory_mask):
        self._check_shapes(tuple(inputs.shape), tuple(memory.shape))
        if memory_mask is not None:
            ka_ops.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
        if inputs_mask is not None:
            ka_ops.check_mask("inputs_mask", inputs_mask, tuple(inputs.shape[:2]))

    def _output_specs(self, inputs, memory, width, return_alignments):
        batch, steps = inputs.shape[0], inputs.shape[1]
        output = keras.KerasTensor((batch, steps, width), dtype=self.compute_dtype)
        if not return_alignments:
            return output
        alignments = (batch, steps, memory.shape[1])
        return output, keras.KerasTensor(alignments, dtype="float32")

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            "lstmn": keras.saving.serialize_keras_object(self.lstmn),
        }
