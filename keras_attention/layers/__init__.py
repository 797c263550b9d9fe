"""Public layers, one per file, grouped by family.

- `recurrent/`: Bahdanau, Luong, scored and pointer attention, RNN decoders,
  the LSTMN and its fusion decoders.
- `transformer/`: multi-head attention, the Transformer blocks and stacks, positions.
- `universal/`: the Universal Transformer (ACT).
- `memory/`: the Neural Turing Machine.
- `pooling/`: attention pooling.
- `vision/`: SAGAN self-attention and the Image Transformer block.

`results.py` (the one result structure) and `fine_tuning.py` (LoRA and
quantization) are shared by the families. Every class is exported here, as
`keras_attention.layers.X`; its file path is not part of the API.
"""

from keras_attention.layers.memory.neural_turing_machine_cell import (
    NeuralTuringMachineCell,
)
from keras_attention.layers.pooling.attention_pooling import AttentionPooling
from keras_attention.layers.recurrent.attention_rnn_cell import AttentionRNNCell
from keras_attention.layers.recurrent.attention_rnn_decoder import AttentionRNNDecoder
from keras_attention.layers.recurrent.bahdanau_attention import BahdanauAttention
from keras_attention.layers.recurrent.lstmn import LSTMN
from keras_attention.layers.recurrent.lstmn_deep_fusion_decoder import (
    LSTMNDeepFusionDecoder,
)
from keras_attention.layers.recurrent.lstmn_shallow_fusion_decoder import (
    LSTMNShallowFusionDecoder,
)
from keras_attention.layers.recurrent.luong_attention import LuongAttention
from keras_attention.layers.recurrent.pointer_attention import PointerAttention
from keras_attention.layers.recurrent.scored_attention import ScoredAttention
from keras_attention.layers.transformer.memory_compressed_attention import (
    MemoryCompressedAttention,
)
from keras_attention.layers.transformer.memory_compressed_decoder import (
    MemoryCompressedDecoder,
)
from keras_attention.layers.transformer.memory_compressed_decoder_block import (
    MemoryCompressedDecoderBlock,
)
from keras_attention.layers.transformer.multi_head_attention import MultiHeadAttention
from keras_attention.layers.transformer.multi_head_self_attention import (
    MultiHeadSelfAttention,
)
from keras_attention.layers.transformer.position_embedding import PositionEmbedding
from keras_attention.layers.transformer.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
)
from keras_attention.layers.transformer.transformer_decoder import TransformerDecoder
from keras_attention.layers.transformer.transformer_decoder_block import (
    TransformerDecoderBlock,
)
from keras_attention.layers.transformer.transformer_encoder import TransformerEncoder
from keras_attention.layers.transformer.transformer_encoder_block import (
    TransformerEncoderBlock,
)
from keras_attention.layers.universal.universal_transformer_decoder import (
    UniversalTransformerDecoder,
)
from keras_attention.layers.universal.universal_transformer_encoder import (
    UniversalTransformerEncoder,
)
from keras_attention.layers.vision.image_transformer_block import ImageTransformerBlock
from keras_attention.layers.vision.self_attention_2d import SelfAttention2D

__all__ = [
    "AttentionPooling",
    "AttentionRNNCell",
    "AttentionRNNDecoder",
    "BahdanauAttention",
    "ImageTransformerBlock",
    "LSTMN",
    "LSTMNDeepFusionDecoder",
    "LSTMNShallowFusionDecoder",
    "LuongAttention",
    "MemoryCompressedAttention",
    "MemoryCompressedDecoder",
    "MemoryCompressedDecoderBlock",
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
