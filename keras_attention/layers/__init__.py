"""Public layers, one per file."""

from keras_attention.layers.bahdanau_attention import BahdanauAttention
from keras_attention.layers.luong_attention import LuongAttention
from keras_attention.layers.scored_attention import ScoredAttention

__all__ = ["BahdanauAttention", "LuongAttention", "ScoredAttention"]

# Transformer stack (issue 3).
from keras_attention.layers.multi_head_attention import MultiHeadAttention  # noqa: E402
from keras_attention.layers.multi_head_self_attention import (  # noqa: E402
    MultiHeadSelfAttention,
)

__all__ += ["MultiHeadAttention", "MultiHeadSelfAttention"]
from keras_attention.layers.position_embedding import PositionEmbedding  # noqa: E402
from keras_attention.layers.sinusoidal_position_encoding import (  # noqa: E402
    SinusoidalPositionEncoding,
)

__all__ += ["PositionEmbedding", "SinusoidalPositionEncoding"]
from keras_attention.layers.transformer_decoder_block import (  # noqa: E402
    TransformerDecoderBlock,
)
from keras_attention.layers.transformer_encoder_block import (  # noqa: E402
    TransformerEncoderBlock,
)

__all__ += ["TransformerDecoderBlock", "TransformerEncoderBlock"]
from keras_attention.layers.transformer_decoder import TransformerDecoder  # noqa: E402
from keras_attention.layers.transformer_encoder import TransformerEncoder  # noqa: E402

__all__ += ["TransformerDecoder", "TransformerEncoder"]
