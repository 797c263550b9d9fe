import gzip
import importlib.util
import json
import math
import pathlib

import keras
import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "long_context_lm.py"


def _load():
    spec = importlib.util.spec_from_file_location("long_context_lm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


long_context_lm = _load()


@pytest.fixture
def text_dir(tmp_path):
    """A small synthetic text: verses of a few words, in a random order."""
    rng = np.random.default_rng(0)
    words = ["to be", "or not", "that is", "the question", "whether"]
    lines = [
        f"{rng.choice(['ANNA', 'BEN'])}:\n" + " ".join(rng.choice(words, 6)) + ".\n"
        for _ in range(400)
    ]
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "input.txt").write_text("\n".join(lines))
    return directory


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--patterns", "LMXL"], "--patterns must be distinct strings"),
        (["--patterns", "LMLML", "LMLML"], "--patterns must be distinct strings"),
        (["--width", "30", "--heads", "4"], "--width must be a multiple of --heads"),
        (["--iterations", "100", "--eval-interval", "30"], "must divide --iterations"),
        (["--context", "0"], "--context must be positive"),
        (["--corpus", "wikipedia"], "invalid choice: 'wikipedia'"),
    ],
)
def test_bad_flags_are_refused_with_a_clear_message(flags, message, capsys):
    with pytest.raises(SystemExit):
        long_context_lm.parse_args(flags)
    assert message in capsys.readouterr().err


def test_smoke_sets_only_the_flags_left_out():
    args = long_context_lm.parse_args(["--smoke", "--width", "8"])
    assert (args.width, args.context, args.iterations) == (8, 64, 20)
    assert args.min_lr == args.lr  # constant after the warm-up
    assert args.patterns == ["FFFFF", "LLLLL", "MMMMM", "LMLML"]


def test_validation_windows_all_or_evenly_spaced():
    ids = np.arange(101, dtype="int32")
    x, y = long_context_lm.validation_windows(ids, 10, count=64)
    assert x.shape == (10, 10)  # all (101 - 1) // 10 consecutive windows
    np.testing.assert_array_equal(x.ravel(), ids[:100])
    np.testing.assert_array_equal(y, x + 1)
    x, _ = long_context_lm.validation_windows(ids, 10, count=4)
    np.testing.assert_array_equal(x[:, 0], [0, 30, 60, 90])  # the first and last
    with pytest.raises(ValueError, match="shorter than one window"):
        long_context_lm.validation_windows(ids[:10], 10, count=4)


def test_one_validation_batch_shape():
    # 54 windows of 2048 (tiny Shakespeare): at most 4 per batch, divides 54.
    assert long_context_lm.eval_batch_size(54, 2048) == 3
    assert long_context_lm.eval_batch_size(64, 2048) == 4
    assert long_context_lm.eval_batch_size(13, 8192) == 1
    assert long_context_lm.eval_batch_size(4, 64) == 4


def test_encode_shares_one_vocabulary():
    (a, b), chars = long_context_lm.encode(["abca", "c\u00e9"])
    assert chars == ["a", "b", "c", "\u00e9"]
    np.testing.assert_array_equal(a, [0, 1, 2, 0])
    np.testing.assert_array_equal(b, [2, 3])
    assert a.dtype == np.int32


