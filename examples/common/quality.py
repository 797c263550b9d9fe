"""Quality measures of a generative model in a feature space (NumPy).

`frechet_distance` compares the first two moments of the real and the
generated features (Heusel et al., 2017); `precision_recall` says which
part of the difference is quality and which is coverage (Kynkaanniemi et
al., 2019): precision is the share of generated samples that fall inside
the real samples' manifold, recall the share of real samples inside the
generated samples' manifold, each manifold being the union of the balls
around its samples whose radius reaches the k-th nearest neighbour.
`mean_std` summarises repeated measurements (draws, seeds).

References:
    - Heusel et al., 2017, GANs trained by a two time-scale update rule
      converge to a local Nash equilibrium: https://arxiv.org/abs/1706.08500
    - Kynkaanniemi et al., 2019, Improved precision and recall metric for
      assessing generative models: https://arxiv.org/abs/1904.06991
"""

import numpy as np


def frechet_distance(a, b):
    """||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)) (Heusel et al.).

    Tr((S_a S_b)^(1/2)) is computed as the sum of the square roots of the
    eigenvalues of the symmetric S_a^(1/2) S_b S_a^(1/2), which stays real and
    stable when a covariance is singular (few samples, many features).
    """
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    values, vectors = np.linalg.eigh(cov_a)
    root_a = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
    middle = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    trace_root = np.sqrt(np.clip(middle, 0, None)).sum()
    return float(
        ((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_root
    )


def _squared_distances(a, b):
    """(len(a), len(b)) squared Euclidean distances, in float64."""
    a, b = a.astype("float64"), b.astype("float64")
    squares = (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(squares, 0.0)


def knn_radii(features, k=3, batch_size=1000):
    """Squared distance from each row of `features` to its k-th nearest
    other row (the row itself, at distance 0, is not counted)."""
    if not isinstance(k, int) or not 1 <= k < len(features):
        raise ValueError(
            f"`k` must be an integer in [1, {len(features) - 1}] (fewer than the "
            f"{len(features)} samples). Received: k={k!r}"
        )
    radii = []
    for start in range(0, len(features), batch_size):
        squares = _squared_distances(features[start : start + batch_size], features)
        # Index 0 of the sorted row is the sample itself (or a duplicate).
        radii.append(np.partition(squares, k, axis=1)[:, k])
    return np.concatenate(radii)


def manifold_share(points, centers, radii, batch_size=1000):
    """The share of `points` inside at least one ball (center, radius):
    `radii` are squared, as `knn_radii` gives them."""
    inside = []
    for start in range(0, len(points), batch_size):
        squares = _squared_distances(points[start : start + batch_size], centers)
        inside.append((squares <= radii[None, :]).any(axis=1))
    return float(np.concatenate(inside).mean())


def precision_recall(real, fake, k=3, batch_size=1000):
    """Improved precision and recall (Kynkaanniemi et al., 2019).

    Args:
        real: `(N, D)` features of real samples.
        fake: `(M, D)` features of generated samples (the same space).
        k: the neighbour whose distance is a sample's radius (3 in the
            paper).
        batch_size: rows of the distance matrix computed at a time.

    Returns:
        `{"precision", "recall"}`: the share of `fake` inside the real
        manifold, and of `real` inside the generated one.
    """
    real, fake = np.asarray(real), np.asarray(fake)
    if real.ndim != 2 or fake.ndim != 2 or real.shape[1] != fake.shape[1]:
        raise ValueError(
            "`real` and `fake` must be (N, D) and (M, D) features. Received: "
            f"real.shape={real.shape}, fake.shape={fake.shape}"
        )
    real_radii = knn_radii(real, k, batch_size)
    fake_radii = knn_radii(fake, k, batch_size)
    return {
        "precision": manifold_share(fake, real, real_radii, batch_size),
        "recall": manifold_share(real, fake, fake_radii, batch_size),
    }


def mean_std(values):
    """`{"mean", "std", "values"}` of repeated measurements (the sample
    standard deviation, ddof=1; 0 for a single value)."""
    values = [float(v) for v in values]
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return {"mean": float(np.mean(values)), "std": std, "values": values}
