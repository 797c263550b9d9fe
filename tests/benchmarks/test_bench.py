import runpy
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench.py"


@pytest.mark.large
def test_bench_smoke_run_prints_every_table(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--smoke"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    for title in ("### 1.", "### 2.", "### 3.", "### 4."):
        assert title in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    # Data rows: 2 layer rows, 1 memory row, 1 encoder row, 1 generation row.
    data = [r for r in rows if r[2].isdigit() or r.startswith("| xla")]
    assert len(data) == 5, out
    memory = [r for r in data if r.startswith("| 32 ")]
    assert memory and "failed" not in memory[0] and "killed" not in memory[0]


def test_bench_ratio_helpers():
    bench = runpy.run_path(str(SCRIPT))
    assert bench["spread"]([3.0, 1.0, 2.0], 1) == "2.0 (1.0-3.0)"
    assert bench["ratio"]([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == "1.00 (0.50-1.50)"
    calls = []
    times = bench["interleaved"](
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2
    )
    assert calls == ["a", "b", "a", "b", "a", "b"]  # warm-up, then A B A B
    assert len(times["a"]) == len(times["b"]) == 2
