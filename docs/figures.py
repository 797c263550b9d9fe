"""Draw the figures of the guide into `docs/img/` (run by `make docs`), and
the live view the guide embeds into `docs/views/` (`alignment_view`).

Every figure comes from the library's own layers, untrained or built on
small constructed inputs, except the alignment matrices of the Bahdanau and
Luong decoders, which train two tiny models to reverse 7 tokens (about 100
steps each). `docs/img/complexity.png` is not drawn here: it comes from a
full run of `examples/complexity.py` and is committed.

    PYTHONPATH=. python docs/figures.py                 # every figure
    PYTHONPATH=. python docs/figures.py --only pe sagan  # some of them
"""

import argparse
import functools
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import keras  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import keras_attention as ka  # noqa: E402
from keras_attention.visualization import plot_attention  # noqa: E402

IMG = pathlib.Path(__file__).resolve().parent / "img"
# The live views the pages embed (HTML, committed: small, self-contained).
VIEWS = pathlib.Path(__file__).resolve().parent / "views"
DPI = 80


def _save(fig, name):
    path = IMG / f"{name}.png"
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _heatmap(ax, weights, title, xlabel="key position", ylabel="query position"):
    image = ax.imshow(np.asarray(weights), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    return image


def soft_attention():
    """A query, six keys (= values) in the plane, the weights and the average."""
    angles = np.array([0.2, 1.0, 1.9, 2.9, 3.9, 5.2])
    radii = np.array([2.0, 2.2, 1.8, 2.1, 1.9, 2.0])
    keys = np.stack([radii * np.cos(angles), radii * np.sin(angles)], -1)
    keys = keys[None].astype("float32")  # (1, 6, 2)
    query = np.array([[1.2, 1.0]], "float32")
    layer = ka.layers.ScoredAttention(score="dot")
    output, weights = layer(query, keys, return_attention_scores=True)
    keys, weights, output = keys[0], np.asarray(weights[0]), np.asarray(output[0])

    fig, (ax_p, ax_w) = plt.subplots(1, 2, figsize=(8, 3.4))
    ax_p.scatter(keys[:, 0], keys[:, 1], s=2000 * weights + 20, c="C0", alpha=0.6)
    for n, (x, y) in enumerate(keys):
        ax_p.annotate(f"$k_{n + 1}$", (x, y), xytext=(6, 6), textcoords="offset points")
    q = query[0]
    ax_p.annotate("", q, (0, 0), arrowprops={"arrowstyle": "->", "color": "C3"})
    ax_p.text(*q, "  $q$", color="C3")
    ax_p.scatter(*output, marker="*", s=250, c="C2", zorder=3)
    ax_p.text(*output, "  output", color="C2", fontsize=8)
    ax_p.set_aspect("equal")
    ax_p.set_title("keys = values (size: weight), query, output", fontsize=9)
    ax_p.grid(alpha=0.3)
    ax_w.bar([f"$k_{n + 1}$" for n in range(6)], weights, color="C0")
    ax_w.set_ylim(0, 1)
    ax_w.set_title(r"$\alpha = \mathrm{softmax}(K q)$ sums to 1", fontsize=9)
    return _save(fig, "soft_attention")


def _score_inputs():
    rng = np.random.default_rng(0)
    query = rng.normal(size=(1, 5, 8)).astype("float32")
    key = rng.normal(size=(1, 7, 8)).astype("float32")
    key[0, 2] = 1.5 * query[0, 1]  # key 2 matches query 1 (and aligned ones)
    key[0, 5] = 1.5 * query[0, 3]
    return query, key


def score_functions():
    """Every score on the same query and key sequences, one panel each.

    Adding a score function (docs/architecture.md) adds its name and formula
    to `scores`; a score that cannot be built by name gets its object in
    `objects`."""
    keras.utils.set_random_seed(0)
    query, key = _score_inputs()
    scores = {
        "additive": r"$v^\top \tanh(W k + U q)$",
        "dot": r"$k^\top q$",
        "scaled_dot": r"$k^\top q / \sqrt{d}$",
        "general": r"$k^\top W q$",
        "cosine": r"$\beta \cos(k, q)$, $\beta=5$",
        "location": r"$(W_a q)_n$",
    }
    objects = {
        "location": ka.scores.Location(max_length=7),
        "cosine": ka.scores.Cosine(beta=5.0),
    }
    fig, axes = plt.subplots(1, len(scores), figsize=(14 / 6 * len(scores), 2.6))
    for ax, (name, formula) in zip(axes, scores.items(), strict=True):
        layer = ka.layers.ScoredAttention(score=objects.get(name, name))
        _, weights = layer(query, key, return_attention_scores=True)
        _heatmap(ax, weights[0], f"{name}\n{formula}")
        if ax is not axes[0]:
            ax.set_ylabel("")
    fig.suptitle(
        "the same 5 queries and 7 keys (key 2 = 1.5 x query 1, key 5 = 1.5 x query 3)",
        fontsize=9,
    )
    return _save(fig, "score_functions")


def hard_attention():
    keras.utils.set_random_seed(0)
    query, key = _score_inputs()
    fig, axes = plt.subplots(1, 2, figsize=(6, 2.8))
    for ax, probability in zip(axes, ("softmax", "hardmax"), strict=True):
        layer = ka.layers.ScoredAttention(score="scaled_dot", probability=probability)
        _, weights = layer(query, key, return_attention_scores=True)
        _heatmap(ax, weights[0], f'probability="{probability}"')
    return _save(fig, "hard_attention")


def key_value():
    """A soft dictionary lookup: keys are word vectors, values are prices."""
    rng = np.random.default_rng(1)
    words = ["apple", "bread", "cheese", "milk", "tea"]
    # Orthogonal keys of norm 2: no word vector is favoured by its length.
    keys = 2 * np.linalg.qr(rng.normal(size=(8, 5)))[0].T[None].astype("float32")
    values = np.array([[[1.2], [2.5], [7.0], [1.0], [4.0]]], "float32")
    query = keys[:, 2] + 0.3 * rng.normal(size=(1, 8)).astype("float32")  # ~cheese
    layer = ka.layers.ScoredAttention(score="dot")
    output, weights = layer(query, values, key=keys, return_attention_scores=True)

    fig, (ax_w, ax_v) = plt.subplots(1, 2, figsize=(8, 2.8))
    ax_w.bar(words, np.asarray(weights[0]), color="C0")
    ax_w.set_ylim(0, 1)
    ax_w.set_title("weights: a noisy 'cheese' query against the keys", fontsize=9)
    ax_v.bar(words, values[0, :, 0], color="C1", alpha=0.7, label="values")
    ax_v.axhline(
        float(output[0, 0]), color="C3", label="output = sum of weight x value"
    )
    ax_v.set_title("values (prices) and the attention output", fontsize=9)
    ax_v.legend(fontsize=7)
    return _save(fig, "key_value")


def _tokens(length=10, width=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1, length, width)).astype("float32")
    x = x + 2.0 * np.asarray(ka.layers.SinusoidalPositionEncoding()(x))
    return x


