"""Public layers, one per file."""

from keras_attention.layers.bahdanau_attention import BahdanauAttention
from keras_attention.layers.luong_attention import LuongAttention
from keras_attention.layers.scored_attention import ScoredAttention

__all__ = ["BahdanauAttention", "LuongAttention", "ScoredAttention"]
from keras_attention.layers.pointer_attention import PointerAttention  # noqa: E402
from keras_attention.layers.self_attention_2d import SelfAttention2D  # noqa: E402

__all__ += ["PointerAttention", "SelfAttention2D"]

from keras_attention.layers.attention_rnn_cell import AttentionRNNCell  # noqa: E402
from keras_attention.layers.attention_rnn_decoder import AttentionRNNDecoder  # noqa: E402

__all__ += ["AttentionRNNCell", "AttentionRNNDecoder"]
