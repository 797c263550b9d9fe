"""Shared parts of the Multi30k translation examples.

`nmt_rnn_attention.py` (BiGRU encoder + GRU decoder with Bahdanau or Luong
attention) and `nmt_transformer.py` (a small Transformer) differ only in
their model, optimizer and search; everything else lives here:

- data: the Multi30k task 1 files, downloaded from their canonical place
  with a SHA-256 check (and cached like `keras.utils.get_file`), or read
  from `--data-dir`; line counts must agree, empty pairs are dropped;
- subwords: a SentencePiece unigram model per language, trained on the
  training split with `keras_hub.tokenizers.compute_sentence_piece_proto`
  and saved beside the model (`spm.<lang>.model`); SentencePiece is
  lossless, so detokenized output is raw text that BLEU can compare with
  the raw references;
- batches: buckets by length (few padded shapes, so XLA compiles the
  training step a handful of times), about `--batch-tokens` target tokens
  per batch and replica; each epoch's batches and their order are drawn up
  front from `--seed` (`make_dataset`);
- training: `model.fit(jit_compile=True)` with a label-smoothed loss that
  ignores padding, `BackupAndRestore` (a killed run resumes at the epoch
  where it stopped, with that epoch's batches), a checkpoint every epoch,
  TensorBoard logs;
- distributed training (`--strategy`, as in `translate_dates.py`; helpers
  in `examples/common/distribute.py`): `mirrored` over the local GPUs (or
  `--devices` logical CPU devices), `multiworker` over the machines of
  `TF_CONFIG` (`examples/common/local_workers.py` starts local workers).
  The loss is normalised by the real tokens of the global batch (an
  all-reduce), so with dropout 0 a run takes the steps of one device on
  the same global batches: `--batch-tokens 256` on two replicas, `512`
  on one (when the bucket bounds split both alike). XLA only with
  `--strategy default` (`--jit-compile` to choose); only the chief keeps
  its outputs;
- decoding: greedy and beam search in one XLA-compiled loop, batched;
- evaluation: corpus BLEU (sacrebleu, cased 13a and lowercased) and chrF
  on detokenized output against the raw references;
- cross-attention heat-maps (`attention.png`) and interactive views of
  the same sentences (`alignments_<i>.html`; for the Transformer also
  `cross_attention_model_view.html`), self-contained pages that open
  offline in a browser; a SavedModel that maps raw source strings to
  translated strings (tokenization, search and detokenization in the
  graph), reloaded in a fresh Python process and checked; it serves through
  the TF1 loader (TensorFlow Serving) too, with `tensorflow_text` loaded.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The repository root, for the helpers shared by the examples.
sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from examples.common import distribute  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_seed  # noqa: E402
from examples.common.cli import add_smoke  # noqa: E402
from examples.common.cli import apply_smoke  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.export import save_for_serving  # noqa: E402
from examples.common.files import sha256  # noqa: E402
from examples.common.runs import provenance  # noqa: E402

# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

MULTI30K_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
)
# SHA-256 of the canonical (gzipped, raw, cased) Multi30k task 1 files.
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
}
LANGUAGES = ("en", "de")
SPLITS = ("train", "val")

# The ids `keras_hub.tokenizers.compute_sentence_piece_proto` reserves.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def locate_file(split, language, data_dir=None, check_hashes=True):
    """The path of `{split}.{language}.gz`, downloaded if `data_dir` is None.

    Downloads go through `keras.utils.get_file` (cached under
    `~/.keras/datasets/multi30k`, re-used when the checksum matches). In
    `data_dir` the gzipped file or its uncompressed twin is accepted; the
    gzipped canonical files are checked against their SHA-256.
    """
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}. Received: split={split!r}")
    name = f"{split}.{language}.gz"
    expected = MULTI30K_SHA256[name] if check_hashes else None
    if data_dir is None:
        return keras.utils.get_file(
            name,
            MULTI30K_URL + name,
            file_hash=expected,
            hash_algorithm="sha256",
            cache_subdir=os.path.join("datasets", "multi30k"),
        )
    if not os.path.isdir(data_dir):
        raise ValueError(
            f"`data_dir` must be a directory. Received: data_dir={data_dir!r}"
        )
    for candidate in (name, name[: -len(".gz")]):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            break
    else:
        raise ValueError(
            f"`data_dir` must contain `{name}` (or `{name[: -len('.gz')]}`). "
            f"Received: data_dir={data_dir!r} with files "
            f"{sorted(os.listdir(data_dir))[:12]}"
        )
    if expected is not None and path.endswith(".gz"):
        actual = sha256(path)
        if actual != expected:
            raise ValueError(
                f"Checksum mismatch: `{path}` must have the SHA-256 of the "
                f"canonical Multi30k file, {expected}. Received: sha256={actual}. "
                "The file is corrupt or different; download it again, or pass "
                "`--no-check-hashes` to use other data on purpose."
            )
    return path


def read_lines(path):
    """The lines of a UTF-8 text file, gzipped or not, without line ends."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return [line.rstrip("\r\n") for line in f]


