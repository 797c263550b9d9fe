"""keras_attention: attention layers for Keras 3."""

from keras_attention import decoding as decoding
from keras_attention import distribution as distribution
from keras_attention import layers as layers
from keras_attention import models as models
from keras_attention import modifiers as modifiers
from keras_attention import ops as ops
from keras_attention import scores as scores
from keras_attention import testing as testing
from keras_attention import visualization as visualization
from keras_attention.layers import *  # noqa: F403
from keras_attention.models import PointerNetwork as PointerNetwork
from keras_attention.models import Transformer as Transformer

__version__ = "0.2.0"
