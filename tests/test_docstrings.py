"""Every `>>>` example in the package's docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import keras_attention

# The examples print shapes as `tuple(x.shape)` and values through NumPy,
# so they run on every backend.
_TENSORFLOW_SHAPE = "TensorShape("


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


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_print_backend_neutral_shapes(name):
    """A printed `TensorShape` only matches on TensorFlow: print
    `tuple(x.shape)` instead, so the example runs on JAX too."""
    docstrings = [
        test.docstring or ""
        for test in doctest.DocTestFinder().find(importlib.import_module(name))
    ]
    assert not any(_TENSORFLOW_SHAPE in text for text in docstrings), name