def read_parallel(source_path, target_path):
    """Aligned `(sources, targets, dropped)` from two parallel files.

    Line `i` of one file translates line `i` of the other, so the counts
    must agree. Pairs where either side is empty (or only whitespace) are
    dropped and counted.
    """
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            "Parallel files must have the same number of lines (line i of one "
            "translates line i of the other). Received: "
            f"{source_path!r} with {len(sources)} lines and {target_path!r} with "
            f"{len(targets)} lines"
        )
    pairs = [
        (s.strip(), t.strip())
        for s, t in zip(sources, targets, strict=True)
        if s.strip() and t.strip()
    ]
    kept_sources = [s for s, _ in pairs]
    kept_targets = [t for _, t in pairs]
    return kept_sources, kept_targets, len(sources) - len(pairs)


def check_languages(source, target):
    for name, value in (("source", source), ("target", target)):
        if value not in LANGUAGES:
            raise ValueError(
                f"`{name}` must be one of {LANGUAGES}. Received: {name}={value!r}"
            )
    if source == target:
        raise ValueError(
            "`source` and `target` must differ. "
            f"Received: source={source!r}, target={target!r}"
        )


def load_multi30k(source, target, split, data_dir=None, check_hashes=True):
    """`(sources, targets, dropped)` of one Multi30k split and direction."""
    check_languages(source, target)
    return read_parallel(
        locate_file(split, source, data_dir, check_hashes),
        locate_file(split, target, data_dir, check_hashes),
    )


# ---------------------------------------------------------------------------
# Subwords
# ---------------------------------------------------------------------------


def load_or_train_tokenizer(path, lines, vocabulary_size):
    """A `keras_hub` SentencePiece tokenizer, trained on `lines` if new.

    The model file is written once and re-used, so a resumed run and
    `--evaluate` see exactly the vocabulary the weights were trained with.
    """
    import keras_hub

    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            proto = keras_hub.tokenizers.compute_sentence_piece_proto(
                tf.data.Dataset.from_tensor_slices(lines),
                vocabulary_size,
                model_type="unigram",
            )
        except RuntimeError as error:  # SentencePiece: "Vocabulary size too high"
            raise ValueError(
                "`vocabulary_size` must be reachable on the training text "
                f"({error}). Received: vocabulary_size={vocabulary_size}"
            ) from error
        with open(path, "wb") as f:
            f.write(proto)
    # The bytes, not the path: given a path, keras-hub leaves the file open.
    with open(path, "rb") as f:
        return keras_hub.tokenizers.SentencePieceTokenizer(proto=f.read())


def in_graph(function, tensor):
    """`function(tensor)` traced, so that tf.RaggedTensors come back.

    Called eagerly, keras-hub tokenizers convert their outputs to Python
    lists (to be backend-agnostic); in a `tf.function` they return the
    tf tensors that the rest of this pipeline (and the SavedModel) needs.
    """
    if not tf.executing_eagerly():
        return function(tensor)
    return tf.function(function, autograph=False)(tensor)


def encode_source(tokenizer, sentences, max_length):
    """Ragged source ids: subwords + EOS, cut to `max_length` (EOS kept)."""
    ids = in_graph(tokenizer.tokenize, tf.convert_to_tensor(sentences, tf.string))
    ids = ids[:, : max_length - 1]
    eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
    return tf.concat([ids, eos], axis=1)


def encode_target(tokenizer, sentences):
    """Ragged target ids: BOS + subwords + EOS."""
    ids = in_graph(tokenizer.tokenize, tf.convert_to_tensor(sentences, tf.string))
    bos = tf.fill([ids.nrows(), 1], tf.constant(BOS_ID, ids.dtype))
    eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
    return tf.concat([bos, ids, eos], axis=1)


def bucket_boundaries(max_length, single=False):
    """Padded lengths 8, 16, 24, 32, 48, 64, ... up to `max_length`.

    Each is one shape for XLA to compile; `single=True` (the smoke runs)
    pads everything to `max_length`: one compilation.
    """
    if single:
        return [max_length]
    bounds = [b for b in (8, 16, 24, 32, 48, 64, 96, 128) if b < max_length]
    return bounds + [max_length]


def plan_batches(buckets, sizes, order, drop_remainder):
    """Row indices of each batch: the rows of `order`, bucket by bucket.

    Row `i` belongs to bucket `buckets[i]`, whose batches hold `sizes[b]`
    rows, taken in the order of `order`; the last batch of a bucket is
    dropped when partial and `drop_remainder`. Returns a list of arrays.
    """
    batches = []
    for bucket, size in enumerate(sizes):
        rows = order[buckets[order] == bucket]
        stop = len(rows) - len(rows) % size if drop_remainder else len(rows)
        batches += [rows[i : i + size] for i in range(0, stop, size)]
    return batches


def epoch_batches(buckets, sizes, seed, epochs, first_epoch=0):
    """The training batches of epochs `first_epoch..epochs-1`, drawn up front.

    Each epoch shuffles the pairs, batches them within their buckets (full
    batches only) and shuffles the batches, all from `seed`: the same
    batches in the same order whatever iterators Keras opens on the data
    (under a strategy `fit` opens an extra one to build the model, which
    would advance a reshuffling `Dataset.shuffle`), on any strategy and
    worker, and after a resume. Every epoch has the same number of batches.
    """
    rng = np.random.default_rng(seed)
    batches = []
    for epoch in range(epochs):
        plan = plan_batches(buckets, sizes, rng.permutation(len(buckets)), True)
        order = rng.permutation(len(plan))  # mix the buckets
        if epoch >= first_epoch:
            batches += [plan[i] for i in order]
    return batches


