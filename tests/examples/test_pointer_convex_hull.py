import importlib.util
import pathlib

import numpy as np
import pytest

SCRIPT = (
    pathlib.Path(__file__).parents[2]
    / "examples"
    / "structured"
    / "pointer_convex_hull.py"
)


def _load():
    spec = importlib.util.spec_from_file_location("pointer_convex_hull", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_targets_and_metrics():
    hull = _load()
    x, y = hull.make_data(np.random.default_rng(0), 50, 8)
    assert x.shape == (50, 9, 3) and y.shape == (50, 9)
    for inputs, target in zip(x, y, strict=True):
        seq = hull.hull_sequence(target)
        assert seq[0] == seq.min() and len(set(seq.tolist())) == len(seq)
        assert np.all(target[len(seq) :] == hull.END)
        pts = inputs[seq, :2]
        # Counter-clockwise: positive signed (shoelace) area.
        signed = np.dot(pts[:, 0], np.roll(pts[:, 1], -1)) - np.dot(
            pts[:, 1], np.roll(pts[:, 0], -1)
        )
        assert signed > 0
    assert hull.evaluate(x, y, y) == (1.0, 1.0)
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], float)
    assert hull.polygon_area(square) == 1.0
    assert hull.polygon_area(square[[0, 2, 1, 3]]) == 0.0  # self-crossing
    assert hull.polygon_area(square[:2]) == 0.0
    shorter = y.copy()
    shorter[:, 0] = hull.END  # predicts an empty hull
    assert hull.evaluate(x, y, shorter) == (0.0, 0.0)


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data and decodes in tf.function")
def test_smoke_run(tmp_path):
    argv = [
        "--n", "5", "--units", "8", "--epochs", "1", "--steps-per-epoch", "3",
        "--batch-size", "8", "--train-size", "64", "--test-size", "40",
        "--beam-width", "2", "--verbose", "0", "--output-dir", str(tmp_path),
    ]  # fmt: skip
    metrics = _load().main(argv)
    for key in ("greedy_exact", "greedy_area_coverage", "beam2_exact"):
        assert 0.0 <= metrics[key] <= 1.0
    for name in ("pointer_convex_hull.keras", "hull.png", "metrics.json"):
        assert (tmp_path / name).is_file(), name
