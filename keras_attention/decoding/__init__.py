"""Decoding loops over a cached step function (XLA-compilable)."""

from keras_attention.decoding.beam_search import beam_search

__all__ = ["beam_search"]