def multi_head():
    keras.utils.set_random_seed(2)
    x = 1.5 * _tokens()
    layer = ka.layers.MultiHeadSelfAttention(num_heads=4, key_dim=8)
    _, weights = layer(x, return_attention_scores=True)  # (1, 4, T, T)
    fig, axes = plt.subplots(1, 4, figsize=(11, 2.9))
    for head, ax in enumerate(axes):
        _heatmap(ax, weights[0, head], f"head {head + 1}")
    fig.suptitle(
        "MultiHeadSelfAttention(num_heads=4, key_dim=8), untrained: "
        "each head has its own projections, hence its own pattern",
        fontsize=9,
    )
    return _save(fig, "multi_head")


def self_attention():
    keras.utils.set_random_seed(0)
    x = _tokens(length=8, width=16)
    padding = np.array([[True] * 6 + [False] * 2])
    layer = ka.layers.MultiHeadSelfAttention(num_heads=1, key_dim=16)
    fig, axes = plt.subplots(1, 2, figsize=(6.5, 2.9))
    for ax, causal in zip(axes, (False, True), strict=True):
        _, weights = layer(
            x, query_mask=padding, use_causal_mask=causal, return_attention_scores=True
        )
        title = "causal + padding" if causal else "bidirectional + padding"
        _heatmap(ax, weights[0, 0], title)
    fig.suptitle("8 positions, the last 2 are padding", fontsize=9, y=1.04)
    return _save(fig, "self_attention")


def positional_encoding():
    x = np.zeros((1, 64, 64), "float32")
    pe = np.asarray(ka.layers.SinusoidalPositionEncoding()(x))[0]  # (T, D)
    fig, (ax_pe, ax_dot) = plt.subplots(1, 2, figsize=(9, 3.6))
    image = ax_pe.imshow(pe, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax_pe.set_xlabel("feature (even: sin, odd: cos)", fontsize=8)
    ax_pe.set_ylabel("position", fontsize=8)
    ax_pe.set_title("PE(pos, i), d = 64", fontsize=9)
    fig.colorbar(image, ax=ax_pe)
    similarity = pe @ pe.T / pe.shape[1]
    image = ax_dot.imshow(similarity, cmap="viridis", aspect="auto")
    ax_dot.set_title("PE(pos) . PE(pos') / d depends on pos - pos'", fontsize=9)
    ax_dot.set_xlabel("position pos'", fontsize=8)
    ax_dot.set_ylabel("position pos", fontsize=8)
    fig.colorbar(image, ax=ax_dot)
    return _save(fig, "positional_encoding")


def transformer():
    keras.utils.set_random_seed(0)
    source = _tokens(length=7, width=16, seed=1)
    target = _tokens(length=5, width=16, seed=2)
    source_mask = np.array([[True] * 5 + [False] * 2])
    encoder = ka.layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=32)
    decoder = ka.layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=32)
    memory, enc_w = encoder(
        source, padding_mask=source_mask, return_attention_scores=True
    )
    _, dec_w = decoder(
        target,
        memory,
        encoder_padding_mask=source_mask,
        return_attention_scores=True,
    )
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.9))
    _heatmap(axes[0], enc_w[0, 0], "encoder self-attention\n(2 padded sources)")
    _heatmap(axes[1], dec_w["self_attention"][0, 0], "decoder masked self-attention")
    _heatmap(
        axes[2],
        dec_w["cross_attention"][0, 0],
        "decoder cross-attention",
        xlabel="source position",
        ylabel="target position",
    )
    fig.suptitle(
        "head 1 of an untrained encoder block and decoder block", fontsize=9, y=1.08
    )
    return _save(fig, "transformer")


def _reversal_model(style, vocab, length, units=32):
    source = keras.Input((length,), dtype="int32")
    previous = keras.Input((length,), dtype="int32")
    embedding = keras.layers.Embedding(vocab, 16)
    memory = keras.layers.Bidirectional(keras.layers.GRU(16, return_sequences=True))(
        embedding(source)
    )
    if style == "bahdanau":
        cell = ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(units), ka.layers.BahdanauAttention(16)
        )
    else:
        cell = ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(units),
            ka.layers.LuongAttention("general"),
            style="luong",
        )
    outputs, alignments = ka.layers.AttentionRNNDecoder(cell)(
        embedding(previous), memory, return_alignments=True
    )
    logits = keras.layers.Dense(vocab)(outputs)
    return keras.Model([source, previous], logits), keras.Model(
        [source, previous], alignments
    )


