"""Complete models built from the layers."""

from keras_attention.models.pointer_network import PointerNetwork

__all__ = ["PointerNetwork"]
