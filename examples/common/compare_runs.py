"""Compare the trained weights and losses of runs of the same example.

Each run directory holds `model.weights.h5` and `history.json`, as written
by `examples/nlp/translate_dates.py`, the NMT examples and
`examples/vision/sagan.py`. The first directory is the reference; for
every other one this prints the largest absolute difference of the
per-epoch losses (every history entry ending in `loss`) and of the
weights, and the weights' largest difference relative to the reference's
largest weight (`--exclude REGEX` leaves weights out):

    python examples/common/compare_runs.py outputs/default outputs/mirrored"""

import argparse
import json
import os
import re

import h5py
import numpy as np


def read_weights(path):
    """`{dataset path: array}` for every array in a `.weights.h5` file."""
    weights = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            weights[name] = item[()]

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return weights


def read_run(directory):
    with open(os.path.join(directory, "history.json")) as f:
        history = json.load(f)
    return history, read_weights(os.path.join(directory, "model.weights.h5"))


def compare(reference, other, exclude=None):
    """Max abs difference of losses and weights, and the relative weight one.

    Losses are every history entry whose name ends in `loss` (`loss`,
    `val_loss`, a GAN's `d_loss` and `g_loss`, ...). `exclude`: a regular
    expression; weights whose path matches it are left out (e.g. biases
    that the model is invariant to, whose gradients are only round-off
    that Adam turns into full-size steps).
    """
    (history, weights), (other_history, other_weights) = reference, other
    if sorted(weights) != sorted(other_weights):
        raise ValueError("The runs have different weights (not the same model).")
    keys = [k for k in history if k.endswith("loss") and k in other_history]
    if not keys:
        raise ValueError(
            "The histories must share an entry ending in `loss`. Received: "
            f"{sorted(history)} and {sorted(other_history)}"
        )
    loss = max(np.max(np.abs(np.subtract(history[k], other_history[k]))) for k in keys)
    kept = [k for k in weights if exclude is None or not re.search(exclude, k)]
    diff = max(np.max(np.abs(weights[k] - other_weights[k])) for k in kept)
    scale = max(np.max(np.abs(weights[k])) for k in kept)
    return {
        "loss": float(loss),
        "weights": float(diff),
        "relative": float(diff / scale),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", help="run directories; the first is the reference"
    )
    parser.add_argument(
        "--exclude", default=None, metavar="REGEX",
        help="leave out the weights whose path matches this regular expression",
    )  # fmt: skip
    args = parser.parse_args(argv)
    reference = read_run(args.runs[0])
    losses = {k: v for k, v in reference[0].items() if k.endswith("loss")}
    print(f"reference: {args.runs[0]}, losses {losses}")
    results = {}
    for directory in args.runs[1:]:
        results[directory] = compare(reference, read_run(directory), args.exclude)
        r = results[directory]
        print(
            f"{directory}: max |loss diff| {r['loss']:.3g}, "
            f"max |weight diff| {r['weights']:.3g} ({r['relative']:.3g} of the "
            "largest weight)"
        )
    return results


if __name__ == "__main__":
    main()
