import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention.initializers import fresh_initializer
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank
from keras_attention.validation import get_layer

# Raw head parameters per head: key (M), strength, gate, shift (K), sharpness.
_SCALARS = 3


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _controller_width(controller):
    """Width of the controller's output, known before it is built."""
    width = getattr(controller, "output_size", None)
    if not isinstance(width, int):
        width = getattr(controller, "units", None)
    if isinstance(width, bool) or not isinstance(width, int):
        raise ValueError(
            "`controller` must be a Keras layer with an integer `units` or "
            "`output_size` (e.g. keras.layers.LSTMCell(100) or "
            f"keras.layers.Dense(100, activation='relu')). Received: "
            f"controller={controller!r}"
        )
    return width


def _check_controller(controller):
    controller = get_layer(
        "controller",
        controller,
        keras.layers.Layer,
        "a Keras layer: an RNN cell such as keras.layers.LSTMCell(100) or a "
        "feed-forward layer such as keras.layers.Dense(100, activation='relu')",
    )
    _controller_width(controller)
    return controller


@keras.saving.register_keras_serializable(package="keras_attention")
class NeuralTuringMachineCell(keras.layers.Layer):
    """A Neural Turing Machine step (Graves et al., 2014): an RNN cell.

    A controller network reads the step input `x_t` and the previous read
    vectors `r_{t-1}`, and emits the parameters of its heads. Each head
    addresses the `N x M` memory with the paper's four steps (content by
    cosine similarity and key strength `beta`, interpolation gate `g`,
    circular shift `s`, sharpening `gamma`; see `keras_attention.ops.address`),
    read heads read `r_t = sum_i w(i) M(i)`, write heads erase and add
    `M_t(i) = M_{t-1}(i) prod_h [1 - w_h(i) e_h] + sum_h w_h(i) a_h`.

    Use it in `keras.layers.RNN` and put the read-out on top:

        rnn = keras.layers.RNN(NeuralTuringMachineCell(...), return_sequences=True)
        logits = keras.layers.Dense(output_dim)(rnn(inputs))

    The step output is `[h_t; r_t^1; ...; r_t^R]`, the controller output and
    the new read vectors (width `controller units + R M`): the read-out
    `y_t = W [h_t; r_t]` is the user's `Dense`, so the cell does not fix the
    task's output width or activation.

    The controller is any Keras layer with `units` (or `output_size`): a
    recurrent cell (`LSTMCell`, `GRUCell`, ...; its states come first in the
    state list) or a feed-forward layer (`Dense`, no state). Its input is
    `[x_t; r_{t-1}]`.

    Head parameters are one linear map of the controller output, clipped to
    `[-clip_value, clip_value]` (as Collier and Beel, 2018, do for reliable
    training), then constrained as in their
    implementation: key `tanh`, `beta = softplus`, `g = sigmoid`,
    `s = softmax` over the `2 shift_range + 1` offsets,
    `gamma = 1 + softplus`, erase `sigmoid`, add `tanh`. Addressing runs in
    float32 under any dtype policy.

    State: a list of the last step output (first, as `keras.layers.RNN`
    on JAX returns `states[0]` at masked steps), the controller's states,
    and ONE tensor packing the NTM state `(B, R M + (R + W) N + N M)`: the
    read vectors, the read and write weightings, and the memory, flattened
    because `keras.layers.RNN` takes one integer size per state. `unpack_state()`
    returns the parts with their shapes; `trace()` runs a sequence and
    returns every step's weightings (the classic copy-task figure).

    Initial state: the memory starts at `memory_initializer` (constant
    `1e-6` by default: Collier and Beel found that small constant memory
    converges about twice as fast as a learned or random one), learned
    when `learn_initial_memory`. The
    initial read vectors (zeros) and weightings (softmax of logits drawn
    by `kernel_initializer`) are learned: equal rows of a constant memory
    give equal content weights, so only the initial weightings can break the
    symmetry between locations.

    Training: clip the gradients in the optimizer, e.g.
    `keras.optimizers.Adam(1e-3, global_clipnorm=10)` (what
    `examples/reasoning/ntm_copy.py` uses; it learns the copy task in about
    70,000 sequences); Graves et al. trained with RMSProp (learning rate
    1e-4, momentum 0.9).

    Args:
        controller: a Keras RNN cell or feed-forward layer (or its
            serialized config); see above.
        memory_size: `N`, the number of memory rows.
        memory_width: `M`, the width of a row.
        num_read_heads: `R`, default 1.
        num_write_heads: `W`, default 1.
        shift_range: the largest shift `R_s` of a head per step: shifts are
            `-R_s..R_s` (default 1, the paper's copy setting). At most
            `(memory_size - 1) // 2`.
        clip_value: clip the raw head parameters to this absolute value
            (default 20.0); `None` for no clipping.
        memory_initializer: initializer of the `(N, M)` initial memory;
            default `keras.initializers.Constant(1e-6)`.
        learn_initial_memory: make the initial memory a trainable weight
            (default `False`: it stays at `memory_initializer`).
        kernel_initializer: initializer of the head-parameter kernel and
            of the initial weighting logits.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: the step input `(B, D)`.
        states: the state list (`get_initial_state(B)` or the previous
            step's); `None` starts from `get_initial_state(B)`.
        training: passed to the controller.

    Returns:
        `(output, new_states)`: `(B, controller units + R M)` and the new
        state list, as every Keras RNN cell.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_attention as ka
    >>> cell = ka.layers.NeuralTuringMachineCell(
    ...     keras.layers.LSTMCell(16), memory_size=12, memory_width=5)
    >>> x = np.random.rand(2, 7, 3).astype("float32")
    >>> tuple(keras.layers.RNN(cell, return_sequences=True)(x).shape)
    (2, 7, 21)
    >>> trace = cell.trace(x)
    >>> tuple(trace["write_weights"].shape)  # (B, T, W, N)
    (2, 7, 1, 12)
    >>> parts = cell.unpack_state(trace["states"])
    >>> tuple(parts["memory"].shape)  # (B, N, M)
    (2, 12, 5)

    References:
        - Graves et al., 2014, Neural Turing Machines:
          https://arxiv.org/abs/1410.5401
        - Collier and Beel, 2018, Implementing Neural Turing Machines:
          https://arxiv.org/abs/1807.08518
    """

    def __init__(
        self,
        controller,
        memory_size,
        memory_width,
        num_read_heads=1,
        num_write_heads=1,
        shift_range=1,
        clip_value=20.0,
        memory_initializer=None,
        learn_initial_memory=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        controller = _check_controller(controller)
        for name, value in (
            ("memory_size", memory_size),
            ("memory_width", memory_width),
            ("num_read_heads", num_read_heads),
            ("num_write_heads", num_write_heads),
        ):
            check_positive_int(name, value)
        if (
            isinstance(shift_range, bool)
            or not isinstance(shift_range, int)
            or not 0 <= 2 * shift_range + 1 <= memory_size
        ):
            raise ValueError(
                "`shift_range` must be an integer in [0, (memory_size - 1) // 2] "
                f"= [0, {(memory_size - 1) // 2}]. Received: shift_range={shift_range!r}"
            )
        if clip_value is not None and (
            isinstance(clip_value, bool)
            or not isinstance(clip_value, (int, float))
            or not clip_value > 0
        ):
            raise ValueError(
                "`clip_value` must be a positive number or None. "
                f"Received: clip_value={clip_value!r}"
            )
        if memory_initializer is None:
            memory_initializer = keras.initializers.Constant(1e-6)
        self.controller = controller
        self.memory_size = memory_size
        self.memory_width = memory_width
        self.num_read_heads = num_read_heads
        self.num_write_heads = num_write_heads
        self.shift_range = shift_range
        self.clip_value = None if clip_value is None else float(clip_value)
        self.memory_initializer = keras.initializers.get(memory_initializer)
        self.learn_initial_memory = bool(learn_initial_memory)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._recurrent = hasattr(controller, "state_size")
        self._controller_units = _controller_width(controller)
        num_heads = num_read_heads + num_write_heads
        self._head_width = memory_width + 2 * shift_range + 1 + _SCALARS
        self.head_dense = keras.layers.Dense(
            num_heads * self._head_width + 2 * num_write_heads * memory_width,
            kernel_initializer=fresh_initializer(self.kernel_initializer, 0),
            dtype=self.dtype_policy,
            name="head_dense",
        )

    # -- sizes ---------------------------------------------------------------

    @property
    def _controller_state_size(self):
        return _as_list(self.controller.state_size) if self._recurrent else []

    @property
    def _memory_state_size(self):
        n, m = self.memory_size, self.memory_width
        r, w = self.num_read_heads, self.num_write_heads
        return r * m + (r + w) * n + n * m

    @property
    def state_size(self):
        """The step output's size, the controller's state sizes, then the
        packed NTM state's."""
        return [
            self.output_size,
            *self._controller_state_size,
            self._memory_state_size,
        ]

    @property
    def output_size(self):
        """`controller units + R M`: the step output `[h_t; r_t]`."""
        return self._controller_units + self.num_read_heads * self.memory_width

    # -- weights -------------------------------------------------------------

    def build(self, inputs_shape):
        check_rank("inputs", inputs_shape, 2)
        reads = self.num_read_heads * self.memory_width
        # Sub-layers restored from a saved config arrive already built.
        if not self.controller.built:
            self.controller.build((inputs_shape[0], inputs_shape[-1] + reads))
        if not self.head_dense.built:
            self.head_dense.build((inputs_shape[0], self._controller_units))
        num_heads = self.num_read_heads + self.num_write_heads
        self.initial_reads = self.add_weight(
            name="initial_reads",
            shape=(self.num_read_heads, self.memory_width),
            initializer="zeros",
        )
        self.initial_weight_logits = self.add_weight(
            name="initial_weight_logits",
            shape=(num_heads, self.memory_size),
            initializer=fresh_initializer(self.kernel_initializer, 1),
        )
        self.initial_memory = self.add_weight(
            name="initial_memory",
            shape=(self.memory_size, self.memory_width),
            initializer=self.memory_initializer,
            trainable=self.learn_initial_memory,
        )
        self.built = True

    # -- state ---------------------------------------------------------------

    def _pack(self, reads, weights, memory):
        """One `(B, R M + (R + W) N + N M)` tensor in the compute dtype."""
        n, m = self.memory_size, self.memory_width
        r, w = self.num_read_heads, self.num_write_heads
        # Static widths (-1 for the batch): a loop carry keeps its shape.
        reads, weights, memory = (
            ops.cast(x, "float32") for x in (reads, weights, memory)
        )
        parts = [
            ops.reshape(reads, (-1, r * m)),  # (B, R M)
            ops.reshape(weights, (-1, (r + w) * n)),  # (B, (R + W) N)
            ops.reshape(memory, (-1, n * m)),  # (B, N M)
        ]
        return ops.cast(ops.concatenate(parts, axis=-1), self.compute_dtype)

    def unpack_state(self, states):
        """The named parts of a state list, float32.

        Returns:
            A dict: `output` (the last step output), `controller` (the
            controller's state list),
            `reads (B, R, M)`, `read_weights (B, R, N)`,
            `write_weights (B, W, N)` and `memory (B, N, M)`.
        """
        states = _as_list(states)
        packed = ops.cast(states[-1], "float32")
        n, m = self.memory_size, self.memory_width
        r, w = self.num_read_heads, self.num_write_heads
        ends = [r * m, r * m + r * n, r * m + (r + w) * n]
        return {
            "output": states[0],
            "controller": states[1:-1],
            "reads": ops.reshape(packed[:, : ends[0]], (-1, r, m)),
            "read_weights": ops.reshape(packed[:, ends[0] : ends[1]], (-1, r, n)),
            "write_weights": ops.reshape(packed[:, ends[1] : ends[2]], (-1, w, n)),
            "memory": ops.reshape(packed[:, ends[2] :], (-1, n, m)),
        }

    def get_initial_state(self, batch_size=None):
        """The initial state list for `batch_size` sequences (see the class
        docstring: learned reads and weightings, constant or learned memory)."""
        if self._recurrent:
            controller_states = _as_list(
                self.controller.get_initial_state(batch_size=batch_size)
            )
        else:
            controller_states = []
        n, m = self.memory_size, self.memory_width
        num_heads = self.num_read_heads + self.num_write_heads
        reads = ops.broadcast_to(
            self.initial_reads, (batch_size, self.num_read_heads, m)
        )
        weights = ops.softmax(ops.cast(self.initial_weight_logits, "float32"), axis=-1)
        weights = ops.broadcast_to(weights, (batch_size, num_heads, n))
        memory = ops.broadcast_to(self.initial_memory, (batch_size, n, m))
        output = ops.zeros((batch_size, self.output_size), dtype=self.compute_dtype)
        return [output, *controller_states, self._pack(reads, weights, memory)]

    def _check_states(self, states):
        sizes = self.state_size
        if len(states) != len(sizes):
            raise ValueError(
                f"`states` must be a list of {len(sizes)} tensors (see "
                f"`state_size`). Received: {len(states)} tensors"
            )
        for i, (state, size) in enumerate(zip(states, sizes, strict=True)):
            width = getattr(state, "shape", (None,))[-1]
            if width is not None and width != size:
                raise ValueError(
                    f"`states[{i}]` must have width {size} (see `state_size`). "
                    f"Received: states[{i}].shape={tuple(state.shape)}"
                )

    # -- one step ------------------------------------------------------------

    def _head_parameters(self, controller_output):
        """The constrained head parameters, float32, from `h_t (B, units)`."""
        raw = ops.cast(self.head_dense(controller_output), "float32")
        if self.clip_value is not None:
            raw = ops.clip(raw, -self.clip_value, self.clip_value)
        num_heads = self.num_read_heads + self.num_write_heads
        m, k = self.memory_width, 2 * self.shift_range + 1
        heads = ops.reshape(
            raw[:, : num_heads * self._head_width], (-1, num_heads, self._head_width)
        )
        erase_add = ops.reshape(
            raw[:, num_heads * self._head_width :], (-1, self.num_write_heads, 2 * m)
        )  # (B, W, 2 M)
        shift = heads[..., m + 2 : m + 2 + k]  # (B, H, K)
        addressing = {
            "key": ops.tanh(heads[..., :m]),  # (B, H, M)
            "strength": ops.softplus(heads[..., m]),  # (B, H)
            "gate": ops.sigmoid(heads[..., m + 1]),  # (B, H)
            "shift": ops.softmax(shift, axis=-1),
            "sharpness": 1.0 + ops.softplus(heads[..., m + 2 + k]),  # (B, H)
        }
        erase = ops.sigmoid(erase_add[..., :m])  # (B, W, M)
        add = ops.tanh(erase_add[..., m:])  # (B, W, M)
        return addressing, (erase, add)

    def _run_controller(self, inputs, controller_states, training):
        if not self._recurrent:
            return self.controller(inputs, training=training), []
        output, new_states = self.controller(
            inputs, controller_states, training=training
        )
        return output, _as_list(new_states)

    def call(self, inputs, states=None, training=None):
        if states is None:
            states = self.get_initial_state(ops.shape(inputs)[0])
        states = _as_list(states)
        self._check_states(states)
        previous = self.unpack_state(states)
        reads_width = self.num_read_heads * self.memory_width
        last_reads = ops.reshape(previous["reads"], (-1, reads_width))  # (B, R M)
        controller_in = ops.concatenate(
            [inputs, ops.cast(last_reads, inputs.dtype)], axis=-1
        )
        h, controller_states = self._run_controller(
            controller_in, previous["controller"], training
        )
        heads, (erase, add) = self._head_parameters(h)
        last_weights = ops.concatenate(
            [previous["read_weights"], previous["write_weights"]], axis=1
        )  # (B, R + W, N)
        memory = previous["memory"]  # (B, N, M)
        weights = ka_ops.address(memory, last_weights, **heads)  # (B, R + W, N)
        read_weights = weights[:, : self.num_read_heads]  # (B, R, N)
        write_weights = weights[:, self.num_read_heads :]  # (B, W, N)
        reads = ka_ops.read_memory(memory, read_weights)  # (B, R, M)
        memory = ka_ops.write_memory(memory, write_weights, erase, add)
        output = ops.concatenate(
            [h, ops.cast(ops.reshape(reads, (-1, reads_width)), h.dtype)], axis=-1
        )  # (B, units + R M)
        new_states = [output, *controller_states, self._pack(reads, weights, memory)]
        return output, new_states

    # -- inspection ----------------------------------------------------------

    def trace(self, inputs, initial_state=None, training=None):
        """Run over a sequence and keep every step's weightings.

        Args:
            inputs: `(B, T, D)`.
            initial_state: a state list; `get_initial_state(B)` if `None`.
            training: passed to the controller.

        Returns:
            A dict: `outputs (B, T, output_size)`,
            `read_weights (B, T, R, N)`, `write_weights (B, T, W, N)` (the
            weightings used at each step, float32) and `states` (the final
            state list).
        """
        check_rank("inputs", inputs.shape, 3)
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        if not self.built:
            self.build((inputs.shape[0], inputs.shape[-1]))
        batch = ops.shape(inputs)[0]
        states = _as_list(initial_state or self.get_initial_state(batch))
        parts = self.unpack_state(states)

        def step(carry, x_t):
            output, new_states = self(x_t, list(carry[3]), training=training)
            new = self.unpack_state(new_states)
            return (output, new["read_weights"], new["write_weights"], new_states)

        first = (
            ops.zeros((batch, self.output_size), dtype=self.compute_dtype),
            parts["read_weights"],
            parts["write_weights"],
            states,
        )
        steps = ka_ops.recurrence(step, first, ops.swapaxes(inputs, 0, 1))
        outputs, read_weights, write_weights, all_states = steps  # (T, B, ...)
        return {
            "outputs": ops.swapaxes(outputs, 0, 1),
            "read_weights": ops.swapaxes(read_weights, 0, 1),
            "write_weights": ops.swapaxes(write_weights, 0, 1),
            "states": [s[-1] for s in all_states],
        }

    def get_config(self):
        return {
            **super().get_config(),
            "controller": keras.saving.serialize_keras_object(self.controller),
            "memory_size": self.memory_size,
            "memory_width": self.memory_width,
            "num_read_heads": self.num_read_heads,
            "num_write_heads": self.num_write_heads,
            "shift_range": self.shift_range,
            "clip_value": self.clip_value,
            "memory_initializer": keras.initializers.serialize(self.memory_initializer),
            "learn_initial_memory": self.learn_initial_memory,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
