import argparse
import csv
import gzip
import importlib.util
import json
import pathlib

import numpy as np
import pytest

SCRIPT = (
    pathlib.Path(__file__).parents[2]
    / "examples"
    / "nlp"
    / "long_document_extraction.py"
)


def _load():
    spec = importlib.util.spec_from_file_location("long_document_extraction", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lde = _load()

WORDS = ["the", "film", "was", "great", "dull", "acting", "plot", "and", "I", "Liked",
         "it", "10/10", "<br />", "Ending!", "café"]  # fmt: skip


def _reviews(count, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(5, 30))) for _ in range(count)]


def _args(**overrides):
    """The smoke run's model and task arguments."""
    values = dict(lde.SMOKE, previous_tokens=2, value_length=2,
                  compression_factor=3, local_memory_flange=4,
                  attention_impl="auto", seed=0, learning_rate=3e-3,
                  patterns=list(lde.PATTERNS))  # fmt: skip
    return argparse.Namespace(**{**values, **overrides})


@pytest.fixture
def data_dir(tmp_path):
    """Synthetic reviews in the JSON-lines format of ../shared/data/imdb."""
    directory = tmp_path / "imdb"
    directory.mkdir()
    for seed, split in enumerate(("train", "test")):
        with gzip.open(directory / f"{split}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i, text in enumerate(_reviews(40, seed)):
                review = dict(id=i, rating=8, label=1, text=text)
                f.write(json.dumps(review) + "\n")
    return directory


def test_reviews_keep_no_capitals_or_digits():
    text = lde.clean_review("Great FILM, 10/10!<br /><br />Loved   it. Café")
    assert text == "great film, /! loved it. caf"
    assert set(text) <= set(lde.TEXT)


def test_the_local_reach_of_stacked_block_local_layers():
    # Blocks of 4, a flange of 4: position 9 (block 2) reads from 4 on.
    assert lde.local_reach(9, 4, 4, 1) == 4
    assert lde.local_reach(9, 4, 4, 2) == 0
    assert lde.local_reach(9, 4, 0, 1) == 8  # within its block only
    assert lde.local_reach(2025, 32, 32, 5) == 1856  # the defaults at 2048
    layout = lde.Layout(2048, 8, 2, 32, 32, 5, previous_tokens=2)
    assert layout.first_target == 2025 and layout.limit == 1854
    with pytest.raises(ValueError, match="local reach"):
        lde.Layout(256, 8, 2, 64, 64, 5)


def test_documents_put_the_facts_where_intended():
    reviews = [lde.clean_review(r) for r in _reviews(50)]
    layout = lde.Layout(300, 5, 3, 8, 8, 5, previous_tokens=2)
    for seed in range(20):
        sequence, facts = lde.make_document(
            reviews, np.random.default_rng(seed), layout
        )
        assert sequence.shape == (301,) and sequence.dtype == np.int32
        text = lde.decode(sequence)
        assert text[layout.document] == lde.SEPARATOR
        document, answer = text[: layout.document], text[layout.document + 1 :]
        assert [key for key, _, _ in facts] == [c for c in document if c.isupper()]
        for key, code, position in facts:
            assert len(code) == 3 and code.isdigit()
            assert text[position - 1 : position + 4] == f" {key}{code}"
            assert position + 4 <= layout.limit  # the whole record before it
        # Capitals and digits are the records' only.
        assert sum(c.isupper() or c.isdigit() for c in document) == 5 * 4
        # The answer: every key once, in some order, with its code.
        items = [answer[i : i + 4] for i in range(0, len(answer), 4)]
        assert sorted(items) == sorted(key + code for key, code, _ in facts)
        x, y = sequence[:-1], sequence[layout.targets + 1]
        assert lde.decode(y) == "".join(item[1:] for item in items)
        assert all(lde.decode(x[t : t + 1]).isupper() for t in layout.targets[::3])


def test_documents_are_a_function_of_the_seed():
    reviews = [lde.clean_review(r) for r in _reviews(50)]
    layout = lde.Layout(200, 3, 2, 8, 8, 5)
    one = lde.make_document(reviews, np.random.default_rng([1, 200, 7]), layout)
    two = lde.make_document(reviews, np.random.default_rng([1, 200, 7]), layout)
    other = lde.make_document(reviews, np.random.default_rng([1, 200, 8]), layout)
    np.testing.assert_array_equal(one[0], two[0])
    assert one[1] == two[1] and one[1] != other[1]
    # Batch i of the stream does not depend on where the stream starts.
    late = next(lde.training_batches(reviews, layout, 2, 1, 5, 6))
    stream = list(lde.training_batches(reviews, layout, 2, 1, 3, 6))
    np.testing.assert_array_equal(late[0], stream[2][0])
    np.testing.assert_array_equal(late[1], stream[2][1])


def test_the_answer_position_control():
    train = np.array([[1, 2], [1, 3], [4, 3]])
    test = np.array([[1, 3], [1, 2], [0, 0]])
    accuracy, exact = lde.position_prior(train, test)
    assert accuracy == pytest.approx(3 / 6) and exact == pytest.approx(1 / 3)


def _documents(layout, count=2, seed=0):
    reviews = [lde.clean_review(r) for r in _reviews(50)]
    rng = np.random.default_rng(seed)
    return np.stack([lde.make_document(reviews, rng, layout)[0] for _ in range(count)])


def test_the_facts_are_out_of_the_local_decoders_reach():
    """Changing every character before `layout.limit` (all the records)
    leaves the answer logits of `LLLLL` exactly as they were, and changes
    those of the full and memory-compressed decoders; the character at
    `layout.limit` reaches `LLLLL` (the bound is tight)."""
    args = _args()
    layout = lde.make_layout(96, args)
    sequences = _documents(layout)[:, :-1]
    changed = sequences.copy()
    changed[:, : layout.limit] = lde.CHARACTERS.index("z")
    at_limit = sequences.copy()
    at_limit[:, layout.limit] = lde.CHARACTERS.index("Z")
    for pattern in lde.PATTERNS:
        model = lde.ExtractionDecoder(pattern, layout.targets - layout.length, args)
        logits = np.asarray(model(sequences))
        moved = np.abs(np.asarray(model(changed)) - logits).max()
        if pattern == "LLLLL":
            assert moved == 0.0
            assert np.abs(np.asarray(model(at_limit)) - logits).max() > 1e-6
        else:
            assert moved > 1e-4, pattern


@pytest.mark.parametrize("pattern", ["FFFFF", "LMLML"])
def test_greedy_decoding_with_the_cache_agrees_with_the_full_pass(pattern):
    """The cached greedy answer, written into the sequences, is what the
    full (teacher-forced) pass predicts from them: the cached steps equal
    the full pass."""
    args = _args()
    layout = lde.make_layout(96, args)
    sequences = _documents(layout, count=3)
    model = lde.ExtractionDecoder(pattern, layout.targets - layout.length, args)
    greedy = lde.greedy_answers(model, sequences, layout)
    assert greedy.shape == (3, len(layout.targets))
    sequences[:, layout.targets + 1] = greedy
    forced = np.argmax(np.asarray(model(sequences[:, :-1])), axis=-1)
    np.testing.assert_array_equal(forced, greedy)
    measures = lde.evaluate(model, sequences, layout, batch_size=2)
    assert measures["exact_match"] == measures["exact_match_teacher_forced"] == 1.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--patterns", "LXL"], "layer pattern"),
        (["--patterns", "LL", "FFF"], "same number of layers"),
        (["--curriculum", "64"], "LENGTH:ITERATIONS"),
        (["--lengths", "300", "--local-block-size", "64"], "local reach"),
        (["--num-facts", "27"], "at most 26"),
        (["--iterations", "30", "--eval-interval", "20"], "divide"),
    ],
)
def test_bad_flags_give_a_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit):
        lde.parse_args(argv)
    assert message in capsys.readouterr().err


