"""The static figures of the views (matplotlib, imported only when a
figure is drawn; a bare `Figure` needs no GUI backend)."""

import numpy as np

from keras_attention.visualization.heatmap import plot_attention

# The heads' colours, as the pages draw them (static/common.js).
HEAD_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


def _figure(width, height):
    from matplotlib.figure import Figure  # lazy: matplotlib is optional

    return Figure(figsize=(width, height))


def _token_column(ax, x, tokens, mask, align):
    for i, (token, real) in enumerate(zip(tokens, mask, strict=True)):
        ax.text(
            x, i, token, ha=align, va="center", fontsize=8,
            color="black" if real else "#bbbbbb",
        )  # fmt: skip


def head_figure(payload, layers, kept):
    """The head view of the page's first layer: every head's lines."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba

    index = payload["layer"]
    layer, keep, entry = layers[index], kept[index], payload["layers"][index]
    queries = payload["tokens"][entry["queryTokens"]]
    keys = payload["tokens"][entry["keyTokens"]]
    rows = max(len(queries), len(keys))
    figure = _figure(5, 1.0 + 0.22 * min(rows, 120))
    ax = figure.add_subplot()
    for head in range(layer.weights.shape[0]):
        h, t, s = np.nonzero(keep[head : head + 1])
        weights = layer.weights[head, t, s]
        colour = np.array(to_rgba(HEAD_COLOURS[head % len(HEAD_COLOURS)]))
        colours = np.repeat(colour[None], len(t), axis=0)
        colours[:, 3] = np.clip(weights, 0.05, 1.0)
        segments = np.stack([np.stack([np.zeros_like(t), t], -1),
                             np.stack([np.ones_like(s), s], -1)], 1)  # fmt: skip
        ax.add_collection(
            LineCollection(segments, colors=colours, linewidths=0.5 + 2 * weights)
        )
    _token_column(ax, -0.05, queries, layer.query_mask, "right")
    _token_column(ax, 1.05, keys, layer.key_mask, "left")
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(f"{entry['name']} ({payload['rule']})", fontsize=8)
    return figure


def model_figure(payload, layers):
    """Every layer x head as a small map, with its entropy and distance."""
    heads = max(layer.weights.shape[0] for layer in layers)
    figure = _figure(1.3 * heads + 0.5, 1.5 * len(layers) + 0.5)
    axes = figure.subplots(len(layers), heads, squeeze=False)
    for row, (layer, entry) in enumerate(zip(layers, payload["layers"], strict=True)):
        for head in range(heads):
            ax = axes[row, head]
            ax.set_xticks([])
            ax.set_yticks([])
            if head >= layer.weights.shape[0]:
                ax.axis("off")
                continue
            weights = np.where(layer.query_mask[:, None], layer.weights[head], 0)
            ax.imshow(weights, cmap="Blues", vmin=0, vmax=1, aspect="auto")
            distance = entry["distance"][head]
            summary = f"H {entry['entropy'][head]:.2f}"
            summary += "" if distance is None else f" d {distance:.1f}"
            ax.set_xlabel(summary, fontsize=7)
            if head == 0:
                ax.set_ylabel(entry["name"].split("/")[-2:][0], fontsize=7)
            if row == 0:
                ax.set_title(f"head {head}", fontsize=8)
    figure.tight_layout()
    return figure


def alignment_figure(weights, source, targets, names):
    """Each matrix as `plot_attention` draws it, side by side."""
    count = len(targets)
    figure = _figure(
        (0.3 * len(source) + 1.5) * count, 0.3 * max(map(len, targets)) + 1.5
    )
    axes = figure.subplots(1, count, squeeze=False)[0]
    for ax, matrix, tokens, name in zip(axes, weights, targets, names, strict=True):
        plot_attention(matrix, source, tokens, ax=ax, title=name)
    return figure


def _query_points(grid):
    """Five query pixels (centre and the quadrants' centres), as SAGAN's
    figure picks a few."""
    h, w = grid
    points = [(h // 2, w // 2), (h // 4, w // 4), (h // 4, 3 * w // 4),
              (3 * h // 4, w // 4), (3 * h // 4, 3 * w // 4)]  # fmt: skip
    return list(dict.fromkeys(points))


def image_figure(payload, layers, rgba):
    """The image with a few query pixels, and where each attends (the mean
    of the heads, upsampled onto the image)."""
    index = payload["layer"]
    layer, entry = layers[index], payload["layers"][index]
    (qh, qw), (kh, kw) = entry["queryGrid"], entry["keyGrid"]
    points = _query_points((qh, qw))
    figure = _figure(2.2 * (len(points) + 1), 2.4)
    axes = figure.subplots(1, len(points) + 1, squeeze=False)[0]
    height, width = rgba.shape[:2]
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)
    axes[0].imshow(rgba)
    for number, (row, col) in enumerate(points):
        y, x = (row + 0.5) * height / qh - 0.5, (col + 0.5) * width / qw - 0.5
        axes[0].plot(x, y, "o", color=HEAD_COLOURS[number], markersize=5)
        heat = layer.weights[:, row * qw + col].mean(0).reshape(kh, kw)
        axes[number + 1].imshow(rgba, alpha=0.5)
        axes[number + 1].imshow(heat, cmap="hot", alpha=0.6, extent=extent)
        axes[number + 1].plot(x, y, "o", color=HEAD_COLOURS[number], markersize=5)
    for ax in axes:
        ax.axis("off")
    axes[0].set_title(entry["name"], fontsize=8)
    return figure
