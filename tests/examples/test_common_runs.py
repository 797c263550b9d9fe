"""`examples/common/runs.py`: what a run records about itself."""

from examples.common import runs


def test_provenance_names_the_code_the_run_started_on(monkeypatch):
    record = runs.provenance("examples/nlp/char_lm.py", ["--smoke", 3])
    head = runs._git("rev-parse", "HEAD")  # None outside a git checkout
    assert record["git_commit"] == head and "git_commit_at_end" not in record
    assert record["script"] == "examples/nlp/char_lm.py"
    assert record["command"] == "python examples/nlp/char_lm.py --smoke 3"
    assert record["started"] <= record["date"]
    # A commit made while the run trains is not the run's code.
    monkeypatch.setattr(runs, "_START_COMMIT", "0" * 40)
    moved = runs.provenance("examples/nlp/char_lm.py", [])
    assert moved["git_commit"] == "0" * 40
    assert moved["git_commit_at_end"] == head
