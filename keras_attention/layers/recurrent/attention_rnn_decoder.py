import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.recurrent.attention_rnn_cell import AttentionRNNCell
from keras_attention.validation import check_rank
from keras_attention.validation import check_same
from keras_attention.validation import get_layer


def _dropout_cells(cell):
    """The wrapped cells that cache dropout masks between steps."""
    cells = getattr(cell, "cells", None) or [cell]
    return [c for c in cells if hasattr(c, "get_dropout_mask")]


@keras.saving.register_keras_serializable(package="keras_attention")
class AttentionRNNDecoder(keras.layers.Layer):
    """RNN decoder with attention over an encoder memory (teacher forcing).

    Runs an `AttentionRNNCell` over a whole target sequence: at step `t`
    the cell reads `inputs[:, t]` (e.g. the embedded previous target token)
    and attends over `memory` (the encoder annotations). Training a seq2seq
    model is then one `model.fit` call. The loop is
    `keras_attention.ops.recurrence` (a scan that trains under XLA,
    `jit_compile=True`) and needs no cuDNN kernel. It plays the part of
    `keras.layers.RNN`, which cannot carry the memory: Keras 3 dropped its
    `constants` argument.

    For inference, run the same weights step by step: `prepare_memory()`,
    `get_initial_state()` and `step()` (see `keras_attention.decoding`).
    Both paths give the same outputs for the same inputs.

    Masks: padded memory positions (`memory_mask`, or the Keras mask of
    `memory`, e.g. from `Embedding(mask_zero=True)` through the encoder)
    get exactly zero attention. The Keras mask of `inputs` is passed on to
    the outputs, so a loss ignores padded target steps.

    Args:
        cell: an `AttentionRNNCell` (or its serialized config).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, T, D)` step inputs.
        memory: `(B, S, Dm)` encoder outputs.
        memory_mask: boolean `(B, S)`, True = may attend.
        initial_state: initial states of the wrapped cell (e.g. the final
            encoder state; a tensor or a list, `[h, c]` for an LSTM); zeros
            when `None`.
        return_alignments: also return the alignment history
            `(B, T, S)`: the float32 attention weights of every step.
        training: whether dropout is active.

    Returns:
        `(B, T, output_size)`, and the alignments when asked.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_attention as ka
    >>> decoder = ka.layers.AttentionRNNDecoder(ka.layers.AttentionRNNCell(
    ...     keras.layers.LSTMCell(16), ka.layers.LuongAttention("general"),
    ...     style="luong"))
    >>> targets = np.random.rand(2, 5, 4).astype("float32")
    >>> memory = np.random.rand(2, 7, 16).astype("float32")
    >>> outputs, alignments = decoder(targets, memory, return_alignments=True)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 5, 16), (2, 5, 7))

    References:
        - Bahdanau et al., 2015: https://arxiv.org/abs/1409.0473
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        self.cell = get_layer(
            "cell",
            cell,
            AttentionRNNCell,
            "an `AttentionRNNCell` (wrap your Keras cell and attention layer in one)",
        )
        self.supports_masking = True

    def _check_shapes(self, inputs_shape, memory_shape):
        check_rank("inputs", inputs_shape, 3)
        check_rank("memory", memory_shape, 3)
        check_same("inputs", inputs_shape[0], "memory", memory_shape[0], "batch size")

    def build(self, inputs_shape, memory_shape):
        self._check_shapes(inputs_shape, memory_shape)
        if not self.cell.built:
            self.cell.build((inputs_shape[0], inputs_shape[-1]), memory_shape)
        self.built = True

    @property
    def state_size(self):
        return self.cell.state_size

    def prepare_memory(self, memory, memory_mask=None):
        """See `AttentionRNNCell.prepare_memory`."""
        return self.cell.prepare_memory(memory, memory_mask)

    def get_initial_state(self, batch_size, initial_state=None):
        """See `AttentionRNNCell.get_initial_state`."""
        return self.cell.get_initial_state(batch_size, initial_state)

    def step(self, inputs, states, memory_cache, training=None):
        """One decoding step; see `AttentionRNNCell.step`."""
        return self.cell.step(inputs, states, memory_cache, training=training)

    def call(
        self,
        inputs,
        memory,
        memory_mask=None,
        initial_state=None,
        return_alignments=False,
        training=None,
    ):
        self._check_shapes(tuple(inputs.shape), tuple(memory.shape))
        if memory_mask is not None:
            check_rank("memory_mask", memory_mask.shape, 2)
            check_same(
                "memory_mask", memory_mask.shape[1], "memory", memory.shape[1], "length"
            )
        batch_size = ops.shape(inputs)[0]
        cache = self.cell.prepare_memory(memory, memory_mask)
        states = self.cell.get_initial_state(batch_size, initial_state)
        states = [ops.cast(s, self.compute_dtype) for s in states]

        cells = _dropout_cells(self.cell.cell) if training else []
        for cell in cells:
            # One dropout mask for the whole sequence (as keras.layers.RNN),
            # created outside the loop so it is not a loop-local tensor.
            for get_mask, kernel in (
                (cell.get_dropout_mask, cell.kernel),
                (cell.get_recurrent_dropout_mask, cell.recurrent_kernel),
            ):
                get_mask(ops.zeros((batch_size, kernel.shape[0]), self.compute_dtype))

        # The carry holds each step's output and alignment next to the
        # states, so that stacking the carries gives the output sequences.
        width = self.cell.output_size(memory.shape[-1])
        carry = (
            states,
            ops.zeros((batch_size, width), dtype=self.compute_dtype),
            ops.zeros_like(memory[:, :, 0], dtype="float32"),  # (B, S)
        )

        def body(carry, x_t):
            output, new_states, alignment = self.cell.step(
                x_t, carry[0], cache, training=training
            )
            new_states = [ops.cast(s, self.compute_dtype) for s in new_states]
            return (new_states, ops.cast(output, self.compute_dtype), alignment)

        time_major = ops.transpose(inputs, (1, 0, 2))  # (T, B, D)
        _, outputs, alignments = ka_ops.recurrence(body, carry, time_major)
        for cell in cells:
            cell.reset_dropout_mask()
            cell.reset_recurrent_dropout_mask()
        outputs = ops.transpose(outputs, (1, 0, 2))  # (B, T, O)
        if return_alignments:
            return outputs, ops.transpose(alignments, (1, 0, 2))  # (B, T, S)
        return outputs

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        return {
            **super().get_config(),
            "cell": keras.saving.serialize_keras_object(self.cell),
        }
