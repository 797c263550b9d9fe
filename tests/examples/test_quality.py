"""The quality measures of generated samples (`examples/common/quality.py`),
on toy distributions whose answer is known."""

import numpy as np
import pytest

from examples.common import quality

# Ten well-separated modes in 2-D: unit Gaussians whose centres lie on a
# circle of radius 100, about 62 apart. (In more dimensions the k-NN balls
# of a few thousand samples cover less of their own distribution: two
# draws of one 8-D mixture score about 0.87.)
ANGLES = 2 * np.pi * np.arange(10) / 10
CENTRES = 100.0 * np.stack([np.cos(ANGLES), np.sin(ANGLES)], axis=1)


def mixture(modes, count, seed):
    rng = np.random.default_rng(seed)
    picks = rng.choice(modes, size=count)
    return CENTRES[picks] + rng.normal(size=(count, 2))


def test_identical_sets_have_full_precision_and_recall():
    real = mixture(np.arange(10), 500, seed=0)
    assert quality.precision_recall(real, real.copy()) == {
        "precision": 1.0,
        "recall": 1.0,
    }


def test_two_draws_of_one_distribution_score_close_to_one():
    real, fake = mixture(np.arange(10), 2000, 0), mixture(np.arange(10), 2000, 1)
    result = quality.precision_recall(real, fake, k=3)
    assert result["precision"] > 0.9 and result["recall"] > 0.9, result


def test_disjoint_far_sets_score_zero():
    real = mixture(np.arange(10), 500, seed=0)
    result = quality.precision_recall(real, real + 1000.0)
    assert result == {"precision": 0.0, "recall": 0.0}


def test_half_the_modes_is_precise_but_recalls_half():
    real = mixture(np.arange(10), 4000, seed=0)
    fake = mixture(np.arange(5), 2000, seed=1)  # modes 0-4 only
    result = quality.precision_recall(real, fake, k=3)
    assert result["precision"] > 0.95, result
    assert result["recall"] == pytest.approx(0.5, abs=0.05), result


def test_batches_do_not_change_the_answer():
    real, fake = mixture(np.arange(10), 300, 0), mixture(np.arange(4), 200, 1)
    one = quality.precision_recall(real, fake, batch_size=1000)
    many = quality.precision_recall(real, fake, batch_size=7)
    assert one == many


def test_radius_is_the_kth_neighbour_not_the_sample_itself():
    points = np.array([[0.0], [1.0], [3.0], [6.0]])
    np.testing.assert_allclose(quality.knn_radii(points, k=1), [1, 1, 4, 9])
    np.testing.assert_allclose(quality.knn_radii(points, k=2), [9, 4, 9, 25])


def test_bad_arguments_are_clear_errors():
    points = np.zeros((4, 2))
    with pytest.raises(ValueError, match="Received: k=4"):
        quality.precision_recall(points, points, k=4)
    with pytest.raises(ValueError, match=r"fake.shape=\(4, 3\)"):
        quality.precision_recall(points, np.zeros((4, 3)))


def test_frechet_distance_of_a_shift_is_its_squared_length():
    features = np.random.default_rng(0).normal(size=(400, 6))
    assert abs(quality.frechet_distance(features, features)) < 1e-6
    np.testing.assert_allclose(
        quality.frechet_distance(features, features + 2.0), 6 * 4.0, rtol=1e-6
    )


def test_mean_std_of_repeated_measurements():
    assert quality.mean_std([1.0, 3.0]) == {
        "mean": 2.0,
        "std": pytest.approx(np.sqrt(2.0)),
        "values": [1.0, 3.0],
    }
    assert quality.mean_std([5])["std"] == 0.0
