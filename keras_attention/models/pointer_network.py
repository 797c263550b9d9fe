import math

import keras
from keras import ops

from keras_attention import ops as ka_ops
from keras_attention import scores
from keras_attention.layers.recurrent.pointer_attention import PointerAttention
from keras_attention.validation import check_int
from keras_attention.validation import check_positive_int
from keras_attention.validation import check_rank

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
# Initial score of the beams that do not exist yet at step 0: far below any
# real score, far above the -1e30 of masked positions.


def _reorder(x, beam, k):
    """Rows of `x (B*K, ...)` taken from beams `beam (B, K)` of `k` beams."""
    trailing = tuple(x.shape[1:])
    flat = ops.reshape(x, (-1, k, math.prod(trailing)))
    index = ops.broadcast_to(beam[:, :, None], ops.shape(flat))
    return ops.reshape(ops.take_along_axis(flat, index, axis=1), (-1, *trailing))


@keras.saving.register_keras_serializable(package="keras_attention")
class PointerNetwork(keras.Model):
    """Pointer network: a recurrent encoder-decoder whose outputs are pointers.

    Each input element (a feature vector, e.g. a float to sort or a point of
    the plane) is embedded linearly and read by a recurrent encoder. The
    decoder is fed, at step `i`, the embedding of the input it pointed to at
    step `i - 1` (a learned start vector at step 0); a `PointerAttention`
    over the encoder states turns its state into log-probabilities over the
    input positions (Vinyals et al., 2015). Positions already pointed to are
    masked BEFORE the softmax, so an output is a permutation (or, with
    `end_position`, a selection without repetition).

    Training uses teacher forcing in one parallel pass: called on
    `(inputs, pointers)` (or `{"inputs": ..., "pointers": ...}`), the model
    gathers the decoder inputs from the target `pointers` and returns the
    log-probabilities `(B, T_out, T_in)` of every step, ready for
    `keras.losses.SparseCategoricalCrossentropy(from_logits=True)` with
    `pointers` as the labels (a log-softmax is unchanged by another softmax;
    masked positions carry about -1e30, never -inf).

    Inference uses `decode(inputs, beam_width=1)`: greedy (or beam) search
    for `T_in` steps, written with `keras.ops.fori_loop` so it compiles with
    `tf.function(jit_compile=True)` and exports as a SavedModel.

    With `end_position=j`, input `j` is a special "end of output" element
    (for outputs shorter than the input, such as a convex hull): once
    pointed to, it is the only allowed position, with log-probability 0, so
    finished outputs add nothing to the loss or to a beam score. Targets are
    padded with `j` after the end.

    Args:
        units: width of the embedding and of the recurrent states.
        cell: `"lstm"` or `"gru"`, for the encoder and the decoder.
        bidirectional: bidirectional encoder, `units // 2` per direction
            (`units` must be even); the decoder starts from the concatenated
            final states.
        attention_units: width of the additive pointer score; `units` when
            `None`.
        glimpse: query the pointer with a glimpse (Bello et al., 2016): the
            decoder state first attends over the encoder states (same
            mask), and that context, not the state itself, is the pointer's
            query.
        end_position: index of the "end of output" input, or `None` (outputs
            are permutations of the input).
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        inputs: a tuple `(inputs, pointers)` or a dict with those keys:
            inputs `(B, T_in, F)` float, pointers `(B, T_out)` int, the
            target indices (teacher forcing).

    Returns:
        float32 log-probabilities `(B, T_out, T_in)`.

    Example:

    >>> import numpy as np
    >>> import keras_attention as ka
    >>> x = np.random.rand(4, 5, 1).astype("float32")
    >>> y = np.argsort(x[..., 0], axis=1)
    >>> model = ka.models.PointerNetwork(units=16)
    >>> tuple(model((x, y)).shape)
    (4, 5, 5)
    >>> pointers, scores = model.decode(x, beam_width=2)
    >>> tuple(pointers.shape), tuple(scores.shape)
    ((4, 5), (4,))

    References:
        - Vinyals et al., 2015, Pointer Networks:
          https://arxiv.org/abs/1506.03134
        - Bello et al., 2016, Neural Combinatorial Optimization with
          Reinforcement Learning: https://arxiv.org/abs/1611.09940
    """

    def __init__(
        self,
        units=128,
        cell="lstm",
        bidirectional=False,
        attention_units=None,
        glimpse=False,
        end_position=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_positive_int("attention_units", attention_units, allow_none=True)
        if cell not in _CELLS:
            raise ValueError(
                f"`cell` must be one of {sorted(_CELLS)}. Received: cell={cell!r}"
            )
        if bidirectional and units % 2:
            raise ValueError(
                "`units` must be even with `bidirectional=True`. "
                f"Received: units={units}"
            )
        check_int("end_position", end_position, 0, allow_none=True)
        self.units = units
        self.cell = cell
        self.bidirectional = bidirectional
        self.attention_units = attention_units
        self.glimpse = glimpse
        self.end_position = end_position

        rnn = _CELLS[cell]
        self.embedding = keras.layers.Dense(
            units, dtype=self.dtype_policy, name="embedding"
        )
        if bidirectional:
            self.encoder = keras.layers.Bidirectional(
                rnn(units // 2, return_sequences=True, return_state=True),
                dtype=self.dtype_policy,
                name="encoder",
            )
        else:
            self.encoder = rnn(
                units,
                return_sequences=True,
                return_state=True,
                dtype=self.dtype_policy,
                name="encoder",
            )
        self.decoder = rnn(
            units, return_sequences=True, dtype=self.dtype_policy, name="decoder"
        )
        self.pointer = PointerAttention(
            attention_units or units, dtype=self.dtype_policy, name="pointer"
        )
        self.glimpse_score = (
            scores.Additive(units=attention_units or units, name="glimpse")
            if glimpse
            else None
        )

    @staticmethod
    def _features_shape(input_shape):
        if isinstance(input_shape, dict):
            return tuple(input_shape["inputs"])
        if input_shape and isinstance(input_shape[0], (list, tuple)):
            return tuple(input_shape[0])
        return tuple(input_shape)

    def build(self, input_shape):
        shape = self._features_shape(input_shape)
        check_rank("inputs", shape, 3)
        batch, length = shape[0], shape[1]
        self.embedding.build(shape)
        sequence = (batch, length, self.units)
        self.encoder.build(sequence)
        self.decoder.build(sequence)
        self.pointer.build(sequence, sequence)
        if self.glimpse_score is not None:
            self.glimpse_score.build(sequence, sequence)
        self.start = self.add_weight(
            name="start",
            shape=(self.units,),
            initializer=keras.initializers.RandomUniform(-1.0, 1.0),
        )
        self.built = True

    # -- shared pieces ---------------------------------------------------------

    def _encode(self, features):
        embedded = self.embedding(features)  # (B, Ti, U)
        outputs = self.encoder(embedded)
        encoded, states = outputs[0], list(outputs[1:])  # (B, Ti, U)
        if self.bidirectional:
            half = len(states) // 2
            states = [
                ops.concatenate([f, b], axis=-1)
                for f, b in zip(states[:half], states[half:], strict=True)
            ]
        return embedded, encoded, states

    def _project(self, encoded):
        """Projections of the encoder states, constant over decoding steps."""
        pointer = self.pointer.project_inputs(encoded)  # (B, Ti, A)
        if self.glimpse_score is None:
            return pointer, None
        return pointer, self.glimpse_score.project_key(encoded)

    def _point(self, decoded, encoded, allowed, projected):
        """Log-probabilities `(B, To, Ti)` from decoder states `(B, To, U)`."""
        pointer_proj, glimpse_proj = projected
        query = decoded
        if self.glimpse_score is not None:
            logits = self.glimpse_score.score_projected(decoded, glimpse_proj)
            weights = ka_ops.masked_softmax(logits, allowed)  # (B, To, Ti)
            query = ops.matmul(weights, ops.cast(encoded, "float32"))  # (B, To, U)
        return self.pointer(
            query, encoded, attention_mask=allowed, projected_value=pointer_proj
        )

    @staticmethod
    def _length(x):
        return x.shape[1] if x.shape[1] is not None else ops.shape(x)[1]

    # -- teacher forcing -------------------------------------------------------

    def call(self, inputs, training=None):
        if isinstance(inputs, dict):
            features, pointers = inputs["inputs"], inputs["pointers"]
        else:
            features, pointers = inputs
        features = ops.convert_to_tensor(features, dtype=self.compute_dtype)
        pointers = ops.cast(pointers, "int32")  # (B, To)
        length = self._length(features)
        embedded, encoded, states = self._encode(features)
        chosen = ops.one_hot(pointers, length, dtype=embedded.dtype)  # (B, To, Ti)
        previous = ops.matmul(chosen, embedded)[:, :-1]  # (B, To - 1, U)
        start = ops.cast(self.start, embedded.dtype)[None, None, :]
        start = ops.broadcast_to(start, ops.shape(embedded[:, :1]))  # (B, 1, U)
        decoded = self.decoder(
            ops.concatenate([start, previous], axis=1),
            initial_state=states,
            training=training,
        )  # (B, To, U)
        allowed = ka_ops.chosen_positions_mask(pointers, length, self.end_position)
        return self._point(decoded, encoded, allowed, self._project(encoded))

    # -- inference ---------------------------------------------------------------

    def decode(self, inputs, beam_width=1):
        """Greedy (`beam_width=1`) or beam search for `T_in` steps.

        Never points to the same input twice (with `end_position`, only the
        end position repeats, after the end). Compiles under XLA.

        Args:
            inputs: `(B, T_in, F)` float.
            beam_width: number of beams; at most `T_in`.

        Returns:
            `(pointers, scores)`: int32 `(B, T_in)` and the float32 total
            log-probability `(B,)` of the best sequence.
        """
        features = self._decode_inputs(inputs, beam_width)
        k, length = beam_width, features.shape[1]
        embedded, encoded, states = self._encode(features)
        if k > 1:  # (B, ...) -> (B * K, ...), beams of one example adjacent
            embedded, encoded = (ops.repeat(x, k, axis=0) for x in (embedded, encoded))
            states = [ops.repeat(s, k, axis=0) for s in states]
        projected = self._project(encoded)
        zeros = ops.zeros_like(embedded[:, 0, 0], dtype="float32")  # (BK,)
        step_input = ops.cast(self.start, embedded.dtype)[None, :] + ops.cast(
            zeros[:, None], embedded.dtype
        )  # (BK, U)
        chosen = zeros[:, None] + ops.zeros((length,))  # (BK, Ti)
        pointers = ops.cast(chosen, "int32")  # (BK, Ti)
        initial = [0.0] + [ka_ops.MASK_VALUE] * (k - 1)
        beam_scores = ops.reshape(zeros, (-1, k)) + ops.convert_to_tensor(
            initial, "float32"
        )  # (B, K)

        def step(t, carry):
            return self._decode_step(t, carry, embedded, encoded, projected, k)

        carry = (step_input, list(states), chosen, pointers, beam_scores)
        carry = ops.fori_loop(0, length, step, carry)
        pointers, beam_scores = carry[3], carry[4]
        if k > 1:
            pointers = ops.reshape(pointers, (-1, k, length))[:, 0]
        return pointers, beam_scores[:, 0]

    def _decode_inputs(self, inputs, beam_width):
        """`inputs` as a tensor, checked for `decode`: `(B, T_in, F)` with a
        static `T_in` of at least `beam_width`."""
        check_positive_int("beam_width", beam_width)
        features = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        check_rank("inputs", tuple(features.shape), 3)
        length = features.shape[1]
        if length is None:
            raise ValueError(
                "`inputs` must have a static length to decode. "
                f"Received: inputs.shape={tuple(features.shape)}"
            )
        if beam_width > length:
            raise ValueError(
                "`beam_width` must be at most the input length. "
                f"Received: beam_width={beam_width}, input length={length}"
            )
        return features

    def _decode_step(self, t, carry, embedded, encoded, projected, k):
        """Step `t` of `decode` with `k` beams: the decoder cell, the
        pointer over the inputs not chosen yet, the best `k` continuations,
        and the chosen input's embedding as the next step's input."""
        step_input, states, chosen, pointers, beam_scores = carry
        length = encoded.shape[1]
        output, states = self.decoder.cell(step_input, states)  # (BK, U)
        allowed = ka_ops.pointer_step_mask(chosen, self.end_position)  # (BK, Ti)
        log_p = self._point(output[:, None], encoded, allowed[:, None], projected)
        log_p = log_p[:, 0]  # (BK, Ti)
        if k == 1:
            choice = ops.argmax(log_p, axis=-1)  # (B,)
            gained = ops.take_along_axis(log_p, choice[:, None], axis=-1)
            beam_scores = beam_scores + gained
        else:
            total = beam_scores[:, :, None] + ops.reshape(log_p, (-1, k, length))
            total = ops.reshape(total, (-1, k * length))  # (B, K * Ti)
            beam_scores, index = ops.top_k(total, k)  # (B, K), best first
            beam = index // length
            choice = ops.reshape(index % length, (-1,))  # (BK,)
            states = [_reorder(s, beam, k) for s in states]
            chosen, pointers = _reorder(chosen, beam, k), _reorder(pointers, beam, k)
        choice = ops.cast(choice, "int32")
        one_hot = ops.one_hot(choice, length)  # (BK, Ti)
        chosen = ops.maximum(chosen, one_hot)
        at_t = ops.cast(ops.equal(ops.arange(length), t), "int32")  # (Ti,)
        pointers = pointers + at_t[None, :] * choice[:, None]
        step_input = ops.einsum(
            "bt,btu->bu", ops.cast(one_hot, embedded.dtype), embedded
        )
        return step_input, list(states), chosen, pointers, beam_scores

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "cell": self.cell,
            "bidirectional": self.bidirectional,
            "attention_units": self.attention_units,
            "glimpse": self.glimpse,
            "end_position": self.end_position,
        }
