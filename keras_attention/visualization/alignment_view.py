"""`alignment_view`: an alignment matrix you can hover."""

import numpy as np

from keras_attention.visualization.html_document import AttentionView
from keras_attention.visualization.sparse_weights import encode_layer
from keras_attention.visualization.sparse_weights import kept_entries
from keras_attention.visualization.sparse_weights import rule_text
from keras_attention.visualization.view_figures import alignment_figure
from keras_attention.visualization.view_inputs import check_threshold
from keras_attention.visualization.view_inputs import check_tokens


def _weights(weights):
    if hasattr(weights, "numpy"):
        weights = weights.numpy()
    weights = np.asarray(weights, dtype="float32")
    if weights.ndim not in (2, 3) or 0 in weights.shape:
        raise ValueError(
            "`weights` must have rank 2 (T, S), or 3 (K, T, S) for K beams or "
            f"heads, and no empty axis. Received: weights.shape={weights.shape}"
        )
    return weights if weights.ndim == 3 else weights[None]


def _target_lists(target_tokens, count, rows):
    """One list of target tokens per matrix: a shared list, or one per
    matrix (beam hypotheses differ); each at most `rows` long."""
    nested = [not isinstance(t, str) and hasattr(t, "__iter__") for t in target_tokens]
    lists = [list(t) for t in target_tokens] if all(nested) and nested else None
    if lists is None:
        lists = [list(target_tokens)] * count
    if len(lists) != count:
        raise ValueError(
            f"`target_tokens` must be one list of tokens, or one per matrix "
            f"({count}). Received: len(target_tokens)={len(lists)}"
        )
    for tokens in lists:
        if not 0 < len(tokens) <= rows:
            raise ValueError(
                f"`target_tokens` must hold 1 to {rows} tokens (one per row of "
                f"`weights`; fewer crops the rows). Received: {len(tokens)} tokens"
            )
    return [[str(t) for t in tokens] for tokens in lists]


def alignment_view(
    weights, source_tokens, target_tokens, *, names=None, threshold=0.001, title=None
):
    """The interactive counterpart of `plot_attention`: an alignment
    matrix, target tokens down, source tokens across, each cell's value
    shown on hover.

    For a seq2seq decoder's alignment history (`AttentionRNNDecoder`
    with `return_alignments=True`, one example `(T, S)`) or the beams of
    a beam search (`(K, T, S)`, one matrix per beam, with a menu to choose
    it; each beam may have its own target tokens). Rows beyond the target
    tokens (padding after the end token) are cropped. Cells below
    `threshold` are left blank (the page states it). Self-contained: works
    offline.

    Args:
        weights: `(T, S)` weights, or `(K, T, S)` for K beams or heads.
        source_tokens: the `S` source tokens (columns).
        target_tokens: the target tokens (rows): one list of at most `T`,
            or, for `(K, T, S)`, one list per matrix.
        names: the name of each matrix in the menu (default "beam i").
        threshold: weights below it are not drawn.
        title: the page's title.

    Returns:
        An `AttentionView`.

    Raises:
        ValueError: weights of the wrong rank, token lists of the wrong
            length, a bad `threshold`.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import alignment_view
    >>> view = alignment_view(np.eye(3), ["a", "b", "c"], ["A", "B", "C"])
    >>> (matrix,) = view.payload["matrices"]
    >>> matrix["name"], matrix["entries"]
    ('beam 0', 3)
    """
    weights = _weights(weights)
    count, rows, cols = weights.shape
    threshold = check_threshold(threshold)
    source = check_tokens("source_tokens", source_tokens, cols, "column of `weights`")
    targets = _target_lists(target_tokens, count, rows)
    names = [f"beam {i}" for i in range(count)] if names is None else list(names)
    if len(names) != count:
        raise ValueError(
            f"`names` must name each of the {count} matrices. "
            f"Received: len(names)={len(names)}"
        )
    matrices = []
    for name, matrix, tokens in zip(names, weights, targets, strict=True):
        matrix = matrix[None, : len(tokens)]  # (1, T', S)
        keep = kept_entries(matrix, threshold, None, np.ones(len(tokens), bool))
        matrices.append(
            {
                "name": str(name),
                "targetTokens": tokens,
                "entries": int(keep.sum()),
                "data": encode_layer(matrix, keep),
            }
        )
    payload = {
        "sourceTokens": source,
        "matrices": matrices,
        "threshold": threshold,
        "rule": rule_text(threshold, None),
    }
    return AttentionView(
        "alignment",
        payload,
        ("alignment_view.js",),
        lambda: alignment_figure(weights, source, targets, names),
        title or "Attention: alignment",
    )
