import importlib.util
import json
import pathlib

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "reasoning" / "babi_ut.py"


def _load():
    spec = importlib.util.spec_from_file_location("babi_ut", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


babi_ut = _load()

PEOPLE = ["Mary", "John", "Sandra", "Daniel"]
PLACES = ["kitchen", "garden", "office", "hallway"]


def _story_file(rng, questions):
    """Task-1-like stories in the bAbI format: moves, then a question on
    where someone is (answer: their last place), two questions a story."""
    lines = []
    while len([line for line in lines if "\t" in line]) < questions:
        where, n = {}, 0
        for _ in range(2):
            for _ in range(3):
                who, place = rng.choice(PEOPLE), rng.choice(PLACES)
                where[who] = (place, n + 1)
                n += 1
                lines.append(f"{n} {who} went to the {place}.")
            who = rng.choice(sorted(where))
            n += 1
            lines.append(f"{n} Where is {who}? \t{where[who][0]}\t{where[who][1]}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def babi_dir(tmp_path):
    """`en/` and `en-10k/` with task 1 and task 3 (no 10k training file for
    task 3, as in ../shared/data/babi)."""
    rng = np.random.default_rng(0)
    for folder in ("en", "en-10k"):
        (tmp_path / folder).mkdir()
    for task in (1, 3):
        stem = f"qa{task}_{babi_ut.TASK_NAMES[task]}"
        (tmp_path / "en" / f"{stem}_train.txt").write_text(_story_file(rng, 120))
        (tmp_path / "en" / f"{stem}_test.txt").write_text(_story_file(rng, 40))
        (tmp_path / "en-10k" / f"{stem}_test.txt").write_text(_story_file(rng, 40))
    stem = f"qa1_{babi_ut.TASK_NAMES[1]}"
    (tmp_path / "en-10k" / f"{stem}_train.txt").write_text(_story_file(rng, 240))
    return tmp_path


def test_parse_stories_keeps_the_statements_before_each_question():
    text = (
        "1 Mary went to the kitchen.\n2 John went to the garden.\n"
        "3 Where is Mary? \tkitchen\t1\n4 Mary went to the office.\n"
        "5 Where is Mary? \toffice\t4\n1 Sandra went to the hallway.\n"
        "2 Where is Sandra?\thallway\t1\n"
    )
    examples = babi_ut.parse_stories(text)
    assert [len(facts) for facts, _, _ in examples] == [2, 3, 1]
    assert examples[1][0][-1] == ["mary", "went", "to", "the", "office"]
    assert examples[1][1:] == (["where", "is", "mary"], "office")


def test_vectorize_puts_the_newest_fact_first_and_unknown_answers_at_minus_one():
    train = [([["a", "b"], ["c"]], ["q"], "x")]
    vocabulary = babi_ut.Vocabulary(train)
    story, question, answer = babi_ut.vectorize(
        train + [([["a"]], ["q", "zz"], "y")], vocabulary, max_facts=3, max_words=2
    )
    c, a, b = (vocabulary.word_ids[w] for w in "cab")
    np.testing.assert_array_equal(story[0], [[c, 0], [a, b], [0, 0]])
    np.testing.assert_array_equal(question[1], [vocabulary.word_ids["q"], 1])
    np.testing.assert_array_equal(answer, [0, -1])


def test_checksums_are_checked(babi_dir):
    with pytest.raises(ValueError, match="Checksum mismatch"):
        babi_ut.task_files(str(babi_dir), 1, "10k")
    *_, note = babi_ut.task_files(str(babi_dir), 3, "10k", check_hash=False)
    assert "1k training set" in note


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="a short end-to-end run; the layers are tested on JAX")
def test_smoke_run(tmp_path, babi_dir):
    out = tmp_path / "out"
    argv = ["--data-dir", str(babi_dir), "--no-check-hash", "--output-dir",
            str(out), "--tasks", "3", "--smoke"]  # fmt: skip
    summary = babi_ut.main(argv)
    records = summary["results"][3]
    assert set(records) == {"ut_act", "transformer"}
    ut, baseline = records["ut_act"], records["transformer"]
    # The baseline has as many weights as the UT, up to one FFN unit per
    # layer (2 layers of width 16: 2 * (2 * 16 + 1) weights).
    assert 0 <= ut["parameters"] - baseline["parameters"] <= 2 * 33
    assert 1 <= ut["mean_steps"] <= 2
    for record in records.values():
        assert 0.0 <= record["test_error"] <= 1.0
    assert "1k training set" in summary["notes"][3]
    assert (out / "ponder_steps.png").stat().st_size > 0
    assert "failed (> 5%)" in (out / "results.md").read_text()
    saved = json.loads((out / "results.json").read_text())
    assert saved["results"]["3"]["ut_act"]["test_error"] == ut["test_error"]
    # A second run resumes: the finished runs are read back, not retrained.
    again = babi_ut.main(argv)
    assert again["results"][3] == records
