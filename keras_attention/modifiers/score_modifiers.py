"""Built-in score modifiers: `(score, batch, head, query, key) -> score`
on absolute positions (see `keras_attention.ops.modifier_calls`)."""

import keras
from keras import ops

from keras_attention.modifiers.base import ScoreModifier
from keras_attention.ops.modifier_calls import alibi_slopes
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class ALiBi(ScoreModifier):
    """Attention with Linear Biases (Press et al., 2022):
    `score - m_h * (query - key)`, a fixed slope `m_h` per head
    (`keras_attention.ops.modifier_calls.alibi_slopes`), no position embedding.

    The paper is causal; keys after the query (`symmetric=False`) get a
    positive bias, which a causal mask removes. `symmetric=True` uses
    `-m_h * |query - key|` for bidirectional attention.

    An additive bias (`additive_bias = True`): the fused path passes it to
    the GPU's kernel as its `bias`.
    """

    additive_bias = True

    def __init__(self, num_heads, symmetric=False):
        check_positive_int("num_heads", num_heads)
        self.num_heads, self.symmetric = num_heads, bool(symmetric)
        self.slopes = alibi_slopes(num_heads)

    def __call__(self, score, batch, head, query, key):
        slope = ops.take(ops.convert_to_tensor(self.slopes, "float32"), head)
        distance = ops.cast(query - key, "float32")
        if self.symmetric:
            distance = ops.abs(distance)
        return score - slope * distance

    def get_config(self):
        return {"num_heads": self.num_heads, "symmetric": self.symmetric}


@keras.saving.register_keras_serializable(package="keras_attention")
class SoftCap(ScoreModifier):
    """Logit soft-capping, `cap * tanh(score / cap)` (Gemma 2): scores stay
    in `(-cap, cap)`, smoothly."""

    def __init__(self, cap):
        if not isinstance(cap, (int, float)) or cap <= 0:
            raise ValueError(f"`cap` must be a positive number. Received: cap={cap!r}")
        self.cap = float(cap)

    def __call__(self, score, batch, head, query, key):
        return self.cap * ops.tanh(score / self.cap)

    def get_config(self):
        return {"cap": self.cap}
