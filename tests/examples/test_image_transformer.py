import importlib.util
import json
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "vision" / "image_transformer.py"


def _load():
    spec = importlib.util.spec_from_file_location("image_transformer_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


image_transformer = _load()


def test_quantisation_covers_every_level_evenly():
    values = np.arange(256, dtype=np.uint8)
    levels = image_transformer.quantise(values, 4)
    assert levels.min() == 0 and levels.max() == 3
    np.testing.assert_array_equal(np.bincount(levels), [64, 64, 64, 64])


@pytest.mark.parametrize("mask_type", ["A", "B"])
def test_masked_convolution_sees_only_earlier_pixels(mask_type):
    """Changing pixel t changes the output at t only for type B, and at
    the pixels after it (in raster order) within the kernel's reach."""
    layer = image_transformer.MaskedConv2D(2, 3, mask_type, use_bias=False)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 5, 5, 1)).astype("float32")
    base = np.asarray(layer(x))
    y = x.copy()
    y[0, 2, 2, 0] += 1.0  # the centre pixel
    diff = np.abs(np.asarray(layer(y)) - base).sum(-1)[0] > 1e-6
    order = np.arange(25).reshape(5, 5)
    assert not diff[order < 12].any()  # no earlier output sees it
    assert diff[2, 2] == (mask_type == "B")
    assert diff[2, 3] and diff[3, 1]  # the next pixels do


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
def test_smoke_run_reports_every_model(tmp_path):
    out = tmp_path / "out"
    argv = ["--smoke", "--output-dir", str(out), "--no-memory"]
    results = image_transformer.main(argv)
    assert set(results) == {"local2d", "full", "pixelcnn"}
    for record in results.values():
        # log2(4) = 2 bits/dim is a uniform guess; one epoch of 4 steps of a
        # tiny model lands near it.
        assert 0.0 < record["test_bits_per_dim"] < 4.0
        assert record["seconds_per_step"] > 0 and record["parameters"] > 0
    assert (out / "samples.png").stat().st_size > 0
    assert (out / "samples_local2d.png").stat().st_size > 0
    assert "| local2d |" in (out / "results.md").read_text()
    saved = json.loads((out / "results.json").read_text())
    assert saved["args"]["levels"] == 4
    # Finished models are reloaded, not trained again.
    again = image_transformer.main(argv + ["--models", "full"])
    assert again["full"]["test_bits_per_dim"] == pytest.approx(
        results["full"]["test_bits_per_dim"], rel=1e-5
    )


@pytest.mark.large
def test_memory_of_a_training_step_is_measured(tmp_path):
    args = image_transformer.parse_args(["--smoke", "--output-dir", str(tmp_path)])
    memory = image_transformer.measure_memory("local2d", args)
    assert memory.get("rss_bytes", 0) > 0, memory
    assert memory["xla_bytes"] > 0
