"""Pure `keras.ops` functions: the attention maths, written once.

Every public name is imported from here (`keras_attention.ops.X`); the
files may move. Multi-head attention runs on three paths, each a
subpackage (`dense/`, `chunked/`, `fused/`), chosen by `dispatch/`
(`plan_attention`) and followed by `multi_head.py`
(`multi_head_attention`); the modules beside them are the building blocks
they share (masks, softmax, modifier calls, devices, loops) and the maths
of the other layer families. Imports point down that list
(docs/architecture.md).
"""

from keras_attention.ops.act import HaltingState
from keras_attention.ops.act import halting_step
from keras_attention.ops.act import initial_halting_state
from keras_attention.ops.act import ponder_cost
from keras_attention.ops.addressing import address
from keras_attention.ops.addressing import circular_shift
from keras_attention.ops.addressing import content_weights
from keras_attention.ops.addressing import cosine_similarity
from keras_attention.ops.addressing import interpolate
from keras_attention.ops.addressing import read_memory
from keras_attention.ops.addressing import sharpen
from keras_attention.ops.addressing import write_memory
from keras_attention.ops.attention import attention
from keras_attention.ops.attention import attention_weights
from keras_attention.ops.attention import weighted_sum
from keras_attention.ops.boolean_masks import band_mask
from keras_attention.ops.boolean_masks import causal_mask
from keras_attention.ops.boolean_masks import check_attention_masks
from keras_attention.ops.boolean_masks import check_mask
from keras_attention.ops.boolean_masks import chosen_positions_mask
from keras_attention.ops.boolean_masks import compute_attention_mask
from keras_attention.ops.boolean_masks import merge_masks
from keras_attention.ops.boolean_masks import padding_mask
from keras_attention.ops.boolean_masks import pointer_step_mask
from keras_attention.ops.boolean_masks import sliding_window_mask
from keras_attention.ops.cache import update_cache
from keras_attention.ops.cache import write_cache_entries
from keras_attention.ops.cache import written_positions_mask
from keras_attention.ops.chunked.chunked_attention import chunked_attention
from keras_attention.ops.dense.dot_product_attention import check_key_value_heads
from keras_attention.ops.dense.dot_product_attention import dot_product_attention
from keras_attention.ops.dense.dot_product_attention import repeat_key_value_heads
from keras_attention.ops.devices import Accelerator
from keras_attention.ops.devices import accelerator
from keras_attention.ops.dispatch.attention_plan import ATTENTION_IMPLS
from keras_attention.ops.dispatch.attention_plan import CHUNKED_MIN_SIZE
from keras_attention.ops.dispatch.attention_plan import AttentionPlan
from keras_attention.ops.dispatch.attention_plan import check_attention_impl
from keras_attention.ops.dispatch.attention_plan import choose_attention_impl
from keras_attention.ops.dispatch.attention_plan import plan_attention
from keras_attention.ops.dispatch.plan_recording import recording_attention_plans
from keras_attention.ops.fused.fused_attention import fused_attention
from keras_attention.ops.fused.fused_plan import FUSED_BIAS_MAX_BYTES
from keras_attention.ops.hashing import dropout_keep_mask
from keras_attention.ops.local_attention import local_predictive_weights
from keras_attention.ops.local_attention import predicted_positions
from keras_attention.ops.local_attention import source_positions
from keras_attention.ops.loops import recurrence
from keras_attention.ops.lstmn import LSTMNActivations
from keras_attention.ops.lstmn import LSTMNStep
from keras_attention.ops.lstmn import LSTMNWeights
from keras_attention.ops.lstmn import intra_attention_logits
from keras_attention.ops.lstmn import lstmn_step
from keras_attention.ops.lstmn import source_read
from keras_attention.ops.lstmn_recurrence import lstmn_fusion_recurrence
from keras_attention.ops.lstmn_recurrence import lstmn_recurrence
from keras_attention.ops.memory_compression import first_key_position
from keras_attention.ops.memory_compression import gather_positions
from keras_attention.ops.memory_compression import memory_compression_mask
from keras_attention.ops.memory_compression import num_memory_slots
from keras_attention.ops.memory_compression import pad_to_slots
from keras_attention.ops.memory_compression import slot_end_positions
from keras_attention.ops.memory_compression import slot_last_positions
from keras_attention.ops.modifier_calls import alibi_slopes
from keras_attention.ops.modifier_calls import position_indices
from keras_attention.ops.modifier_calls import relative_position_bucket
from keras_attention.ops.multi_head import multi_head_attention
from keras_attention.ops.rotary import rotary_embedding
from keras_attention.ops.softmax import MASK_VALUE
from keras_attention.ops.softmax import hardmax
from keras_attention.ops.softmax import masked_log_softmax
from keras_attention.ops.softmax import masked_softmax

__all__ = [
    "HaltingState",
    "halting_step",
    "initial_halting_state",
    "ponder_cost",
    "address",
    "circular_shift",
    "content_weights",
    "cosine_similarity",
    "interpolate",
    "LSTMNActivations",
    "LSTMNStep",
    "LSTMNWeights",
    "intra_attention_logits",
    "lstmn_fusion_recurrence",
    "lstmn_recurrence",
    "lstmn_step",
    "source_read",
    "read_memory",
    "sharpen",
    "write_memory",
    "alibi_slopes",
    "check_key_value_heads",
    "position_indices",
    "relative_position_bucket",
    "repeat_key_value_heads",
    "rotary_embedding",
    "ATTENTION_IMPLS",
    "Accelerator",
    "AttentionPlan",
    "CHUNKED_MIN_SIZE",
    "FUSED_BIAS_MAX_BYTES",
    "accelerator",
    "MASK_VALUE",
    "attention",
    "attention_weights",
    "band_mask",
    "causal_mask",
    "check_attention_impl",
    "check_attention_masks",
    "check_mask",
    "choose_attention_impl",
    "chosen_positions_mask",
    "chunked_attention",
    "compute_attention_mask",
    "dot_product_attention",
    "dropout_keep_mask",
    "fused_attention",
    "hardmax",
    "masked_log_softmax",
    "masked_softmax",
    "memory_compression_mask",
    "merge_masks",
    "first_key_position",
    "gather_positions",
    "num_memory_slots",
    "pad_to_slots",
    "slot_end_positions",
    "slot_last_positions",
    "multi_head_attention",
    "padding_mask",
    "plan_attention",
    "pointer_step_mask",
    "local_predictive_weights",
    "predicted_positions",
    "recording_attention_plans",
    "recurrence",
    "source_positions",
    "sliding_window_mask",
    "update_cache",
    "write_cache_entries",
    "weighted_sum",
    "written_positions_mask",
]
