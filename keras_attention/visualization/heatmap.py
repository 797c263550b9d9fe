"""`plot_attention`: one alignment matrix as a heat-map (matplotlib is imported
only when a plot is drawn)."""

import numpy as np


def _to_numpy(weights):
    if hasattr(weights, "numpy"):
        weights = weights.numpy()
    return np.asarray(weights, dtype="float32")


def plot_attention(
    weights, source_tokens, target_tokens, ax=None, title=None, cmap="gray"
):
    """Draw an alignment matrix, as in Figure 3 of Bahdanau et al. (2015).

    Row `t` shows how output token `t` distributes its attention over the
    source tokens; a bright cell is a large weight. Weights beyond the given
    tokens (padding) are cropped.

    Args:
        weights: `(T, S)` attention weights (numpy array or tensor), e.g. one
            example of the alignment history of `AttentionRNNDecoder`.
        source_tokens: the `S'` source labels (x axis, top), `S' <= S`.
        target_tokens: the `T'` target labels (y axis), `T' <= T`.
        ax: a matplotlib `Axes` to draw into; a new figure when `None`.
        title: optional axes title.
        cmap: matplotlib colour map (`"gray"` as in the paper).

    Returns:
        The matplotlib `Figure` holding the plot.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import plot_attention
    >>> fig = plot_attention(np.eye(3), ["a", "b", "c"], ["A", "B", "C"])
    >>> len(fig.axes[0].get_xticklabels())
    3

    References:
        - Bahdanau et al., 2015: https://arxiv.org/abs/1409.0473
    """
    weights = _to_numpy(weights)
    if weights.ndim != 2:
        raise ValueError(
            "`weights` must have rank 2 (target, source). "
            f"Received: weights.shape={weights.shape}"
        )
    source_tokens = [str(t) for t in source_tokens]
    target_tokens = [str(t) for t in target_tokens]
    rows, cols = weights.shape
    if len(source_tokens) > cols or len(target_tokens) > rows:
        raise ValueError(
            "`source_tokens` and `target_tokens` cannot outnumber the columns and "
            f"rows of `weights`. Received: weights.shape={weights.shape}, "
            f"{len(source_tokens)} source and {len(target_tokens)} target tokens"
        )
    weights = weights[: len(target_tokens), : len(source_tokens)]

    if ax is None:
        from matplotlib.figure import Figure  # lazy: matplotlib is optional

        # A bare Figure needs no GUI backend (safe under Agg and headless).
        figure = Figure(
            figsize=(0.3 * len(source_tokens) + 1.5, 0.3 * len(target_tokens) + 1.2)
        )
        ax = figure.add_subplot()
    else:
        figure = ax.figure
    ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(source_tokens)))
    ax.set_xticklabels(source_tokens, rotation=90)
    ax.set_yticks(range(len(target_tokens)))
    ax.set_yticklabels(target_tokens)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    if title is not None:
        ax.set_title(title, pad=12)
    return figure
