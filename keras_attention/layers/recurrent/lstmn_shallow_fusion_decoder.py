import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.recurrent.attention_rnn_cell import attend
from keras_attention.layers.recurrent.attention_rnn_cell import prepare_attention_memory
from keras_attention.layers.recurrent.attention_rnn_cell import step_attention
from keras_attention.layers.recurrent.lstmn_decoder_base import LSTMNDecoderBase


@keras.saving.register_keras_serializable(package="keras_attention")
class LSTMNShallowFusionDecoder(LSTMNDecoderBase):
    """An LSTMN decoder with inter-attention over an encoder: shallow fusion.

    Shallow attention fusion of Cheng, Dong and Lapata (2016, §3.3): the
    decoder is an `LSTMN`, whose intra-attention reads its own tapes of
    earlier states, and inter-attention over the encoder's outputs is
    triggered each time it reads a target token. At step `t`:

        h_t = LSTMN(x_1 .. x_t)                      (intra-attention, §3.1)
        a_t = softmax_j(s(m_j, h_t)),  ctx_t = sum_j a_tj m_j
        output_t = [h_t; ctx_t]

    where `m_j` are the encoder outputs (`memory`) and `s` is `attention`'s
    score (any `ScoredAttention`: `BahdanauAttention`, `LuongAttention`,
    ...). The paper gives shallow fusion in words and a figure only ("the
    LSTMN in lieu of a standard RNN", inter-attention "similar to" Bahdanau
    et al.); made exact here, the wiring is Luong et al.'s global attention
    without input feeding: `h_t` queries the memory after the step, and the
    context does not feed back into the recurrence. So the recurrence is
    exactly `LSTMN`'s, with its `O(T)`-memory gradient, and teacher forcing
    attends for all steps at once. (The authors' released code has the deep
    decoder only.) The output concatenates `h_t` and the context, as
    `AttentionRNNCell`'s Bahdanau style does: put a readout (`Dense`) on
    top.

    Teacher forcing is `decoder(inputs, memory)`; step-by-step decoding
    runs the same weights through `prepare_memory()`,
    `get_initial_state(batch, max_length)` and `step()` (see
    `keras_attention.decoding`; the state is the LSTMN's tapes, sized for
    `max_length` steps: see `get_initial_state`). Both give the same
    outputs. `step` applies none of the LSTMN's dropout (decoding is
    inference); the attention's, with `training=True`.

    Masks: padded encoder positions (`memory_mask`, or the Keras mask of
    `memory`) get exactly zero attention. Padded decoder steps
    (`inputs_mask`, or the Keras mask of `inputs`) are skipped as `LSTMN`
    skips them (carried over, never attended to, wherever they are); their
    outputs are computed from the carried `h`, and the mask is passed on to
    the outputs so that a loss ignores them.

    Args:
        lstmn: a `keras_attention.layers.LSTMN` (or its config): the
            decoder's recurrence, its units, scores, activations, dropout
            and initializers (`go_backwards` must be False; its
            `return_sequences`, `return_state` and `zero_output_for_mask`
            play no part: the decoder returns every step).
        attention: a `ScoredAttention` layer (or its config); a local
            `window` only with `alignment="predictive"` (as
            `AttentionRNNCell`).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)` step inputs (e.g. the embedded previous target
            tokens).
        memory: `(B, S, Dm)` encoder outputs.
        inputs_mask: boolean `(B, T)`, True = a real step.
        memory_mask: boolean `(B, S)`, True = may attend.
        initial_state: `[h_0, c_0]` `(B, units)` each, slot 0 of the tapes
            (e.g. the encoder's last state); zeros when `None`.
        return_alignments: also return the inter-attention weights
            `(B, T, S)` (float32).
        training: whether dropout is active.

    Returns:
        `(B, T, units + Dm)`, and the alignments when asked.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> decoder = ka.layers.LSTMNShallowFusionDecoder(
    ...     ka.layers.LSTMN(8), ka.layers.BahdanauAttention(4))
    >>> targets = np.random.rand(2, 5, 3).astype("float32")
    >>> memory = np.random.rand(2, 7, 6).astype("float32")
    >>> outputs, alignments = decoder(targets, memory, return_alignments=True)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 5, 14), (2, 5, 7))
    >>> cache = decoder.prepare_memory(memory)
    >>> state = decoder.get_initial_state(2, max_length=5)
    >>> output, state, alignment = decoder.step(targets[:, 0], state, cache)
    >>> bool(np.allclose(output, outputs[:, 0], atol=1e-5))
    True

    References:
        - Cheng, Dong and Lapata, 2016, Long Short-Term Memory-Networks for
          Machine Reading, §3.3: https://arxiv.org/abs/1601.06733
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
    """

    def __init__(self, lstmn, attention, **kwargs):
        super().__init__(lstmn, **kwargs)
        self.attention = step_attention(attention)

    def build(self, inputs_shape, memory_shape):
        self._check_shapes(inputs_shape, memory_shape)
        self._build_lstmn(inputs_shape)
        if not self.attention.built:
            self.attention.build((inputs_shape[0], self.units), memory_shape)
        self.built = True

    def output_size(self, memory_dim):
        """Width of a step output for a memory of width `memory_dim`."""
        return self.units + memory_dim

    def prepare_memory(self, memory, memory_mask=None):
        """Per-sequence work done once, for `step`: `(memory, keys, mask)`
        (as `AttentionRNNCell.prepare_memory`)."""
        return prepare_attention_memory(self.attention, memory, memory_mask)

    def step(self, inputs, state, memory_cache, training=None):
        """One decoding step.

        Args:
            inputs: the step input `(B, D)`.
            state: `get_initial_state()`'s dict, or the last step's.
            memory_cache: `prepare_memory(memory, memory_mask)`.
            training: whether the attention's dropout is active.

        Returns:
            `(output, state, alignment)`: `(B, units + Dm)`, the new state
            and the float32 inter-attention weights `(B, S)`.
        """
        lstmn_step, state = self._advance(inputs, state)
        output, alignment = self._attend(lstmn_step.hidden, memory_cache, training)
        return output, state, alignment

    def _attend(self, hidden, memory_cache, training):
        """`([h; ctx], weights)` for float32 `h` `(B, [T,] U)`: `h` queries the
        memory in float32 (under a mixed policy, the gradient of a bilinear
        score by `h` would overflow float16) as `AttentionRNNCell` does."""
        context, alignment = attend(self.attention, hidden, memory_cache, training)
        hidden = ops.cast(hidden, self.compute_dtype)
        output = ops.concatenate([hidden, ops.cast(context, hidden.dtype)], axis=-1)
        return output, alignment

    def call(
        self,
        inputs,
        memory,
        inputs_mask=None,
        memory_mask=None,
        initial_state=None,
        return_alignments=False,
        training=None,
    ):
        self._check_call(inputs, memory, inputs_mask, memory_mask)
        loop, _ = self.lstmn.loop_inputs(inputs, initial_state, inputs_mask, training)
        hidden, _, _ = ka_ops.lstmn_recurrence(
            loop, self.lstmn.recurrent_weights(), self.lstmn.activations()
        )
        cache = self.prepare_memory(memory, memory_mask)
        outputs, alignments = self._attend(hidden[:, 1:], cache, training)
        return (outputs, alignments) if return_alignments else outputs

    def compute_output_spec(self, inputs, memory, return_alignments=False, **kwargs):
        width = self.output_size(memory.shape[-1])
        return self._output_specs(inputs, memory, width, return_alignments)

    def get_config(self):
        return {
            **super().get_config(),
            "attention": keras.saving.serialize_keras_object(self.attention),
        }
