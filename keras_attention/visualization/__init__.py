"""Attention weights out of a model, and views of them.

- `collect_attention(model, inputs)`: the weights `(B, N, T, S)` of every
  attention layer of a built model, from one eager call that leaves its
  outputs unchanged (`collect.py`; which layers are read, and how, is in
  `readers.py`).
- `plot_attention(weights, ...)`: one alignment matrix as a matplotlib
  heat-map (`heatmap.py`; matplotlib is imported only when a plot is drawn).

This module reads the package's layers (to know which are attention
layers); nothing in the package imports it but the package's `__init__`.
"""

from keras_attention.visualization.collect import AttentionCollection
from keras_attention.visualization.collect import AttentionRecord
from keras_attention.visualization.collect import collect_attention
from keras_attention.visualization.heatmap import plot_attention

__all__ = [
    "AttentionCollection",
    "AttentionRecord",
    "collect_attention",
    "plot_attention",
]
