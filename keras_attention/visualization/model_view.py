"""`model_view`: every layer x head as a small map, with its summaries."""

from keras_attention.visualization.head_view import initial_layer
from keras_attention.visualization.html_document import AttentionView
from keras_attention.visualization.layer_payload import layer_payload
from keras_attention.visualization.view_figures import model_figure


def model_view(
    attention,
    tokens,
    source_tokens=None,
    *,
    example=0,
    threshold=0.01,
    top_k=16,
    title=None,
):
    """The model view: a grid of small maps, one row per layer and one
    column per head, each the head's weights (queries down, keys across).

    Under each map are the head's summaries (`head_summaries`): its
    entropy `H` (nats; low = the head looks at few keys) and its mean
    attended distance `d` (positions; small = a local head). Clicking a
    map opens that layer and head in a head view below the grid (the same
    page, the same controls as `head_view`). Padded queries draw nothing;
    the maps are drawn on canvases from the kept weights (the rule,
    `threshold` and `top_k`, is stated on the page). Self-contained:
    works offline.

    Args:
        attention: an `AttentionCollection`, a dict `name -> (B, N, T, S)`
            weights, one `AttentionRecord` or one array (as `head_view`).
        tokens: the tokens of the queries (and of the keys of
            self-attention).
        source_tokens: the tokens of the keys of cross-attention (labelled
            as in `head_view`).
        example: which example of the batch to show.
        threshold: weights below it are not drawn.
        top_k: at most this many weights per query (the largest); `None`:
            all above `threshold`.
        title: the page's title.

    Returns:
        An `AttentionView`.

    Raises:
        ValueError: as `head_view`.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import model_view
    >>> weights = np.full((1, 2, 3, 3), 1 / 3, "float32")  # (B, N, T, S)
    >>> view = model_view({"block_0": weights, "block_1": weights}, list("abc"))
    >>> tuple(tuple(layer["entropy"]) for layer in view.payload["layers"])
    ((1.099, 1.099), (1.099, 1.099))
    """
    payload, layers, kept = layer_payload(
        attention, tokens, source_tokens, example, threshold, top_k
    )
    payload["layer"] = initial_layer(0, layers)
    title = title or "Attention: model view"
    return AttentionView(
        "model",
        payload,
        ("head_view.js", "model_view.js"),
        lambda: model_figure(payload, layers),
        title,
        height=900,
    )
