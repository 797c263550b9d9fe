"""`tools/figures.py`: the quoted figures, their provenance and staleness,
on a toy repository (its own git history with chosen commit dates)."""

import importlib.util
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("figures", ROOT / "tools" / "figures.py")
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)

EXAMPLE = '''"""Title: a toy example.

Run: `python examples/toy.py --epochs 3 \\\\
    --seed 1`

Measured (2026-01-02, 2 cores, the command above): loss 0.5.
"""

print("toy")
'''
README = """# Toy

## Results

Train with `python examples/toy.py --epochs 3 --seed 1`.

Measured on 2026-01-05 (2 cores): accuracy 99%.

Measured on 2 cores: 3 s per epoch.

Not a figure: 2026-01-01 was a Thursday.
"""


def _commit(repo, date, message):
    env = {
        "GIT_AUTHOR_DATE": f"{date}T12:00:00",
        "GIT_COMMITTER_DATE": f"{date}T12:00:00",
    }
    for command in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t",
                        "-c", "commit.gpgsign=false", *command],
                       cwd=repo, check=True, env={**os.environ, **env})  # fmt: skip
    return figures.git("rev-parse", "HEAD", root=repo)


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "examples" / "toy.py").write_text(EXAMPLE)
    (repo / "README.md").write_text(README)
    first = _commit(repo, "2026-01-03", "toy example")
    results = repo / "outputs" / "toy" / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({
        "results": {"accuracy": 0.99, "curve": [1.0, 0.5], "fd": {"mean": 2.5},
                    "done": True},
        "provenance": {"date": "2026-01-04T10:00:00+00:00", "git_commit": first,
                       "git_dirty": False, "script": "examples/toy.py",
                       "command": "python examples/toy.py --epochs 3"},
    }))  # fmt: skip
    (repo / ".gitignore").write_text("outputs/\n")
    _commit(repo, "2026-01-03", "ignore outputs")
    return repo


def _rows(repo):
    rows = figures.results_figures([repo / "outputs"], repo)
    rows += figures.paragraph_figures([repo / "README.md", repo / "examples"], repo)
    return {row["source"].split("/")[-1]: row for row in rows}


def test_lists_every_figure_with_date_commit_and_command(repo):
    rows = _rows(repo)
    assert sorted(rows) == ["README.md:7", "README.md:9", "results.json", "toy.py:6"]
    result = rows["results.json"]
    assert result["date"] == "2026-01-04" and result["state"] == "ok"
    assert result["command"] == "python examples/toy.py --epochs 3"
    assert result["figure"] == "2 numbers"  # lists and flags left out
    assert result["metrics"] == {"accuracy": 0.99, "fd.mean": 2.5}
    header = rows["toy.py:6"]
    assert header["date"] == "2026-01-02" and header["example"] == "examples/toy.py"
    assert header["command"] == "above: python examples/toy.py --epochs 3 --seed 1"
    assert len(header["commit"]) == 8
    readme = rows["README.md:7"]
    assert readme["example"] == "examples/toy.py"  # found earlier in its section
    assert readme["state"] == "ok"  # measured after the example's last change
    assert rows["README.md:9"]["state"] == "undated"


def test_a_figure_older_than_its_example_is_stale(repo):
    # The header's figure predates the commit that added the file.
    assert _rows(repo)["toy.py:6"]["state"].startswith("STALE: examples/toy.py")
    (repo / "examples" / "toy.py").write_text(EXAMPLE + "print('changed')\n")
    _commit(repo, "2026-01-10", "change the example")
    rows = _rows(repo)
    assert rows["README.md:7"]["state"].startswith(
        "STALE: examples/toy.py changed 2026-01-10"
    )
    assert rows["results.json"]["state"].startswith(
        "STALE: examples/toy.py changed 2026-01-10"
    )
    assert "1 commits" in rows["results.json"]["state"]


def test_main_prints_the_table_and_checks(repo, capsys):
    argv = [str(repo / "outputs"), "--root", str(repo),
            "--docs", str(repo / "README.md"), "--metrics"]  # fmt: skip
    assert figures.main(argv) == 0
    out = capsys.readouterr().out
    assert "| README.md:7 | 2026-01-05 |" in out and "fd.mean = 2.5" in out
    assert figures.main(argv + ["--check"]) == 0  # nothing stale yet
    (repo / "examples" / "toy.py").write_text(EXAMPLE + "print('changed')\n")
    _commit(repo, "2026-01-10", "change the example")
    assert figures.main(argv + ["--check"]) == 1


def test_results_without_provenance_or_with_an_unknown_commit(repo):
    assert figures.results_state({}, repo) == "no provenance"
    unknown = {"git_commit": "0" * 40, "script": "examples/toy.py"}
    assert "not in this repository" in figures.results_state(unknown, repo)


