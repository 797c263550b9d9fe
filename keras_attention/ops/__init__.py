"""Pure `keras.ops` functions: the attention maths, written once."""

from keras_attention.ops.attention import (
    attention,
    attention_weights,
    dot_product_attention,
    weighted_sum,
)
from keras_attention.ops.masks import (
    band_mask,
    causal_mask,
    compute_attention_mask,
    merge_masks,
    padding_mask,
)
from keras_attention.ops.softmax import hardmax, masked_log_softmax, masked_softmax

__all__ = [
    "attention",
    "attention_weights",
    "band_mask",
    "causal_mask",
    "compute_attention_mask",
    "dot_product_attention",
    "hardmax",
    "masked_log_softmax",
    "masked_softmax",
    "merge_masks",
    "padding_mask",
    "weighted_sum",
]
