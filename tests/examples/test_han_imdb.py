import importlib.util
import json
import pathlib

import numpy as np
import pytest
from synthetic_imdb import write_reviews

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "nlp" / "han_imdb.py"


def _load():
    spec = importlib.util.spec_from_file_location("han_imdb", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


han_imdb = _load()


@pytest.fixture
def data_dir(tmp_path):
    return write_reviews(tmp_path / "imdb", 60, suffix="!<br /><br />The end.")


def test_reviews_become_documents_of_sentences(data_dir):
    texts, labels, ids = han_imdb.load_split("train", str(data_dir), check_hash=False)
    assert len(texts) == 60 and set(labels) == {0, 1}
    assert ids.tolist() == list(range(60))
    sentences = han_imdb.split_sentences(texts[:1])
    assert sentences.to_list()[0][-1] == b"The end."
    vectorizer = han_imdb.make_vectorizer(sentences, 50, words=3)
    docs = han_imdb.documents(sentences, vectorizer, num_sentences=6)
    assert docs.shape == (1, 6, 3)
    real = (docs != 0).any(-1)[0]
    assert real.tolist() == [True] * 4 + [False] * 2  # 3 phrases, "The end"
    flat = han_imdb.flatten(docs)
    assert flat.shape == (1, 18)
    n = int((docs != 0).sum())
    assert np.all(flat[0, :n] != 0) and np.all(flat[0, n:] == 0)
    assert flat[0, :n].tolist() == docs[0][docs[0] != 0].tolist()


def test_checksums_are_checked(data_dir):
    with pytest.raises(ValueError, match="Checksum mismatch"):
        han_imdb.load_split("train", str(data_dir))
    with pytest.raises(ValueError, match="train.jsonl.gz"):
        han_imdb.load_split("train", str(data_dir / "missing"))


def test_masked_max_ignores_padding():
    x = np.array([[[1.0], [5.0], [-3.0]], [[-2.0], [-7.0], [9.0]]], "float32")
    mask = np.array([[True, False, True], [True, True, False]])
    pooled = han_imdb.MaskedMaxPooling()(x, mask=mask)
    np.testing.assert_allclose(np.asarray(pooled), [[1.0], [-2.0]])


@pytest.mark.large  # the whole script end to end: .ci/run runs the large set
@pytest.mark.tf_only(reason="the script splits sentences with tensorflow_text")
def test_smoke_run(data_dir, tmp_path):
    out = tmp_path / "out"
    results = han_imdb.main([
        "--smoke", "--data-dir", str(data_dir), "--no-check-hash",
        "--output-dir", str(out), "--models", "han", "flat-max",
    ])  # fmt: skip
    assert set(results) == {"han", "flat-max"}
    for record in results.values():
        assert 0.0 <= record["test_accuracy"] <= 1.0
    assert (out / "review.png").stat().st_size > 0
    assert "<table>" in (out / "review.html").read_text()
    for name in ("review_words.html", "review_sentences.html"):
        assert '"sourceTokens":["' in (out / name).read_text(encoding="utf-8")
    assert "| han |" in (out / "results.md").read_text()
    # Finished models are reloaded, not trained again.
    again = han_imdb.main([
        "--smoke", "--data-dir", str(data_dir), "--no-check-hash",
        "--output-dir", str(out), "--models", "han",
    ])  # fmt: skip
    assert again["han"]["test_accuracy"] == results["han"]["test_accuracy"]


def test_review_views_show_word_and_sentence_weights(tmp_path):
    """`save_review_views` (what `save_review` writes beside review.png):
    the word weights as one row per sentence over the review's words (each
    row on its own words only) and the sentence weights as one row over the
    sentences; self-contained pages."""
    import re

    sentences = [["a", "fine", "film"], ["the", "plot", "drags", "on", "badly"]]
    word_weights = np.array(
        [[0.2, 0.5, 0.3, 0.0, 0.0, 0.0], [0.1, 0.1, 0.6, 0.1, 0.1, 0.0]], "float32"
    )  # (sentences, W): padded words get no weight
    paths = han_imdb.save_review_views(
        sentences, word_weights, np.array([0.3, 0.7]), "a review", tmp_path
    )
    assert [p.name for p in paths] == ["review_words.html", "review_sentences.html"]
    payloads = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
        payloads.append(
            json.loads(re.search(r"id='ka-data'>(.*?)</script>", text, re.S).group(1))
        )
    words, by_sentence = payloads
    labels = ["s1 a fine film", "s2 the plot drags\u2026"]
    assert words["sourceTokens"] == [*sentences[0], *sentences[1]]
    assert words["matrices"][0]["targetTokens"] == labels
    assert words["matrices"][0]["entries"] == 3 + 5  # each row on its own words
    assert by_sentence["sourceTokens"] == labels
    assert by_sentence["matrices"][0]["targetTokens"] == ["document"]
    assert by_sentence["matrices"][0]["entries"] == 2


def test_record_covers_every_epoch_of_a_resumed_run(tmp_path):
    # A run resumed by BackupAndRestore appends its epochs to the same log
    # (CSVLogger(append=True) writes no second header); its `History` holds
    # only the resumed epochs, so the record is read from the log.
    log = tmp_path / "log.csv"
    assert han_imdb.best_so_far(str(log)) is None
    log.write_text(
        "epoch,accuracy,loss,val_accuracy,val_loss,epoch_seconds\n"
        "0,0.8,0.4,0.85,0.3,100.0\n"
        "1,0.9,0.2,0.88,0.3,110.0\n"
    )
    assert han_imdb.best_so_far(str(log)) == 0.88
    with open(log, "a") as f:
        f.write("2,0.95,0.1,0.87,0.4,120.5\n")
    record = han_imdb.training_record(str(log))
    assert record == dict(
        train_seconds=330.5, epochs=3, best_epoch=2, val_accuracy=0.88
    )


def test_validation_holds_out_the_highest_ids_of_each_class():
    # Reviews of one movie have consecutive ids: the highest ids of each
    # class are whole movies, unlike a random draw.
    labels = np.array([0, 1] * 10)
    ids = np.array([i // 2 for i in range(20)])[::-1]  # files in any order
    held_out = han_imdb.validation_mask(ids, labels, 0.2)
    assert held_out.sum() == 4
    assert sorted(zip(labels[held_out], ids[held_out], strict=True)) == [
        (0, 8), (0, 9), (1, 8), (1, 9)
    ]  # fmt: skip


def test_long_reviews_keep_their_first_and_last_sentences():
    import tensorflow as tf

    sentences = tf.ragged.constant([list("abcdef"), list("xy"), list("pqrs")])
    kept = han_imdb.keep_sentences(sentences, num_sentences=4, last=1).to_list()
    assert kept == [[b"a", b"b", b"c", b"f"], [b"x", b"y"], [b"p", b"q", b"r", b"s"]]
    kept = han_imdb.keep_sentences(sentences, num_sentences=4, last=0).to_list()
    assert kept[0] == [b"a", b"b", b"c", b"d"]
    kept = han_imdb.keep_sentences(sentences, num_sentences=3, last=3).to_list()
    assert kept == [[b"d", b"e", b"f"], [b"x", b"y"], [b"q", b"r", b"s"]]


def test_cooccurrences_count_both_orders_by_inverse_distance():
    # 0 = padding and 1 = OOV are not words; pairs never cross sentences.
    sentences = np.array([[2, 3, 1, 4], [4, 2, 0, 0]])
    counts = han_imdb.cooccurrences(sentences, vocabulary_size=5, window=2).toarray()
    expected = np.zeros((5, 5))
    for a, b, weight in [(2, 3, 1.0), (3, 4, 0.5), (4, 2, 1.0)]:
        expected[a, b] += weight
        expected[b, a] += weight
    np.testing.assert_allclose(counts, expected)


def test_ppmi_against_numpy():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, size=(6, 6)).astype("float64")
    counts = counts + counts.T
    import scipy.sparse

    result = han_imdb.ppmi(scipy.sparse.csr_matrix(counts), smoothing=0.75).toarray()
    total = counts.sum()
    word = counts.sum(1) / total
    context = word**0.75 / np.sum(word**0.75)
    with np.errstate(divide="ignore"):
        pmi = np.log(counts / total / word[:, None] / context[None, :])
    np.testing.assert_allclose(result, np.maximum(pmi, 0.0), rtol=1e-6)


def test_words_of_the_same_contexts_get_the_same_direction():
    # Words 2 and 3 ("good", "great") share their contexts (4-7), words 8 and
    # 9 ("dull", "tedious") theirs (10-13): the first pair ends up closer
    # to each other than to the second.
    rng = np.random.default_rng(0)
    docs = []
    for _ in range(400):
        pair, context = rng.choice([(2, 3), (8, 9)], 1)[0], rng.integers(0, 4, 3)
        base = 4 if pair[0] == 2 else 10
        docs.append([base + context[0], rng.choice(pair), base + context[1], 0])
    docs = np.array(docs).reshape(100, 4, 4)
    vectors = han_imdb.word_vectors(docs, vocabulary_size=14, dim=3)
    assert vectors.shape == (14, 3) and vectors.dtype == np.float32
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert unit[2] @ unit[3] > 0.9
    assert unit[2] @ unit[3] > unit[2] @ unit[8] + 0.5
    assert unit[8] @ unit[9] > 0.9