def make_dataset(
    source_ids,
    target_ids,
    batch_tokens,
    max_length,
    seed=None,
    single_bucket=False,
    epochs=1,
    first_epoch=0,
    replicas=1,
):
    """Teacher-forcing batches, bucketed by length.

    Elements are `({"encoder_tokens", "decoder_tokens"}, labels, weights)`:
    the decoder reads BOS + target, predicts target + EOS, and `weights`
    (1 on real tokens, 0 on padding) keep padding out of the loss and the
    metrics. Pairs longer than `max_length` (source, or target with EOS)
    must be filtered out before. Each bucket pads to its bound and batches
    about `batch_tokens` tokens per replica (`replicas` x that in all, so
    that every batch splits evenly). With `seed` (training): `epochs -
    first_epoch` epochs of shuffled full batches (`epoch_batches`), so fit
    with `steps_per_epoch`; without: one pass in order, partial batches kept.
    The batches are planned in NumPy, not with `Dataset.shuffle` and
    `Dataset.bucket_by_sequence_length`, whose orders depend on how many
    iterators were opened before (see `epoch_batches`).
    """
    lengths = np.maximum(
        source_ids.row_lengths().numpy(), target_ids.row_lengths().numpy() - 1
    )
    bounds = bucket_boundaries(max_length, single_bucket)
    if lengths.max(initial=0) > bounds[-1]:
        raise ValueError(
            "`max_length` must fit every pair (leave longer ones out with "
            f"`prepare_pairs`). Received: max_length={max_length} and a pair "
            f"of {lengths.max()} ids"
        )
    buckets = np.searchsorted(bounds, lengths)  # the first bound >= length
    sizes = [replicas * max(1, batch_tokens // b) for b in bounds]
    if seed is None:
        batches = plan_batches(buckets, sizes, np.arange(len(lengths)), False)
    else:
        batches = epoch_batches(buckets, sizes, seed, epochs, first_epoch)
    rows = tf.RaggedTensor.from_row_lengths(
        np.concatenate(batches or [np.zeros(0, "int64")]).astype("int64"),
        np.array([len(b) for b in batches], "int64"),
    )
    batch_bounds = np.array(bounds, "int32")[[buckets[b[0]] for b in batches]]
    sources, targets = source_ids.to_tensor(PAD_ID), target_ids.to_tensor(PAD_ID)

    def gather(rows, bound):
        # Rows of the bucket: cut the common padding to the bound, or pad.
        source = tf.gather(sources, rows)[:, :bound]
        target = tf.gather(targets, rows)[:, : bound + 1]
        source = tf.pad(source, [[0, 0], [0, bound - tf.shape(source)[1]]])
        target = tf.pad(target, [[0, 0], [0, bound + 1 - tf.shape(target)[1]]])
        labels = target[:, 1:]
        inputs = {"encoder_tokens": source, "decoder_tokens": target[:, :-1]}
        return inputs, labels, tf.cast(labels != PAD_ID, "float32")

    dataset = tf.data.Dataset.from_tensor_slices((rows, batch_bounds))
    dataset = dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def prepare_pairs(tokenizers, sources, targets, max_length):
    """Encoded `(source_ids, target_ids, dropped)`, pairs too long dropped.

    A source may have `max_length` ids with its EOS, a target `max_length`
    decoder steps (BOS + text, or text + EOS).
    """
    # Cut one past the limit, so that too-long sources are still visible.
    source_ids = encode_source(tokenizers[0], sources, max_length + 1)
    target_ids = encode_target(tokenizers[1], targets)
    keep = (source_ids.row_lengths() <= max_length) & (
        target_ids.row_lengths() - 1 <= max_length
    )
    dropped = len(sources) - int(tf.reduce_sum(tf.cast(keep, "int32")))
    if dropped == len(sources):
        raise ValueError(
            f"`max_length` must fit some of the {len(sources)} pairs (in subwords, "
            f"with BOS/EOS). Received: max_length={max_length}"
        )
    return (
        tf.ragged.boolean_mask(source_ids, keep),
        tf.ragged.boolean_mask(target_ids, keep),
        dropped,
    )


# ---------------------------------------------------------------------------
# Training pieces that Keras does not have
# ---------------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="nmt")
class SmoothedCrossentropy(keras.losses.Loss):
    """Label-smoothed cross-entropy from logits and integer labels.

    `(1 - e) * -log p(y) + e * mean_v(-log p(v))`, the loss of Szegedy et
    al. (2016) as used by Vaswani et al. (2017). Written here because
    `keras.losses.SparseCategoricalCrossentropy` has no `label_smoothing`,
    and `CategoricalCrossentropy(label_smoothing=...)` would need one-hot
    labels of `(B, T, V)` floats per batch. Padding is left out with the
    `sample_weight`s of `make_dataset`; the default reduction
    `"mean_with_sample_weight"` averages over real tokens only, and under a
    `tf.distribute` strategy over the real tokens of the global batch
    (see `__call__`).
    """

    def __init__(
        self,
        label_smoothing=0.1,
        reduction="mean_with_sample_weight",
        name="smoothed_crossentropy",
        **kwargs,
    ):
        super().__init__(reduction=reduction, name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        labels = ops.expand_dims(ops.cast(y_true, "int32"), -1)
        nll = -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)
        uniform = -ops.mean(log_probs, axis=-1)
        return (1.0 - self.label_smoothing) * nll + self.label_smoothing * uniform

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The loss; under a strategy, normalised by the global token count.

        Keras computes a replica's loss on its part of the batch, divides it
        by its own weight total and by the number of replicas, and sums the
        replicas' gradients: a mean of per-replica means, which differs from
        one device's mean over the batch whenever the replicas hold
        different numbers of tokens (nearly always, with padding). Here the
        replica's share becomes its weighted sum over the weight total of
        all replicas (an all-reduce), so the replicas add up to exactly the
        single-device loss. This needs the weights to be zero wherever a
        Keras mask on `y_pred` is (true of `make_dataset`'s weights).
        """
        loss = super().__call__(y_true, y_pred, sample_weight)
        context = tf.distribute.get_replica_context()
        if (
            self.reduction != "mean_with_sample_weight"
            or sample_weight is None
            or context is None
            or context.num_replicas_in_sync == 1
        ):
            return loss
        local = ops.sum(ops.cast(sample_weight, loss.dtype))
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, ops.stop_gradient(local))
        # `loss` is (weighted sum / local) / replicas, as Keras scales it.
        replicas = context.num_replicas_in_sync
        return ops.divide_no_nan(loss * local * replicas, total)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


class EpochLog(keras.callbacks.Callback):
    """Records which epochs ran (1-based) and, for tests, stops on purpose.

    `interrupt_after` simulates a killed run: it raises after that many
    epochs of this call (after `BackupAndRestore` saved its backup, since
    it comes later in the callback list).
    """

    def __init__(self, interrupt_after=None):
        super().__init__()
        self.epochs = []
        self.interrupt_after = interrupt_after

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch + 1)
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        status(f"Epoch {epoch + 1} took {time.perf_counter() - self._start:.1f} s")
        if (
            self.interrupt_after is not None
            and len(self.epochs) >= self.interrupt_after
        ):
            raise SimulatedInterruption(f"Interrupted after epoch {epoch + 1}")


class SimulatedInterruption(RuntimeError):
    """Raised by `--interrupt-after-epochs` to test resuming."""


# ---------------------------------------------------------------------------
# Translation, evaluation, pictures, export
# ---------------------------------------------------------------------------


class Translator(tf.Module):
    """Raw source strings -> translated strings, with the trained layers.

    `search(source_ids, num_beams, max_length) -> (ids, attention)` is the
    model's greedy or beam search; `translate_ids` compiles it with XLA.
    `__call__` adds SentencePiece tokenization and detokenization around
    it (string ops, not XLA-compilable) and is the SavedModel's serving
    signature. The model stays off the module: `export_and_check` tracks
    the variables the search reads (and the tokenizers are tracked here),
    not the Keras model with its optimizer state.
    """

    def __init__(self, search, tokenizers, max_source_length, max_target_length,
                 num_beams=1, bounds=None):  # fmt: skip
        super().__init__()
        self.bounds = bounds or bucket_boundaries(max_source_length)
        self._search = search
        self.source_tokenizer, self.target_tokenizer = tokenizers
        # Detokenization joins the target pieces by hand instead of calling
        # the second SentencePiece op: two SentencePiece resources in one
        # SavedModel get mixed up when it is loaded again (the reloaded
        # model detokenized with the source model). For SentencePiece
        # without byte fallback, decoding is exactly this: concatenate the
        # pieces and turn the meta symbol U+2581 into spaces.
        self.target_pieces = tf.constant(
            [
                self.target_tokenizer.id_to_token(i)
                for i in range(self.target_tokenizer.vocabulary_size())
            ]
        )
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.num_beams = num_beams

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
        jit_compile=True,
        autograph=False,  # no Python control flow on tensors; saves seconds of tracing
    )
    def translate_ids(self, source_ids):
        """`(B, S)` ids -> ids `(B, T)` and cross-attention `(B, L, N, T, S)`."""
        return self._search(source_ids, self.num_beams, self.max_target_length)

    def tokenize(self, sentences):
        ids = encode_source(self.source_tokenizer, sentences, self.max_source_length)
        return ids.to_tensor(PAD_ID)

    def detokenize(self, ids):
        # BOS/EOS/PAD/UNK are dropped; everything after EOS is padding.
        ids = tf.ragged.boolean_mask(ids, ids > EOS_ID)
        text = tf.strings.reduce_join(tf.gather(self.target_pieces, ids), axis=-1)
        return tf.strings.strip(tf.strings.regex_replace(text, "\u2581", " "))

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
        autograph=False,
    )
    def __call__(self, sentences):
        ids, _ = self.translate_ids(self.tokenize(sentences))
        return self.detokenize(ids)


def translate(translator, sentences, batch_size=128, return_attention=False):
    """Translations of `sentences` (and their attention) in batches.

    Sentences are sorted by length and each batch padded to a bucket bound
    (`translator.bounds`) and to `batch_size` rows, so the XLA search
    compiles for a few shapes only.
    """
    ids = encode_source(
        translator.source_tokenizer, sentences, translator.max_source_length
    )
    lengths = ids.row_lengths().numpy()
    order = np.argsort(lengths, kind="stable")
    outputs = [None] * len(sentences)
    attention = [None] * len(sentences)
    for start in range(0, len(sentences), batch_size):
        rows = order[start : start + batch_size]
        width = next(b for b in translator.bounds if b >= lengths[rows].max())
        batch = tf.gather(ids, rows).to_tensor(PAD_ID, shape=[batch_size, width])
        tokens, weights = translator.translate_ids(batch)
        texts = translator.detokenize(tokens[: len(rows)]).numpy()
        for i, row in enumerate(rows):
            outputs[row] = texts[i].decode("utf-8")
            if return_attention:
                attention[row] = (tokens[i].numpy(), weights[i].numpy())
    return (outputs, attention) if return_attention else outputs


def bleu_scores(hypotheses, references):
    """sacrebleu corpus BLEU (13a, cased and lowercased) and chrF."""
    import sacrebleu

    return {
        "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
        "bleu_lowercase": sacrebleu.corpus_bleu(
            hypotheses, [references], lowercase=True
        ).score,
        "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
    }


def pieces(tokenizer, ids):
    """Printable subword labels of `ids` (specials named)."""
    names = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
    return [names.get(int(i)) or tokenizer.id_to_token(int(i)) for i in ids]


def sentence_attention(translator, sentences):
    """The greedy translations of `sentences` and their cross-attention:
    per sentence `(sentence, source, target, weights)`, the subword labels
    of its source and of its output up to and with EOS, and every layer's
    weights `(L, N, T, S)` cropped to them (L = N = 1 for the RNN)."""
    outputs, attention = translate(
        translator, sentences, batch_size=len(sentences), return_attention=True
    )
    rows = []
    for sentence, (tokens, weights) in zip(sentences, attention, strict=True):
        source = pieces(
            translator.source_tokenizer,
            encode_source(translator.source_tokenizer, [sentence],
                          translator.max_source_length)[0].numpy(),
        )  # fmt: skip
        steps = int(np.sum(tokens != PAD_ID))  # up to and with EOS
        target = pieces(translator.target_tokenizer, tokens[:steps])
        rows.append((sentence, source, target, weights[:, :, :steps, : len(source)]))
    return outputs, rows


def last_layer_panels(weights):
    """`[(name, (T, S))]`: the RNN's alignment, or the mean of the last
    layer's heads followed by each head."""
    last = weights[-1]  # (N, T, S)
    if len(last) == 1:
        return [("alignment", last[0])]
    mean = (f"mean of {len(last)} heads", last.mean(0))
    return [mean] + [(f"head {h}", last[h]) for h in range(len(last))]


def save_heatmaps(rows, path):
    """Heat-maps of `sentence_attention`'s rows: the last layer's mean over
    heads per sentence, and (multi-head models) every head of that layer
    for the first sentence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_attention.visualization import plot_attention

    panels = []
    for number, (sentence, source, target, weights) in enumerate(rows):
        chosen = last_layer_panels(weights)
        chosen = chosen if number == 0 else chosen[:1]
        name, first = chosen[0]
        panels.append((f"{name}\n{sentence[:60]}", first, source, target))
        panels += [(title, w, source, target) for title, w in chosen[1:]]
    cols = min(4, len(panels))
    fig_rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(
        fig_rows, cols, figsize=(5.5 * cols, 5 * fig_rows), squeeze=False
    )
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (title, weights, source, target) in zip(axes.flat, panels, strict=False):
        plot_attention(weights, source, target, ax=ax, title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save_attention_views(rows, output_dir):
    """Interactive pages of `sentence_attention`'s rows (self-contained,
    offline): `alignments_<i>.html` per sentence (`alignment_view`, the
    panels of `last_layer_panels` in its menu, values on hover) and, for
    the Transformer, `cross_attention_model_view.html` of the first
    sentence (`model_view`: every decoder layer x head, with entropy and
    mean attended distance; click a map for its head view). Returns the
    paths."""
    from keras_attention.visualization import alignment_view
    from keras_attention.visualization import model_view

    paths = []
    for i, (sentence, source, target, weights) in enumerate(rows):
        panels = last_layer_panels(weights)
        view = alignment_view(
            np.stack([w for _, w in panels]),
            source,
            [target] * len(panels),
            names=[name for name, _ in panels],
            title=sentence,
        )
        paths.append(view.save(os.path.join(output_dir, f"alignments_{i}.html")))
    sentence, source, target, weights = rows[0]
    if weights.shape[1] > 1:  # heads: the Transformer
        layers = {f"decoder_{n}_cross": w[None] for n, w in enumerate(weights)}
        view = model_view(layers, target, source, title=f"cross-attention: {sentence}")
        path = os.path.join(output_dir, "cross_attention_model_view.html")
        paths.append(view.save(path))
    return paths


RELOAD_CHECK = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
model = tf.saved_model.load(sys.argv[1])
sentences = json.loads(sys.stdin.read())
outputs = model.signatures["serving_default"](sentences=tf.constant(sentences))
print(json.dumps([s.decode() for s in next(iter(outputs.values())).numpy()]))
"""


def export_and_check(translator, export_dir, sentences):
    """Save the SavedModel, reload it in a fresh process, compare outputs.

    `save_for_serving` makes it servable by `tf.saved_model.load` and by the
    TF1 loader (`tf.compat.v1.saved_model.loader.load`, TensorFlow Serving);
    see `examples/common/export.py`.
    """
    save_for_serving(translator, export_dir, translator.__call__)
    expected = [s.decode() for s in translator(tf.constant(sentences)).numpy()]
    process = subprocess.run(
        [sys.executable, "-c", RELOAD_CHECK, export_dir],
        input=json.dumps(sentences),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if process.returncode:
        raise RuntimeError(f"Reloading the SavedModel failed:\n{process.stderr}")
    served = json.loads(process.stdout.strip().splitlines()[-1])
    if served != expected:
        raise RuntimeError(
            "The SavedModel reloaded in a fresh process translates differently:\n"
            f"{served[:3]}\nvs\n{expected[:3]}"
        )
    return served


# ---------------------------------------------------------------------------
# The command line, shared by both scripts
# ---------------------------------------------------------------------------

SMOKE = dict(
    num_train=300, num_val=48, vocabulary_size=400, epochs=1, max_length=48,
    batch_tokens=512, beams=2,
)  # fmt: skip


def add_common_arguments(parser, defaults):
    """Flags of both scripts; `defaults` sets the model-specific ones."""
    add = parser.add_argument
    add("--source", choices=LANGUAGES, default="de", help="source language")
    add("--target", choices=LANGUAGES, default="en", help="target language")
    add("--data-dir", default=None,
        help="directory with {train,val}.{en,de}[.gz]; default: download the "
             "canonical files (checked by SHA-256) into ~/.keras/datasets")  # fmt: skip
    add("--no-check-hashes", action="store_true",
        help="accept gzipped files whose checksum differs from the canonical ones")  # fmt: skip
    add_output_dir(parser, defaults["output_dir"],
                   "tokenizers, checkpoints, logs, plots, results and the SavedModel")  # fmt: skip
    add("--epochs", type=int, default=defaults["epochs"], help="training epochs")
    add("--batch-tokens", type=int, default=defaults["batch_tokens"],
        help="about this many target tokens per batch, per replica (global "
             "batch: this x the number of replicas of --strategy)")  # fmt: skip
    add("--vocabulary-size", type=int, default=6000,
        help="SentencePiece vocabulary per language")  # fmt: skip
    add("--max-length", type=int, default=64,
        help="longest training sequence in subwords (longer pairs are dropped); "
             "sources are cut and translations stop at this length")  # fmt: skip
    add("--beams", type=int, default=5,
        help="beam width for the beam-search evaluation and the SavedModel "
             "(greedy is always evaluated too; 1: greedy only)")  # fmt: skip
    add("--label-smoothing", type=float, default=0.1,
        help="label smoothing of the training loss")  # fmt: skip
    add("--length-penalty", type=float, default=0.6,
        help="GNMT length penalty alpha of beam search")  # fmt: skip
    add("--num-train", type=int, default=None, help="use the first N training pairs")
    add("--num-val", type=int, default=None, help="use the first N validation pairs")
    add_seed(parser)
    add_smoke(parser, f"a tiny end-to-end run for tests: {SMOKE} and a tiny model")
    add("--evaluate", nargs=2, metavar=("FILE.src", "FILE.ref"),
        help="evaluate the trained model in --output-dir on a parallel pair of "
             "files (no training)")  # fmt: skip
    add("--translate", action="store_true",
        help="translate sentences read from stdin, one per line, with the "
             "trained model in --output-dir (no training)")  # fmt: skip
    add("--no-export", action="store_true", help="skip the SavedModel export")
    distribute.add_strategy_flags(parser)
    distribute.add_jit_compile_flag(parser)
    add(
        "--interrupt-after-epochs", type=int, default=None, help=argparse.SUPPRESS
    )  # tests: simulate a killed run


def finish_arguments(args, smoke_model, argv=None):
    """Apply `--smoke` (to the flags not given explicitly) and check values."""
    apply_smoke(args, {**SMOKE, **smoke_model}, argv)
    check_languages(args.source, args.target)
    for name in ("epochs", "batch_tokens", "vocabulary_size", "max_length", "beams"):
        value = getattr(args, name)
        if value < (0 if name == "epochs" else 1):
            raise ValueError(
                f"`--{name.replace('_', '-')}` must be "
                f"{'>= 0' if name == 'epochs' else 'positive'}. Received: {value}"
            )
    return args


ARCHITECTURE_FILE = "architecture.json"


def run(args, build, architecture_keys):
    """Train (or load), evaluate, plot and export; returns the results.

    `build(args, source_vocab, target_vocab, steps_per_epoch)` returns
    `(model, optimizer, search)`; it runs inside the `--strategy` scope.
    `architecture_keys` are the flags that shape the model: they are saved
    with it and restored for `--evaluate` and `--translate`.
    """
    # First, before any other TensorFlow op: `mirrored` on a CPU splits it
    # into logical devices, `multiworker` connects to the other workers.
    strategy = distribute.make_strategy(args)
    status(f"Strategy: {distribute.describe(strategy)}")
    keras.utils.set_random_seed(args.seed)
    # BackupAndRestore resumes each worker from its own lasting directory.
    backup_dir = distribute.backup_dir_for(
        os.path.join(args.output_dir, "backup"), strategy
    )
    # Only the chief's outputs are kept (other workers write to a temp dir
    # and train the same tokenizers there: SentencePiece is deterministic).
    output_dir = distribute.output_dir_for(args.output_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)
    weights_path = os.path.join(output_dir, "model.weights.h5")
    use_trained = bool(args.evaluate or args.translate)
    if use_trained:
        load_architecture(args, output_dir, weights_path)
    direction = f"{args.source}-{args.target}"  # after the saved flags came back
    tokenizers, data = load_data(args, output_dir, use_trained, strategy, backup_dir)
    vocab_sizes = [t.vocabulary_size() for t in tokenizers]
    steps_per_epoch = data and data["steps_per_epoch"]
    with strategy.scope():  # variables are created mirrored on every replica
        model, optimizer, search = build(args, *vocab_sizes, steps_per_epoch)
        model.compile(
            optimizer=optimizer,
            loss=SmoothedCrossentropy(args.label_smoothing),
            weighted_metrics=["accuracy"],
            jit_compile=distribute.jit_compile_for(args, strategy),
        )
    results = {"direction": direction, "parameters": model.count_params()}
    if use_trained:
        # The weights file holds the optimizer state too: build it first.
        model.optimizer.build(model.trainable_variables)
        model.load_weights(weights_path)
    else:
        with open(os.path.join(output_dir, ARCHITECTURE_FILE), "w") as f:
            json.dump({k: getattr(args, k) for k in architecture_keys}, f, indent=1)
        results.update(train(args, model, data, output_dir, backup_dir))
        model.save_weights(weights_path)

    def translator(num_beams):
        return Translator(search, tokenizers, args.max_length,
                          args.max_length + 8, num_beams,
                          bucket_boundaries(args.max_length, args.smoke))  # fmt: skip

    if args.translate:
        lines = [line.rstrip("\n") for line in sys.stdin]
        for output in translate(translator(args.beams), lines):
            print(output)
        return results
    if args.evaluate:
        eval_src, eval_ref, _ = read_parallel(*args.evaluate)
        name = os.path.basename(args.evaluate[0])
    else:
        (eval_src, eval_ref), name = data["val_pairs"], "val"
    evaluate(args, translator, (eval_src, eval_ref, name), output_dir, results)
    if not args.evaluate:
        export(args, translator, eval_src, output_dir, results)
    distribute.cleanup_output_dir(output_dir, strategy)
    return results


def load_architecture(args, output_dir, weights_path):
    """Restore the flags that shape the trained model in `output_dir`."""
    if not os.path.exists(weights_path):
        raise ValueError(
            "`--evaluate` and `--translate` need a trained model in "
            f"`--output-dir`. Received: output_dir={output_dir!r} "
            f"without {os.path.basename(weights_path)}"
        )
    with open(os.path.join(output_dir, ARCHITECTURE_FILE)) as f:
        for name, value in json.load(f).items():
            setattr(args, name, value)


def load_data(args, output_dir, use_trained, strategy, backup_dir):
    """`(tokenizers, data)`: `data` holds the datasets `train` and `val`,
    `steps_per_epoch` and the raw `val_pairs`; it is None for `--evaluate`
    and `--translate`, whose runs need only the tokenizers.

    Batches are global (`--batch-tokens` per replica), sharded by data
    across workers, and the training data starts at the epoch that
    `BackupAndRestore` resumes at (`make_dataset`'s fixed orders).
    """
    # Data: the training split is needed to train the tokenizers.
    check_hashes = not args.no_check_hashes
    spm_paths = [
        os.path.join(output_dir, f"spm.{lang}.model")
        for lang in (args.source, args.target)
    ]
    if not use_trained or not all(map(os.path.exists, spm_paths)):
        train_src, train_tgt, dropped = load_multi30k(
            args.source, args.target, "train", args.data_dir, check_hashes
        )
        train_src, train_tgt = train_src[: args.num_train], train_tgt[: args.num_train]
        status(f"Multi30k {args.source}-{args.target}: {len(train_src)} training "
              f"pairs ({dropped} empty pairs dropped)")  # fmt: skip
    else:
        train_src = train_tgt = None
    tokenizers = [
        load_or_train_tokenizer(path, lines, args.vocabulary_size)
        for path, lines in zip(spm_paths, (train_src, train_tgt), strict=True)
    ]
    if use_trained:
        return tokenizers, None
    train_ids = prepare_pairs(tokenizers, train_src, train_tgt, args.max_length)
    status(f"Subwords: {[t.vocabulary_size() for t in tokenizers]} (source, "
          f"target); {train_ids[2]} pairs longer than {args.max_length} subwords "
          "left out")  # fmt: skip
    epochs = max(args.epochs, 1)
    first = min(distribute.resumed_epoch(backup_dir), epochs - 1)
    batching = dict(batch_tokens=args.batch_tokens, max_length=args.max_length,
                    single_bucket=args.smoke,
                    replicas=strategy.num_replicas_in_sync)  # fmt: skip
    train_ds = make_dataset(*train_ids[:2], seed=args.seed, epochs=epochs,
                            first_epoch=first, **batching)  # fmt: skip
    val_src, val_tgt, _ = load_multi30k(
        args.source, args.target, "val", args.data_dir, check_hashes
    )
    val_src, val_tgt = val_src[: args.num_val], val_tgt[: args.num_val]
    val_ids = prepare_pairs(tokenizers, val_src, val_tgt, args.max_length)
    return tokenizers, {
        "train": distribute.shard_by_data(train_ds),
        "val": distribute.shard_by_data(make_dataset(*val_ids[:2], **batching)),
        "steps_per_epoch": len(train_ds) // (epochs - first),
        "val_pairs": (val_src, val_tgt),
    }


def train(args, model, data, output_dir, backup_dir):
    """`model.fit` with backups, checkpoints and logs; returns its results."""
    model.summary()
    epoch_log = EpochLog(args.interrupt_after_epochs)
    callbacks = [
        keras.callbacks.BackupAndRestore(backup_dir),
        keras.callbacks.ModelCheckpoint(
            os.path.join(output_dir, "checkpoints", "last.weights.h5"),
            save_weights_only=True,
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(output_dir, "checkpoints", "best.weights.h5"),
            save_weights_only=True,
            save_best_only=True,
        ),
        keras.callbacks.TensorBoard(os.path.join(output_dir, "logs")),
        epoch_log,
    ]
    if getattr(args, "reduce_lr_on_plateau", False):
        callbacks.insert(
            0, keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=0, verbose=1)
        )
    start = time.perf_counter()
    history = model.fit(
        data["train"],
        validation_data=data["val"],
        epochs=args.epochs,
        steps_per_epoch=data["steps_per_epoch"],  # one iterator over all epochs
        callbacks=callbacks,
        shuffle=False,  # make_dataset shuffles
        verbose=1 if sys.stdout.isatty() else 2,
    )
    seconds = time.perf_counter() - start
    status(f"Training time: {seconds:.1f} s (epochs {epoch_log.epochs})")
    history = {k: [float(x) for x in v] for k, v in history.history.items()}
    # Per-epoch losses, e.g. to compare strategies with the weights
    # (`python examples/common/compare_runs.py DIR DIR ...`).
    with open(os.path.join(output_dir, "history.json"), "w") as f:
        json.dump(history, f)
    return {
        "train_seconds": seconds,
        "epochs_run": epoch_log.epochs,
        "iterations": int(model.optimizer.iterations.numpy()),
        "steps_per_epoch": data["steps_per_epoch"],
        "history": history,
    }


def evaluate(args, translator, evaluation, output_dir, results):
    """BLEU and chrF, greedy and with `--beams`, of `evaluation = (sources,
    references, name)`; `translator(num_beams)` makes a `Translator`. Writes
    the hypotheses beside the model and fills `results`."""
    eval_src, eval_ref, name = evaluation
    direction = results["direction"]
    searches = [1] + ([args.beams] if args.beams > 1 else [])
    for beams in searches:
        start = time.perf_counter()
        hypotheses = translate(translator(beams), eval_src)
        seconds = time.perf_counter() - start
        label = "greedy" if beams == 1 else f"beam{beams}"
        scores = bleu_scores(hypotheses, eval_ref)
        results[label] = {**scores, "seconds": seconds}
        print(
            f"{direction} {name} ({len(eval_src)} sentences), {label}: "
            f"BLEU {scores['bleu']:.2f} (lowercased {scores['bleu_lowercase']:.2f}), "
            f"chrF {scores['chrf']:.2f}; decoded in {seconds:.1f} s"
        )
        with open(os.path.join(output_dir, f"{name}.{label}.{args.target}"),
                  "w", encoding="utf-8") as f:  # fmt: skip
            f.write("\n".join(hypotheses) + "\n")
    for s, h, r in list(zip(eval_src, hypotheses, eval_ref, strict=True))[:3]:
        print(f"  src: {s}\n  out: {h}\n  ref: {r}")


def export(args, translator, sentences, output_dir, results):
    """Heat-maps of the first sentences, the SavedModel (unless
    `--no-export`), and `results.json`."""
    _, rows = sentence_attention(translator(1), sentences[:3])
    heatmap_path = os.path.join(output_dir, "attention.png")
    save_heatmaps(rows, heatmap_path)
    status(f"Saved cross-attention heat-maps to {heatmap_path}")
    view_paths = save_attention_views(rows, output_dir)
    status("Saved interactive attention views (open in a browser): "
           + ", ".join(os.path.basename(p) for p in view_paths))  # fmt: skip
    if not args.no_export:
        export_dir = os.path.join(output_dir, "saved_model")
        served = export_and_check(translator(args.beams), export_dir, sentences[:16])
        status(
            f"Exported SavedModel to {export_dir}; reloaded in a fresh process it "
            f"translates {len(served)} sentences like the model in memory, e.g. "
            f"{sentences[0]!r} -> {served[0]!r}"
        )
    results["provenance"] = provenance()  # the command line of sys.argv
    with open(os.path.join(output_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