def test_smoke_defaults_and_flags():
    args = lde.parse_args(["--smoke", "--hidden-dim", "8"])
    assert args.lengths == [96] and args.hidden_dim == 8 and not args.jit_compile
    assert args.local_memory_flange == args.local_block_size == 4
    args = lde.parse_args(["--smoke", "--jit-compile"])
    assert args.jit_compile
    default = lde.parse_args([])
    assert default.patterns == list(lde.PATTERNS) and default.lengths == [2048]
    assert default.curriculum == [(64, 400), (256, 800)]


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="a short end-to-end run; the model is tested on JAX")
def test_smoke_run(data_dir, tmp_path):
    out = tmp_path / "out"
    # T-D and T-DMCA: every layer kind; the other two patterns would cost CI
    # their own compilations (the four are compared in the tests above).
    argv = ["--smoke", "--data-dir", str(data_dir), "--no-check-hash",
            "--output-dir", str(out), "--patterns", "FFFFF", "LMLML"]  # fmt: skip
    results = lde.main(argv)
    decoders = results[96]["decoders"]
    assert list(decoders) == ["FFFFF", "LMLML"]
    for pattern, record in decoders.items():
        assert 0.0 <= record["test"]["exact_match"] <= 1.0
        assert record["test"]["documents"] == 4 and record["ms_per_iteration"] > 0
        rows = _rows(out / f"{pattern}-96" / "log.csv")
        assert [(r["epoch"], r["length"]) for r in rows] == [
            ("0", "64"), ("1", "96"), ("2", "96")]  # fmt: skip
    controls = results[96]["controls"]
    assert controls["chance_exact_match"] == pytest.approx(1e-4)
    table = (out / "results.md").read_text()
    assert "| 96 | `LMLML` |" in table and "answer-position control" in table
    saved = json.loads((out / "results.json").read_text())
    assert saved["provenance"]["script"] == "examples/nlp/long_document_extraction.py"
    # Finished decoders are reloaded, not trained again.
    again = lde.main([*argv, "--patterns", "FFFFF"])
    assert again[96]["decoders"]["FFFFF"] == decoders["FFFFF"]
    assert len(_rows(out / "FFFFF-96" / "log.csv")) == 3
    with pytest.raises(ValueError, match="other settings"):
        lde.main([*argv, "--patterns", "FFFFF", "--learning-rate", "1e-2"])


