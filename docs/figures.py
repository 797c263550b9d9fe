"""Draw the figures of the guide into `docs/img/` (run by `make docs`).

Every figure comes from the library's own layers, untrained or built on
small constructed inputs, except the alignment matrices of the Bahdanau and
Luong decoders, which train two tiny models to reverse 7 tokens (about 100
steps each). `docs/img/complexity.png` is not drawn here: it comes from a
full run of `examples/complexity.py` and is committed.

    PYTHONPATH=. python docs/figures.py                 # every figure
    PYTHONPATH=. python docs/figures.py --only pe sagan  # some of them
"""

import argparse
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

import keras_attention as ka  # noqa: E402
from keras_attention.visualization import plot_attention  # noqa: E402

IMG = pathlib.Path(__file__).resolve().parent / "img"
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
    """The six scores on the same query and key sequences."""
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
    fig, axes = plt.subplots(1, 6, figsize=(14, 2.6))
    for ax, (name, formula) in zip(axes, scores.items(), strict=True):
        score = name
        if name == "location":
            score = ka.scores.Location(max_length=7)
        elif name == "cosine":
            score = ka.scores.Cosine(beta=5.0)
        layer = ka.layers.ScoredAttention(score=score)
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


def alignment(steps=100):
    """Two tiny decoders learn to reverse 7 tokens; their alignment matrices."""
    vocab, length, batch = 12, 7, 64  # tokens 2..11, 1 = start
    rng = np.random.default_rng(0)
    source = rng.integers(2, vocab, size=(steps * batch, length))
    target = source[:, ::-1]
    previous = np.concatenate([np.ones((len(source), 1), int), target[:, :-1]], 1)
    example = np.array([[2, 3, 4, 5, 6, 7, 8]])
    example_previous = np.concatenate([[[1]], example[:, ::-1][:, :-1]], 1)
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4))
    for ax, style in zip(axes, ("bahdanau", "luong"), strict=True):
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
        weights = aligner([example, example_previous])[0]
        words = [f"t{n}" for n in example[0]]
        plot_attention(weights, words, words[::-1], ax=ax)
        accuracy = history.history["accuracy"][-1]
        ax.set_title(f"{style} (train acc. {accuracy:.2f})", fontsize=9, pad=24)
    fig.suptitle("alignment of a decoder trained 100 steps to reverse 7 tokens", y=0.02)
    return _save(fig, "alignment")


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
    "pointer": pointer,
    "sagan": sagan,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(FIGURES), default=None)
    parser.add_argument("--output-dir", default=None, help="instead of docs/img")
    args = parser.parse_args(argv)
    global IMG
    if args.output_dir:
        IMG = pathlib.Path(args.output_dir)
    total = time.perf_counter()
    for name in args.only or FIGURES:
        start = time.perf_counter()
        path = FIGURES[name]()
        print(f"{path}: {time.perf_counter() - start:.1f} s", flush=True)
    print(f"figures: {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
