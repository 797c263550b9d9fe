"""Save one `.keras` file per public layer case and model, with its outputs.

The files are the fixture of `tests/test_release_compatibility.py`: models
saved by a release must keep loading, with the same outputs, after the code
moves (issue 34 grouped the layers into family subpackages). Run it from the
checkout of the release being frozen, once per release:

    PYTHONPATH=. KERAS_BACKEND=tensorflow .venv/bin/python \
        tools/save_release_models.py tests/data/release-0.2.0

It writes `<case>.keras` for every case of `tests/test_every_layer.py`'s
`LAYER_CASES` ("/" in a case name becomes "__") and for a small instance of
each model of `keras_attention.models`, and `cases.npz` with each case's
inputs and outputs (the model in inference mode).
"""

import argparse
import importlib.util
import os
import pathlib

import keras
import numpy as np

import keras_attention as ka
from keras_attention import modifiers as km
from keras_attention import testing

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _layer_cases():
    path = ROOT / "tests" / "test_every_layer.py"
    spec = importlib.util.spec_from_file_location("_every_layer_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LAYER_CASES


def _model_cases():
    """name -> (model, inputs): small instances of each public model."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 11, size=(2, 4)).astype("int32")
    return {
        "models.Transformer": lambda: (
            ka.models.Transformer(
                11,
                11,
                hidden_dim=4,
                num_heads=2,
                intermediate_dim=4,
                num_encoder_layers=1,
                num_decoder_layers=1,
                dropout=0.0,
            ),
            [tokens, tokens],
        ),
        "models.PointerNetwork": lambda: (
            ka.models.PointerNetwork(units=8),
            [rng.normal(size=(2, 5, 2)).astype("float32"), np.zeros((2, 5), "int32")],
        ),
        "models.HierarchicalAttentionNetwork": lambda: (
            ka.models.HierarchicalAttentionNetwork(
                9,
                3,
                embedding_dim=4,
                word_units=4,
                sentence_units=4,
                attention_units=4,
            ),
            rng.integers(0, 9, size=(2, 3, 4)).astype("int32"),
        ),
        "models.ImageTransformer": lambda: (
            ka.models.ImageTransformer(
                (4, 6),
                3,
                mask_modifier=km.BlockLocal2D(6, (2, 3), (1, 3)),
                hidden_dim=8,
                num_heads=2,
                intermediate_dim=8,
                num_layers=1,
            ),
            rng.integers(0, 3, size=(2, 4, 6)).astype("int32"),
        ),
    }


def _arrays(inputs):
    return inputs if isinstance(inputs, list) else [inputs]


def _save_case(name, build, directory, record):
    keras.utils.set_random_seed(0)
    obj, inputs = build()
    arrays = _arrays(inputs)
    if isinstance(obj, keras.Model):
        model = obj
        outputs = model(arrays if len(arrays) > 1 else arrays[0], training=False)
    else:
        model = testing.make_model(obj, inputs)
        outputs = model(arrays if len(arrays) > 1 else arrays[0], training=False)
    outputs = [np.asarray(x) for x in keras.tree.flatten(outputs)]
    file_name = name.replace("/", "__")
    model.save(os.path.join(directory, f"{file_name}.keras"))
    for i, x in enumerate(arrays):
        record[f"{file_name}/input{i}"] = np.asarray(x)
    for i, y in enumerate(outputs):
        record[f"{file_name}/output{i}"] = y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    record = {}
    cases = {**_layer_cases(), **_model_cases()}
    for name, build in cases.items():
        _save_case(name, build, args.directory, record)
        print("saved", name)
    np.savez_compressed(os.path.join(args.directory, "cases.npz"), **record)


if __name__ == "__main__":
    main()