def test_docstring_comment_and_layout_changes_leave_a_figure_standing(repo):
    # Writing the figure into the header, a comment, a blank line: no code.
    (repo / "examples" / "toy.py").write_text(
        EXAMPLE.replace("loss 0.5.", "loss 0.5 (seed 1).").replace(
            'print("toy")', '# a comment\n\nprint( "toy" )'
        )
    )
    _commit(repo, "2026-01-10", "header and comment")
    rows = _rows(repo)
    assert rows["README.md:7"]["state"] == (
        "ok (1 later commits change only docstrings, comments, layout)"
    )
    assert rows["results.json"]["state"].startswith("ok (1 later commits")
    # A function's docstring changes nothing either; its body does.
    source = EXAMPLE + 'def f():\n    """One."""\n    return 1\n'
    (repo / "examples" / "toy.py").write_text(source)
    _commit(repo, "2026-01-11", "a function")
    assert _rows(repo)["README.md:7"]["state"].startswith(
        "STALE: examples/toy.py changed 2026-01-11"
    )
    (repo / "examples" / "toy.py").write_text(source.replace("One.", "Two."))
    last = _commit(repo, "2026-01-12", "its docstring")
    assert not figures.changes_code(last, "examples/toy.py", repo)
    assert figures.code("x = 1  # one") == figures.code("x = 1\n\n")
    assert figures.code("x = 1") != figures.code("x = 2")


def test_a_reviewed_code_change_leaves_a_figure_standing(repo):
    (repo / "examples" / "toy.py").write_text(EXAMPLE + "print('refactor')\n")
    refactor = _commit(repo, "2026-01-10", "a refactor")
    (repo / "tools").mkdir()
    reviewed = repo / "tools" / "figures_reviewed.txt"
    reviewed.write_text(
        "# COMMIT FILE WHY\n"
        f"{refactor[:7]} examples/other.py  another file's review does not count\n"
    )
    assert _rows(repo)["README.md:7"]["state"].startswith("STALE")
    reviewed.write_text(f"{refactor[:7]} examples/toy.py  prints, computes the same\n")
    rows = _rows(repo)
    expected = (
        f"reviewed (1 later code changes judged not to change it: {refactor[:8]})"
    )
    assert rows["README.md:7"]["state"] == expected
    assert rows["results.json"]["state"] == expected
    # A later change nobody reviewed makes it stale again.
    (repo / "examples" / "toy.py").write_text(EXAMPLE + "print('changed')\n")
    last = _commit(repo, "2026-01-11", "a change")
    assert _rows(repo)["README.md:7"]["state"] == (
        f"STALE: examples/toy.py changed 2026-01-11 ({last[:8]})"
    )
    reviewed.write_text("abc examples/toy.py\n")
    with pytest.raises(ValueError, match="COMMIT FILE WHY"):
        figures.reviewed_commits(repo)


def test_a_figure_that_names_its_code_is_checked_from_that_commit(repo):
    # Dated before the commit that added the example (so STALE by date), the
    # header names that commit as its code: nothing changed since.
    first = figures.git("rev-list", "--max-parents=0", "HEAD", root=repo)
    named = EXAMPLE.replace("loss 0.5.", f"loss 0.5, on the code of {first[:7]}.")
    (repo / "examples" / "toy.py").write_text(named)
    _commit(repo, "2026-01-04", "name the code")
    assert _rows(repo)["toy.py:6"]["state"].startswith("ok")
    # A later code change makes it stale; naming an older commit as well
    # checks from the oldest.
    (repo / "examples" / "toy.py").write_text(named + "print('changed')\n")
    last = _commit(repo, "2026-01-05", "a change")
    assert _rows(repo)["toy.py:6"]["state"] == (
        f"STALE: examples/toy.py changed 2026-01-05 ({last[:8]})"
    )
    both = named.replace(f"code of {first[:7]}", f"code {last[:7]} and {first[:7]}")
    (repo / "examples" / "toy.py").write_text(both + "print('changed')\n")
    _commit(repo, "2026-01-06", "name both")
    assert _rows(repo)["toy.py:6"]["state"].startswith("ok")  # names only `last`
    oldest = both.replace(f"and {first[:7]}", f"and the code of {first[:7]}")
    (repo / "examples" / "toy.py").write_text(oldest + "print('changed')\n")
    _commit(repo, "2026-01-07", "name the oldest too")
    assert _rows(repo)["toy.py:6"]["state"].startswith("STALE")
    # An unknown commit falls back to the paragraph's date.
    assert figures.changes_after_named("examples/toy.py", "code 0123456", repo) is None


def test_library_code_changes_after_a_figure_are_counted_not_stale(repo):
    rows = _rows(repo)
    assert rows["README.md:7"]["library"] == "-"  # no library in the repository
    assert rows["results.json"]["library"] == "-"
    assert rows["README.md:9"]["library"] == "?"  # undated, names no code
    library = repo / "keras_attention"
    library.mkdir()
    (library / "core.py").write_text('"""Core."""\nx = 1\n')
    added = _commit(repo, "2026-01-10", "the library")
    (library / "core.py").write_text('"""The core, documented again."""\nx = 1\n')
    _commit(repo, "2026-01-11", "a docstring only")
    (library / "notes.md").write_text("not code\n")
    _commit(repo, "2026-01-12", "notes")
    rows = _rows(repo)
    expected = f"1 (newest {added[:8]}, 2026-01-10)"
    assert rows["README.md:7"]["library"] == expected
    assert rows["results.json"]["library"] == expected
    assert rows["README.md:7"]["state"] == "ok"  # the example did not change
    (library / "core.py").write_text('"""The core, documented again."""\nx = 2\n')
    last = _commit(repo, "2026-01-13", "a change")
    assert _rows(repo)["toy.py:6"]["library"] == f"2 (newest {last[:8]}, 2026-01-13)"
    lines = figures.table([_rows(repo)["README.md:7"]])
    assert lines[0].endswith("| state | library |")
    assert lines[2].endswith(f"| ok | 2 (newest {last[:8]}, 2026-01-13) |")