@functools.cache
def _reversal_alignments(steps=100):
    """Two tiny decoders (Bahdanau, Luong) trained `steps` steps to reverse
    7 tokens: `(words, [(style, (7, 7) weights, train accuracy)])` for one
    example (trained once per run, for `alignment` and `alignment_view`)."""
    vocab, length, batch = 12, 7, 64  # tokens 2..11, 1 = start
    rng = np.random.default_rng(0)
    source = rng.integers(2, vocab, size=(steps * batch, length))
    target = source[:, ::-1]
    previous = np.concatenate([np.ones((len(source), 1), int), target[:, :-1]], 1)
    example = np.array([[2, 3, 4, 5, 6, 7, 8]])
    example_previous = np.concatenate([[[1]], example[:, ::-1][:, :-1]], 1)
    results = []
    for style in ("bahdanau", "luong"):
        keras.utils.set_random_seed(0)
        model, aligner = _reversal_model(style, vocab, length)
        model.compile(
            keras.optimizers.Adam(0.01),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        history = model.fit(
            [source, previous], target, batch_size=batch, epochs=1, verbose=0
        )
        weights = np.asarray(aligner([example, example_previous])[0])
        results.append((style, weights, history.history["accuracy"][-1]))
    return [f"t{n}" for n in example[0]], results


def alignment(steps=100):
    """Two tiny decoders learn to reverse 7 tokens; their alignment matrices."""
    words, results = _reversal_alignments(steps)
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4))
    for ax, (style, weights, accuracy) in zip(axes, results, strict=True):
        plot_attention(weights, words, words[::-1], ax=ax)
        ax.set_title(f"{style} (train acc. {accuracy:.2f})", fontsize=9, pad=24)
    fig.suptitle("alignment of a decoder trained 100 steps to reverse 7 tokens", y=0.02)
    return _save(fig, "alignment")


def alignment_view(steps=100):
    """The same two alignments as a live `alignment_view` (hover a cell),
    `docs/views/alignment.html`: committed (about 11 KB, self-contained)
    and embedded in the Bahdanau vs Luong page with an iframe."""
    from keras_attention.visualization import alignment_view as view_of

    words, results = _reversal_alignments(steps)
    view = view_of(
        np.stack([weights for _, weights, _ in results]),
        words,
        words[::-1],
        names=[f"{style} (train acc. {acc:.2f})" for style, _, acc in results],
        title="Alignment of a decoder trained 100 steps to reverse 7 tokens",
    )
    VIEWS.mkdir(parents=True, exist_ok=True)
    return view.save(VIEWS / "alignment.html")


def pointer():
    """Greedy pointing with chosen positions masked before the softmax."""
    keras.utils.set_random_seed(0)
    n = 6
    rng = np.random.default_rng(0)
    encoded = rng.normal(size=(1, n, 16)).astype("float32") * 2
    layer = ka.layers.PointerAttention(units=16)
    chosen = []
    rows = []
    for step in range(n):
        decoder_state = encoded[:, (step * 5) % n] + rng.normal(size=(1, 16)) * 0.5
        allowed = np.ones((1, n), bool)
        allowed[0, chosen] = False
        log_p = layer(decoder_state.astype("float32"), encoded, attention_mask=allowed)
        p = np.exp(np.asarray(log_p[0]))
        rows.append(p)
        chosen.append(int(np.argmax(p)))
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    _heatmap(ax, np.stack(rows), "p(pointer at step i)", "input position", "step i")
    for step, position in enumerate(chosen):
        ax.text(position, step, "x", ha="center", va="center", color="red")
    ax.set_title("pointer distributions, x = chosen\n(chosen inputs get 0)", fontsize=9)
    return _save(fig, "pointer")


def _digit():
    """An 8x8 digit drawn by hand (a '3'), upsampled to 16x16."""
    rows = [
        "..####..",
        ".#....#.",
        "......#.",
        "...###..",
        "......#.",
        "......#.",
        ".#....#.",
        "..####..",
    ]
    image = np.array([[c == "#" for c in row] for row in rows], "float32")
    return np.kron(image, np.ones((2, 2), "float32"))


