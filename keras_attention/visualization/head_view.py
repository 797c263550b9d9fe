"""`head_view`: the tokens in two columns joined by their attention."""

from keras_attention.visualization.html_document import AttentionView
from keras_attention.visualization.layer_payload import layer_payload
from keras_attention.visualization.view_figures import head_figure


def initial_layer(layer, layers):
    """The index of `layer` (an index or a name) among `layers`."""
    names = [entry.name for entry in layers]
    if isinstance(layer, str) and layer in names:
        return names.index(layer)
    if isinstance(layer, int) and not isinstance(layer, bool):
        if -len(names) <= layer < len(names):
            return layer % len(names)
    raise ValueError(
        f"`layer` must be the index or the name of one of the {len(names)} "
        f"layers ({names}). Received: layer={layer!r}"
    )


def head_view(
    attention,
    tokens,
    source_tokens=None,
    *,
    example=0,
    layer=0,
    threshold=0.01,
    top_k=16,
    title=None,
):
    """The head view: queries on the left, keys on the right, one line per
    weight, its opacity and width the weight, one colour per head.

    The page has a menu to choose the layer, a check box per head (its
    colour) to show or hide it, and hovering a token shows only its lines
    (a query's on the left, those reaching a key on the right). Padded
    positions (the record's masks) are greyed and draw no line. The lines
    are drawn on a canvas, so 512 tokens stay quick; the rule that picks
    them (weights below `threshold` hidden, at most `top_k` per query) is
    stated on the page. The document holds every script it needs: it
    works offline, from a file or in Jupyter.

    Self-attention labels both columns with `tokens`. For cross-attention
    pass the keys' tokens as `source_tokens`: each layer's queries and
    keys are labelled by the list of their length, and when both lists
    have it, by the layer's name (a name holding `cross`: `tokens` for the
    queries and `source_tokens` for the keys; one holding `encoder`:
    `source_tokens` for both; otherwise `tokens` for both), which fits
    `collect_attention` of a `Transformer`.

    Args:
        attention: an `AttentionCollection` (from `collect_attention`), a
            dict `name -> (B, N, T, S)` weights, one `AttentionRecord`, or
            one array `(B, N, T, S)` or `(N, T, S)`.
        tokens: the tokens (strings) of the queries, and of the keys of
            self-attention.
        source_tokens: the tokens of the keys of cross-attention layers.
        example: which example of the batch to show.
        layer: the layer shown first (its index or name).
        threshold: weights below it are not drawn.
        top_k: at most this many lines per query (the largest); `None`:
            every weight above `threshold`.
        title: the page's title.

    Returns:
        An `AttentionView` (`.html`, `.save(path)`, `.save_png(path)`).

    Raises:
        ValueError: weights of the wrong rank, token lists of the wrong
            length, an empty collection, a bad `example`, `layer`,
            `threshold` or `top_k`.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import head_view
    >>> weights = np.full((1, 2, 3, 3), 1 / 3, "float32")  # (B, N, T, S)
    >>> view = head_view({"encoder": weights}, ["the", "cat", "sat"])
    >>> view.kind, sum(layer["entries"] for layer in view.payload["layers"])
    ('head', 18)
    >>> "<script src" in view.html, len(view.html) > 0
    (False, True)
    """
    payload, layers, kept = layer_payload(
        attention, tokens, source_tokens, example, threshold, top_k
    )
    payload["layer"] = initial_layer(layer, layers)
    title = title or "Attention: head view"
    return AttentionView(
        "head",
        payload,
        ("head_view.js",),
        lambda: head_figure(payload, layers, kept),
        title,
    )
