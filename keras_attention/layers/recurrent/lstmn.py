import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.validation import check_last_dim
from keras_attention.validation import check_mask
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_rate
from keras_attention.validation import get_activation
from keras_attention.validation import get_initializer

# The constructor arguments (initializer, regularizer, constraint) of the
# weights applied to the input and of those applied to hidden states.
_KERNEL = ("kernel_initializer", "kernel_regularizer", "kernel_constraint")
_RECURRENT = ("recurrent_initializer", "recurrent_regularizer", "recurrent_constraint")


def _check_flag(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be True or False. Received: {name}={value!r}")


@keras.saving.register_keras_serializable(package="keras_attention")
class LSTMN(keras.layers.Layer):
    """Long Short-Term Memory-Network (Cheng, Dong and Lapata, 2016).

    An LSTM whose memory is a tape of every earlier hidden state `h_i` and
    memory cell `c_i`, read by attention at each step (intra-attention)
    instead of the single `(h_{t-1}, c_{t-1})` (the paper's §3.1). At step
    `t`:

        a_i = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1}),  i = 0 .. t-1
        s = softmax_i(a),  [h~_t; c~_t] = sum_i s_i [h_i; c_i]
        [i, f, c^, o] = [sigma, sigma, tanh, sigma](W x_t + U h~_t + b)
        c_t = f * c~_t + i * c^,  h_t = o * tanh(c_t)

    and `(h_t, c_t)` join the tapes. `W`, `U` and `b` are
    `keras.layers.LSTM`'s `kernel`, `recurrent_kernel` and `bias`, in its
    layout (gates `[i, f, c, o]`), with `U` applied to the read `h~_t`;
    `activation` and `recurrent_activation` replace the two `tanh` and the
    `sigma` as in Keras. `W_x`, `W_h`, `W_h~` and `v` are
    `attention_input_kernel`, `attention_memory_kernel`,
    `attention_summary_kernel` and `attention_vector`.

    Choices where the paper and the authors' code (github.com/cheng6076/
    SNLI-attention) leave room, made exact here:

    - The first step: the paper's sum over `i < t` is empty at `t = 1`.
      As in the authors' code, the tapes start with one slot `i = 0`
      holding the initial state `h_0 = c_0 = 0` (or `initial_state`), which
      every step may attend to; step 1 reads it alone (`h~_1 = h_0`,
      `c~_1 = c_0`), so the first step is `keras.layers.LSTM`'s first step.
    - `W_h~ h~_{t-1}` is in the paper's equation and the authors' decoder
      (`model/decoder_deep_w2v.lua`); their encoder
      (`model/encoder_lstmn_w2v.lua`) leaves it out. It is kept, with
      `h~_0 = 0` (the decoder's initial alignment vector);
      `use_summary_in_score=False` leaves it out, as their encoder.
    - The score has no bias, as in the paper (the authors' linear layers
      add one inside the tanh); the gates have `b` (`use_bias`), as in
      Keras and the authors' code.

    Masks (padding), as `keras.layers.LSTM`: a masked step attends to
    nothing, carries `(h, c, h~)` over and adds no entry to the tape that
    any later step attends to, so padding anywhere (left, right, holes)
    changes no other step and its inputs get no gradient; the real steps
    compute what they compute on the sequence without its padding. A
    masked step's output is the carried `h` (before the first real step:
    `h_0`, as Keras' LSTM on JAX; on TensorFlow Keras' LSTM outputs zeros
    there even from a nonzero `initial_state`), or zeros with
    `zero_output_for_mask` (which `keras.layers.Bidirectional` sets when it
    returns sequences). The output mask is the input mask when returning
    sequences, as for an LSTM. (The authors' code instead writes the read
    `(h~_t, c~_t)` into the tape at a padded step.)

    `go_backwards` reverses the sequence (and the mask) and returns the
    outputs in the reversed order, as Keras' RNNs, so the layer works in
    `keras.layers.Bidirectional`. `stateful=True` is refused: the state of
    an LSTMN is the whole tape, which would grow without bound across
    batches; pass `initial_state=[h, c]` (the `return_state` of the previous
    call) to start the tape from a state instead.

    Cost: step `t` scores `t` tape entries, so a sequence costs
    `O(T^2 (units + attention_units))` time; the tapes are allocated for
    the input's length at run time (no maximum length). Training keeps
    `O(T (units + attention_units))` memory per sequence on TensorFlow
    and JAX: the gradient (`keras_attention.ops.lstmn_recurrence`) walks
    the steps backwards over the final tapes, instead of storing a copy of
    the tapes per step. The recurrence runs in float32 under every dtype
    policy; the outputs are in the compute dtype.

    Args:
        units: the width `U` of `h` and `c`.
        attention_units: the width `A` of the score's hidden layer
            (default `units`).
        use_summary_in_score: keep the paper's `W_h~ h~_{t-1}` in the score
            (default `True`); `False`: the authors' encoder.
        activation: activation of the candidate `c^` and of `c_t` in `h_t`
            (default `"tanh"`).
        recurrent_activation: activation of the gates `i`, `f`, `o`
            (default `"sigmoid"`).
        use_bias: whether the gates have the bias `b` (default `True`).
        kernel_initializer: initializer of the weights applied to the input
            (`kernel`, `attention_input_kernel`) and of `attention_vector`
            (default `"glorot_uniform"`; each weight draws its own values).
        recurrent_initializer: initializer of the weights applied to hidden
            states (`recurrent_kernel`, `attention_memory_kernel`,
            `attention_summary_kernel`; default `"orthogonal"`).
        bias_initializer: initializer of `b` (default `"zeros"`).
        unit_forget_bias: add 1 to the forget gate's bias at initialization
            (default `True`, as Keras).
        kernel_regularizer, recurrent_regularizer, bias_regularizer:
            regularizers of the same weights as the initializers.
        activity_regularizer: regularizer of the output.
        kernel_constraint, recurrent_constraint, bias_constraint:
            constraints of the same weights.
        dropout: fraction of the input units to drop while training (one
            mask per sequence, for the gates and the score), in `[0, 1)`.
        recurrent_dropout: fraction of the units of `h~_t` to drop in the
            gates' recurrent term while training, in `[0, 1)`.
        seed: seed of the dropout masks.
        return_sequences: return every step's output `(B, T, U)` instead of
            the last one `(B, U)` (default `False`).
        return_state: also return the last state `h_T, c_T`.
        go_backwards: process the sequence backwards (see above).
        stateful: must be `False` (see above).
        zero_output_for_mask: output zeros at masked steps instead of the
            carried `h` (default `False`).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        sequences: `(B, T, D)`.
        initial_state: `[h_0, c_0]`, each `(B, units)`: slot 0 of the tapes
            (zeros when `None`).
        mask: boolean `(B, T)`, True = a real step; the input's Keras mask
            when `None`.
        training: whether dropout is active.
        return_attention_scores: also return the intra-attention weights
            `(B, T, T)` (float32): row `t` holds step `t + 1`'s weights over
            the earlier steps (strictly lower-triangular, zero columns at
            masked steps); the rest of a row, `1 - sum(row)`, is the weight
            on the initial state. A masked step's row is all zeros. With
            `go_backwards` rows and columns follow the processing order,
            as the outputs do.
        return_cells: also return every step's memory cell `c_t`
            `(B, T, U)`, the paper's memory tape (the outputs with
            `return_sequences` are its hidden tape), in processing order; a
            masked step's entry is the carried `c` (zeros with
            `zero_output_for_mask`). `LSTMNDeepFusionDecoder` reads both
            tapes of an encoder.

    Returns:
        The output, `(B, T, U)` or `(B, U)`; with `return_state`, then
        `h_T` and `c_T` `(B, U)`; with `return_cells`, then the cells
        `(B, T, U)`; with `return_attention_scores`, then the weights.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(2, 7, 5).astype("float32")
    >>> lstmn = ka.layers.LSTMN(8, return_sequences=True, return_state=True)
    >>> outputs, h, c, weights = lstmn(x, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(h.shape), tuple(weights.shape)
    ((2, 7, 8), (2, 8), (2, 7, 7))
    >>> bool(np.allclose(np.triu(weights), 0.0))  # earlier steps only
    True
    >>> initial = 1.0 - np.asarray(weights).sum(-1)  # weight on (h_0, c_0)
    >>> float(initial[0, 0])  # step 1 reads the initial state alone
    1.0

    References:
        - Cheng, Dong and Lapata, 2016, Long Short-Term Memory-Networks for
          Machine Reading: https://arxiv.org/abs/1601.06733
        - The authors' code: https://github.com/cheng6076/SNLI-attention
    """

    def __init__(
        self,
        units,
        attention_units=None,
        use_summary_in_score=True,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        zero_output_for_mask=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_positive_int("attention_units", attention_units, allow_none=True)
        check_rate("dropout", dropout)
        check_rate("recurrent_dropout", recurrent_dropout)
        flags = {
            "use_summary_in_score": use_summary_in_score,
            "use_bias": use_bias,
            "unit_forget_bias": unit_forget_bias,
            "return_sequences": return_sequences,
            "return_state": return_state,
            "go_backwards": go_backwards,
            "stateful": stateful,
            "zero_output_for_mask": zero_output_for_mask,
        }
        for name, value in flags.items():
            _check_flag(name, value)
        if stateful:
            raise ValueError(
                "`stateful` must be False: the state of an LSTMN is its whole "
                "tape of earlier states, which would grow without bound from "
                "batch to batch. Pass `initial_state=[h, c]` (the state returned "
                "with `return_state=True`) to start a call from a state. "
                f"Received: stateful={stateful!r}"
            )
        for name, value in flags.items():
            setattr(self, name, value)
        self.units = units
        self.attention_units = attention_units
        self.activation = get_activation(activation, "activation")
        self.recurrent_activation = get_activation(
            recurrent_activation, "recurrent_activation"
        )
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.recurrent_initializer = get_initializer(
            recurrent_initializer, "recurrent_initializer"
        )
        self.bias_initializer = get_initializer(bias_initializer, "bias_initializer")
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = keras.regularizers.get(recurrent_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.recurrent_constraint = keras.constraints.get(recurrent_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.dropout = float(dropout)
        self.recurrent_dropout = float(recurrent_dropout)
        self.seed = seed
        rates = self.dropout + self.recurrent_dropout
        self.seed_generator = keras.random.SeedGenerator(seed) if rates else None
        self.supports_masking = True
        self.states = None  # what `keras.layers.Bidirectional` reads: not stateful

    # -- weights -------------------------------------------------------------

    def _add(self, name, shape, arguments, index, initializer=None):
        """A float32 weight (not cast under a mixed policy: the recurrence
        runs in float32) set up by the constructor `arguments`."""
        init, regularizer, constraint = (getattr(self, a) for a in arguments)
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=initializer or fresh_initializer(init, index),
            regularizer=regularizer,
            constraint=constraint,
            autocast=False,
        )

    def _bias_initializer(self):
        units, init = self.units, self.bias_initializer
        if not self.unit_forget_bias:
            return init

        def initializer(shape, dtype=None):
            del shape
            return ops.concatenate(
                [
                    init((units,), dtype=dtype),
                    keras.initializers.get("ones")((units,), dtype=dtype),
                    init((2 * units,), dtype=dtype),
                ]
            )

        return initializer

    def build(self, sequences_shape, initial_state_shape=None):
        check_rank("sequences", sequences_shape, 3)
        width = sequences_shape[-1]
        if width is None:
            raise ValueError(
                "The last dimension of `sequences` must be known. "
                f"Received: sequences.shape={tuple(sequences_shape)}"
            )
        units, att = self.units, self.attention_units or self.units
        self.kernel = self._add("kernel", (width, 4 * units), _KERNEL, 0)
        self.recurrent_kernel = self._add(
            "recurrent_kernel", (units, 4 * units), _RECURRENT, 0
        )
        self.bias = None
        if self.use_bias:
            arguments = ("bias_initializer", "bias_regularizer", "bias_constraint")
            self.bias = self._add(
                "bias", (4 * units,), arguments, 0, self._bias_initializer()
            )
        self.attention_input_kernel = self._add(
            "attention_input_kernel", (width, att), _KERNEL, 1
        )
        self.attention_memory_kernel = self._add(
            "attention_memory_kernel", (units, att), _RECURRENT, 1
        )
        self.attention_summary_kernel = None
        if self.use_summary_in_score:
            self.attention_summary_kernel = self._add(
                "attention_summary_kernel", (units, att), _RECURRENT, 2
            )
        self.attention_vector = self._add("attention_vector", (att,), _KERNEL, 2)
        self.built = True

    def recurrent_weights(self):
        """The weights of the loop, float32 (`keras_attention.ops.LSTMNWeights`)."""

        def value(weight):
            return None if weight is None else ops.cast(weight, "float32")

        return ka_ops.LSTMNWeights(
            recurrent_kernel=value(self.recurrent_kernel),
            memory_kernel=value(self.attention_memory_kernel),
            attention_vector=value(self.attention_vector),
            summary_kernel=value(self.attention_summary_kernel),
        )

    def activations(self):
        """The loop's activations (`keras_attention.ops.LSTMNActivations`)."""
        return ka_ops.LSTMNActivations(self.activation, self.recurrent_activation)

    # -- call ----------------------------------------------------------------

    def _initial_state(self, initial_state, batch):
        if initial_state is None:
            zeros = ops.zeros((batch, self.units), "float32")
            return zeros, zeros
        if not isinstance(initial_state, (list, tuple)):
            shapes = tuple(getattr(initial_state, "shape", ()))
        else:
            shapes = [tuple(getattr(s, "shape", ())) for s in initial_state]
        if (
            not isinstance(shapes, list)
            or len(shapes) != 2
            or any(len(s) != 2 or s[-1] not in (None, self.units) for s in shapes)
        ):
            raise ValueError(
                "`initial_state` must be a list `[h_0, c_0]` of two tensors of "
                f"shape (batch, units={self.units}). Received: initial_state "
                f"of shape(s) {shapes}"
            )
        return tuple(ops.cast(s, "float32") for s in initial_state)

    def _dropout_mask(self, like, rate, training):
        if not training or rate == 0:
            return None
        return keras.random.dropout(ops.ones_like(like), rate, seed=self.seed_generator)

    def loop_inputs(self, sequences, initial_state=None, mask=None, training=None):
        """The inputs of `keras_attention.ops.lstmn_recurrence` (a dict),
        and the float32 sequences they were computed from (after `dropout`
        and `go_backwards`), for layers built on this one (the fusion
        decoders); see `call` for the arguments."""
        x = ops.cast(sequences, "float32")  # (B, T, D)
        if mask is None:
            step_mask = ops.ones_like(x[..., 0])  # (B, T)
        else:
            check_mask("mask", mask, (sequences.shape[0], sequences.shape[1]))
            step_mask = ops.cast(ops.cast(mask, "bool"), "float32")
        if self.go_backwards:
            x, step_mask = ops.flip(x, axis=1), ops.flip(step_mask, axis=1)
        initial_hidden, initial_cell = self._initial_state(
            initial_state, ops.shape(x)[0]
        )
        dropped = self._dropout_mask(x[:, 0], self.dropout, training)  # (B, D)
        if dropped is not None:
            x = x * dropped[:, None, :]
        gate_inputs = ops.matmul(x, ops.cast(self.kernel, "float32"))  # (B, T, 4U)
        if self.bias is not None:
            gate_inputs = gate_inputs + ops.cast(self.bias, "float32")
        kernel = ops.cast(self.attention_input_kernel, "float32")
        inputs = {
            "gate_inputs": gate_inputs,
            "attention_inputs": ops.matmul(x, kernel),  # (B, T, A)
            "step_mask": step_mask,
            "initial_hidden": initial_hidden,
            "initial_cell": initial_cell,
            "recurrent_dropout_mask": self._dropout_mask(
                initial_hidden, self.recurrent_dropout, training
            ),
        }
        return inputs, x

    def call(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=None,
        return_attention_scores=False,
        return_cells=False,
    ):
        check_rank("sequences", sequences.shape, 3)
        check_last_dim("sequences", sequences.shape, self.kernel.shape[0])
        inputs, _ = self.loop_inputs(sequences, initial_state, mask, training)
        hidden, cell, weights = ka_ops.lstmn_recurrence(
            inputs,
            self.recurrent_weights(),
            self.activations(),
            return_attention=return_attention_scores,
        )
        # (B, T, U): slot t is the state after step t.
        outputs, cells = hidden[:, 1:], cell[:, 1:]
        if self.zero_output_for_mask:
            outputs = outputs * inputs["step_mask"][:, :, None]
            cells = cells * inputs["step_mask"][:, :, None]
        results = [outputs if self.return_sequences else outputs[:, -1]]
        if self.return_state:
            results += [hidden[:, -1], cell[:, -1]]
        if return_cells:
            results.append(cells)
        results = [ops.cast(r, self.compute_dtype) for r in results]
        if return_attention_scores:
            results.append(weights[:, :, 1:])  # (B, T, T): slot 0 left out
        return results[0] if len(results) == 1 else tuple(results)

    # -- shapes and masks ----------------------------------------------------

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        batch, steps = sequences_shape[0], sequences_shape[1]
        state = (batch, self.units)
        output = (batch, steps, self.units) if self.return_sequences else state
        return (output, state, state) if self.return_state else output

    def compute_output_spec(
        self,
        sequences,
        initial_state=None,
        return_attention_scores=False,
        return_cells=False,
        **kwargs,
    ):
        shapes = self.compute_output_shape(tuple(sequences.shape))
        shapes = list(shapes) if self.return_state else [shapes]
        if return_cells:
            shapes.append((*sequences.shape[:2], self.units))
        specs = [keras.KerasTensor(s, dtype=self.compute_dtype) for s in shapes]
        if return_attention_scores:
            batch, steps = sequences.shape[0], sequences.shape[1]
            specs.append(keras.KerasTensor((batch, steps, steps), dtype="float32"))
        return specs[0] if len(specs) == 1 else tuple(specs)

    def compute_mask(self, sequences, mask=None):
        output_mask = mask if self.return_sequences else None
        return [output_mask, None, None] if self.return_state else output_mask

    def get_config(self):
        config = {
            "units": self.units,
            "attention_units": self.attention_units,
            "use_summary_in_score": self.use_summary_in_score,
            "activation": keras.activations.serialize(self.activation),
            "recurrent_activation": keras.activations.serialize(
                self.recurrent_activation
            ),
            "use_bias": self.use_bias,
            "unit_forget_bias": self.unit_forget_bias,
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "seed": self.seed,
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "go_backwards": self.go_backwards,
            "stateful": self.stateful,
            "zero_output_for_mask": self.zero_output_for_mask,
        }
        for kind in ("kernel", "recurrent", "bias"):
            config[f"{kind}_initializer"] = keras.initializers.serialize(
                getattr(self, f"{kind}_initializer")
            )
            config[f"{kind}_regularizer"] = keras.regularizers.serialize(
                getattr(self, f"{kind}_regularizer")
            )
            config[f"{kind}_constraint"] = keras.constraints.serialize(
                getattr(self, f"{kind}_constraint")
            )
        return {**super().get_config(), **config}
