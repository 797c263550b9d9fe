import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.layers.recurrent.scored_attention import ScoredAttention
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import get_layer

_STYLES = ("bahdanau", "luong")


def _as_list(size):
    return list(size) if isinstance(size, (list, tuple)) else [size]


def _no_memory(name):
    """The TypeError for a call without the memory, e.g. from keras.layers.RNN."""
    raise TypeError(
        f"`AttentionRNNCell` needs `{name}`: the attention memory (the "
        "encoder outputs). `keras.layers.RNN` cannot pass it to its cell "
        "(Keras 3 calls a cell with `(inputs, states, training)` only), so "
        "`keras.layers.RNN(AttentionRNNCell(...))` does not work: use "
        "`keras_attention.layers.AttentionRNNDecoder(cell)(inputs, memory)` "
        "over a sequence, or `cell.prepare_memory(memory)` and `cell.step()` "
        f"step by step. Received: {name}=None"
    )


def step_attention(attention):
    """`attention` (or its config) checked for a decoder that queries it one
    state at a time: a `ScoredAttention` whose window, if any, is local-p."""
    attention = get_layer(
        "attention",
        attention,
        ScoredAttention,
        "a `ScoredAttention` layer (e.g. BahdanauAttention, LuongAttention)",
    )
    if attention.window is not None and not attention.predictive:
        raise ValueError(
            "`attention` inside a decoder cell may use a local `window` only "
            "with alignment='predictive' (local-p). Received: "
            f"attention.window={attention.window}, "
            f"attention.alignment={attention.alignment!r}"
        )
    return attention


def prepare_attention_memory(attention, memory, memory_mask=None):
    """`(memory, keys, mask)` for `attend`: `keys` the memory projected by
    `attention`'s score when it supports it (`project_key`), else the
    memory; `mask` boolean `(B, S)` or `None`."""
    check_rank("memory", memory.shape, 3)
    if memory_mask is not None:
        ka_ops.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
        memory_mask = ops.cast(memory_mask, "bool")
    score = attention.score
    keys = score.project_key(memory) if hasattr(score, "project_key") else memory
    return memory, keys, memory_mask


def attend(attention, query, memory_cache, training=None):
    """Context `(B, Dm)` and float32 alignment `(B, S)` of one query `(B, D)`
    over `prepare_attention_memory`'s cache, with `attention`'s score; for a
    sequence of queries `(B, T, D)`, `(B, T, Dm)` and `(B, T, S)`. The query
    reaches the score in its own dtype (the score computes in float32)."""
    memory, keys, mask = memory_cache
    score = attention.score
    single = len(query.shape) == 2
    if single:
        query = query[:, None, :]  # (B, 1, D)
    if hasattr(score, "score_projected"):
        logits = score.score_projected(query, keys)  # (B, 1, S)
    else:
        logits = score(query, keys)
    weights = attention.alignment_weights(
        query,
        logits,
        None if mask is None else mask[:, None, :],
        key_mask=mask,
        training=training,
    )
    context = ka_ops.weighted_sum(weights, memory)  # (B, T, Dm)
    return (context[:, 0], weights[:, 0]) if single else (context, weights)


