import numpy as np
import pytest
from matplotlib.figure import Figure

from keras_attention.visualization import plot_attention


def test_returns_figure_with_labels():
    weights = np.random.default_rng(0).dirichlet(np.ones(6), size=4)
    fig = plot_attention(weights, list("abcdef"), list("WXYZ"), title="t")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcdef")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("WXYZ")
    assert ax.get_title() == "t"
    np.testing.assert_allclose(ax.images[0].get_array(), weights)


def test_crops_padding_and_draws_into_given_axes():
    fig = Figure()
    ax = fig.add_subplot()
    weights = np.zeros((5, 9))
    weights[:3, :4] = 0.25
    out = plot_attention(weights, list("abcd"), list("xyz"), ax=ax)
    assert out is fig
    assert ax.images[0].get_array().shape == (3, 4)


def test_accepts_tensors():
    import keras

    fig = plot_attention(keras.ops.eye(2), ["a", "b"], ["c", "d"])
    assert fig.axes[0].images[0].get_array().shape == (2, 2)


def test_bad_inputs():
    with pytest.raises(ValueError, match="`weights` must have rank 2"):
        plot_attention(np.zeros((2, 3, 4)), ["a"], ["b"])
    with pytest.raises(ValueError, match="cannot outnumber"):
        plot_attention(np.zeros((2, 3)), list("abcd"), ["b"])