def sagan():
    keras.utils.set_random_seed(4)
    image = _digit()  # (16, 16)
    rng = np.random.default_rng(0)
    channels = 16
    # Features: one random direction for ink, another for paper.
    ink = rng.normal(size=channels)
    paper = rng.normal(size=channels)
    x = image[..., None] * ink + (1 - image[..., None]) * paper
    x = 1.5 * x[None].astype("float32")
    layer = ka.layers.SelfAttention2D(channels_reduction=2, pool_keys=False)
    _, beta = layer(x, return_attention_scores=True)  # (1, 256, 256)
    queries = [(1, 6), (9, 13), (8, 4)]  # (row, col): ink, ink, paper
    fig, axes = plt.subplots(1, 1 + len(queries), figsize=(10, 2.8))
    axes[0].imshow(image, cmap="gray_r")
    axes[0].set_title("input (16x16)", fontsize=9)
    for ax, (row, col) in zip(axes[1:], queries, strict=True):
        attention = np.asarray(beta[0, row * 16 + col]).reshape(16, 16)
        ax.imshow(attention, cmap="viridis")
        ax.plot(col, row, "r+", markersize=12, markeredgewidth=2)
        ax.set_title(f"where pixel ({row}, {col}) attends", fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    return _save(fig, "sagan")


# -- attention variants (docs/guide/attention-variants.md) ----------------------
#
# Every pattern below is the library's own modifier evaluated on index grids
# from `ka.ops.position_indices`, exactly as the attention paths call it, so
# the pictures cannot drift from the code.

_BLOCKED, _ALLOWED, _ADDED = "#eeeeee", "#3f51b5", "#ff9800"


def _pattern(modifier, queries=16, keys=16, query_start=0, heads=1, batch=1):
    """A mask modifier on `(batch, heads, queries, keys)` index grids; the
    queries sit at absolute positions `query_start + [0, queries)`."""
    indices = ka.ops.position_indices(
        batch, heads, query_start + np.arange(queries), np.arange(keys)
    )
    mask = keras.ops.convert_to_numpy(modifier(*indices))
    return np.broadcast_to(mask, (batch, heads, queries, keys))


def _scores(modifier, score, queries, keys, query_start=0, heads=1):
    """A score modifier applied to `score` (broadcast to the grid)."""
    indices = ka.ops.position_indices(
        1, heads, query_start + np.arange(queries), np.arange(keys)
    )
    shape = (1, heads, queries, keys)
    score = keras.ops.broadcast_to(keras.ops.convert_to_tensor(score, "float32"), shape)
    return keras.ops.convert_to_numpy(modifier(score, *indices))[0]


def _mask_panel(
    ax, mask, title, query_start=0, base=None, labels=None, xlabel="key position j"
):
    """A boolean `(T, S)` grid: allowed cells indigo; with `base`, the cells
    that `mask` adds to `base` orange."""
    mask = np.asarray(mask, bool)
    kinds = mask.astype(int)
    if base is not None:
        kinds = np.where(mask & ~np.asarray(base, bool), 2, kinds)
    colors = ListedColormap([_BLOCKED, _ALLOWED, _ADDED])
    t, s = mask.shape
    ax.imshow(
        kinds,
        cmap=colors,
        vmin=0,
        vmax=2,
        extent=(-0.5, s - 0.5, query_start + t - 0.5, query_start - 0.5),
        interpolation="nearest",
    )
    if max(t, s) <= 32:  # cell borders, where cells are large enough
        ax.set_xticks(np.arange(-0.5, s, 1), minor=True)
        ax.set_yticks(np.arange(query_start - 0.5, query_start + t, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
    ax.tick_params(labelsize=7)
    step = 4 if max(t, s) <= 32 else 16
    ax.set_xticks(np.arange(0, s, step))
    ax.set_yticks(np.arange(query_start, query_start + t, step if t > 4 else 1))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel("query position i", fontsize=8)
    if labels:
        patches = [
            Patch(color=c, label=label)
            for c, label in zip((_ALLOWED, _ADDED), labels, strict=True)
        ]
        ax.legend(handles=patches, fontsize=7, loc="upper right", framealpha=0.9)


def _mask_figure(panels, width=3.1, height=3.2):
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height))
    for ax, panel in zip(np.atleast_1d(axes), panels, strict=True):
        _mask_panel(ax, **panel)
    fig.tight_layout()
    return fig


def _variant_causal():
    km = ka.modifiers
    fig = _mask_figure(
        [
            dict(
                mask=_pattern(km.CausalMask())[0, 0], title="CausalMask(), T = S = 16"
            ),
            dict(
                mask=_pattern(km.CausalMask(), queries=4, query_start=12)[0, 0],
                query_start=12,
                title="4 queries at positions 12-15\n(a cache): bottom-right",
            ),
        ],
    )
    return _save(fig, "variant_causal")


def _variant_sliding_window():
    km = ka.modifiers
    fig = _mask_figure(
        [
            dict(mask=_pattern(km.SlidingWindow(4))[0, 0], title="SlidingWindow(4)"),
            dict(
                mask=_pattern(km.SlidingWindow(4, causal=False))[0, 0],
                title="SlidingWindow(4, causal=False)",
            ),
        ],
    )
    return _save(fig, "variant_sliding_window")


def _variant_sinks():
    km = ka.modifiers
    window = km.SlidingWindow(4)
    fig = _mask_figure(
        [
            dict(
                mask=_pattern(km.AttentionSinks(2, window))[0, 0],
                base=_pattern(window)[0, 0],
                title="AttentionSinks(2, SlidingWindow(4))",
                labels=["the window", "the sinks"],
            )
        ],
        width=3.6,
        height=3.6,
    )
    return _save(fig, "variant_sinks")


def _variant_prefix_lm():
    km = ka.modifiers
    prefix = km.PrefixLM(np.array([3, 10]))  # one prefix length per example
    masks = _pattern(prefix, batch=2)[:, 0]
    causal = _pattern(km.CausalMask())[0, 0]
    fig = _mask_figure(
        [
            dict(
                mask=masks[b],
                base=causal,
                title=f"PrefixLM([3, 10]), example {b} (P = {p})",
                labels=["causal", "the prefix"],
            )
            for b, p in ((0, 3), (1, 10))
        ],
    )
    return _save(fig, "variant_prefix_lm")


def _segment_ids():
    return np.array([[0] * 5 + [1] * 7 + [2] * 4])


def _variant_segments():
    km = ka.modifiers
    segments = km.SegmentMask(_segment_ids())
    fig = _mask_figure(
        [
            dict(mask=_pattern(segments)[0, 0], title="SegmentMask(ids)"),
            dict(
                mask=_pattern(segments & km.CausalMask())[0, 0],
                title="SegmentMask(ids) & CausalMask()",
            ),
        ],
    )
    fig.suptitle("ids = [0]*5 + [1]*7 + [2]*4: three sequences packed", fontsize=9)
    fig.tight_layout()
    return _save(fig, "variant_segments")


def _variant_block_local_2d():
    km = ka.modifiers
    size, pixel = 12, (6, 5)  # a 12 x 12 image; the query pixel (row, col)
    query = pixel[0] * size + pixel[1]
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6))
    for ax, causal in zip(axes[:2], (True, False), strict=True):
        modifier = km.BlockLocal2D(size, (4, 4), (2, 2), causal=causal)
        row = _pattern(modifier, queries=1, keys=size * size, query_start=query)
        image = row[0, 0, 0].reshape(size, size).astype(int)
        image[pixel] = 2
        colors = ListedColormap([_BLOCKED, _ALLOWED, "#e53935"])
        ax.imshow(image, cmap=colors, vmin=0, vmax=2)
        ax.add_patch(
            Rectangle((3.5, 3.5), 4, 4, fill=False, edgecolor="black", linewidth=1.5)
        )
        ax.set_xticks(np.arange(-0.5, size, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, size, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.5)
        ax.tick_params(which="both", length=0, labelsize=7)
        ax.set_xlabel("column", fontsize=8)
        ax.set_ylabel("row", fontsize=8)
        ax.set_title(
            f"causal={causal}: what pixel {pixel} (red) sees\n"
            "query block 4x4 (black), flange 2 pixels",
            fontsize=9,
        )
    full = _pattern(
        km.BlockLocal2D(size, (4, 4), (2, 2)), queries=size * size, keys=size * size
    )
    _mask_panel(axes[2], full[0, 0], "the whole mask, raster order (144 x 144)")
    fig.suptitle(
        "BlockLocal2D(12, query_block=(4, 4), memory_flange=(2, 2))", fontsize=9
    )
    fig.tight_layout()
    return _save(fig, "variant_block_local_2d")


def _variant_alibi():
    km = ka.modifiers
    heads, length = 4, 16
    zeros = np.zeros((1, 1, 1, 1), "float32")
    causal = _pattern(km.CausalMask())[0, 0]
    rows = (
        ("ALiBi(4) + CausalMask()", km.ALiBi(heads), causal),
        ("ALiBi(4, symmetric=True)", km.ALiBi(heads, symmetric=True), None),
    )
    fig, axes = plt.subplots(2, heads, figsize=(10, 5.4))
    slopes = ka.ops.alibi_slopes(heads)
    vmin = -slopes[0] * (length - 1)
    for (label, modifier, mask), ax_row in zip(rows, axes, strict=True):
        bias = _scores(modifier, zeros, length, length, heads=heads)  # (N, T, S)
        for head, ax in enumerate(ax_row):
            shown = bias[head] if mask is None else np.where(mask, bias[head], np.nan)
            image = ax.imshow(shown, cmap="viridis", vmin=vmin, vmax=0.0)
            ax.set_title(
                f"{label}\nhead {head}, slope 1/{round(1 / slopes[head])}", fontsize=8
            )
            ax.tick_params(labelsize=6)
    fig.colorbar(image, ax=axes, shrink=0.8, label="bias added to the score")
    return _save(fig, "variant_alibi")


def _variant_softcap():
    cap = ka.modifiers.SoftCap(50.0)
    score = np.linspace(-150, 150, 301, dtype="float32")[None, None, None]
    capped = _scores(cap, score, 1, score.shape[-1])[0, 0]
    fig, ax = plt.subplots(figsize=(4.2, 3.0))
    ax.plot(score[0, 0, 0], score[0, 0, 0], "--", color="grey", label="no cap")
    ax.plot(score[0, 0, 0], capped, color=_ALLOWED, label="SoftCap(50.0)")
    for y in (-50, 50):
        ax.axhline(y, color="grey", linewidth=0.5)
    ax.set_ylim(-80, 80)
    ax.set_xlabel("score s", fontsize=8)
    ax.set_ylabel("modified score", fontsize=8)
    ax.set_title("50 tanh(s / 50): linear near 0, bounded by 50", fontsize=9)
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    return _save(fig, "variant_softcap")


def _bucket_layer(bidirectional):
    """A T5 bias whose table holds each bucket's own number: its output is
    the bucket map."""
    layer = ka.modifiers.RelativePositionBias(1, bidirectional=bidirectional)
    layer.build()
    layer.table.assign(np.arange(32, dtype="float32")[:, None])
    return layer


def _variant_t5():
    fig, (ax_line, ax_map) = plt.subplots(1, 2, figsize=(9, 3.4))
    zeros = np.zeros((1, 1, 1, 1), "float32")
    relative = np.arange(-160, 161)  # key - query: a query at 160, keys 0..320
    for bidirectional, style in ((True, "-"), (False, "--")):
        buckets = _scores(_bucket_layer(bidirectional), zeros, 1, 321, query_start=160)
        ax_line.step(
            relative, buckets[0, 0], style, where="mid", label=f"{bidirectional=}"
        )
    ax_line.axvline(0, color="grey", linewidth=0.5)
    ax_line.set_xlabel("relative position j - i", fontsize=8)
    ax_line.set_ylabel("bucket", fontsize=8)
    ax_line.set_title("32 buckets, max_distance=128", fontsize=9)
    ax_line.legend(fontsize=7)
    ax_line.tick_params(labelsize=7)
    buckets = _scores(_bucket_layer(True), zeros, 32, 32)[0]
    image = ax_map.imshow(buckets, cmap="tab20b")
    ax_map.set_title("bucket(j - i) for T = S = 32 (bidirectional)", fontsize=9)
    ax_map.set_xlabel("key position j", fontsize=8)
    ax_map.set_ylabel("query position i", fontsize=8)
    ax_map.tick_params(labelsize=7)
    fig.colorbar(image, ax=ax_map, label="bucket")
    fig.tight_layout()
    return _save(fig, "variant_t5")


def _variant_rope():
    rng = np.random.default_rng(0)
    head_dim, length = 32, 48
    q, k = rng.normal(size=(2, head_dim)).astype("float32")

    def rotated(x, positions, factor=1.0):
        x = np.broadcast_to(x, (1, len(positions), 1, head_dim))
        out = ka.ops.rotary_embedding(x, positions, scaling_factor=factor)
        return keras.ops.convert_to_numpy(out)[0, :, 0]

    positions = np.arange(length)
    scores = rotated(q, positions) @ rotated(k, positions).T
    fig, (ax_map, ax_line) = plt.subplots(1, 2, figsize=(9, 3.4))
    image = ax_map.imshow(scores, cmap="RdBu_r")
    ax_map.set_title("RoPE(q, i) . RoPE(k, j): constant along diagonals", fontsize=9)
    ax_map.set_xlabel("key position j", fontsize=8)
    ax_map.set_ylabel("query position i", fontsize=8)
    ax_map.tick_params(labelsize=7)
    fig.colorbar(image, ax=ax_map)
    offsets = np.arange(160)
    for factor in (1.0, 4.0):
        line = rotated(q, offsets, factor) @ rotated(q, np.zeros(1), factor)[0]
        ax_line.plot(offsets, line, label=f"rope_scaling_factor={factor:g}")
    ax_line.set_xlabel("offset i - j", fontsize=8)
    ax_line.set_ylabel("score", fontsize=8)
    ax_line.set_title("RoPE(q, i) . RoPE(q, j) as a function of i - j", fontsize=9)
    ax_line.legend(fontsize=7)
    ax_line.tick_params(labelsize=7)
    fig.tight_layout()
    return _save(fig, "variant_rope")


def _variant_gqa():
    heads = 8
    fig, axes = plt.subplots(1, 3, figsize=(11, 2.4))
    for ax, groups in zip(axes, (8, 2, 1), strict=True):
        # Key/value head g holds the number g; repeated as the attention does.
        kv = np.arange(groups, dtype="float32").reshape(1, 1, groups, 1)
        used = ka.ops.repeat_key_value_heads(kv, heads // groups)
        used = keras.ops.convert_to_numpy(used)[0, 0, :, 0].astype(int)
        kv_x = (np.arange(groups) + 0.5) * heads / groups - 0.5
        for n, g in enumerate(used):
            ax.plot([n, kv_x[g]], [1, 0], color="grey", linewidth=0.8, zorder=1)
        ax.scatter(np.arange(heads), np.ones(heads), s=260, marker="s", c="C0")
        ax.scatter(kv_x, np.zeros(groups), s=260, marker="s", c="C1")
        for n in range(heads):
            ax.text(n, 1, str(n), ha="center", va="center", color="white", fontsize=7)
        for g in range(groups):
            ax.text(kv_x[g], 0, str(g), ha="center", va="center", fontsize=7)
        name = {8: "multi-head", 2: "grouped-query", 1: "multi-query"}[groups]
        ax.set_title(f"{name}: N = 8 query heads, G = {groups}", fontsize=9)
        ax.set_ylim(-0.4, 1.4)
        ax.set_xlim(-0.8, heads - 0.2)
        ax.set_yticks([0, 1], ["key/value\nheads", "query\nheads"], fontsize=8)
        ax.set_xticks([])
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
    fig.tight_layout()
    return _save(fig, "variant_gqa")


def _every_4th(batch, head, query, key):
    """A plain function: keys a multiple of 4 positions before (or after)."""
    return (query - key) % 4 == 0


def _variant_combine():
    km = ka.modifiers
    segments = km.SegmentMask(_segment_ids())
    strided = km.SlidingWindow(4) | (km.CausalMask() & _every_4th)
    fig = _mask_figure(
        [
            dict(
                mask=_pattern(km.PrefixLM(5) & km.SlidingWindow(4, causal=False))[0, 0],
                title="PrefixLM(5)\n& SlidingWindow(4, causal=False)",
            ),
            dict(
                mask=_pattern(segments & km.SlidingWindow(3))[0, 0],
                title="SegmentMask(ids)\n& SlidingWindow(3)",
            ),
            dict(
                mask=_pattern(strided)[0, 0],
                title="SlidingWindow(4)\n| (CausalMask() & every_4th)",
            ),
        ],
    )
    return _save(fig, "variant_combine")


def _variant_blocks():
    """Which blocks the chunked path computes: the key blocks inside the
    modifier's `key_range`, and of those only the ones with a visible pair."""
    km = ka.modifiers
    length, chunk = 64, 8
    blocks = length // chunk
    panels = (
        ("SlidingWindow(12)", km.SlidingWindow(12)),
        (
            "AttentionSinks(4, SlidingWindow(12))",
            km.AttentionSinks(4, km.SlidingWindow(12)),
        ),
    )
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 4.1))
    for ax, (title, modifier) in zip(axes, panels, strict=True):
        mask = _pattern(modifier, queries=length, keys=length)[0, 0]
        _mask_panel(ax, mask, title)
        computed = skipped = 0
        for i in range(blocks):
            lo, hi = ka.ops.modifier_calls.key_range(
                modifier, i * chunk, (i + 1) * chunk
            )
            first, stop = max(int(lo), 0) // chunk, -(-min(int(hi), length) // chunk)
            for j in range(blocks):
                block = mask[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk]
                if not first <= j < stop:
                    style = dict(facecolor="none", edgecolor="none")
                elif block.any():
                    style = dict(facecolor="none", edgecolor="black", linewidth=1.2)
                    computed += 1
                else:
                    style = dict(facecolor="#ff9800", alpha=0.35, edgecolor="#ff9800")
                    skipped += 1
                ax.add_patch(
                    Rectangle((j * chunk - 0.5, i * chunk - 0.5), chunk, chunk, **style)
                )
        ax.set_title(f"{title}\n{computed} computed, {skipped} skipped", fontsize=9)
    fig.suptitle(
        "the chunked path, L = 64 in 8 x 8 blocks: computed (black), tested and "
        "skipped (orange), never visited (the rest)",
        fontsize=9,
    )
    fig.tight_layout()
    return _save(fig, "variant_blocks")


