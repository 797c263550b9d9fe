import argparse
import csv
import importlib.util
import json
import math
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "complexity.py"


def _load():
    spec = importlib.util.spec_from_file_location("complexity_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


complexity = _load()


def test_crossover_interpolates_on_log_log_axes():
    lengths = [16, 32, 64, 128]
    theirs = [1.0, 2.0, 4.0, 8.0]  # linear
    ours = [0.25, 1.0, 4.0 * 4, 16.0 * 4]  # quadratic, crosses between 32 and 64
    length, status = complexity.crossover(lengths, ours, theirs)
    assert status == "crossed"
    # log(ours/theirs) goes from log(1/2) at 32 to log(4) at 64: 1/3 of the way.
    assert math.isclose(length, 32 * 2 ** (1 / 3), rel_tol=1e-9)


def test_crossover_ignores_a_noisy_crossing_before_the_last_one():
    lengths = [16, 32, 64, 128]
    ours = [1.0, 3.0, 1.0, 9.0]  # above at 32 (noise), below at 64, above at 128
    theirs = [2.0, 2.0, 2.0, 2.0]
    length, status = complexity.crossover(lengths, ours, theirs)
    assert status == "crossed" and 64 < length < 128


def test_crossover_always_and_never():
    assert complexity.crossover([1, 2], [3.0, 4.0], [1.0, 1.0]) == (None, "always")
    assert complexity.crossover([1, 2], [3.0, 0.5], [1.0, 1.0]) == (None, "never")
    assert complexity.crossover([1, 2], [None, None], [1.0, 1.0]) == (None, "never")


def test_analytic_memory_follows_the_complexity_table():
    conv = [complexity.analytic_bytes("conv", n, 64, 4, 1) for n in (1024, 2048)]
    attention = [
        complexity.analytic_bytes("attention", n, 64, 4, 1) for n in (1024, 2048)
    ]
    assert conv[1] == 2 * conv[0]  # O(L)
    assert attention[0] == 4 * (4 * 1024 * 64 + 4 * 1024**2)
    assert 3.5 < attention[1] / attention[0] < 4.0  # O(L^2) dominates


@pytest.mark.tf_only  # the script times tf.function graphs
def test_smoke_run(tmp_path, capsys):
    result = complexity.main(["--smoke", "--output-dir", str(tmp_path)])
    assert result["config"]["lengths"] == [16, 64]
    for kind in ("conv", "gru", "attention"):
        points = result["points"][kind]
        assert [p["length"] for p in points] == [16, 64]
        assert all(p["seconds"] > 0 for p in points)
    assert set(result["crossovers"]) >= {"conv_seconds", "gru_seconds"}
    saved = json.loads((tmp_path / "complexity.json").read_text())
    assert saved["crossovers"] == result["crossovers"]
    with open(tmp_path / "complexity.csv") as f:
        assert len(list(csv.DictReader(f))) == 6
    assert (tmp_path / "complexity.png").stat().st_size > 5000
    assert "| 64 |" in (tmp_path / "complexity.md").read_text()
    assert "GRU" in capsys.readouterr().out


def test_width_must_be_a_multiple_of_heads():
    with pytest.raises(SystemExit):
        complexity.parse_args(["--width", "10", "--heads", "4"])


@pytest.mark.large
def test_child_process_measures_memory(tmp_path):
    args = argparse.Namespace(
        width=16, heads=2, batch=1, rounds=1, round_seconds=0.01, timeout=300.0
    )
    point = complexity.run_child("attention", 512, args)
    assert "error" not in point, point
    # The (2, 512, 512) float32 weights alone are 2 MiB.
    assert point["peak_bytes"] >= 2 * 1024**2
    assert point["seconds"] > 0
