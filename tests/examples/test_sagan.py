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


def _blocks(model):
    return [type(layer).__name__ for layer in model.layers
            if type(layer).__name__ in ("SelfAttention2D", "ResidualConvBlock")]  # fmt: skip


def test_ablation_has_the_attention_blocks_weights_and_no_attention():
    """`--block conv`: both networks lose `SelfAttention2D` and keep every
    trainable weight count (1.25 C^2 + 1 in the 16x16 block when 8 | C)."""
    for block, name in (
        ("attention", "SelfAttention2D"),
        ("conv", "ResidualConvBlock"),
    ):
        assert _blocks(sagan.build_generator(16, 8, block=block)) == [name]
        assert _blocks(sagan.build_discriminator(8, block=block)) == [name]
    counts = {block: sagan.parameter_counts(16, 8, block) for block in sagan.BLOCKS}
    for network, channels in (("generator", 16), ("discriminator", 8)):
        attention, conv = counts["attention"][network], counts["conv"][network]
        assert attention["trainable"] == conv["trainable"]
        assert attention["block_trainable"] == conv["block_trainable"]
        assert conv["block_trainable"] == 1.25 * channels**2 + 1
        # Only the power-iteration vectors differ: C/8 + C against 1.75 C.
        assert attention["all"] - conv["all"] == 0.625 * channels
    with pytest.raises(ValueError, match="block='mlp'"):
        sagan.build_discriminator(8, block="mlp")


def test_residual_conv_block_starts_as_the_identity():
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 16)).astype("float32")
    block = sagan.ResidualConvBlock()
    np.testing.assert_array_equal(np.array(block(x, training=True)), x)
    assert block.local_conv.layer.kernel.shape == (3, 3, 16, 2)
    config = block.get_config()
    assert sagan.ResidualConvBlock.from_config(config).get_config() == config


def test_evaluate_reports_every_draw_and_its_spread():
    import keras

    z = keras.Input((4,))
    image = keras.layers.Reshape((32, 32, 1))(
        keras.layers.Dense(32 * 32, activation="tanh")(z)
    )
    generator = keras.Model(z, image)
    _, scorer = sagan.build_classifier(seed=0)
    real_images = np.random.default_rng(0).uniform(-1, 1, (64, 32, 32, 1))
    real = sagan.real_reference(scorer, real_images.astype("float32"), k=3)
    report = sagan.evaluate(generator, scorer, real, 48, 4, seed=1, draws=2, k=3)
    assert report["samples"] == 48 and len(report["draws"]) == 2
    fds = [draw["frechet_distance"] for draw in report["draws"]]
    assert fds[0] != fds[1]  # independent draws
    assert report["frechet_distance"] == pytest.approx(np.mean(fds))
    assert report["frechet_distance_std_over_draws"] == pytest.approx(
        np.std(fds, ddof=1)
    )
    for name in ("precision", "recall", "precision_real_vs_real"):
        assert 0.0 <= report[name] <= 1.0
    assert sum(report["class_histogram"]) == pytest.approx(1.0, abs=1e-3)
    again = sagan.evaluate(generator, scorer, real, 48, 4, seed=1, draws=2, k=3)
    assert again["draws"] == report["draws"]  # the draws are seeded


def _report(fd, block, seed):
    measures = dict(frechet_distance=fd, precision=0.8, recall=0.6,
                    mean_top_class_confidence=0.9, smallest_class_share=0.05,
                    gamma_generator=0.1, gamma_discriminator=0.2)  # fmt: skip
    report = {**measures, **{f"{k}_std_over_draws": 0.01 for k in measures}}
    report.update(classes_present=10, train_seconds=100.0, block=block, seed=seed)
    report["frechet_distance_std_over_draws"] = 0.5
    return report


