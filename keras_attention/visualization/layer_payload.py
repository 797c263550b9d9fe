"""The payload the head and model views share: each layer's kept weights,
its token lists and masks, and the rule (private to the views)."""

from keras_attention.visualization.head_summaries import head_summaries
from keras_attention.visualization.sparse_weights import encode_layer
from keras_attention.visualization.sparse_weights import kept_entries
from keras_attention.visualization.sparse_weights import rule_text
from keras_attention.visualization.view_inputs import check_threshold
from keras_attention.visualization.view_inputs import check_tokens
from keras_attention.visualization.view_inputs import view_layers

TOKENS, SOURCE = 0, 1  # indices into the payload's token lists


def _pick(name, length, side, lengths):
    """Which token list labels one side (`"queries"`/`"keys"`) of layer
    `name`: the one of that length; when both are, by the layer's name."""
    fits = [i for i, n in enumerate(lengths) if n == length]
    if not fits:
        given = ", ".join(
            f"len({a})={n}"
            for a, n in zip(
                ("tokens", "source_tokens")[: len(lengths)], lengths, strict=True
            )
        )
        hint = (
            ""
            if len(lengths) > 1
            else ("; for cross-attention pass the keys' tokens as `source_tokens`")
        )
        one = {"queries": "query", "keys": "key"}[side]
        raise ValueError(
            f"`tokens` must hold one token per {one} of every layer: layer "
            f"{name!r} has {length} {side}{hint}. Received: {given}"
        )
    if len(fits) == 1:
        return fits[0]
    lowered = name.lower()
    if "cross" in lowered:
        return TOKENS if side == "queries" else SOURCE
    return SOURCE if "encoder" in lowered else TOKENS


def _labels(layer, lengths):
    _, queries, keys = layer.weights.shape
    return (
        _pick(layer.name, queries, "queries", lengths),
        _pick(layer.name, keys, "keys", lengths),
    )


def _check_top_k(top_k):
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(
            "`top_k` must be a positive int (the most weights drawn per query) "
            f"or None. Received: top_k={top_k!r}"
        )
    return top_k


def layer_payload(attention, tokens, source_tokens, example, threshold, top_k):
    """`(payload, layers, kept)`: the JSON-ready dict, the `ViewLayer`s
    and, per layer, the boolean `(N, T, S)` of the weights kept."""
    layers = view_layers(attention, example)
    threshold, top_k = check_threshold(threshold), _check_top_k(top_k)
    token_lists = [check_tokens("tokens", tokens, len(list(tokens)), "position")]
    if source_tokens is not None:
        token_lists.append(
            check_tokens(
                "source_tokens", source_tokens, len(list(source_tokens)), "key"
            )
        )
    lengths = [len(t) for t in token_lists]
    entries, kept = [], []
    for layer in layers:
        query_list, key_list = _labels(layer, lengths)
        keep = kept_entries(
            layer.weights, threshold, top_k, layer.query_mask, layer.key_mask
        )
        summary = head_summaries(layer.weights, layer.query_mask)
        kept.append(keep)
        entries.append(
            {
                "name": layer.name,
                "shape": list(layer.weights.shape),  # N, T, S
                "queryTokens": query_list,
                "keyTokens": key_list,
                "queryMask": layer.query_mask.astype(int).tolist(),
                "keyMask": layer.key_mask.astype(int).tolist(),
                "entries": int(keep.sum()),
                "data": encode_layer(layer.weights, keep),
                "entropy": [round(float(e), 3) for e in summary.entropy],
                "distance": [
                    None if d != d else round(float(d), 2) for d in summary.distance
                ],
            }
        )
    payload = {
        "tokens": token_lists,
        "layers": entries,
        "threshold": threshold,
        "topK": top_k,
        "rule": rule_text(threshold, top_k),
    }
    return payload, layers, kept
