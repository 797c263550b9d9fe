"""keras_attention: attention layers for Keras 3."""

from keras_attention import layers as layers
from keras_attention import models as models
from keras_attention import ops as ops
from keras_attention import scores as scores
from keras_attention.layers import *  # noqa: F403

__version__ = "0.1.0"

from keras_attention import decoding as decoding  # noqa: E402
from keras_attention import visualization as visualization  # noqa: E402