def attention_variants():
    """The mask and bias patterns of the built-in modifiers, RoPE and GQA."""
    paths = [
        _variant_causal(),
        _variant_sliding_window(),
        _variant_sinks(),
        _variant_prefix_lm(),
        _variant_segments(),
        _variant_block_local_2d(),
        _variant_alibi(),
        _variant_softcap(),
        _variant_t5(),
        _variant_rope(),
        _variant_gqa(),
        _variant_combine(),
        _variant_blocks(),
    ]
    return f"{paths[0].parent}/variant_*.png ({len(paths)} figures)"


def ntm_addressing():
    """The four addressing steps of a Neural Turing Machine head, one panel
    each (`ka.ops.content_weights`, `interpolate`, `circular_shift`,
    `sharpen`), on a memory of 16 rows whose row 5 matches the key."""
    rng = np.random.default_rng(0)
    n, m = 16, 6
    memory = rng.normal(size=(1, n, m)).astype("float32")
    key = (memory[:, 5:6] + 0.3 * rng.normal(size=(1, 1, m))).astype("float32")
    previous = np.zeros((1, 1, n), "float32")
    previous[..., 10] = 1.0  # last step's focus
    one = np.ones((1, 1), "float32")
    content = ka.ops.content_weights(memory, key, 4.0 * one)
    gated = ka.ops.interpolate(content, previous, 0.5 * one)
    shift = np.array([[[0.05, 0.15, 0.8]]], "float32")  # mostly +1
    shifted = ka.ops.circular_shift(gated, shift)
    sharpened = ka.ops.sharpen(shifted, 4.0 * one)
    panels = [
        (content, "content $w^c$ ($\\beta=4$, key ~ row 5)"),
        (gated, "gated $w^g$ ($g=0.5$, $w_{t-1}$ at row 10)"),
        (shifted, "shifted $\\tilde w$ ($s$ mostly +1)"),
        (sharpened, "sharpened $w$ ($\\gamma=4$)"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(13, 2.6), sharey=True)
    for ax, (weights, title) in zip(axes, panels, strict=True):
        ax.bar(np.arange(n), np.asarray(weights)[0, 0], color="C0")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("memory row $i$", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("weight", fontsize=8)
    return _save(fig, "ntm_addressing")


def act_halting():
    """ACT (`ka.ops.halting_step`) on made-up halting probabilities of six
    positions over T = 6 steps: h^n, and the update weights p^n they give
    (each column sums to 1; the halting step holds the remainder R)."""
    steps = 6
    h = np.array(
        [[0.9, 0.3, 0.5, 0.2, 0.1, 0.05]] * steps, "float32"
    ).T  # (positions, steps): a constant h per position
    h = h * np.linspace(1.0, 1.3, steps)[None]  # growing a little per step
    h = np.minimum(h, 0.95)[None]  # (1, T_positions, steps)
    state = ka.ops.initial_halting_state(np.ones((1, h.shape[1]), bool))
    weights = []
    for n in range(steps):
        state, w, _ = ka.ops.halting_step(state, h[..., n], 0.99, n == steps - 1)
        weights.append(np.asarray(w)[0])
    weights = np.stack(weights)  # (steps, positions)
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.2))
    for ax, values, title in (
        (axes[0], h[0].T, "halting probability $h^n$"),
        (axes[1], weights, "update weight $p^n$ (0 after halting)"),
    ):
        image = _heatmap(ax, values, title, "position", "step $n$")
        ax.set_yticks(range(steps), range(1, steps + 1))
    n_steps = np.asarray(state.steps)[0]
    remainders = np.asarray(state.remainders)[0]
    for i, (n, r) in enumerate(zip(n_steps, remainders, strict=True)):
        axes[1].text(i, n - 1, f"R={r:.2f}", ha="center", va="center",
                     fontsize=7, color="w")  # fmt: skip
    fig.colorbar(image, ax=axes, fraction=0.03)
    return _save(fig, "act_halting")


