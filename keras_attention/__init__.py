"""keras_attention: attention layers for Keras 3."""

from keras_attention import layers
from keras_attention import ops
from keras_attention import scores
from keras_attention.layers import *  # noqa: F401,F403

__version__ = "0.1.0"
from keras_attention import decoding  # noqa: E402,F401
from keras_attention.models import Transformer  # noqa: E402,F401
