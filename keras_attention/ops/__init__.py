"""Pure `keras.ops` functions: the attention maths, written once."""

from keras_attention.ops.attention import attention
from keras_attention.ops.attention import attention_weights
from keras_attention.ops.attention import dot_product_attention
from keras_attention.ops.attention import weighted_sum
from keras_attention.ops.masks import band_mask
from keras_attention.ops.masks import causal_mask
from keras_attention.ops.masks import compute_attention_mask
from keras_attention.ops.masks import merge_masks
from keras_attention.ops.masks import padding_mask
from keras_attention.ops.softmax import hardmax
from keras_attention.ops.softmax import masked_log_softmax
from keras_attention.ops.softmax import masked_softmax

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
