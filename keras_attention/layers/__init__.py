"""Public layers, one per file."""

from keras_attention.layers.attention_pooling import AttentionPooling
from keras_attention.layers.attention_rnn_cell import AttentionRNNCell
from keras_attention.layers.attention_rnn_decoder import AttentionRNNDecoder
from keras_attention.layers.bahdanau_attention import BahdanauAttention
from keras_attention.layers.image_transformer_block import ImageTransformerBlock
from keras_attention.layers.luong_attention import LuongAttention
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.multi_head_self_attention import MultiHeadSelfAttention
from keras_attention.layers.neural_turing_machine_cell import NeuralTuringMachineCell
from keras_attention.layers.pointer_attention import PointerAttention
from keras_attention.layers.position_embedding import PositionEmbedding
from keras_attention.layers.scored_attention import ScoredAttention
from keras_attention.layers.self_attention_2d import SelfAttention2D
from keras_attention.layers.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
)
from keras_attention.layers.transformer_decoder import TransformerDecoder
from keras_attention.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_attention.layers.transformer_encoder import TransformerEncoder
from keras_attention.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_attention.layers.universal_transformer_decoder import (
    UniversalTransformerDecoder,
)
from keras_attention.layers.universal_transformer_encoder import (
    UniversalTransformerEncoder,
)

__all__ = [
    "AttentionPooling",
    "AttentionRNNCell",
    "AttentionRNNDecoder",
    "BahdanauAttention",
    "ImageTransformerBlock",
    "LuongAttention",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "NeuralTuringMachineCell",
    "PointerAttention",
    "PositionEmbedding",
    "ScoredAttention",
    "SelfAttention2D",
    "SinusoidalPositionEncoding",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "UniversalTransformerDecoder",
    "UniversalTransformerEncoder",
]