def test_imdb_holds_out_the_highest_ids_of_each_class(tmp_path):
    reviews = [
        {"id": i, "rating": 8 if label else 2, "label": label,
         "text": f"r{label}{i}<br /><br />end"}
        for label in (0, 1) for i in range(10)
    ]  # fmt: skip
    with gzip.open(tmp_path / "train.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in reviews)
    train, val = long_context_lm.imdb_texts(str(tmp_path), check_hash=False)
    assert val == "r09\nend\nr19\nend"  # 10% of each class: the highest id
    assert train.startswith("r00\nend\nr01\nend") and "r09" not in train
    assert "<br" not in train + val


def test_full_and_local_models_have_the_same_weights():
    args = long_context_lm.parse_args(["--smoke"])
    counts = {}
    for pattern in ("FF", "LL", "MM", "LM"):
        model = long_context_lm.build_model(pattern, args, 11)
        assert model.attention_paths == ["dense", "dense"]  # T S < 2048 x 2048
        logits = model(np.zeros((2, 24), "int32"))
        assert tuple(logits.shape) == (2, 24, 11)
        counts[pattern] = model.count_params()
    # Each memory-compressed layer adds two convolutions (f D D) and biases.
    width, factor = args.width, args.factor
    conv = 2 * (factor * width * width + width)
    assert counts["FF"] == counts["LL"]
    assert counts["MM"] == counts["FF"] + 2 * conv
    assert counts["LM"] == counts["FF"] + conv


def test_the_memory_process_builds_the_same_model(tmp_path):
    args = long_context_lm.parse_args(
        ["--smoke", "--width", "24", "--heads", "3", "--flange", "0",
         "--attention-impl", "chunked", "--output-dir", str(tmp_path)]
    )  # fmt: skip
    child = long_context_lm.parse_args(long_context_lm.memory_flags(args, "LM", 11))
    assert (child.memory_point, child.memory_vocabulary) == ("LM", 11)
    for name in long_context_lm.MODEL_FLAGS:
        assert getattr(child, name) == getattr(args, name), name
    # Measured once: a memory.json is read back; --no-memory measures nothing.
    args.no_memory = True
    assert long_context_lm.measure_memory(args, "LM", 11) == {}
    (tmp_path / "LM").mkdir()
    (tmp_path / "LM" / "memory.json").write_text('{"xla_step_mib": 3.5}')
    assert long_context_lm.measure_memory(args, "LM", 11) == {"xla_step_mib": 3.5}


def test_progress_takes_the_compilation_out(tmp_path, monkeypatch):
    clock = iter([0.0, 0.0, 25.0, 34.0, 100.0, 200.0, 204.0, 300.0])
    monkeypatch.setattr(long_context_lm.time, "perf_counter", lambda: next(clock))
    progress = long_context_lm.Progress("F", 4, str(tmp_path / "log.csv"))
    progress.on_train_begin()
    progress.on_epoch_begin(0)  # 0
    progress.on_train_batch_begin(0)  # 0
    progress.on_train_batch_end(0)  # 25: compilation and one step
    for batch in (1, 2, 3):
        progress.on_train_batch_begin(batch)
    progress.on_test_begin()  # 34: the other three took 9 s, 3 s each
    assert math.isclose(progress.compile_seconds, 22.0)
    assert math.isclose(progress._train_seconds, 12.0)
    progress.on_epoch_end(0, {"loss": 2.0, "val_loss": 2.5})  # 100
    progress.on_epoch_begin(1)  # 200: no longer the first interval
    progress.on_test_begin()  # 204
    assert math.isclose(progress._train_seconds, 4.0)
    assert math.isclose(progress.compile_seconds, 22.0)


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data")
def test_smoke_run(tmp_path, text_dir):
    out = tmp_path / "out"
    # T-D and T-DMCA: every layer kind (F, L, M) at the default depth. The
    # other two default patterns cost CI two more compilations each.
    argv = ["--smoke", "--data-dir", str(text_dir), "--no-check-hash",
            "--output-dir", str(out), "--patterns", "FFFFF", "LMLML"]  # fmt: skip
    summary = long_context_lm.main(argv)
    results = summary["patterns"]
    assert list(results) == ["FFFFF", "LMLML"]
    vocabulary = len(set((text_dir / "input.txt").read_text()))
    for name, result in results.items():
        curve = result["curve"]
        assert curve["iteration"] == [10, 20]
        bits = curve["loss_bpc"] + curve["val_bpc"]
        assert np.all(np.isfinite(bits)) and max(bits) < 1.5 * math.log2(vocabulary)
        assert curve["val_bpc"][-1] < curve["val_bpc"][0], name
        assert math.isclose(result["val_nats"], result["val_bpc"] * math.log(2))
        assert result["tokens_per_second"] > 0 and result["compile_seconds"] > 0
        assert result["xla_step_mib"] > 0 and result["peak_rss_mib"] >= 0
        assert result["attention_paths"] == ["dense"] * 5  # context 64
    table = (out / "results.md").read_text()
    assert all(f"| `{name}` |" in table for name in results)
    assert (out / "val_bpc.png").stat().st_size > 10_000
    saved = json.loads((out / "results.json").read_text())
    assert set(saved["results"]["patterns"]) == set(results)
    assert saved["provenance"]["script"] == "examples/nlp/long_context_lm.py"
    # Run again: the trained patterns are reloaded, not trained again.
    again = long_context_lm.main(argv)["patterns"]
    assert again == results
    with pytest.raises(ValueError, match="other settings"):
        long_context_lm.main([*argv, "--lr", "1e-3"])


class _Killed(RuntimeError):
    pass


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script feeds tf.data")
def test_a_killed_run_resumes_where_it_stopped(tmp_path, text_dir, monkeypatch):
    argv = ["--smoke", "--data-dir", str(text_dir), "--no-check-hash",
            "--output-dir", str(tmp_path), "--patterns", "F", "LM",
            "--iterations", "30", "--no-memory"]  # fmt: skip
    backup = keras.callbacks.BackupAndRestore
    end_of_epoch = backup.on_epoch_end
    ends = []

    def killed_in_the_second_pattern(self, epoch, logs=None):
        end_of_epoch(self, epoch, logs)  # the backup is written
        ends.append(epoch)
        if len(ends) == 5:  # F's three intervals, then two of LM's
            raise _Killed

    monkeypatch.setattr(backup, "on_epoch_end", killed_in_the_second_pattern)
    with pytest.raises(_Killed):
        long_context_lm.main(argv)
    assert (tmp_path / "LM" / "backup").is_dir()
    first = json.loads((tmp_path / "F" / "training.json").read_text())
    monkeypatch.setattr(backup, "on_epoch_end", end_of_epoch)
    results = long_context_lm.main(argv)["patterns"]
    assert results["F"] == first  # finished: loaded, not trained again
    resumed = results["LM"]
    assert resumed["epochs_this_call"] == 1  # only the third interval ran again
    assert resumed["curve"]["iteration"] == [10, 20, 30]
    assert not (tmp_path / "LM" / "backup").exists()
