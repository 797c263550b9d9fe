"""Compare the trained weights and losses of runs of the same example.

Each run directory holds `model.weights.h5` and `history.json`, as written
by `examples/nlp/translate_dates.py`. The first directory is the reference;
for every other one this prints the largest absolute difference of the
per-epoch losses and of the weights, and the weights' largest difference
relative to the reference's largest weight:

    python examples/common/compare_runs.py outputs/default outputs/mirrored
"""

import argparse
import json
import os

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


def compare(reference, other):
    """Max abs difference of losses and weights, and the relative weight one."""
    (history, weights), (other_history, other_weights) = reference, other
    if sorted(weights) != sorted(other_weights):
        raise ValueError("The runs have different weights (not the same model).")
    loss = np.max(np.abs(np.subtract(history["loss"], other_history["loss"])))
    diff = max(np.max(np.abs(weights[k] - other_weights[k])) for k in weights)
    scale = max(np.max(np.abs(w)) for w in weights.values())
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
    args = parser.parse_args(argv)
    reference = read_run(args.runs[0])
    print(f"reference: {args.runs[0]}, losses {reference[0]['loss']}")
    results = {}
    for directory in args.runs[1:]:
        results[directory] = compare(reference, read_run(directory))
        r = results[directory]
        print(
            f"{directory}: max |loss diff| {r['loss']:.3g}, "
            f"max |weight diff| {r['weights']:.3g} ({r['relative']:.3g} of the "
            "largest weight)"
        )
    return results


if __name__ == "__main__":
    main()
