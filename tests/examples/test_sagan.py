import gzip
import importlib.util
import json
import pathlib
import struct

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name, relative):
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sagan = _load("sagan_example", "examples/vision/sagan.py")


def _write_idx(path, array):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, array.ndim))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(np.uint8).tobytes())


def test_read_idx_round_trip(tmp_path):
    images = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    _write_idx(tmp_path / "x.gz", images)
    np.testing.assert_array_equal(sagan.read_idx(str(tmp_path / "x.gz")), images)


def test_checksum_mismatch_is_a_clear_error(tmp_path):
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", np.zeros((1, 28, 28)))
    with pytest.raises(ValueError, match="Checksum mismatch"):
        sagan.mnist_file("t10k-images-idx3-ubyte.gz", str(tmp_path))


def test_missing_file_names_the_data_dir(tmp_path):
    with pytest.raises(ValueError, match="data-dir"):
        sagan.mnist_file("t10k-labels-idx1-ubyte.gz", str(tmp_path))


def test_frechet_distance_is_zero_for_identical_sets_and_grows_with_shift():
    features = np.random.default_rng(0).normal(size=(400, 6))
    assert abs(sagan.frechet_distance(features, features)) < 1e-6
    shifted = sagan.frechet_distance(features, features + 2.0)
    np.testing.assert_allclose(shifted, 6 * 4.0, rtol=1e-6)


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(
    reason="the SAGAN script trains with a tf.GradientTape train_step and exports a SavedModel"
)
def test_smoke_run_trains_evaluates_and_exports(tmp_path):
    report = sagan.main(["--smoke", "--output-dir", str(tmp_path)])
    assert report["samples"] == 256
    assert sum(report["class_histogram"]) == pytest.approx(1.0, abs=1e-3)
    assert np.isfinite(report["frechet_distance"])
    assert (tmp_path / "samples_001.png").stat().st_size > 0
    assert (tmp_path / "attention.png").stat().st_size > 0
    assert json.loads((tmp_path / "quality.json").read_text())["epochs"] == 1
    export_dir = tmp_path / "generator_savedmodel"
    assert (export_dir / "saved_model.pb").exists()
    # The TF1 loader (saved_model_cli run, as TensorFlow Serving loads it)
    # serves the generator like tf.saved_model.load.
    import tensorflow as tf

    from examples.common.export import run_saved_model_cli

    served = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    latent_dim = served.structured_input_signature[1]["z"].shape[-1]
    z = np.random.default_rng(0).normal(size=(4, latent_dim)).astype("float32")
    expected = served(z=tf.constant(z))["output_0"].numpy()
    outputs = run_saved_model_cli(export_dir, {"z": z}, tmp_path / "cli")
    np.testing.assert_allclose(outputs["output_0"], expected, atol=1e-6)
