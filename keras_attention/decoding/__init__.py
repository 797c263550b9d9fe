"""Decoding loops over a step function: XLA-compilable, fixed maximum length.

Every search takes a `step_fn(tokens, state, index) -> (logits, state, aux)`:
`tokens` are the previous tokens `(B,)` int32, `state` any nested structure
of tensors with fixed shapes (RNN states, a key/value cache), `index` the
scalar int32 position being decoded, `logits` `(B, V)` the next-token scores,
`aux` any nested structure of per-step tensors to collect (e.g. attention
weights `(B, S)`), or `None`.
"""

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.greedy import greedy_search
from keras_attention.decoding.sampling import sample
from keras_attention.decoding.sampling import top_k_filter
from keras_attention.decoding.sampling import top_p_filter

__all__ = ["beam_search", "greedy_search", "sample", "top_k_filter", "top_p_filter"]
