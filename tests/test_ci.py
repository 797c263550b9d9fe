"""What CI runs: `.ci/run` runs the quick suites and the large set.

The tests marked `large` (whole example scripts, the variants' compiled
fits, multi-process training, the wheel install, the browser test) are kept
out of `make test` for its time, so CI must run them or nobody does.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _make_variables():
    """`NAME: value` of the Makefile's `NAME := value` (or `=`, `?=`)."""
    variables = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Z_]+)\s*[:?]?=\s*(.*)$", line)
        if match:
            variables[match.group(1)] = match.group(2)
    return variables


def _expand(text, variables):
    """`text` with the Makefile's `$(NAME)` references replaced, nested ones
    too; other `$(...)` (make's functions) are left as they are."""
    for _ in range(5):
        text = re.sub(
            r"\$\(([A-Z_]+)\)", lambda m: variables.get(m.group(1), m.group(0)), text
        )
    return text


def _make_targets():
    """`target: recipe lines` of the Makefile, its variables expanded."""
    targets, name, variables = {}, None, _make_variables()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([\w-]+):", line)
        if match:
            name = match.group(1)
            targets[name] = []
        elif line.startswith("\t") and name:
            targets[name].append(_expand(line.strip(), variables))
    return targets


def _ci_commands():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and line[0] != "#"]


def _runs_target(command, target):
    return re.search(rf"\bmake (\S+ )*{re.escape(target)}\b", command) is not None


def test_ci_runs_both_backends_and_the_large_set():
    commands = _ci_commands()
    targets = _make_targets()
    ran = {t for t in targets for c in commands if _runs_target(c, t)}
    assert {"test", "test-jax", "test-jax-slow"} <= ran, commands
    large = [t for t in ran if any("-m large" in r for r in targets[t])]
    assert large, f".ci/run runs no make target with `pytest -m large`: {commands}"


def test_ci_requires_the_browser_for_the_large_set():
    text = (ROOT / ".ci" / "run").read_text()
    assert "KERAS_ATTENTION_REQUIRE_BROWSER=1" in text
    assert "apt-get install" in text and "chromium" in text


def test_the_views_browser_tests_run_once_in_ci():
    """tests/test_visualization_browser.py is `large` (the large set, which
    CI runs, takes it; `make test` leaves it out) and `browser` (`make
    test-browser` runs it alone, which CI does not call: once is enough);
    .ci/run installs the driver with the browser."""
    source = (ROOT / "tests" / "test_visualization_browser.py").read_text()
    assert "pytest.mark.large, pytest.mark.browser" in source
    assert "-m browser" in " ".join(_make_targets()["test-browser"])
    commands = _ci_commands()
    assert not any(_runs_target(c, "test-browser") for c in commands)
    assert "chromium chromium-driver" in (ROOT / ".ci" / "run").read_text()


def test_the_two_jax_targets_split_the_quick_suite():
    """`make test-jax` leaves out `slow_on_jax`; `make test-jax-slow` runs
    exactly those, so that together they run the whole quick suite."""
    targets = _make_targets()
    quick = " ".join(targets["test-jax"])
    slow = " ".join(targets["test-jax-slow"])
    assert '-m "not large and not slow_on_jax"' in quick
    assert '-m "slow_on_jax and not large"' in slow
    assert "KERAS_BACKEND=jax" in quick and "KERAS_BACKEND=jax" in slow


def test_every_test_listed_slow_on_jax_exists():
    """tests/slow_on_jax.txt names tests that exist (a renamed test would
    otherwise silently move back into `make test-jax`)."""
    for line in (ROOT / "tests" / "slow_on_jax.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, name = line.split("[")[0].split("::")
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), line


def test_every_pattern_listed_in_variants_names_tests_that_exist():
    """Each line of tests/variants.txt names an existing test function (a
    renamed one would otherwise silently move back into `make test`)."""
    for line in (ROOT / "tests" / "variants.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, name = line.split("[")[0].split("::")
        source = (ROOT / path).read_text()
        pattern = name.replace("*", r"\w*")
        assert re.search(rf"^def {pattern}\(", source, re.M), line


def test_the_large_set_runs_in_parts_that_leave_no_test_out():
    """`make test-large-only` runs the large set as several pytest runs (a
    worker's memory grows with every test it runs). Run with
    `LARGE_PYTEST=echo`, it prints each part's arguments: each part ignores
    the paths of the parts before it and the last runs `tests` ignoring them
    all, so no large test runs twice or falls between the parts."""
    import subprocess

    recipe = " ".join(_make_targets()["test-large-only"])
    assert "-m large" in recipe, recipe
    result = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "test-large-only", "LARGE_PYTEST=echo"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    parts = [line.split() for line in result.stdout.splitlines()]
    assert len(parts) >= 3, result.stdout
    ran = []
    for words in parts:
        ignored = [
            w.removeprefix("--ignore=") for w in words if w.startswith("--ignore=")
        ]
        assert ignored == ran, words
        ran += [w for w in words if not w.startswith("--")]
    assert parts[-1][-1] == "tests", parts[-1]
