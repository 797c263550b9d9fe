"""Title: Planar convex hulls with a pointer network
Description: a pointer network points, one after the other, to the vertices of
the convex hull of n random points of the unit square (Vinyals et al., 2015,
Table 1: 72.6% exact match and 99.9% area coverage at n=50).

Input position 0 is a special "end" element (features `(0, 0, 1)`); points
are positions 1..n (features `(x, y, 0)`). The target is the hull, counter-
clockwise, starting from its lowest-index vertex, then the end position,
padded with the end position to n+1 steps. The model's `end_position=0` makes
the end absorbing: once pointed to, it is the only choice, with probability 1,
so padding adds nothing to the loss. Ground truth comes from
`scipy.spatial.ConvexHull`.

Reported on 10,000 fresh point sets: exact match (the vertex sequence up to the
end equals the target) and area coverage (area of the predicted polygon over
the true hull's, 0 when the prediction is not a simple polygon of at least
three vertices), averaged.

    python examples/structured/pointer_convex_hull.py --n 10 --output-dir outputs/hull10

Measured at n=10 (mean hull size 6.0), 10,000 fresh test sets, one seed each,
10 epochs of 500 batches of 128 from a pool of 100,000 sets, 2026-12-07 on
the code of 0f74baf (keras_attention 0.2.0, TensorFlow 2.21.0, Keras
3.15.1), each command pinned to one core of a 2-core AMD EPYC VM whose
other core trained another model (outputs `outputs/hull10_r2`,
`hull10_glimpse_r2`, `hull10_biglimpse_r2`):

    defaults (LSTM 128):         71.65% exact (beam 3: 72.19%), area 99.14%; 325 s
    --glimpse:                   64.16% exact (beam 3: 64.77%), area 98.28%; 385 s
    --bidirectional --glimpse:   69.52% exact (beam 3: 69.98%), area 99.06%; 386 s

The same accuracies as on 2026-11-30 (code 1fbdb53, before 4277fca changed
the library's attention gradients under XLA; 2 shared cores at load ~6:
452, 631 and 632 s of training); 0.1.0, whose additive score started with
W and U equal, gave 71.5%, 63.8% and 68.8%.

For comparison, Vinyals et al. (2015) report 72.6% exact and 99.9% area at
n=50, with a 512-unit LSTM trained on 1M examples for much longer; their
table also has smaller n, where a longer run than ours should be expected to
do better. The glimpse did not help within this budget.

Outputs in `--output-dir`: the trained model (`pointer_convex_hull.keras`), a
picture of one example with the pointer distributions (`hull.png`) and the
metrics (`metrics.json`).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from scipy.spatial import ConvexHull  # noqa: E402

try:  # run from the repository root (the tests) or as a script (a sibling)
    from examples.structured import pointer_common  # noqa: E402
except ModuleNotFoundError:
    import pointer_common  # noqa: E402

END = 0  # input position of the end element


def parse_args(argv=None):
    parser = pointer_common.argument_parser(__doc__, 10, "points per set")
    parser.add_argument(
        "--train-size",
        type=int,
        default=100_000,
        help="point sets in the training pool (hulls are computed once, with scipy)",
    )
    pointer_common.add_evaluation_arguments(
        parser, "fresh point sets to evaluate", "outputs/pointer_convex_hull"
    )
    parser.add_argument(
        "--verbose", type=int, default=1, choices=[0, 1, 2], help="fit verbosity"
    )
    return parser.parse_args(argv)


def make_data(rng, size, n):
    """Inputs `(size, n + 1, 3)` and targets `(size, n + 1)` (see the header)."""
    points = rng.random((size, n, 2))
    inputs = np.zeros((size, n + 1, 3), "float32")
    inputs[:, 0, 2] = 1.0
    inputs[:, 1:, :2] = points
    targets = np.full((size, n + 1), END, "int32")
    bar = keras.utils.Progbar(size, unit_name="hull")
    for i in range(size):
        hull = ConvexHull(points[i]).vertices  # counter-clockwise in 2-D
        hull = np.roll(hull, -int(np.argmin(hull))) + 1
        targets[i, : len(hull)] = hull
        if (i + 1) % 10_000 == 0 or i + 1 == size:
            bar.update(i + 1)
    return inputs, targets


def hull_sequence(pointers):
    """Vertex indices before the first end pointer."""
    ended = np.flatnonzero(pointers == END)
    return pointers[: ended[0]] if len(ended) else pointers


def _cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _segments_cross(p1, p2, p3, p4):
    d1, d2 = _cross(p3, p4, p1), _cross(p3, p4, p2)
    d3, d4 = _cross(p1, p2, p3), _cross(p1, p2, p4)
    return d1 * d2 < 0 and d3 * d4 < 0


def polygon_area(vertices):
    """Area of a simple polygon `(k, 2)`, or 0 when it is not one (k < 3 or
    two non-adjacent edges cross)."""
    k = len(vertices)
    if k < 3:
        return 0.0
    for i in range(k):
        for j in range(i + 2, k):
            if i == 0 and j == k - 1:
                continue  # adjacent through the closing edge
            a, b = vertices[i], vertices[(i + 1) % k]
            c, d = vertices[j], vertices[(j + 1) % k]
            if _segments_cross(a, b, c, d):
                return 0.0
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def evaluate(inputs, targets, pointers):
    exact, coverage = [], []
    for x, target, pred in zip(inputs, targets, pointers, strict=True):
        truth, guess = hull_sequence(target), hull_sequence(pred)
        exact.append(len(truth) == len(guess) and np.array_equal(truth, guess))
        true_area = polygon_area(x[truth, :2])
        coverage.append(polygon_area(x[guess, :2]) / true_area)
    return float(np.mean(exact)), float(np.mean(coverage))


def plot_example(model, x, target, pointers, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    probs = np.exp(np.array(model((x[None], pointers[None])))[0])  # (T, T)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    pts = x[1:, :2]
    left.scatter(pts[:, 0], pts[:, 1], c="k", s=12)
    for i, (px, py) in enumerate(pts, start=1):
        left.annotate(str(i), (px, py), textcoords="offset points", xytext=(3, 3))
    for seq, style, label in (
        (hull_sequence(target), "g-", "true hull"),
        (hull_sequence(pointers), "r--", "predicted"),
    ):
        loop = x[np.append(seq, seq[:1]), :2]
        left.plot(loop[:, 0], loop[:, 1], style, label=label)
    left.set_aspect("equal")
    left.legend(loc="best")
    left.set_title("points, hull and prediction")
    right.imshow(probs, cmap="Blues", vmin=0.0, vmax=1.0)
    n = len(x)
    right.set_xticks(range(n), ["end"] + [str(i) for i in range(1, n)])
    right.set_yticks(range(n), [f"{t}: {'end' if p == END else p}"
                                for t, p in enumerate(pointers)])  # fmt: skip
    right.set_xlabel("input position")
    right.set_ylabel("step: pointed to")
    right.set_title("p(pointer | previous pointers)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    pointer_common.prepare_run(args, min_n=3)
    rng = np.random.default_rng(args.seed)
    print("Computing training hulls", file=sys.stderr, flush=True)
    x_train, y_train = make_data(rng, args.train_size, args.n)
    print("Computing test hulls", file=sys.stderr, flush=True)
    x_test, y_test = make_data(rng, args.test_size, args.n)

    model = pointer_common.compiled_model(args, end_position=END)
    train = (
        tf.data.Dataset.from_tensor_slices(
            ({"inputs": x_train, "pointers": y_train}, y_train)
        )
        .shuffle(min(args.train_size, 50_000), seed=args.seed)
        .repeat()
        .batch(args.batch_size)
        .prefetch(2)
    )
    history, train_seconds = pointer_common.fit_timed(model, train, args)

    metrics = {
        "n": args.n,
        "train_seconds": round(train_seconds, 1),
        "train_sets_seen": args.epochs * args.steps_per_epoch * args.batch_size,
        "train_pool": args.train_size,
        "final_loss": float(history.history["loss"][-1]),
        "test_size": args.test_size,
        "mean_hull_size": float(np.mean([len(hull_sequence(t)) for t in y_test])),
    }
    greedy = None
    for width in pointer_common.decoding_widths(args.beam_width):
        pointers, seconds = pointer_common.decode_timed(model, x_test, width, "set")
        exact, coverage = evaluate(x_test, y_test, pointers)
        name = "greedy" if width == 1 else f"beam{width}"
        metrics.update(
            {
                f"{name}_exact": exact,
                f"{name}_area_coverage": coverage,
                f"{name}_seconds": round(seconds, 1),
            }
        )
        print(f"{name}: exact match {exact:.2%}, area coverage {coverage:.2%}")
        greedy = pointers if width == 1 else greedy

    model.save(os.path.join(args.output_dir, "pointer_convex_hull.keras"))
    plot_example(
        model,
        x_test[0],
        y_test[0],
        greedy[0],
        os.path.join(args.output_dir, "hull.png"),
    )
    return pointer_common.write_metrics(metrics, args.output_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
