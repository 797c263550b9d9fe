"""Smoke run of the `make demo` example, so that it cannot rot."""

import importlib.util
import json
import pathlib
import re

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "translate_dates.py"


def assert_self_contained_view(path, tokens):
    """A saved view: one HTML file that loads nothing and holds `tokens` (in
    its JSON payload)."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    links = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]+)""", text)
    assert not [u for u in links if u.startswith(("http://", "https://", "//"))]
    for token in tokens:
        assert json.dumps(token) in text, token


def load_script():
    spec = importlib.util.spec_from_file_location("translate_dates", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_dates_are_consistent():
    script = load_script()
    sources, targets = script.generate_dates(300, seed=0)
    assert (sources, targets) == script.generate_dates(300, seed=0)
    assert len(set(sources)) > 250
    for target in targets:
        assert len(target) == 10 and target[4] == target[7] == "-"
    # Every format appears, and each is unambiguous for a tricky date.
    import datetime

    date = datetime.date(2026, 11, 29)
    written = {f(date, "November", "Sunday") for f in script.FORMATS}
    assert len(written) == len(script.FORMATS)
    assert "29.11.26" in written and "11/29/2026" in written


def test_help_documents_every_flag(capsys):
    script = load_script()
    with pytest.raises(SystemExit):
        script.main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--epochs", "--output-dir", "--attention", "--num-train", "--seed",
                 "--batch-size", "--model"):  # fmt: skip
        assert flag in text


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(
    reason="the script decodes in tf.function and exports a SavedModel"
)
@pytest.mark.parametrize(
    "flags",
    [
        ["--attention", "luong"],
        # local-p is also trained, saved and reloaded in tests/layers/test_local_p.py.
        pytest.param(
            ["--attention", "luong", "--local-p", "3"], marks=pytest.mark.large
        ),
    ],
    ids=["luong", "luong-local-p"],
)  # fmt: skip
def test_smoke_run_with_export(flags, tmp_path):
    script = load_script()
    result = script.main(
        [
            "--num-train", "256", "--num-test", "64", "--epochs", "1",
            "--batch-size", "64", "--units", "16", *flags,
            "--output-dir", str(tmp_path),
        ]
    )  # fmt: skip
    assert 0.0 <= result["accuracy"] <= 1.0
    assert (tmp_path / "alignments.png").stat().st_size > 0
    for i in range(3):
        view = tmp_path / f"alignments_{i}.html"
        assert_self_contained_view(view, [])
        assert '"sourceTokens":["' in view.read_text(encoding="utf-8")
    # main() raises if the reloaded SavedModel disagrees with the model.
    assert (tmp_path / "saved_model" / "saved_model.pb").exists()


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(
    reason="the script decodes in tf.function and exports a SavedModel"
)
def test_transformer_smoke_run_with_export(tmp_path):
    script = load_script()
    result = script.main(
        [
            "--model", "transformer", "--num-train", "256", "--num-test", "64",
            "--epochs", "1", "--batch-size", "64", "--units", "16",
            "--num-heads", "2", "--num-layers", "1", "--output-dir", str(tmp_path),
        ]
    )  # fmt: skip
    assert 0.0 <= result["accuracy"] <= 1.0
    assert (tmp_path / "alignments.png").stat().st_size > 0
    for i in range(3):
        view = tmp_path / f"alignments_{i}.html"
        assert_self_contained_view(view, [])
        assert '"sourceTokens":["' in view.read_text(encoding="utf-8")
    # main() raises if the reloaded SavedModel disagrees with the model.
    assert (tmp_path / "saved_model" / "saved_model.pb").exists()


def test_attention_panels_pick_heads_and_average():
    script = load_script()
    rng = np.random.default_rng(0)
    attention = rng.random((2, 4, 3, 5))  # (L, N, T, S)
    panels = script.attention_panels(attention, layer=-1, heads=[1, 3])
    assert [name for name, _ in panels] == [
        "layer 2, head 1",
        "layer 2, head 3",
        "layer 2, mean of 4 heads",
    ]
    np.testing.assert_array_equal(panels[1][1], attention[1, 3])
    np.testing.assert_allclose(panels[2][1], attention[1].mean(0))
    # The RNN's single alignment is one panel.
    ((name, weights),) = script.attention_panels(attention[:1, :1])
    assert name == "alignment"
    np.testing.assert_array_equal(weights, attention[0, 0])


@pytest.mark.parametrize("heads", [1, 4], ids=["rnn", "transformer"])
def test_alignment_views_beside_the_heat_maps(heads, tmp_path):
    """`save_alignment_views` (what `main` writes beside `alignments.png`):
    one self-contained `alignment_view` per example, its panels (the RNN's
    alignment, or the chosen heads and their mean) as the page's matrices,
    the source cut to its characters and the targets to the prediction."""
    script = load_script()
    sources = ["29.11.26", "nov 29 2026"]
    predictions = ["2026-11-29", "2026-11"]
    rng = np.random.default_rng(0)
    attention = rng.random((2, 2, heads, script.TARGET_LENGTH, 32))  # (B, L, N, T, S)
    attention /= attention.sum(-1, keepdims=True)
    paths = script.save_alignment_views(sources, predictions, attention, tmp_path)
    assert [p.name for p in paths] == ["alignments_0.html", "alignments_1.html"]
    assert_self_contained_view(paths[1], ["\u2423", "n", "$"])
    text = paths[1].read_text(encoding="utf-8")
    payload = json.loads(re.search(r"id='ka-data'>(.*?)</script>", text, re.S).group(1))
    assert payload["sourceTokens"] == ["n", "o", "v", "\u2423", "2", "9",
                                       "\u2423", "2", "0", "2", "6"]  # fmt: skip
    names = [m["name"] for m in payload["matrices"]]
    if heads == 1:
        assert names == ["alignment"]
    else:
        assert names == ["layer 2, head 0", "layer 2, head 1",
                         "layer 2, mean of 4 heads"]  # fmt: skip
    assert all(m["targetTokens"] == [*"2026-11", "$"] for m in payload["matrices"])


@pytest.mark.tf_only(reason="exports a SavedModel and serves it with saved_model_cli")
# The Transformer's export repeats the RNN's check (~26 s) as `large`.
@pytest.mark.parametrize(
    "model", ["rnn", pytest.param("transformer", marks=pytest.mark.large)]
)
def test_saved_model_serves_under_the_tf1_loader(model, tmp_path):
    """The SavedModel of `main` (`export_and_check`) runs under `saved_model_cli
    run`, like under `tf.saved_model.load`. An untrained tiny model is
    enough: the TF1 loader used to fail on its first variable read ("Read
    variable failure ... tf2xla conversion failed")."""
    from examples.common.export import run_saved_model_cli

    script = load_script()
    args = script.parse_args(
        ["--model", model, "--units", "16", "--num-heads", "2", "--num-layers", "1"]
    )
    sources, _ = script.generate_dates(256, seed=0)
    vocab = script.make_vocabularies(sources, args.max_source_length)
    _, search = script.build_model(args, vocab)
    translator = script.DateTranslator(search, vocab, args.beams)
    dates = ["3 March 1999", *sources[:15]]
    export_dir = tmp_path / "saved_model"
    # Raises unless tf.saved_model.load serves what the translator computes.
    served = script.export_and_check(translator, str(export_dir), dates)
    # saved_model_cli run: the TF1 loader of TensorFlow Serving, in a fresh process.
    outputs = run_saved_model_cli(export_dir, {"dates": dates}, tmp_path / "cli")
    assert [s.decode() for s in outputs["output_0"]] == served
