"""The views (issue 44, part 2), without a browser: what each page holds
(the weights the stated rule keeps, decoded back here; the token lists; the
masks), the per-head summaries against a hand computation, the static PNG
export, Jupyter's `_repr_html_`, that a page references nothing online, and
the errors. tests/test_visualization_browser.py opens the pages."""

import base64
import re
import zlib

import keras
import numpy as np
import pytest

import keras_attention as ka
from keras_attention.visualization import AttentionView
from keras_attention.visualization import alignment_view
from keras_attention.visualization import collect_attention
from keras_attention.visualization import head_summaries
from keras_attention.visualization import head_view
from keras_attention.visualization import image_view
from keras_attention.visualization import model_view

TOKENS = "the cat sat on the mat".split()


def peaked(*shape, seed=0, sharpness=3.0):
    """Softmax rows of random logits: a few large weights per row."""
    logits = np.random.default_rng(seed).normal(size=shape) * sharpness
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)).astype("float32")


def decode(entry, shape):
    """A layer's `data` back as `{(head, query, key): value}` (the layout of
    keras_attention/visualization/sparse_weights.py, read independently)."""
    words = np.frombuffer(zlib.decompress(base64.b64decode(entry["data"])), "<u2")
    heads, queries, _ = shape
    counts = words[: heads * queries]
    total = int(counts.sum())
    keys, values = words[heads * queries :][:total], words[heads * queries :][total:]
    rows = np.repeat(np.arange(heads * queries), counts)
    return {
        (int(r // queries), int(r % queries), int(k)): v / 1000
        for r, k, v in zip(rows, keys, values, strict=True)
    }


def expected_entries(weights, threshold, top_k, query_mask=None, key_mask=None):
    """The rule, counted: per row min(top_k, #weights >= threshold)."""
    above = weights >= threshold
    if key_mask is not None:
        above &= key_mask[None, None, :]
    counts = above.sum(-1)
    if top_k is not None:
        counts = np.minimum(counts, top_k)
    if query_mask is not None:
        counts = counts * query_mask[None, :]
    return int(counts.sum())


# -- the payload ------------------------------------------------------------------


@pytest.mark.parametrize("threshold, top_k", [(0.01, 16), (0.1, None), (0.05, 2)])
def test_head_view_keeps_the_weights_the_stated_rule_keeps(threshold, top_k):
    weights = peaked(2, 3, 6, 6)
    view = head_view(
        {"a": weights, "b": weights[:, :2]},
        TOKENS,
        example=1,
        threshold=threshold,
        top_k=top_k,
    )
    for entry, w in zip(
        view.payload["layers"], (weights[1], weights[1, :2]), strict=True
    ):
        kept = decode(entry, w.shape)
        assert entry["entries"] == len(kept) == expected_entries(w, threshold, top_k)
        for (h, t, s), value in kept.items():
            assert value == pytest.approx(round(float(w[h, t, s]), 3), abs=1e-9)
            assert w[h, t, s] >= threshold
        if top_k is not None:  # the kept ones are the largest of their row
            for h, t, s in kept:
                assert (w[h, t] > w[h, t, s]).sum() < top_k
    assert f"below {threshold:g} not drawn" in view.rule
    assert ("largest per query" in view.rule) == (top_k is not None)
    assert view.rule in view.html


def test_masks_mark_padding_and_draw_nothing_there():
    inputs = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(30, 8, mask_zero=True)(inputs)
    x = ka.layers.TransformerEncoder(
        num_layers=2, num_heads=2, intermediate_dim=16, name="encoder"
    )(x)
    model = keras.Model(inputs, x)
    batch = np.array([[5, 3, 8, 2, 0, 0], [7, 1, 4, 9, 6, 2]])
    collected = collect_attention(model, batch)
    view = model_view(collected, TOKENS, threshold=0.0, top_k=None)
    for entry in view.payload["layers"]:
        assert entry["queryMask"] == entry["keyMask"] == [1, 1, 1, 1, 0, 0]
        kept = decode(entry, entry["shape"])
        assert kept and all(t < 4 and s < 4 for (_, t, s) in kept)
        assert entry["entries"] == 2 * 4 * 4  # every real pair, both heads
    second = head_view(collected, TOKENS, example=1, threshold=0.0, top_k=None)
    assert second.payload["layers"][0]["entries"] == 2 * 6 * 6


def test_cross_attention_labels_queries_and_keys_by_their_lists():
    target, source = ["<s>", "un", "chat"], ["a", "cat", "sat", "down"]
    attention = {
        "encoder/block_0/self_attention": peaked(1, 2, 4, 4),
        "decoder/block_0/self_attention": peaked(1, 2, 3, 3),
        "decoder/block_0/cross_attention": peaked(1, 2, 3, 4),
    }
    view = head_view(attention, target, source_tokens=source, layer=2)
    assert view.payload["tokens"] == [target, source]
    labels = [(e["queryTokens"], e["keyTokens"]) for e in view.payload["layers"]]
    assert labels == [(1, 1), (0, 0), (0, 1)]
    assert view.payload["layer"] == 2
    # Lists of one length: the layer's name decides.
    same = {name: peaked(1, 2, 3, 3) for name in attention}
    view = head_view(same, target, source_tokens=source[:3])
    labels = [(e["queryTokens"], e["keyTokens"]) for e in view.payload["layers"]]
    assert labels == [(1, 1), (0, 0), (0, 1)]


def test_model_view_holds_each_heads_summaries():
    weights = peaked(1, 3, 5, 5)
    view = model_view({"block": weights}, TOKENS[:5])
    expected = head_summaries(weights[0])
    entry = view.payload["layers"][0]
    np.testing.assert_allclose(entry["entropy"], expected.entropy, atol=5e-4)
    np.testing.assert_allclose(entry["distance"], expected.distance, atol=5e-3)
    assert "H " in view.html and "entropy" in view.html


def test_head_summaries_against_a_hand_computation():
    # Head 0, query 0: (0.5, 0.5, 0) -> entropy log 2, distance 0.5;
    # query 1: (0, 0, 1) -> 0 and 1; query 2 padded (left out).
    # Head 1: uniform rows -> entropy log 3; distances 1, 2/3, 1.
    weights = np.array(
        [
            [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],
            [[1 / 3] * 3] * 3,
        ]
    )
    summary = head_summaries(weights, query_mask=[True, True, False])
    np.testing.assert_allclose(summary.entropy, [np.log(2) / 2, np.log(3)])
    np.testing.assert_allclose(summary.distance, [(0.5 + 1) / 2, (1 + 2 / 3) / 2])
    batched = head_summaries(np.stack([weights, weights]), [[1, 1, 0], [1, 1, 0]])
    np.testing.assert_allclose(batched.entropy, summary.entropy)
    cross = head_summaries(np.full((1, 2, 4), 0.25))
    assert np.isnan(cross.distance).all()
    np.testing.assert_allclose(cross.entropy, [np.log(4)])


def test_alignment_view_of_beams_crops_each_to_its_tokens():
    weights = peaked(2, 5, 4)  # two beams, 5 steps, 4 source tokens
    targets = [["A", "B", "</s>"], ["A", "C", "D", "</s>"]]
    view = alignment_view(weights, list("wxyz"), targets, names=["best", "second"])
    first, second = view.payload["matrices"]
    assert (first["name"], first["targetTokens"]) == ("best", targets[0])
    assert first["entries"] == expected_entries(weights[:1, :3], 0.001, None)
    assert decode(second, (1, 4, 4)) == {
        (0, t, s): round(float(weights[1, t, s]), 3)
        for t in range(4)
        for s in range(4)
        if weights[1, t, s] >= 0.001
    }


def test_image_view_lays_queries_and_pooled_keys_on_the_image():
    layer = ka.layers.SelfAttention2D(channels_reduction=2, pool_keys=True)
    image = np.random.default_rng(0).uniform(size=(1, 4, 6, 8)).astype("float32")
    layer(image)
    collected = collect_attention(layer, image)
    view = image_view(collected, image[0, ..., :3])
    entry = view.payload["layers"][0]
    assert (entry["queryGrid"], entry["keyGrid"]) == ([4, 6], [2, 3])
    rgba = base64.b64decode(view.payload["image"]["rgba"])
    assert len(rgba) == 4 * 6 * 4
    # A picture bigger than the feature map, with its aspect.
    big = image_view(collected, np.zeros((40, 60), "uint8"))
    assert big.payload["layers"][0]["queryGrid"] == [4, 6]


# -- the document -----------------------------------------------------------------


def _views():
    weights = peaked(1, 2, 6, 6)
    return [
        head_view(weights, TOKENS),
        model_view({"a": weights, "b": weights}, TOKENS),
        alignment_view(weights[0, 0], TOKENS, TOKENS),
        image_view(peaked(1, 2, 16, 4), np.zeros((4, 4, 3))),
    ]


@pytest.mark.parametrize("index", range(4), ids=["head", "model", "alignment", "image"])
def test_documents_are_self_contained(index, tmp_path):
    view = _views()[index]
    assert isinstance(view, AttentionView)
    document = view.html
    assert document.startswith("<!DOCTYPE html>")
    assert "http://" not in document and "https://" not in document
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=", document)
    assert "<link" not in document and "@import" not in document
    assert "DecompressionStream" in document  # the scripts are inlined
    assert f"data-kind='{view.kind}'" in document
    path = view.save(tmp_path / "view.html")
    assert path.read_text(encoding="utf-8") == document
    shown = view._repr_html_()
    assert shown.startswith("<iframe srcdoc=") and "<script>" not in shown


def test_the_payload_cannot_close_its_script_element():
    view = head_view(np.full((1, 2, 2), 0.5), ["</script><b>", "&amp;"])
    assert view.html.count("</script>") == 2  # the JSON's and the code's
    assert "\\u003c/script\\u003e" in view.html


@pytest.mark.parametrize("index", range(4), ids=["head", "model", "alignment", "image"])
def test_png_export(index, tmp_path):
    view = _views()[index]
    path = view.save_png(tmp_path / "view.png", dpi=60)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert view.figure().axes


# -- errors -----------------------------------------------------------------------


def _error(function, *args, **kwargs):
    with pytest.raises(ValueError) as info:
        function(*args, **kwargs)
    return str(info.value)


def test_weights_of_the_wrong_rank():
    message = _error(head_view, np.zeros((6, 6)), TOKENS)
    assert "`attention` must have rank 3 or 4" in message
    assert "Received: attention.shape=(6, 6)" in message
    message = _error(model_view, {"enc": np.zeros((1, 1, 1, 6, 6))}, TOKENS)
    assert "`attention['enc']` must have rank 3 or 4" in message
    message = _error(alignment_view, np.zeros((1, 1, 6, 6)), TOKENS, TOKENS)
    assert "`weights` must have rank 2" in message and "(1, 1, 6, 6)" in message
    message = _error(image_view, np.zeros((16, 4)), np.zeros((4, 4)))
    assert "Received: attention.shape=(16, 4)" in message


def test_token_lists_of_the_wrong_length():
    message = _error(head_view, np.zeros((1, 2, 6, 6)), TOKENS[:5])
    assert "`tokens` must hold one token per query" in message
    assert "'attention' has 6 queries" in message and "len(tokens)=5" in message
    assert "source_tokens" in message  # the hint for cross-attention
    message = _error(head_view, np.zeros((1, 6, 4)), TOKENS, source_tokens=list("abc"))
    assert "one token per key" in message and "len(source_tokens)=3" in message
    message = _error(alignment_view, np.zeros((3, 4)), list("abc"), list("ABC"))
    assert "`source_tokens` must hold one token per column" in message
    assert "len(source_tokens)=3" in message
    message = _error(alignment_view, np.zeros((3, 4)), list("abcd"), list("ABCDE"))
    assert "`target_tokens` must hold 1 to 3 tokens" in message
    message = _error(head_view, np.zeros((1, 2, 2)), "ab")
    assert "`tokens` must be a list of tokens" in message


def test_no_attention_layer():
    message = _error(model_view, {}, TOKENS)
    assert "`attention` holds no attention layer" in message
    assert "Received: attention={}" in message
    message = _error(head_view, None, TOKENS)
    assert "`attention` must be an AttentionCollection" in message


def test_bad_options():
    weights = np.zeros((2, 1, 6, 6))
    assert "Received: example=2" in _error(head_view, weights, TOKENS, example=2)
    assert "Received: threshold=1.5" in _error(
        head_view, weights, TOKENS, threshold=1.5
    )
    assert "Received: top_k=0" in _error(head_view, weights, TOKENS, top_k=0)
    assert "Received: layer='nope'" in _error(head_view, weights, TOKENS, layer="nope")
    message = _error(image_view, np.zeros((1, 12, 12)), np.zeros((4, 4)))
    assert "cannot be laid out" in message and "4 x 4" in message
    message = _error(image_view, np.zeros((1, 4, 4)), np.zeros((2, 2, 2)))
    assert "`image` must have shape" in message