@pytest.mark.large
@pytest.mark.tf_only(reason="a short end-to-end run; the model is tested on JAX")
def test_an_interrupted_run_resumes(data_dir, tmp_path, monkeypatch):
    """Killed at the start of its third interval (the second at the final
    length), a rerun goes on from the backup with the batches after it,
    and ends where an uninterrupted run ends."""
    argv = ["--smoke", "--data-dir", str(data_dir), "--no-check-hash",
            "--patterns", "LMLML", "--iterations", "6"]  # fmt: skip
    straight = lde.main([*argv, "--output-dir", str(tmp_path / "straight")])
    original = lde.Progress.on_epoch_begin

    def crash(self, epoch, logs=None):
        if self.offset + epoch == 2:
            raise KeyboardInterrupt
        original(self, epoch, logs)

    monkeypatch.setattr(lde.Progress, "on_epoch_begin", crash)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        lde.main([*argv, "--output-dir", str(out)])
    assert [r["epoch"] for r in _rows(out / "LMLML-96" / "log.csv")] == ["0", "1"]
    monkeypatch.setattr(lde.Progress, "on_epoch_begin", original)
    resumed = lde.main([*argv, "--output-dir", str(out)])
    rows = _rows(out / "LMLML-96" / "log.csv")
    assert [r["epoch"] for r in rows] == ["0", "1", "2", "3"]
    one, two = straight[96]["decoders"]["LMLML"], resumed[96]["decoders"]["LMLML"]
    assert two["final_loss"] == pytest.approx(one["final_loss"], rel=1e-4)
    assert two["test"] == one["test"]
