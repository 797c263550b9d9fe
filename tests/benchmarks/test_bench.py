import functools
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench.py"


def _smoke_sections(monkeypatch, capsys, sections):
    """The `### ` sections `bench.py --smoke --sections ...` prints."""
    argv = [str(SCRIPT), "--smoke", "--sections", *sections]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(SCRIPT), run_name="__main__")
    return capsys.readouterr().out.split("\n### ")[1:]


def _assert_memory_points(rows):
    for row in rows:
        assert "failed" not in row and "killed" not in row and "not run" not in row


# Two tests, so that CI's two workers share the smoke run: section 12 alone
# takes about as long as the eleven before it (its memory children).
@pytest.mark.large
def test_bench_smoke_run_prints_sections_1_to_11(monkeypatch, capsys):
    bench = runpy.run_path(str(SCRIPT))
    names = [name for name in bench["SECTIONS"] if name != "long_documents"]
    sections = _smoke_sections(monkeypatch, capsys, names)
    assert [s.split(" ", 1)[0] for s in sections] == [f"{i}." for i in range(1, 12)]
    # Data rows per section: 2 layer rows; 1 memory, encoder and generation
    # row; 4 window rows and 1 window memory row; 3 modifier rows; 2 GQA rows;
    # 1 row of execution modes; 1 bf16 row; 1 long-context row; 2 LSTMN time
    # rows and 2 LSTMN memory rows.
    data = [_data_rows(s) for s in sections]
    assert [len(rows) for rows in data] == [2, 1, 1, 1, 5, 3, 2, 1, 1, 1, 4], sections
    # The long-context row: time over the FLOP time and over the products alone.
    assert data[9][0].count("|") == 7, data[9]
    for rows in (data[1], data[4][-1:], data[7], data[9], data[10][2:]):
        _assert_memory_points(rows)  # child-process memory points


@pytest.mark.large
def test_bench_smoke_run_prints_section_12(monkeypatch, capsys):
    (section,) = _smoke_sections(monkeypatch, capsys, ["long_documents"])
    assert section.startswith("12. ")
    # One length forward+backward and one forward, 4 one-layer candidates
    # and 5 stacks each; memory children for the forward+backward rows of
    # the dense anchor and the T-DMCA layer and stack only.
    rows = _data_rows(section)
    assert len(rows) == 2 * (4 + 5), section
    assert "Targets of issue 43 at L=8192" in section, section
    backward, forward = rows[:9], rows[9:]
    smoke_memory = runpy.run_path(str(SCRIPT))["LONG_SMOKE_MEMORY"]
    measured = [row for row in backward if row.split("|")[2].strip() in smoke_memory]
    assert len(measured) == 4, backward  # full-dense is a layer and a stack
    _assert_memory_points(measured)
    for row in measured:  # XLA MiB and peak GiB, and their ratios to dense
        cells = [cell.strip() for cell in row.strip("| ").split("|")]
        assert float(cells[6]) >= 0 and float(cells[8]) > 0, row
        assert float(cells[7]) > 0 and float(cells[9]) > 0, row
    others = [row for row in backward + forward if row not in measured]
    assert all("memory not measured under --smoke" in row for row in others)


def _data_rows(section):
    """Table rows of a section, without header and separator rows."""
    lines = section.splitlines()
    return [
        line
        for i, line in enumerate(lines)
        if line.startswith("| ")
        and not (i + 1 < len(lines) and lines[i + 1].startswith("|---"))
    ]


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


@pytest.mark.tf_only  # bench.py's gradient step is a tf.function
def test_bench_lstmn_helpers():
    bench = runpy.run_path(str(SCRIPT))
    growth, times_four = bench["growth"], bench["times_four"]
    assert growth({64: 1.0, 256: 16.0, 1024: 64.0}) == {64: None, 256: 16.0, 1024: 4.0}
    assert growth({8: 1.0, 16: 2.0}) == {8: None, 16: None}  # no T/4 measured
    assert growth({64: 0, 256: 1.0})[256] is None  # a failed point
    assert [times_four(v) for v in (None, 15.94)] == ["-", "15.9x"]
    assert bench["RECURRENT"] == ("lstmn", "lstm")
    x = bench["tf"].random.normal((2, 5, 3))
    for name in bench["RECURRENT"]:
        layer = bench["recurrent_layer"](name, 4)
        layer(x)
        grads = bench["recurrent_gradients"](layer)(x)
        # The input's gradient, then one per trainable weight.
        assert len(grads) == 1 + len(layer.trainable_weights)
        assert tuple(grads[0].shape) == (2, 5, 3)
    args = bench["parse_args"](["--smoke", "--sections", "lstmn"])
    assert args.lstmn_lengths == [8, 32]  # a 4x step: the growth column is filled