@keras.saving.register_keras_serializable(package="keras_attention")
class AttentionRNNCell(keras.layers.Layer):
    """One decoder step of an RNN with attention over an encoder memory.

    Wraps any Keras RNN cell (`GRUCell`, `LSTMCell`, `SimpleRNNCell`, or a
    custom cell with `state_size`) and an attention layer
    (`BahdanauAttention`, `LuongAttention` or any `ScoredAttention`). Two
    ways of wiring them, after the two papers:

    - `style="bahdanau"` (Bahdanau et al., 2015): the previous decoder
      state `s_{t-1}` queries the memory, the context `c_t` is
      concatenated to the step input `y_{t-1}` and fed into the cell:
      `s_t = cell([y_{t-1}; c_t], s_{t-1})`. The step output is
      `[s_t; c_t]`, so that the read-out sees the context directly.
    - `style="luong"` (Luong et al., 2015): the cell runs first,
      `h_t = cell(x_t, h_{t-1})`, then `h_t` queries the memory and the
      attentional hidden state `h~_t = tanh(W_c [c_t; h_t])` is the step
      output. With `input_feeding` (the default), `h~_{t-1}` is
      concatenated to the step input and carried as an extra state.

    Memory is processed once per sequence by `prepare_memory()` (for an
    additive score this caches the key projection `W h_j`, which does not
    change from step to step), then `step()` advances one time step.
    `AttentionRNNDecoder` runs these over a whole target sequence; call
    them directly for step-by-step inference.

    The state is a flat list: the wrapped cell's states (the first one is
    the hidden state `h`, as for every Keras cell), then `h~_{t-1}` for the
    Luong style with input feeding.

    Not a cell for `keras.layers.RNN`: Keras 3's RNN calls its cell with
    `(inputs, states, training)` only (it dropped Keras 2's `constants`), so
    it cannot hand the memory to the cell at every step.
    `keras.layers.RNN(AttentionRNNCell(...))` raises a TypeError that says
    so when it is called; use `AttentionRNNDecoder`, which runs this cell
    over a sequence with the memory (under `fit`, `predict` and XLA).

    Args:
        cell: a Keras RNN cell instance (or its serialized config).
        attention: a `ScoredAttention` layer (e.g. `BahdanauAttention(64)`,
            `LuongAttention("general")`) or its serialized config. Local
            attention works with predictive alignment (local-p:
            `window=D, alignment="predictive"`); local-m, whose position is
            the query's own index, does not apply to a single decoder state.
        style: `"bahdanau"` (default) or `"luong"`.
        input_feeding: Luong style only: feed `h~_{t-1}` into the cell
            (default `True`). Must be left `None` for the Bahdanau style,
            which always feeds the context.
        attention_dim: Luong style only: width of `h~_t` (the cell's units
            when `None`).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_attention as ka
    >>> cell = ka.layers.AttentionRNNCell(
    ...     keras.layers.GRUCell(16), ka.layers.BahdanauAttention(8))
    >>> memory = np.random.rand(2, 7, 12).astype("float32")
    >>> cell.build((2, 5), memory.shape)
    >>> cache = cell.prepare_memory(memory)
    >>> states = cell.get_initial_state(2)
    >>> x = np.random.rand(2, 5).astype("float32")
    >>> output, states, alignment = cell.step(x, states, cache)
    >>> tuple(output.shape), tuple(alignment.shape)
    ((2, 28), (2, 7))

    References:
        - Bahdanau et al., 2015: https://arxiv.org/abs/1409.0473
        - Luong et al., 2015: https://arxiv.org/abs/1508.04025
    """

    def __init__(
        self,
        cell,
        attention,
        style="bahdanau",
        input_feeding=None,
        attention_dim=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        cell = get_layer(
            "cell",
            cell,
            keras.layers.Layer,
            "a Keras RNN cell (a layer with `state_size`, e.g. keras.layers.GRUCell)",
            attribute="state_size",
        )
        attention = step_attention(attention)
        if style not in _STYLES:
            raise ValueError(
                f"`style` must be one of {_STYLES}. Received: style={style!r}"
            )
        if style == "bahdanau":
            for name, value in (
                ("input_feeding", input_feeding),
                ("attention_dim", attention_dim),
            ):
                if value is not None:
                    raise ValueError(
                        f"`{name}` applies to the Luong style only. "
                        f"Received: style='bahdanau', {name}={value!r}"
                    )
        check_positive_int("attention_dim", attention_dim, allow_none=True)
        self.cell = cell
        self.attention = attention
        self.style = style
        self.input_feeding = input_feeding
        self.attention_dim = attention_dim
        self._feeds = style == "luong" and input_feeding is not False
        self._step_fn = self._bahdanau_step if style == "bahdanau" else self._luong_step
        self.attention_layer = None
        if style == "luong":
            self.attention_layer = keras.layers.Dense(
                attention_dim or self._cell_units,
                activation="tanh",
                use_bias=False,
                dtype=self.dtype_policy,
                name="attention_layer",
            )

    @property
    def _cell_units(self):
        return _as_list(self.cell.state_size)[0]

    @property
    def _cell_output_size(self):
        return getattr(self.cell, "output_size", None) or self._cell_units

    @property
    def state_size(self):
        """Sizes of the state list: the cell's states, then `h~` if fed."""
        sizes = _as_list(self.cell.state_size)
        if self._feeds:
            sizes.append(self.attention_layer.units)
        return sizes

    def output_size(self, memory_dim):
        """Width of a step output for a memory of width `memory_dim`."""
        if self.style == "luong":
            return self.attention_layer.units
        return self._cell_output_size + memory_dim

    def build(self, inputs_shape, memory_shape=None):
        """Build from one step's input `(B, D)` and the memory `(B, S, Dm)`."""
        if memory_shape is None:
            _no_memory("memory_shape")
        check_rank("inputs", inputs_shape, 2)
        check_rank("memory", memory_shape, 3)
        memory_dim = memory_shape[-1]
        extra = memory_dim if self.style == "bahdanau" else 0
        if self._feeds:
            extra = self.attention_layer.units
        # Sub-layers restored from a saved config arrive already built.
        if not self.cell.built:
            self.cell.build((inputs_shape[0], inputs_shape[-1] + extra))
        if not self.attention.built:
            self.attention.build((inputs_shape[0], self._cell_units), memory_shape)
        if self.attention_layer is not None and not self.attention_layer.built:
            self.attention_layer.build(
                (inputs_shape[0], memory_dim + self._cell_output_size)
            )
        self.built = True

    def get_initial_state(self, batch_size, cell_states=None):
        """The initial state list.

        Args:
            batch_size: int or scalar tensor.
            cell_states: initial states of the wrapped cell (e.g. the final
                encoder state), a tensor or a list; zeros when `None`.
        """
        if cell_states is None:
            if hasattr(self.cell, "get_initial_state"):
                states = _as_list(self.cell.get_initial_state(batch_size))
            else:
                states = [
                    ops.zeros((batch_size, size), dtype=self.compute_dtype)
                    for size in _as_list(self.cell.state_size)
                ]
        else:
            states = _as_list(cell_states)
            expected = len(_as_list(self.cell.state_size))
            if len(states) != expected:
                raise ValueError(
                    f"`initial_state` must hold {expected} tensor(s), the states "
                    f"of {type(self.cell).__name__}. Received: {len(states)}"
                )
        if self._feeds:
            states.append(
                ops.zeros(
                    (batch_size, self.attention_layer.units), dtype=self.compute_dtype
                )
            )
        return states

    def prepare_memory(self, memory, memory_mask=None):
        """Per-sequence work done once: `(memory, keys, mask)`.

        `keys` is the memory projected by the score when it supports it
        (`project_key`, e.g. the additive score's `W h_j`), else the memory.
        """
        return prepare_attention_memory(self.attention, memory, memory_mask)

    def _attend(self, query, memory_cache, training):
        return attend(self.attention, query, memory_cache, training)

    def _run_cell(self, inputs, cell_states, training):
        output, new_states = self.cell(inputs, cell_states, training=training)
        return output, _as_list(new_states)

    def _bahdanau_step(self, inputs, states, memory_cache, training):
        context, alignment = self._attend(states[0], memory_cache, training)
        cell_in = ops.concatenate([inputs, ops.cast(context, inputs.dtype)], axis=-1)
        output, new_states = self._run_cell(cell_in, states, training)
        output = ops.concatenate([output, ops.cast(context, output.dtype)], axis=-1)
        return output, new_states, alignment

    def _luong_step(self, inputs, states, memory_cache, training):
        if self._feeds:
            cell_states, feed = states[:-1], states[-1]
            cell_in = ops.concatenate([inputs, ops.cast(feed, inputs.dtype)], axis=-1)
        else:
            cell_states, cell_in = states, inputs
        h, new_states = self._run_cell(cell_in, cell_states, training)
        context, alignment = self._attend(h, memory_cache, training)
        # h~_t = tanh(W_c [c_t; h_t])
        attentional = self.attention_layer(
            ops.concatenate([ops.cast(context, h.dtype), h], axis=-1)
        )
        if self._feeds:
            new_states = [*new_states, attentional]
        return attentional, new_states, alignment

    def step(self, inputs, states, memory_cache, training=None):
        """Advance one time step.

        Args:
            inputs: the step input `(B, D)` (e.g. the embedded previous token).
            states: the state list (`get_initial_state()` or the last step's);
                a single tensor for a cell with one state.
            memory_cache: `prepare_memory(memory, memory_mask)`.
            training: whether dropout is active.

        Returns:
            `(output, new_states, alignment)`: `(B, output_size)`, the new
            state list and the float32 attention weights `(B, S)`.
        """
        states = _as_list(states)
        expected = len(self.state_size)
        if len(states) != expected:
            raise ValueError(
                f"`states` must be a list of {expected} tensors (see `state_size`). "
                f"Received: {len(states)} tensors"
            )
        for i, (state, size) in enumerate(zip(states, self.state_size, strict=True)):
            width = getattr(state, "shape", (None,))[-1]
            if width is not None and width != size:
                raise ValueError(
                    f"`states[{i}]` must have width {size} (see `state_size`). "
                    f"Received: states[{i}].shape={tuple(state.shape)}"
                )
        return self._step_fn(inputs, states, memory_cache, training)

    def call(self, inputs, states, memory=None, memory_mask=None, training=None):
        """One step from raw memory: `step(inputs, states, prepare_memory(...))`."""
        if memory is None:
            _no_memory("memory")
        cache = self.prepare_memory(memory, memory_mask)
        return self.step(inputs, states, cache, training=training)

    def get_config(self):
        return {
            **super().get_config(),
            "cell": keras.saving.serialize_keras_object(self.cell),
            "attention": keras.saving.serialize_keras_object(self.attention),
            "style": self.style,
            "input_feeding": self.input_feeding,
            "attention_dim": self.attention_dim,
        }
