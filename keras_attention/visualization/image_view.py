"""`image_view`: click a pixel, see where it attends (SAGAN's figure)."""

import base64
import math

import numpy as np

from keras_attention.visualization.head_view import initial_layer
from keras_attention.visualization.html_document import AttentionView
from keras_attention.visualization.sparse_weights import encode_layer
from keras_attention.visualization.sparse_weights import kept_entries
from keras_attention.visualization.sparse_weights import rule_text
from keras_attention.visualization.view_figures import image_figure
from keras_attention.visualization.view_inputs import check_threshold
from keras_attention.visualization.view_inputs import view_layers


def _rgba(image):
    """`image` `(H, W)`, `(H, W, 1|3|4)` (floats in [0, 1] or uint8) as
    uint8 RGBA `(H, W, 4)`."""
    if hasattr(image, "numpy"):
        image = image.numpy()
    image = np.asarray(image)
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[-1] not in (1, 3, 4) or 0 in image.shape:
        raise ValueError(
            "`image` must have shape (H, W), or (H, W, C) with C = 1, 3 or 4. "
            f"Received: image.shape={image.shape}"
        )
    if image.dtype != np.uint8:
        image = np.clip(np.rint(np.asarray(image, "float64") * 255), 0, 255)
    image = image.astype(np.uint8)
    if image.shape[-1] == 1:
        image = np.repeat(image, 3, axis=-1)
    if image.shape[-1] == 3:
        image = np.concatenate(
            [image, np.full(image.shape[:2] + (1,), 255, np.uint8)], -1
        )
    return image


def grid_of(count, height, width, argument):
    """`(h, w)` with `h * w == count` and the image's aspect `height / width`:
    the grid of feature-map positions, in raster order."""
    rows = round(math.sqrt(count * height / width))
    for h in (rows, rows - 1, rows + 1):
        if h > 0 and count % h == 0 and abs(h / (count // h) - height / width) < 1e-6:
            return h, count // h
    raise ValueError(
        f"`image` must have the feature map's aspect: the {count} {argument} "
        f"cannot be laid out in raster order on a grid of the image's aspect. "
        f"Received: image of {height} x {width}, {count} {argument}"
    )


def image_view(attention, image, *, example=0, layer=0, threshold=0.001, title=None):
    """Where each pixel attends, as the SAGAN paper's figure shows it:
    click a pixel of the image and the page overlays its attention map.

    For `SelfAttention2D` and `ImageTransformerBlock` (and any layer whose
    queries and keys are the positions of a feature map in raster order).
    The query and key grids are laid out with the image's aspect, so a
    pooled key map (`SelfAttention2D(pool_keys=True)`: `H W / 4` keys) or
    a feature map smaller than the image fit. The page has a menu for the
    layer and one for the head (or the mean of the heads); the clicked
    pixel is marked, and the keys it attends to are tinted by their weight
    (relative to the largest of the row). Self-contained: works offline.

    Args:
        attention: an `AttentionCollection`, a dict `name -> (B, N, T, S)`
            weights, one `AttentionRecord` or one array (as `head_view`),
            the `T` queries and `S` keys in raster order.
        image: the picture shown, `(H, W)` or `(H, W, C)` (floats in
            [0, 1] or uint8), with the feature map's aspect.
        example: which example of the batch to show.
        layer: the layer shown first (its index or name).
        threshold: weights below it are not drawn.
        title: the page's title.

    Returns:
        An `AttentionView`.

    Raises:
        ValueError: weights of the wrong rank, an image of the wrong shape
            or aspect, an empty collection.

    Example:

    >>> import numpy as np
    >>> from keras_attention.visualization import image_view
    >>> weights = np.full((1, 1, 16, 4), 0.25, "float32")  # 4 x 4 -> 2 x 2 keys
    >>> view = image_view(weights, np.zeros((8, 8)))
    >>> (layer,) = view.payload["layers"]
    >>> tuple(layer["queryGrid"]), tuple(layer["keyGrid"])
    ((4, 4), (2, 2))
    """
    layers = view_layers(attention, example)
    threshold = check_threshold(threshold)
    rgba = _rgba(image)
    height, width = rgba.shape[:2]
    entries, kept = [], []
    for entry in layers:
        _, queries, keys = entry.weights.shape
        keep = kept_entries(
            entry.weights, threshold, None, entry.query_mask, entry.key_mask
        )
        kept.append(keep)
        entries.append(
            {
                "name": entry.name,
                "shape": list(entry.weights.shape),
                "queryGrid": list(grid_of(queries, height, width, "queries")),
                "keyGrid": list(grid_of(keys, height, width, "keys")),
                "entries": int(keep.sum()),
                "data": encode_layer(entry.weights, keep),
            }
        )
    payload = {
        "image": {
            "height": height,
            "width": width,
            "rgba": base64.b64encode(rgba.tobytes()).decode("ascii"),
        },
        "layers": entries,
        "layer": initial_layer(layer, layers),
        "threshold": threshold,
        "rule": rule_text(threshold, None),
    }
    return AttentionView(
        "image",
        payload,
        ("image_view.js",),
        lambda: image_figure(payload, layers, rgba),
        title or "Attention: image view",
    )
