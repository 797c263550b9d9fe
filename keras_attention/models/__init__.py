"""Complete models built from the layers (they may use `decoding`)."""

from keras_attention.models.bert_encoder import BertEncoder
from keras_attention.models.bert_masked_lm import BertMaskedLM
from keras_attention.models.hierarchical_attention_network import (
    HierarchicalAttentionNetwork,
)
from keras_attention.models.image_transformer import ImageTransformer
from keras_attention.models.pointer_network import PointerNetwork
from keras_attention.models.transformer import Transformer

__all__ = [
    "BertEncoder",
    "BertMaskedLM",
    "HierarchicalAttentionNetwork",
    "ImageTransformer",
    "PointerNetwork",
    "Transformer",
]
