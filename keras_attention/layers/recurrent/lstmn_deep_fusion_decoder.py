import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.layers.recurrent.lstmn_decoder_base import LSTMNDecoderBase
from keras_attention.validation import check_last_dim
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import check_same

# Which of the LSTMN's settings (initializer, regularizer, constraint) each
# weight follows, and the `fresh_initializer` index it draws with (after the
# LSTMN's own 0 .. 2, so that no two weights start equal).
_WEIGHTS = {
    "source_input_kernel": ("kernel", 3),  # W_x' (D, A')
    "source_memory_kernel": ("recurrent", 3),  # W_gamma (Us, A')
    "source_summary_kernel": ("recurrent", 4),  # W_gamma~ (Us, A')
    "source_vector": ("kernel", 4),  # u (A',)
    "source_gate_input_kernel": ("kernel", 5),  # W_r's x_t block (D, U)
    "source_gate_kernel": ("recurrent", 5),  # W_r's gamma~_t block (Us, U)
    "source_gate_bias": ("bias", 0),  # b_r (U,)
}


@keras.saving.register_keras_serializable(package="keras_attention")
class LSTMNDeepFusionDecoder(LSTMNDecoderBase):
    """An LSTMN decoder that reads an encoder's tapes into its memory: deep fusion.

    Deep attention fusion of Cheng, Dong and Lapata (2016, §3.3): the
    decoder is an `LSTMN` (intra-attention over its own tapes, §3.1) whose
    step also attends over the encoder's hidden tape `gamma_1 .. gamma_S`
    and memory tape `alpha_1 .. alpha_S` (an `LSTMN` encoder's outputs and
    cells, `return_sequences=True` and `return_cells=True`) and writes what
    it reads into its memory cell. At step `t` (equations 10-15 of the
    paper; the intra-attention's `h~_t`, `c~_t` and gates as in `LSTMN`):

        b_j = u^T tanh(W_gamma gamma_j + W_x' x_t + W_gamma~ gamma~_{t-1})
        p = softmax_j(b),  [gamma~_t; alpha~_t] = sum_j p_j [gamma_j; alpha_j]
        r_t = sigma(W_r [gamma~_t; x_t] + b_r)
        c_t = r_t * alpha~_t + f_t * c~_t + i_t * c^_t,  h_t = o_t * tanh(c_t)

    with `gamma~_0 = 0`; the output is `h_t`. `W_x'`, `W_gamma`,
    `W_gamma~` and `u` are `source_input_kernel`, `source_memory_kernel`,
    `source_summary_kernel` and `source_vector`; `W_r` is
    `source_gate_input_kernel` (on `x_t`) and `source_gate_kernel` (on
    `gamma~_t`); `sigma` is `lstmn`'s `recurrent_activation`. Checked
    against the authors' decoder (`model/decoder_deep_w2v.lua` in
    github.com/cheng6076/SNLI-attention), which computes the same; where
    they differ this layer follows the paper, and says so:

    - Encoder padding is never attended: padded `j` get weight exactly 0
      (the authors multiply the scores `b_j` by the mask, which gives a
      padded position the score 0, not weight 0).
    - The sum runs over the `S` encoder steps; the authors' tapes also hold
      the encoder's initial state (their slot 0). Pass it as a step of
      `memory` to attend to it.
    - No bias inside the `tanh` (the paper; the authors' linear layers have
      one), as `LSTMN`'s score. `r_t` has the bias `b_r` (with `lstmn`'s
      `use_bias`), which the authors' code has and equation 13 leaves out,
      as the LSTMN's gates have `b`.
    - The inter-attention is the paper's additive score (the authors'
      too), with its own weights: the recurrence feeds `gamma~_{t-1}` back
      into it, so it runs inside the loop, whose `O(T)`-memory gradient
      (`keras_attention.ops.lstmn_fusion_recurrence`) differentiates these
      weights itself. For another score, use `LSTMNShallowFusionDecoder`.

    The memory tape must be `units` wide (`r_t * alpha~_t` joins `c_t`);
    the hidden tape may have any width `Us`. Training memory is
    `O(T (U + A) + S (Us + U + A'))` per sequence (the backward pass walks
    the steps over the final tapes, as `LSTMN`'s); time `O(T (T + S) A)`.

    Teacher forcing is `decoder(inputs, memory, memory_cells)`; step-by-step
    decoding runs the same weights through `prepare_memory()`,
    `get_initial_state(batch, max_length)` and `step()` (see
    `keras_attention.decoding`; the state is the LSTMN's tapes and the
    last `gamma~`, sized for `max_length` steps: see `get_initial_state`).
    Both give the same outputs. `step` applies no dropout.

    Masks: padded encoder positions (`memory_mask`, or the Keras mask of
    `memory`) get exactly zero weight. Padded decoder steps (`inputs_mask`,
    or the Keras mask of `inputs`) are skipped as `LSTMN` skips them: they
    read nothing (their alignments are zeros), carry `h`, `c`, `h~` and
    `gamma~` over and are never attended to; their output is the carried
    `h`, and the mask is passed on to the outputs.

    Args:
        lstmn: a `keras_attention.layers.LSTMN` (or its config): the
            decoder's recurrence, its units, intra-attention, activations,
            dropout (`dropout` also drops the inputs of the fusion) and
            initializers, regularizers and constraints, which the fusion's
            weights follow too (`go_backwards` must be False; its
            `return_sequences`, `return_state` and `zero_output_for_mask`
            play no part: the decoder returns every step).
        inter_attention_units: the width `A'` of the inter-attention's
            hidden layer (default: `lstmn`'s attention units).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)` step inputs (e.g. the embedded previous target
            tokens).
        memory: `(B, S, Us)` the encoder's hidden tape `gamma`.
        memory_cells: `(B, S, units)` the encoder's memory tape `alpha`.
        inputs_mask: boolean `(B, T)`, True = a real step.
        memory_mask: boolean `(B, S)`, True = may attend.
        initial_state: `[h_0, c_0]` `(B, units)` each, slot 0 of the tapes
            (e.g. the encoder's last state); zeros when `None`.
        return_alignments: also return the inter-attention weights `p`
            `(B, T, S)` (float32).
        training: whether dropout is active.

    Returns:
        `(B, T, units)`, and the alignments when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> encoder = ka.layers.LSTMN(8, return_sequences=True)
    >>> decoder = ka.layers.LSTMNDeepFusionDecoder(ka.layers.LSTMN(8))
    >>> sources = np.random.rand(2, 7, 6).astype("float32")
    >>> targets = np.random.rand(2, 5, 3).astype("float32")
    >>> hidden_tape, memory_tape = encoder(sources, return_cells=True)
    >>> outputs, alignments = decoder(
    ...     targets, hidden_tape, memory_tape, return_alignments=True)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 5, 8), (2, 5, 7))
    >>> cache = decoder.prepare_memory(hidden_tape, memory_tape)
    >>> state = decoder.get_initial_state(2, max_length=5)
    >>> output, state, alignment = decoder.step(targets[:, 0], state, cache)
    >>> bool(np.allclose(output, outputs[:, 0], atol=1e-5))
    True

    References:
        - Cheng, Dong and Lapata, 2016, Long Short-Term Memory-Networks for
          Machine Reading, §3.3: https://arxiv.org/abs/1601.06733
        - The authors' code: https://github.com/cheng6076/SNLI-attention
    """

    def __init__(self, lstmn, inter_attention_units=None, **kwargs):
        super().__init__(lstmn, **kwargs)
        check_positive_int(
            "inter_attention_units", inter_attention_units, allow_none=True
        )
        self.inter_attention_units = inter_attention_units

    def _check_memory(self, memory_shape, cells_shape):
        check_rank("memory_cells", cells_shape, 3)
        for axis, what in ((0, "batch size"), (1, "length")):
            check_same(
                "memory_cells", cells_shape[axis], "memory", memory_shape[axis], what
            )
        if cells_shape[-1] is not None and cells_shape[-1] != self.units:
            raise ValueError(
                "The last dimension of `memory_cells` (the encoder's memory "
                f"tape) must be the decoder's units={self.units}: r_t * alpha~_t "
                f"joins its cell. Received: memory_cells.shape={tuple(cells_shape)}"
            )
        if self.built:
            check_last_dim("memory", memory_shape, self.source_memory_kernel.shape[0])

    def build(self, inputs_shape, memory_shape, memory_cells_shape):
        self._check_shapes(inputs_shape, memory_shape)
        self._check_memory(memory_shape, memory_cells_shape)
        self._build_lstmn(inputs_shape)
        width, source_width = inputs_shape[-1], memory_shape[-1]
        if source_width is None:
            raise ValueError(
                "The last dimension of `memory` must be known. "
                f"Received: memory.shape={tuple(memory_shape)}"
            )
        lstmn, units = self.lstmn, self.units
        att = self.inter_attention_units or lstmn.attention_units or units
        shapes = {
            "source_input_kernel": (width, att),
            "source_memory_kernel": (source_width, att),
            "source_summary_kernel": (source_width, att),
            "source_vector": (att,),
            "source_gate_input_kernel": (width, units),
            "source_gate_kernel": (source_width, units),
        }
        if lstmn.use_bias:
            shapes["source_gate_bias"] = (units,)
        self.source_gate_bias = None
        for name, shape in shapes.items():
            kind, index = _WEIGHTS[name]
            setattr(self, name, self._add(name, shape, kind, index))
        self.built = True

    def _add(self, name, shape, kind, index):
        """A float32 weight (the recurrence runs in float32) that follows
        `lstmn`'s `{kind}_initializer`, regularizer and constraint."""
        settings = [getattr(self.lstmn, f"{kind}_{s}") for s in _SETTINGS]
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=fresh_initializer(settings[0], index),
            regularizer=settings[1],
            constraint=settings[2],
            autocast=False,
        )

    def _source_width(self):
        return self.source_memory_kernel.shape[0]

    def _loop_weights(self):
        def value(weight):
            return ops.cast(weight, "float32")

        return self.lstmn.recurrent_weights()._replace(
            source_summary_kernel=value(self.source_summary_kernel),
            source_vector=value(self.source_vector),
            source_gate_kernel=value(self.source_gate_kernel),
        )

    def _source_step_inputs(self, x):
        """`(W_x' x, W_r's x block x + b_r)` of the steps `x` `(B, [T,] D)`."""
        attention = ops.matmul(x, ops.cast(self.source_input_kernel, "float32"))
        gate = ops.matmul(x, ops.cast(self.source_gate_input_kernel, "float32"))
        if self.source_gate_bias is not None:
            gate = gate + ops.cast(self.source_gate_bias, "float32")
        return attention, gate

    def prepare_memory(self, memory, memory_cells, memory_mask=None):
        """Per-sequence work done once, for `step` (and `call`): the source
        tapes of `keras_attention.ops.lstmn_step`, a dict of float32
        `hidden (B, S, Us)`, `cell (B, S, U)`, `projected (B, S, A')`
        (`W_gamma gamma_j`) and `mask (B, S)` (1 = a real position)."""
        check_rank("memory", memory.shape, 3)
        self._check_memory(tuple(memory.shape), tuple(memory_cells.shape))
        hidden = ops.cast(memory, "float32")
        if memory_mask is None:
            mask = ops.ones_like(hidden[..., 0])
        else:
            ka_ops.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
            mask = ops.cast(ops.cast(memory_mask, "bool"), "float32")
        kernel = ops.cast(self.source_memory_kernel, "float32")
        return {
            "hidden": hidden,
            "cell": ops.cast(memory_cells, "float32"),
            "projected": ops.matmul(hidden, kernel),  # (B, S, A')
            "mask": mask,
        }

    def step(self, inputs, state, memory_cache, training=None):
        """One decoding step.

        Args:
            inputs: the step input `(B, D)`.
            state: `get_initial_state()`'s dict, or the last step's.
            memory_cache: `prepare_memory(memory, memory_cells, memory_mask)`.
            training: unused (`step` applies no dropout); for the signature
                of `AttentionRNNDecoder.step`.

        Returns:
            `(output, state, alignment)`: `h_t` `(B, units)`, the new state
            and the float32 inter-attention weights `p` `(B, S)`.
        """
        del training
        lstmn_step, state = self._advance(inputs, state, memory_cache)
        output = ops.cast(lstmn_step.hidden, self.compute_dtype)
        return output, state, lstmn_step.source_attention

    def call(
        self,
        inputs,
        memory,
        memory_cells,
        inputs_mask=None,
        memory_mask=None,
        initial_state=None,
        return_alignments=False,
        training=None,
    ):
        self._check_call(inputs, memory, inputs_mask, memory_mask)
        loop, x = self.lstmn.loop_inputs(inputs, initial_state, inputs_mask, training)
        source = self.prepare_memory(memory, memory_cells, memory_mask)
        loop.update({f"source_{name}": value for name, value in source.items()})
        attention_inputs, gate_inputs = self._source_step_inputs(x)
        loop["source_attention_inputs"] = attention_inputs  # (B, T, A')
        loop["source_gate_inputs"] = gate_inputs  # (B, T, U)
        hidden, _, _, alignments = ka_ops.lstmn_fusion_recurrence(
            loop,
            self._loop_weights(),
            self.lstmn.activations(),
            return_attention=return_alignments,
        )
        outputs = ops.cast(hidden[:, 1:], self.compute_dtype)  # (B, T, U)
        return (outputs, alignments) if return_alignments else outputs

    def compute_output_spec(
        self, inputs, memory, memory_cells, return_alignments=False, **kwargs
    ):
        return self._output_specs(inputs, memory, self.units, return_alignments)

    def get_config(self):
        return {
            **super().get_config(),
            "inter_attention_units": self.inter_attention_units,
        }


_SETTINGS = ("initializer", "regularizer", "constraint")
