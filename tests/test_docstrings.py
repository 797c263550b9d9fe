"""Every `>>>` example in the package's docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import keras
import pytest

import keras_attention

# The examples print TensorFlow tensors and shapes.
pytestmark = [
    pytest.mark.tf_only,
    pytest.mark.skipif(
        keras.backend.backend() != "tensorflow",
        reason="docstring examples print TensorFlow shapes",
    ),
]


def _modules():
    names = [keras_attention.__name__]
    for info in pkgutil.walk_packages(
        keras_attention.__path__, prefix=keras_attention.__name__ + "."
    ):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
        report=True,
    )
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
