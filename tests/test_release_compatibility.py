"""Models saved by a release keep loading, with the same outputs.

`tests/data/release-0.2.0/` holds one `.keras` file per case of
`test_every_layer.LAYER_CASES` and per public model, saved by release 0.2.0
(commit 44a0fb4, before issue 34 moved the layers into family folders) with
`tools/save_release_models.py`, and `cases.npz` with each one's inputs and
outputs. Each file must load in `safe_mode` from the current code, under
every backend, and compute what it computed when it was saved.
"""

import pathlib

import keras
import numpy as np
import pytest

import keras_attention  # noqa: F401  (registers the classes)

RELEASE = pathlib.Path(__file__).parent / "data" / "release-0.2.0"
CASES = sorted(p.stem for p in RELEASE.glob("*.keras"))
# Public classes added after release 0.2.0: it could not save them.
ADDED_AFTER_0_2_0 = {
    "LSTMN", "LSTMNDeepFusionDecoder", "LSTMNShallowFusionDecoder",
    "MemoryCompressedAttention", "MemoryCompressedDecoder",
    "MemoryCompressedDecoderBlock", "models.BertEncoder", "models.BertMaskedLM",
}  # fmt: skip


def _arrays(record, case, kind):
    arrays, i = [], 0
    while f"{case}/{kind}{i}" in record:
        arrays.append(record[f"{case}/{kind}{i}"])
        i += 1
    return arrays


@pytest.fixture(scope="module")
def record():
    with np.load(RELEASE / "cases.npz") as data:
        return dict(data)


def test_the_fixture_covers_every_public_class():
    import keras_attention as ka

    saved = {case.split("__")[0] for case in CASES}
    expected = set(ka.layers.__all__) | {f"models.{m}" for m in ka.models.__all__}
    assert saved == expected - ADDED_AFTER_0_2_0


@pytest.mark.parametrize("case", CASES)
def test_a_model_saved_by_release_0_2_0_loads_and_computes_the_same(case, record):
    model = keras.saving.load_model(RELEASE / f"{case}.keras", safe_mode=True)
    inputs = _arrays(record, case, "input")
    expected = _arrays(record, case, "output")
    outputs = model(inputs if len(inputs) > 1 else inputs[0], training=False)
    outputs = [np.asarray(x) for x in keras.tree.flatten(outputs)]
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-5)
