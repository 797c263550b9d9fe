"""Score and mask modifiers for every attention path.

A mask modifier is `f(batch, head, query, key) -> bool` (True = may
attend), a score modifier `f(score, batch, head, query, key) -> score`, on
absolute positions; plain functions work too. See
`keras_attention.ops.modifier_calls` for the protocol and the docs' "Attention
variants" page for the formulas.
"""

from keras_attention.modifiers.base import AndMask
from keras_attention.modifiers.base import MaskModifier
from keras_attention.modifiers.base import OrMask
from keras_attention.modifiers.base import ScoreChain
from keras_attention.modifiers.base import ScoreModifier
from keras_attention.modifiers.mask_modifiers import AttentionSinks
from keras_attention.modifiers.mask_modifiers import BlockLocal1D
from keras_attention.modifiers.mask_modifiers import BlockLocal2D
from keras_attention.modifiers.mask_modifiers import CausalMask
from keras_attention.modifiers.mask_modifiers import CompressedCausalMask
from keras_attention.modifiers.mask_modifiers import PrefixLM
from keras_attention.modifiers.mask_modifiers import SegmentMask
from keras_attention.modifiers.mask_modifiers import SlidingWindow
from keras_attention.modifiers.relative_position_bias import RelativePositionBias
from keras_attention.modifiers.score_modifiers import ALiBi
from keras_attention.modifiers.score_modifiers import SoftCap

__all__ = [
    "ALiBi",
    "AndMask",
    "AttentionSinks",
    "BlockLocal1D",
    "BlockLocal2D",
    "CausalMask",
    "CompressedCausalMask",
    "MaskModifier",
    "OrMask",
    "PrefixLM",
    "RelativePositionBias",
    "ScoreChain",
    "ScoreModifier",
    "SegmentMask",
    "SlidingWindow",
    "SoftCap",
]