def local_attention(queries=12, keys=20, window=3):
    """local-m and local-p weights of the library's own ops, random scores."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(1, queries, keys)).astype("float32")
    band = ka.ops.band_mask(queries, keys, window)
    local_m = ka.ops.masked_softmax(scores, band[None])
    # A predicted alignment that runs ahead of t and skips source positions.
    predicted = (keys - 1) * np.linspace(0.05, 0.95, queries) ** 1.3
    positions, _ = ka.ops.source_positions(None, keys)
    local_p = ka.ops.local_predictive_weights(
        scores, predicted[None].astype("float32"), positions, window
    )
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    _heatmap(axes[0], local_m[0], f"local-m: p_t = t, D = {window}",
             "source position s", "target step t")  # fmt: skip
    _heatmap(axes[1], local_p[0], f"local-p: predicted p_t (dots), D = {window}",
             "source position s", "target step t")  # fmt: skip
    axes[1].plot(predicted, np.arange(queries), "w.", markersize=5)
    fig.tight_layout()
    return _save(fig, "local_attention")


def hierarchical(steps=120, batch=64):
    """A tiny HAN learns which word decides the class; its two attentions."""
    vocab, sentences, words = 20, 4, 6  # 2 = "good", 3 = "bad", 4..19 filler
    rng = np.random.default_rng(0)
    docs = rng.integers(4, vocab, size=(steps * batch, sentences, words))
    labels = rng.integers(0, 2, size=len(docs))
    rows, cols = (
        rng.integers(0, sentences, len(docs)),
        rng.integers(0, words, len(docs)),
    )
    docs[np.arange(len(docs)), rows, cols] = np.where(labels == 1, 2, 3)
    docs[:, -1, 4:] = 0  # the last sentence is shorter: padding
    keras.utils.set_random_seed(0)
    model = ka.models.HierarchicalAttentionNetwork(
        vocab, 2, embedding_dim=8, word_units=8, sentence_units=8, attention_units=8
    )
    model.compile(
        keras.optimizers.Adam(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(docs, labels, batch_size=batch, epochs=1, verbose=0)
    example = rng.integers(4, vocab, size=(1, sentences, words))
    example[0, 2, 1] = 2
    example[0, -1, 4:] = 0
    result = model.explain(example)
    fig, axes = plt.subplots(
        1, 2, figsize=(6.4, 2.6), gridspec_kw=dict(width_ratios=[words, 1.4])
    )
    names = {0: "pad", 2: "good", 3: "bad"}
    _heatmap(axes[0], result.word_weights[0], "word weights (per sentence)",
             "word", "sentence")  # fmt: skip
    for (i, j), token in np.ndenumerate(example[0]):
        axes[0].text(j, i, names.get(int(token), str(token)), ha="center",
                     va="center", fontsize=7, color="w")  # fmt: skip
    _heatmap(axes[1], np.asarray(result.sentence_weights)[0][:, None],
             "sentence\nweights", "", "")  # fmt: skip
    axes[1].set_xticks([])
    for ax in axes:
        ax.set_yticks(range(sentences))
    axes[0].set_xticks(range(words))
    accuracy = history.history["accuracy"][-1]
    fig.suptitle(f"HAN trained {steps} steps (train acc. {accuracy:.2f})",
                 y=-0.06, fontsize=9)  # fmt: skip
    return _save(fig, "hierarchical")


def image_transformer():
    """What one pixel of a 12 x 12 image sees: full causal attention, local
    1D and local 2D (the Image Transformer's two local attentions)."""
    km = ka.modifiers
    size, pixel = 12, (6, 5)
    query = pixel[0] * size + pixel[1]
    panels = (
        ("full causal: every earlier pixel", km.CausalMask()),
        ("BlockLocal1D(24, 24): block of 24\n+ 24 earlier positions",
         km.BlockLocal1D(24, 24)),
        ("BlockLocal2D(12, (4, 4), (2, 2)): block 4x4\n+ 2 rows above, 2 cols aside",
         km.BlockLocal2D(size, (4, 4), (2, 2))),
    )  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.7))
    colors = ListedColormap([_BLOCKED, _ALLOWED, "#e53935"])
    for ax, (title, modifier) in zip(axes, panels, strict=True):
        row = _pattern(modifier, queries=1, keys=size * size, query_start=query)
        image = row[0, 0, 0].reshape(size, size).astype(int)
        image[pixel] = 2
        ax.imshow(image, cmap=colors, vmin=0, vmax=2)
        ax.set_xticks(np.arange(-0.5, size, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, size, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.5)
        ax.tick_params(which="both", length=0, labelsize=7)
        ax.set_xlabel("column", fontsize=8)
        ax.set_ylabel("row", fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"what pixel {pixel} (red) attends to, raster order", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return _save(fig, "image_transformer_masks")


def long_document_masks():
    """Liu et al. (2018)'s decoder attentions over 24 positions: full causal,
    the two local variants in blocks of 6, and memory-compressed attention
    with f = 3 drawn over the memory it reads (`k_0`, then the slots)."""
    km = ka.modifiers
    length, block, factor = 24, 6, 3

    def grid(modifier):
        return _pattern(modifier, queries=length, keys=length)[0, 0]

    compressed = ka.ops.memory_compression_mask(
        length, length, factor, use_causal_mask=True
    )
    compressed = keras.ops.convert_to_numpy(compressed)[0]  # (T, 1 + S / f)
    fig = _mask_figure(
        [
            dict(mask=grid(km.CausalMask()), title="full causal attention"),
            dict(
                mask=grid(km.BlockLocal1D(block, 0)),
                title="local, within the block\nBlockLocal1D(6, 0)",
            ),
            dict(
                mask=grid(km.BlockLocal1D(block, block)),
                title="local_mask_right: + the previous block\nBlockLocal1D(6, 6)",
            ),
            dict(
                mask=compressed,
                title="memory-compressed, f = 3, causal:\nover the compressed memory",
                xlabel="memory: k_0, slots",
            ),
        ],
        height=3.4,
    )
    local_axes, memory_ax = fig.axes[1:3], fig.axes[3]
    for ax in local_axes:  # the block boundaries
        for edge in range(block, length, block):
            ax.axhline(edge - 0.5, color="black", linewidth=0.6)
            ax.axvline(edge - 0.5, color="black", linewidth=0.6)
    slots = compressed.shape[1] - 1
    memory_ax.set_aspect("auto")  # a slot is as wide as the f keys it sums
    memory_ax.set_xticks(
        np.arange(1 + slots), ["$k_0$"] + [f"$s_{j}$" for j in range(slots)]
    )
    memory_ax.axvline(0.5, color="black", linewidth=0.6)
    fig.tight_layout()
    return _save(fig, "long_document_masks")


FIGURES = {
    "soft": soft_attention,
    "scores": score_functions,
    "hard": hard_attention,
    "kv": key_value,
    "multihead": multi_head,
    "self": self_attention,
    "pe": positional_encoding,
    "transformer": transformer,
    "alignment": alignment,
    "alignment_view": alignment_view,
    "local": local_attention,
    "hierarchical": hierarchical,
    "pointer": pointer,
    "sagan": sagan,
    "variants": attention_variants,
    "ntm": ntm_addressing,
    "act": act_halting,
    "image_transformer": image_transformer,
    "long_documents": long_document_masks,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(FIGURES), default=None)
    parser.add_argument(
        "--output-dir", default=None, help="instead of docs/img and docs/views"
    )
    args = parser.parse_args(argv)
    global IMG, VIEWS
    if args.output_dir:
        IMG = VIEWS = pathlib.Path(args.output_dir)
    total = time.perf_counter()
    for name in args.only or FIGURES:
        start = time.perf_counter()
        path = FIGURES[name]()
        print(f"{path}: {time.perf_counter() - start:.1f} s", flush=True)
    print(f"figures: {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
