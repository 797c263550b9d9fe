"""Score and mask modifiers for every attention path.

A mask modifier is `f(batch, head, query, key) -> bool` (True = may
attend), a score modifier `f(score, batch, head, query, key) -> score`, on
absolute positions; plain functions work too. See
`keras_attention.ops.modifiers` for the protocol and the docs' "Attention
variants" page for the formulas.
"""

from keras_attention.modifiers.base import AndMask
from keras_attention.modifiers.base import MaskModifier
from keras_attention.modifiers.base import OrMask
from keras_attention.modifiers.base import ScoreChain
from keras_attention.modifiers.base import ScoreModifier
from keras_attention.modifiers.masks import AttentionSinks
from keras_attention.modifiers.masks import BlockLocal1D
from keras_attention.modifiers.masks import BlockLocal2D
from keras_attention.modifiers.masks import CausalMask
from keras_attention.modifiers.masks import PrefixLM
from keras_attention.modifiers.masks import SegmentMask
from keras_attention.modifiers.masks import SlidingWindow
from keras_attention.modifiers.relative_position_bias import RelativePositionBias
from keras_attention.modifiers.scores import ALiBi
from keras_attention.modifiers.scores import SoftCap

__all__ = [
    "ALiBi",
    "AndMask",
    "AttentionSinks",
    "BlockLocal1D",
    "BlockLocal2D",
    "CausalMask",
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
