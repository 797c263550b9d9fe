"""What the Universal Transformer encoder and decoder share (private).

One block, applied for up to `max_steps` steps with the position and
timestep encodings added before every step, and Adaptive Computation Time
(`keras_attention.ops.act`) deciding per position when to stop.
"""

from typing import Any
from typing import NamedTuple

import keras
from keras import ops

from keras_attention.initializers import fresh_initializer
from keras_attention.layers.fine_tuning import FineTuningMixin
from keras_attention.layers.results import LayerResult
from keras_attention.layers.transformer.sequence_layer import SequenceLayerMixin
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
)
from keras_attention.ops.act import halting_step
from keras_attention.ops.act import initial_halting_state
from keras_attention.ops.act import ponder_cost
from keras_attention.validation import check_positive_int

_BASE_LAYER_ARGS = ("name", "dtype", "trainable", "autocast")
# T2T's `act_halting_bias_init`: sigmoid(1) = 0.73, so an untrained
# position halts after about two steps rather than one or `max_steps`.
_HALTING_BIAS = 1.0


class UniversalResult(NamedTuple):
    """What one call computed: the `(B, T, D)` output, the steps each
    position took and its remainder, float32 `(B, T)` (0 at padding), and
    the updated caches (empty without a cache)."""

    output: Any
    steps: Any
    remainders: Any
    caches: tuple = ()

    def keras_outputs(self, return_halting):
        """Keras' order (as `LayerResult`'s, the halting dict in the place of
        the scores): the output, the halting dict if asked, the caches."""
        halting = {"steps": self.steps, "remainders": self.remainders}
        return LayerResult(self.output, halting, self.caches).keras_outputs(
            return_halting
        )


def _check_number(name, value, low, high, low_open=True):
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and (low < value if low_open else low <= value)
        and value <= high
    )
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(
            f"Invalid argument `{name}`: `{name}` must be a number in {interval}. "
            f"Received: {name}={value!r}"
        )


class UniversalTransformerBase(SequenceLayerMixin, FineTuningMixin, keras.layers.Layer):
    """The constructor, config, weights and recurrence of both layers.

    Subclasses set `block_class`, build the block, and call `_recur` with
    a function that applies the shared block once, under their masks.
    """

    block_class = None

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        max_steps=6,
        halting=True,
        halting_threshold=0.99,
        ponder_cost_weight=0.01,
        max_wavelength=10000,
        freeze_halted=True,
        **kwargs,
    ):
        base = {k: kwargs.pop(k) for k in _BASE_LAYER_ARGS if k in kwargs}
        super().__init__(**base)
        check_positive_int("max_steps", max_steps)
        for name, value in (("halting", halting), ("freeze_halted", freeze_halted)):
            if not isinstance(value, bool):
                raise ValueError(
                    f"Invalid argument `{name}`: `{name}` must be True or False. "
                    f"Received: {name}={value!r}"
                )
        _check_number("halting_threshold", halting_threshold, 0.0, 1.0)
        _check_number(
            "ponder_cost_weight", ponder_cost_weight, 0.0, float("inf"), False
        )
        self.max_steps = max_steps
        self.halting = halting
        self.halting_threshold = halting_threshold
        self.ponder_cost_weight = ponder_cost_weight
        self.freeze_halted = freeze_halted
        self.position_encoding = SinusoidalPositionEncoding(
            max_wavelength, dtype=self.dtype_policy, name="position_encoding"
        )
        self.max_wavelength = max_wavelength
        # The block checks (and keeps the config of) its own arguments.
        self.block = self.block_class(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            **kwargs,
            dtype=self.dtype_policy,
            name="block",
        )
        self._block_kwargs = self.block.get_config()
        for key in ("name", "trainable", "dtype"):
            self._block_kwargs.pop(key, None)
        self.num_heads = num_heads
        self.normalize_first = self.block.normalize_first
        self.halting_unit = None
        if halting:
            self.halting_unit = keras.layers.Dense(
                1,
                activation="sigmoid",
                kernel_initializer=fresh_initializer(
                    self.block.kernel_initializer, 1000
                ),
                bias_initializer=keras.initializers.Constant(_HALTING_BIAS),
                dtype=self.dtype_policy,
                name="halting_unit",
            )
        self.final_norm = None
        if self.normalize_first:  # pre-LN blocks leave their output unnormalized
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=self.block.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="final_norm",
            )
        self.supports_masking = True

    def _build_own(self, shape):
        if self.halting_unit is not None:
            self.halting_unit.build(shape)
        if self.final_norm is not None:
            self.final_norm.build(shape)

    def _recur(self, inputs, mask, block_step, training, start_index=0):
        """`block_step(x, n, training)` applied `max_steps` times with ACT
        (or without).

        `s^0 = inputs`; at step `n` every running position gets
        `s^n = block(s^{n-1} + P + S^n)` (`P` the position encoding from
        `start_index`, `S^n` the timestep encoding of `n - 1`), a halted one
        keeps its state (`freeze_halted=True`) or, as in tensor2tensor, goes
        on being transformed for the others to read (`False`; its output
        stops changing either way). The block reads every position at every
        step, so a cache written one position at a time holds the same keys
        and values as the full pass.
        With halting the output is `sum_n p^n s^n` (ACT's update weights),
        without it `s^max_steps`. A Python loop, unrolled when compiled: the
        block's dropout draws new masks at each step (a seed generator
        inside `fori_loop` would leak JAX tracers), and `max_steps` is small.
        """
        width = inputs.shape[-1]
        positions = self.position_encoding(inputs, start_index=start_index)
        timesteps = self.position_encoding(
            ops.zeros((1, self.max_steps, width), self.compute_dtype)
        )  # (1, max_steps, D)
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], "bool")
        mask = ops.cast(mask, "bool")  # (B, T)
        act = initial_halting_state(mask)
        state = inputs  # (B, T, D)
        output = ops.zeros(ops.shape(inputs), "float32")
        for n in range(self.max_steps):
            new = block_step(state + positions + timesteps[:, n : n + 1], n, training)
            if not self.halting:
                state = new
                continue
            halting = ops.squeeze(self.halting_unit(new), -1)  # h^n, (B, T)
            act, weights, running = halting_step(
                act, halting, self.halting_threshold, n == self.max_steps - 1
            )
            output = output + weights[..., None] * ops.cast(new, "float32")
            if self.freeze_halted:
                new = ops.where(running[..., None], new, state)
            state = new
        if self.halting:
            output = ops.cast(output, self.compute_dtype)
            if self.ponder_cost_weight:
                self.add_loss(self.ponder_cost_weight * ponder_cost(act, mask))
            steps, remainders = act.steps, act.remainders
        else:
            output = state
            steps = ops.cast(mask, "float32") * float(self.max_steps)
            remainders = ops.zeros_like(steps)
        if self.final_norm is not None:
            output = self.final_norm(output)
        return UniversalResult(output, steps, remainders)

    def get_config(self):
        return {
            **super().get_config(),
            **self._block_kwargs,
            "max_steps": self.max_steps,
            "halting": self.halting,
            "halting_threshold": self.halting_threshold,
            "ponder_cost_weight": self.ponder_cost_weight,
            "max_wavelength": self.max_wavelength,
            "freeze_halted": self.freeze_halted,
            "dtype": self._dtype_config(),
        }