def test_comparison_table_and_results_files(tmp_path):
    import argparse

    from examples.common import runs

    records = {block: {str(seed): _report(fd, block, seed)
                       for seed, fd in zip((1, 2, 3), fds, strict=True)}
               for block, fds in (("attention", (10, 12, 14)), ("conv", (20, 21, 22)))}  # fmt: skip
    summary, noise = sagan.summarize(records)
    assert summary["attention"]["frechet_distance"]["mean"] == 12.0
    assert summary["attention"]["frechet_distance"]["std"] == pytest.approx(2.0)
    assert noise["conv"] == {"frechet_distance_std_over_draws": 0.5,
                             "frechet_distance_std_over_seeds": 1.0}  # fmt: skip
    counts = {"trainable": 100, "all": 110, "block_trainable": 21}
    results = {
        "dataset": "mnist", "epochs": 12, "seeds": [1, 2, 3], "eval_samples": 10000,
        "eval_draws": 3, "k": 3, "classifier_accuracy": 0.984,
        "parameters": {b: {"generator": counts, "discriminator": counts}
                       for b in records},
        "real_vs_real": {"frechet_distance_real_vs_real": 6.9,
                         "precision_real_vs_real": 0.7, "recall_real_vs_real": 0.71},
        "runs": records, "summary": summary, "noise": noise,
    }  # fmt: skip
    lines = sagan.comparison_table(results)
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 1 + 2 * (3 + 1)  # header, 3 seeds + the mean per block
    assert any(line.startswith("| attention | 2 | 12.00 ± 0.50 | 0.800 ± 0.010 |")
               for line in lines)  # fmt: skip
    assert any(line.startswith("| **conv** | mean ± std | 21.00 ± 1.00 |")
               for line in lines)  # fmt: skip
    text = "\n".join(lines)
    assert "generator 100 / 100, discriminator 100 / 100" in text
    assert (
        "`attention_seed3/attention.png` (`attention_view.html`)" in text
        and "conv_seed1/att" not in text
    )
    assert "FD 6.90, precision 0.700, recall 0.710" in text
    runs.write_results(str(tmp_path), results, argparse.Namespace(seeds=[1, 2, 3]),
                       lines, source={"command": "python sagan.py"})  # fmt: skip
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["results"]["summary"]["conv"]["frechet_distance"]["mean"] == 21.0
    assert saved["provenance"] == {"command": "python sagan.py"}
    assert (tmp_path / "results.md").read_text() == text + "\n"


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
    page = (tmp_path / "attention_view.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "g_attention" in page
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


@pytest.mark.large
@pytest.mark.tf_only(reason="the SAGAN script trains with a tf.GradientTape train_step")
def test_ablation_comparison_trains_both_blocks_and_reads_finished_runs_back(
    tmp_path,
):
    flags = ["--smoke", "--compare-ablation", "--seeds", "1", "--output-dir",
             str(tmp_path)]  # fmt: skip
    argv = flags + ["--eval-draws", "2"]
    results = sagan.main(argv)
    assert set(results["runs"]) == {"attention", "conv"}
    for network in ("generator", "discriminator"):
        attention, conv = (results["parameters"][b][network] for b in sagan.BLOCKS)
        assert attention["trainable"] == conv["trainable"] > 0
    assert (tmp_path / "attention_seed1" / "attention.png").stat().st_size > 0
    assert (tmp_path / "attention_seed1" / "attention_view.html").exists()
    assert not (tmp_path / "conv_seed1" / "attention.png").exists()
    assert not (tmp_path / "conv_seed1" / "attention_view.html").exists()
    saved = json.loads((tmp_path / "results.json").read_text())
    assert "--compare-ablation" in saved["provenance"]["command"]
    assert "| **conv** | mean ± std |" in (tmp_path / "results.md").read_text()
    # Run again after losing one run's report: the finished runs are read
    # back, the one whose report is missing is loaded and scored again.
    (tmp_path / "conv_seed1" / "quality.json").unlink()
    again = sagan.main(argv)
    for block in ("attention", "conv"):
        first, second = results["runs"][block]["1"], again["runs"][block]["1"]
        assert second["train_seconds"] == first["train_seconds"]
        assert second["frechet_distance"] == pytest.approx(first["frechet_distance"])
    # Other evaluation flags score the trained GANs again; other training
    # flags are refused.
    rescored = sagan.main(flags + ["--eval-draws", "3"])
    assert len(rescored["runs"]["conv"]["1"]["draws"]) == 3
    assert rescored["runs"]["conv"]["1"]["train_seconds"] == first["train_seconds"]
    with pytest.raises(ValueError, match="trained with other settings"):
        sagan.main(argv + ["--g-lr", "2e-4"])