@pytest.mark.tf_only  # bench.py's steps are tf.functions
def test_bench_long_documents_helpers(capsys):
    bench = runpy.run_path(str(SCRIPT))
    args = bench["parse_args"](["--sections", "long_documents"])
    assert (args.long_lengths, args.long_forward_lengths) == (
        [1024, 2048, 4096, 8192],
        [16384, 32768],
    )
    assert (args.long_batch, args.long_width, args.long_heads) == (1, 256, 4)
    assert (args.long_block, args.long_factor) == (256, 3)
    share = functools.partial(bench["score_share"], args=args)
    assert share("layer", "full-dense", 8192) == 1.0
    assert share("layer", "full-chunked", 8192) == pytest.approx(33 / 64)
    assert share("layer", "local", 8192) == pytest.approx(63 / 1024)
    # Memory-compressed at 8192, causal on the chunked path: query blocks of
    # 256 read the key blocks (of 256) up to slot stop // 3 of the 2732.
    blocks = [
        min(-(-(stop // 3 + 1) // 256) * 256, 2732) for stop in range(256, 8193, 256)
    ]
    compressed = 256 * sum(blocks) / 8192**2
    assert share("layer", "memory-compressed", 8192) == pytest.approx(compressed)
    assert compressed == pytest.approx(0.1914, abs=1e-4)
    # Below the chunked path's threshold it is dense: every memory entry.
    assert share("layer", "memory-compressed", 1024) == pytest.approx(343 / 1024)
    lmlml = (3 * 63 / 1024 + 2 * compressed) / 5
    assert share("stack", "LMLML", 8192) == pytest.approx(lmlml)
    assert share("stack", "local", 8192) == share("layer", "local", 8192)
    # The dense one layer at 32768 forward holds 2 (1, 4, L, L) float32
    # tensors; the stack backward one per layer and 2 more; chunked: none.
    dense = functools.partial(bench["dense_scores_bytes"], args=args)
    assert dense("layer", "full-dense", 32768, False) == 32 * 2**30
    assert dense("stack", "full-dense", 8192, True) == 7 * 2**30
    assert dense("stack", "full-chunked", 32768, True) == 0
    verdict = bench["target_verdict"]
    assert verdict(0.31, 0.4) == "0.31x: met (target <= 0.40x)"
    assert verdict(0.47, 0.4) == "0.47x: missed by 0.07x (target <= 0.40x)"
    assert verdict(None, 0.4) == "not measured"
    row = dict(
        length=8192,
        name="LMLML",
        anchor="full-chunked",
        time_ratio=0.5,
        xla_bytes_ratio=0.1,
        peak_ratio=None,
    )
    result = bench["long_targets"]([row], [1024, 8192])
    assert result == dict(
        length=8192, time_ratio=0.5, xla_bytes_ratio=0.1, peak_ratio=None
    )
    line = capsys.readouterr().out
    assert "(full-chunked) 0.50x: missed by 0.10x (target <= 0.40x)" in line, line
    assert "XLA's account 0.10x: met (target <= 0.33x)" in line, line
    assert "peak RSS not measured" in line, line
    assert bench["long_targets"]([], [256, 512]) is None
    assert "(8192 not measured: at L=512): not measured" in capsys.readouterr().out


@pytest.mark.tf_only
def test_bench_long_documents_layers_run():
    """Every one-layer candidate of section 12, forward and backward."""
    bench = runpy.run_path(str(SCRIPT))
    args = bench["parse_args"](["--smoke"])
    x = bench["tf"].random.normal((1, 24, args.long_width))
    for name in bench["LONG_LAYERS"]:
        out = bench["long_step"]("layer", name, False, args)(x)
        assert tuple(out.shape) == (1, 24, args.long_width), name
        grads = bench["long_step"]("layer", name, True, args)(x)
        assert tuple(grads[0].shape) == (1, 24, args.long_width), name
        assert all(g is not None for g in grads), name


@pytest.mark.large
def test_jax_bench_smoke_run_prints_every_table():
    """In a child process: the JAX backend is chosen before Keras loads."""
    pytest.importorskip("jax")
    script = SCRIPT.with_name("bench_jax.py")
    out = subprocess.run(
        [sys.executable, str(script), "--smoke"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])},
        timeout=600,
    ).stdout
    sections = out.split("\n### ")[1:]
    assert [s.split(" ", 1)[0] for s in sections] == ["1.", "2.", "3.", "4."], out
    assert [len(_data_rows(s)) for s in sections] == [1, 1, 1, 2], out
