"""Loading safety: saved models load with `safe_mode=True`, tampered ones fail.

A `.keras` file written by this library references only `keras` and
`keras_attention` classes (no lambdas, no pickled or marshalled code), so it
loads with `safe_mode=True` and gives identical outputs. A file whose
config was edited to name a class that is not registered (or a function of
an arbitrary module) fails with a clear error naming it instead of running
anything.
"""

import json
import os
import zipfile

import keras
import numpy as np
import pytest

import keras_attention as ka

SRC = np.array([[3, 4, 5, 0], [6, 7, 0, 0]])
TGT = np.array([[1, 6, 7], [1, 8, 0]])


def _transformer():
    model = ka.Transformer(
        12,
        12,
        hidden_dim=8,
        num_heads=2,
        intermediate_dim=16,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    return model, {"encoder_tokens": SRC, "decoder_tokens": TGT}


def _functional():
    """Several library layers, nested in one functional model."""
    tokens = keras.Input((None,), dtype="int32")
    memory = keras.Input((5, 6))
    x = keras.layers.Embedding(12, 8, mask_zero=True)(tokens)
    x = x + ka.layers.SinusoidalPositionEncoding()(x)
    x = ka.layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=16)(x)
    x = ka.layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, memory)
    x = ka.layers.ScoredAttention(score="additive")(x, memory)
    model = keras.Model([tokens, memory], x)
    rng = np.random.default_rng(0)
    return model, [SRC, rng.normal(size=(2, 5, 6)).astype("float32")]


MODELS = {"transformer": _transformer, "functional": _functional}


def _save(model, tmp_path):
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    return path


def _config(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def _objects(config):
    """Every serialized object (a dict with a `class_name`) in a config."""
    if isinstance(config, dict):
        if "class_name" in config:
            yield config
        for value in config.values():
            yield from _objects(value)
    elif isinstance(config, list):
        for value in config:
            yield from _objects(value)


def _tampered(path, edit, tmp_path):
    """A copy of the `.keras` archive with `edit(config)` applied."""
    out = os.path.join(tmp_path, "tampered.keras")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.namelist():
            data = src.read(item)
            if item == "config.json":
                config = json.loads(data)
                edit(config)
                data = json.dumps(config).encode()
            dst.writestr(item, data)
    return out


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_saved_model_references_only_keras_and_loads_in_safe_mode(kind, tmp_path):
    model, inputs = MODELS[kind]()
    expected = keras.ops.convert_to_numpy(model(inputs))
    path = _save(model, tmp_path)
    modules = {obj.get("module") for obj in _objects(_config(path))}
    foreign = {
        m
        for m in modules - {None, "keras"}
        if not m.startswith(("keras.", "keras_attention."))
    }
    assert not foreign, f"the config references other modules: {foreign}"
    for obj in _objects(_config(path)):
        assert obj["class_name"] not in ("__lambda__", "function"), obj
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(inputs)), expected)


def _rename(config, old, new):
    """Rename the first serialized object of class `old` to `new`."""
    for obj in _objects(config):
        if obj["class_name"] == old:
            obj["class_name"] = new
            obj["registered_name"] = f"keras_attention>{new}"
            return
    raise AssertionError(f"no {old} in the config")


@pytest.mark.parametrize(
    "kind, old, new",
    [
        ("transformer", "Transformer", "EvilTransformer"),
        ("functional", "MultiHeadAttention", "EvilAttention"),
        ("functional", "ScoredAttention", "Unregistered"),
    ],
)
def test_tampered_config_naming_an_unknown_class_fails(kind, old, new, tmp_path):
    model, inputs = MODELS[kind]()
    model(inputs)
    path = _tampered(_save(model, tmp_path), lambda c: _rename(c, old, new), tmp_path)
    with pytest.raises(TypeError, match=f"Could not locate class '{new}'"):
        keras.saving.load_model(path, safe_mode=True)


@pytest.mark.parametrize("module, name", [("os", "system"), ("subprocess", "Popen")])
def test_tampered_config_cannot_reach_other_modules(module, name, tmp_path):
    model, inputs = _transformer()
    model(inputs)

    def edit(config):
        config.update(module=module, class_name=name, registered_name=None)

    path = _tampered(_save(model, tmp_path), edit, tmp_path)
    with pytest.raises(TypeError, match=f"Could not locate class '{name}'"):
        keras.saving.load_model(path, safe_mode=True)


def test_tampered_activation_is_refused(tmp_path):
    model, inputs = _transformer()
    model(inputs)
    evil = {
        "module": "builtins",
        "class_name": "function",
        "config": "eval",
        "registered_name": "function",
    }

    def edit(config):
        config["config"]["activation"] = evil

    path = _tampered(_save(model, tmp_path), edit, tmp_path)
    with pytest.raises(ValueError, match="`activation`"):
        keras.saving.load_model(path, safe_mode=True)


def test_a_python_lambda_is_refused_in_safe_mode(tmp_path):
    """The guard is on in the load path the library documents: a model that
    does carry code (a `Lambda` layer) does not load with `safe_mode=True`."""
    x = keras.Input((3, 4))
    y = ka.layers.ScoredAttention()(x, x)
    model = keras.Model(x, keras.layers.Lambda(lambda t: t * 2)(y))
    path = _save(model, tmp_path)
    with pytest.raises(ValueError, match="safe_mode"):
        keras.saving.load_model(path, safe_mode=True)
