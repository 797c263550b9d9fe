"""Attention weights out of a model, and views of them.

- `collect_attention(model, inputs)`: the weights `(B, N, T, S)` of every
  attention layer of a built model, from one eager call that leaves its
  outputs unchanged (`collect.py`; which layers are read, and how, is in
  `readers.py`).
- `plot_attention(weights, ...)`: one alignment matrix as a matplotlib
  heat-map (`heatmap.py`; matplotlib is imported only when a plot is drawn).
- The views, each an `AttentionView`: a self-contained HTML document (every
  script and style inline, no network) shown in Jupyter and saved with
  `.save(path)`, with a static PNG export (`.save_png(path)`):
  `head_view` (tokens joined by lines, per layer and head), `model_view`
  (every layer x head as a small map, with `head_summaries`),
  `alignment_view` (an alignment matrix to hover) and `image_view` (click a
  pixel, see where it attends). `html_document.py` assembles the pages from
  `static/`; `sparse_weights.py` holds the rule that picks the weights
  drawn and their encoding.

This module reads the package's layers (to know which are attention
layers); nothing in the package imports it but the package's `__init__`.
"""

from keras_attention.visualization.alignment_view import alignment_view
from keras_attention.visualization.collect import AttentionCollection
from keras_attention.visualization.collect import AttentionRecord
from keras_attention.visualization.collect import collect_attention
from keras_attention.visualization.head_summaries import HeadSummaries
from keras_attention.visualization.head_summaries import head_summaries
from keras_attention.visualization.head_view import head_view
from keras_attention.visualization.heatmap import plot_attention
from keras_attention.visualization.html_document import AttentionView
from keras_attention.visualization.image_view import image_view
from keras_attention.visualization.model_view import model_view

__all__ = [
    "AttentionCollection",
    "AttentionRecord",
    "AttentionView",
    "HeadSummaries",
    "alignment_view",
    "collect_attention",
    "head_summaries",
    "head_view",
    "image_view",
    "model_view",
    "plot_attention",
]
