import runpy
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "generation_cache.py"


@pytest.mark.tf_only(reason="the benchmark compares against a tf.function loop")
def test_generation_benchmark_smoke_run_has_identical_tokens(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--smoke"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:3] == "| 2"]
    assert len(rows) == 1
    assert rows[0].rstrip(" |").endswith("True")  # cached == uncached tokens
