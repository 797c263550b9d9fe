"""
Title: BERT-style pre-training on IMDB reviews, then sentiment fine-tuning
Description: `keras_attention.models.BertEncoder` pre-trained by masked
language modelling (Devlin et al., 2019) on the text of the Large Movie
Review Dataset, then fine-tuned for its sentiment, against the same
encoder trained from scratch.

Steps:
1. WordPiece vocabulary (`--vocabulary-size`, lower case) learned on the
   25,000 training reviews with keras-hub's `compute_word_piece_vocabulary`
   (`vocab.txt`, reused when present).
2. Pre-training text: every review of both splits (the labels are not
   used), cut into windows of `--sequence-length - 2` word pieces between
   `[CLS]` and `[SEP]`; the reviews of 1% of the movies (`--held-out`,
   the highest ids, as `han_imdb.validation_mask` holds out movies) are
   held out to measure the masked LM. keras-hub's `MaskedLMMaskGenerator`
   masks 15% of the pieces (80% `[MASK]`, 10% random, 10% kept) afresh in
   every epoch; the held-out windows are masked once, with `--seed`.
3. `BertMaskedLM.fit(jit_compile=True)`: AdamW, linear warm-up then linear
   decay (`--pretrain-steps`), `BackupAndRestore` (rerun the same command
   after a kill: it resumes), masked-LM loss and accuracy on the held-out
   windows every `--eval-every` steps (`pretrain/log.csv`).
4. Fine-tuning (`--models`): `pretrained` (the encoder of step 3) and
   `scratch` (the same encoder freshly initialised), each with a dropout
   and a dense layer on the pooled `[CLS]` output, on the first
   `--sequence-length - 2` pieces of each review: 22,500 training reviews,
   2,500 validating (whole movies, `han_imdb.validation_mask`), the best
   validation epoch's weights kept, accuracy on all 25,000 test reviews;
   `lora`: the pre-trained encoder frozen, LoRA on the attention's query
   and value projections (`BertEncoder.enable_lora`), the head trained.
5. The pre-trained classifier as a SavedModel that takes raw review
   strings and returns the two class probabilities (tokenization in the
   graph), checked under the TF1 loader (`saved_model_cli`'s and
   TensorFlow Serving's) in a fresh process with `tensorflow_text`
   imported. `saved_model_cli run` itself cannot serve it: it does not
   load the tensorflow-text ops (WordPiece) that the graph holds.
6. The attention of the pre-trained classifier on one short test review:
   `attention.png` (the last layer's heads) and `attention_view.html`
   (every layer x head, interactive, offline).

Data: `--data-dir` with `train.jsonl.gz` and `test.jsonl.gz` (as in
`../shared/data/imdb`, checked against their SHA-256), or the canonical
`aclImdb_v1.tar.gz`, downloaded once and checked (see `han_imdb.py`).

Run:
    python examples/nlp/bert_imdb.py --data-dir ../shared/data/imdb \\
        --output-dir outputs/bert_imdb

Measured (2026-12-07, a 2-vCPU AMD EPYC VM, each process pinned to one
core, TensorFlow 2.21.0, Keras 3.15.1, keras-hub 0.32.0,
tensorflow-text 2.21.1; pre-training on the code of 9c2e673, fine-tuning
on 63564b5, which changed only fine-tuning's seeding). The defaults were
then a 256-wide encoder, 3,000 pre-training steps and 3 epochs, but that
encoder took over 2.6 s per pre-training step on one core (more than two
hours for the steps), so the run measured the budget below, which the
defaults now are (the command above gives it):

    python examples/nlp/bert_imdb.py --data-dir ../shared/data/imdb \
        --output-dir outputs/bert_imdb_small --hidden-dim 128 \
        --intermediate-dim 512 --num-layers 4 --num-heads 4 \
        --pretrain-steps 2000 --warmup-steps 200 --eval-every 250 --epochs 2

(`--models scratch` of the same command ran beside it on the other core;
the full command then read that model back.) Pre-training: 154,088
windows of 126 pieces, 2,000 steps of 64 (0.83 of an epoch), 49.6
minutes. Held-out masked LM (1,546 windows of 1% of the movies) by step:

    step      250    500    750    1000   1250   1500   1750   2000
    loss      4.951  4.789  4.688  4.634  4.605  4.583  4.568  4.563
    accuracy  4.85%  8.16%  9.80%  10.53% 11.17% 11.57% 11.75% 11.94%

Fine-tuning: 2 epochs on the first 126 pieces of each review, the best
validation epoch's weights, all 25,000 test reviews:

    model       test accuracy  validation  trainable weights  training s
    pretrained  79.78%         76.72%      1,850,754          978
    scratch     81.10%         79.16%      1,850,754          1,033
    lora        57.41%         59.80%      18,178             850

At this budget pre-training does not help: the encoder trained from
scratch beats the pre-trained one by 1.3 points, and LoRA on the frozen
pre-trained encoder (1% of the weights trained) stays near chance. A masked LM that places
12% of the hidden pieces has learned little beyond which pieces are
frequent (BERT's own runs train 1M steps of 256 sequences of 512); the
loss was still falling. Both are far below the HAN example's 90.09%,
which reads whole reviews, where these read the first 126 pieces: the
test reviews have 326 pieces on average (median 241), and only 10.6% of
them fit whole. `attention.png` and `attention_view.html` show the
pre-trained classifier's attention on the shortest of the first 2,000
test reviews (the guide page "Pre-training an encoder: BERT" shows it).
"""

import json
import os
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import han_imdb  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the WordPiece ops, for the SavedModel)

import keras_attention as ka  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_seed  # noqa: E402
from examples.common.cli import add_smoke  # noqa: E402
from examples.common.cli import add_transformer_size  # noqa: E402
from examples.common.cli import apply_smoke  # noqa: E402
from examples.common.cli import check_positive  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.cli import transformer_size  # noqa: E402
from examples.common.export import save_for_serving  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(len(SPECIALS))
MODELS = ("pretrained", "scratch", "lora")

# ---------------------------------------------------------------------------
# Word pieces
# ---------------------------------------------------------------------------


def load_vocabulary(path, texts, size):
    """The WordPiece vocabulary in `path`, learned on `texts` first when
    the file is not there yet (keras-hub, lower case, no accents)."""
    if not os.path.exists(path):
        status(f"Learning a WordPiece vocabulary of {size} on {len(texts)} reviews...")
        keras_hub.tokenizers.compute_word_piece_vocabulary(
            tf.data.Dataset.from_tensor_slices(texts).batch(1000),
            size,
            vocabulary_output_file=path,
            lowercase=True,
            strip_accents=True,
            reserved_tokens=SPECIALS,
        )
    return path


def make_tokenizer(vocabulary_path):
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary_path, lowercase=True, strip_accents=True
    )


def pieces(tokenizer, texts, batch=2000):
    """Each text's word-piece ids, as a list of int32 arrays."""
    rows = []
    for start in range(0, len(texts), batch):
        ids = tokenizer(tf.constant(texts[start : start + batch]))
        ids = ids if isinstance(ids, list) else ids.to_list()  # eager: lists
        rows += [np.asarray(r, "int32") for r in ids]
    return rows


def pack(rows, length):
    """`(N, length)` ids: `[CLS] piece ... [SEP]`, then `[PAD]`."""
    out = np.full((len(rows), length), PAD, "int32")
    for i, row in enumerate(rows):
        row = row[: length - 2]
        out[i, 0], out[i, 1 : len(row) + 1], out[i, len(row) + 1] = CLS, row, SEP
    return out


def windows(rows, length):
    """Every review cut into consecutive windows of `length - 2` pieces,
    packed (the pre-training examples)."""
    step = length - 2
    cut = [row[i : i + step] for row in rows for i in range(0, max(len(row), 1), step)]
    return pack(cut, length)


# ---------------------------------------------------------------------------
# Masked-LM pre-training
# ---------------------------------------------------------------------------


def mask_generator(args):
    return keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=args.vocabulary_size,
        mask_selection_rate=0.15,
        mask_token_id=MASK,
        mask_selection_length=args.max_predictions,
        unselectable_token_ids=[PAD, CLS, SEP],
    )


def masked_examples(generator, token_ids):
    """`(inputs, labels, sample_weights)` of `BertMaskedLM` for a batch of
    packed ids, masked by `generator`."""
    masked = generator(token_ids)
    inputs = {
        "token_ids": masked["token_ids"],
        "padding_mask": tf.not_equal(token_ids, PAD),
        "mask_positions": masked["mask_positions"],
    }
    return inputs, masked["mask_ids"], masked["mask_weights"]


def pretraining_data(train_windows, held_out_windows, args):
    """The training batches (masked afresh as they are drawn, endlessly)
    and the held-out ones (masked once, with `--seed`)."""
    generator = mask_generator(args)
    train = (
        tf.data.Dataset.from_tensor_slices(train_windows)
        .shuffle(len(train_windows), seed=args.seed)
        .repeat()
        .batch(args.batch_size, drop_remainder=True)
        .map(lambda ids: masked_examples(generator, ids))
        .prefetch(2)
    )
    tf.random.set_seed(args.seed)
    held_out = [
        masked_examples(generator, tf.constant(held_out_windows[i : i + 256]))
        for i in range(0, len(held_out_windows), 256)
    ]
    validation = tf.data.Dataset.from_tensor_slices(
        tuple(_concatenate([batch[k] for batch in held_out]) for k in range(3))
    ).batch(args.batch_size)
    return train, validation


def _concatenate(parts):
    if isinstance(parts[0], dict):
        return {k: tf.concat([p[k] for p in parts], 0) for k in parts[0]}
    return tf.concat(parts, 0)


def learning_rate(peak, warmup, total):
    """Linear warm-up to `peak` over `warmup` steps, then linear decay to 0
    at `total` (BERT's schedule)."""
    decay = keras.optimizers.schedules.PolynomialDecay(peak, total - warmup, 0.0)
    return WarmUp(peak, warmup, decay)


@keras.saving.register_keras_serializable(package="bert_imdb")
class WarmUp(keras.optimizers.schedules.LearningRateSchedule):
    """`peak * step / warmup` for the first `warmup` steps, then `after`
    (counted from the end of the warm-up)."""

    def __init__(self, peak, warmup, after):
        self.peak, self.warmup, self.after = peak, warmup, after

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warm = self.peak * step / max(self.warmup, 1)
        return keras.ops.where(step < self.warmup, warm, self.after(step - self.warmup))

    def get_config(self):
        return {"peak": self.peak, "warmup": self.warmup,
                "after": keras.saving.serialize_keras_object(self.after)}  # fmt: skip

    @classmethod
    def from_config(cls, config):
        after = keras.saving.deserialize_keras_object(config.pop("after"))
        return cls(after=after, **config)


def build_encoder(args):
    return ka.models.BertEncoder(
        vocabulary_size=args.vocabulary_size,
        max_sequence_length=args.sequence_length,
        attention_impl=args.attention_impl,
        name="bert_encoder",
        **transformer_size(args),
    )


def pretrain(args, train_windows, held_out_windows):
    """The pre-trained encoder (`pretrain/encoder.weights.h5`), trained now
    or read back, and the log rows of its held-out masked LM."""
    directory = os.path.join(args.output_dir, "pretrain")
    os.makedirs(directory, exist_ok=True)
    weights = os.path.join(directory, "encoder.weights.h5")
    encoder = build_encoder(args)
    model = ka.models.BertMaskedLM(encoder)
    model.build()
    log = os.path.join(directory, "log.csv")
    if not os.path.exists(weights):
        train, validation = pretraining_data(train_windows, held_out_windows, args)
        model.compile(
            optimizer=keras.optimizers.AdamW(
                learning_rate(args.pretrain_lr, args.warmup_steps, args.pretrain_steps),
                weight_decay=0.01,
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=True,
        )
        with warnings.catch_warnings():
            # The pooler takes no part in the masked LM (keras-hub's BERT
            # warns alike): it is trained by fine-tuning.
            warnings.filterwarnings("ignore", "Gradients do not exist")
            model.fit(
                train,
                validation_data=validation,
                steps_per_epoch=args.eval_every,
                epochs=args.pretrain_steps // args.eval_every,
                shuffle=False,  # the dataset shuffles
                verbose=2,
                callbacks=[
                    keras.callbacks.BackupAndRestore(os.path.join(directory, "backup")),
                    han_imdb.EpochSeconds(),
                    keras.callbacks.CSVLogger(log, append=True),
                ],
            )
        encoder.save_weights(weights)
    encoder.load_weights(weights)
    return encoder, runs.last_epoch_rows(log)


# ---------------------------------------------------------------------------
# Fine-tuning
# ---------------------------------------------------------------------------


def classifier(encoder, args, name):
    """Packed ids `(B, L)` -> two class logits: the pooled `[CLS]` output,
    dropout, dense. The padding mask comes from the ids (`[PAD]` = 0)."""
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.ops.not_equal(token_ids, PAD)
    pooled = encoder({"token_ids": token_ids, "padding_mask": padding_mask})
    x = keras.layers.Dropout(args.dropout, seed=args.seed)(pooled["pooled_output"])
    logits = keras.layers.Dense(2, name="logits")(x)
    return keras.Model(token_ids, logits, name=name)


def fine_tuning_builder(pretrained, args):
    """`han_imdb.train_and_test`'s `build(name, args, steps_per_epoch)`."""

    def build(name, args, steps_per_epoch):
        # Each model starts from the same seed, whatever ran before it, so
        # that `--models scratch` alone trains the model of the full run.
        keras.utils.set_random_seed(args.seed)
        encoder = build_encoder(args)
        encoder.build()
        if name in ("pretrained", "lora"):
            encoder.set_weights(pretrained.get_weights())
        if name == "lora":
            encoder.enable_lora(args.lora_rank)
        model = classifier(encoder, args, name)
        total = steps_per_epoch * args.epochs
        model.compile(
            optimizer=keras.optimizers.AdamW(
                learning_rate(args.fine_tune_lr, total // 10, total), weight_decay=0.01
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=True,
        )
        return model

    return build


def trainable_count(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


# ---------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------


class ReviewClassifier(tf.Module):
    """Raw review strings -> class probabilities `(B, 2)` [negative,
    positive], tokenized and packed in the graph."""

    def __init__(self, tokenizer, model, length):
        super().__init__()
        self._tokenizer, self._length = tokenizer, length
        self._model = [model]  # a list: keep the Keras model untracked

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="reviews")])
    def __call__(self, reviews):
        ids = self._tokenizer(reviews)[:, : self._length - 2]
        batch = tf.shape(reviews)[0]
        cls = tf.fill([batch, 1], CLS)
        sep = tf.fill([batch, 1], SEP)
        packed = tf.concat([cls, tf.cast(ids, tf.int32), sep], axis=1)
        ids = packed.to_tensor(default_value=PAD, shape=[None, self._length])
        return {"probabilities": tf.nn.softmax(self._model[0](ids, training=False))}


# The TF1 loader (`saved_model_cli run`'s and TensorFlow Serving's) in a
# fresh process. Not `saved_model_cli` itself: it cannot register the
# tensorflow-text ops (WordPiece, NormalizeUTF8) that the graph holds.
SERVE_CHECK = """
import json, sys
import numpy as np
import tensorflow_text  # noqa: F401  (registers the WordPiece ops)
from examples.common.export import run_v1_signature
reviews = np.array(json.loads(sys.stdin.read()), dtype=object)
outputs = run_v1_signature(sys.argv[1], {"reviews": reviews})
print(json.dumps(outputs["probabilities"].tolist()))
"""


def export(tokenizer, model, args, texts):
    """The SavedModel (`saved_model/`), and its probabilities of `texts`
    under the TF1 loader in a fresh process, checked against the model in
    memory."""
    directory = os.path.join(args.output_dir, "saved_model")
    module = ReviewClassifier(tokenizer, model, args.sequence_length)
    expected = module(tf.constant(texts))["probabilities"].numpy()
    save_for_serving(module, directory, module.__call__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    process = subprocess.run(
        [sys.executable, "-c", SERVE_CHECK, directory],
        input=json.dumps(list(texts)), capture_output=True, text=True, cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    if process.returncode:
        raise RuntimeError(f"The SavedModel does not serve:\n{process.stderr[-2000:]}")
    served = np.array(json.loads(process.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(served, expected, atol=1e-5)
    return directory, served


# ---------------------------------------------------------------------------
# Attention of one review
# ---------------------------------------------------------------------------


def review_attention(model, tokenizer, texts, rows, longest=48):
    """The shortest of the first 2,000 `texts` (`rows`: their pieces, as
    `main` has them; its first `longest - 2` pieces when it is longer),
    between `[CLS]` and `[SEP]`, unpadded:
    `(text, labels, weights (L, N, T, T), positive)`, the weights of every
    encoder layer (`collect_attention`: one eager call, inference mode)
    and the classifier's probability of a positive review."""
    from keras_attention.visualization import collect_attention

    index = int(np.argmin([len(r) for r in rows[:2000]]))
    ids = pack([rows[index]], min(len(rows[index]) + 2, longest))
    attention = collect_attention(model, ids)
    weights = np.stack([record.weights[0] for record in attention.values()])
    positive = float(keras.ops.softmax(attention.outputs)[0, 1])
    labels = [tokenizer.id_to_token(int(i)) for i in ids[0]]
    return texts[index], labels, weights, positive


def save_attention_pictures(model, tokenizer, texts, rows, args):
    """`attention.png` (the last layer's mean over heads, then each of its
    heads) and `attention_view.html` (`model_view`: every layer x head,
    click a map for its head view) of one short test review."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_attention.visualization import model_view
    from keras_attention.visualization import plot_attention

    longest = min(48, args.sequence_length)  # within the position table
    text, labels, weights, positive = review_attention(
        model, tokenizer, texts, rows, longest
    )
    title = f"P(positive) = {positive:.3f}: {text[:70]}"
    last = weights[-1]
    panels = [(f"last layer, mean of {len(last)} heads", last.mean(0))]
    panels += [(f"last layer, head {h}", w) for h, w in enumerate(last)]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 6.5))
    for ax, (name, w) in zip(axes, panels, strict=True):
        plot_attention(w, labels, labels, ax=ax, title=name)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(args.output_dir, "attention.png"), dpi=90)
    plt.close(fig)
    layers = {f"layer_{n}": w[None] for n, w in enumerate(weights)}
    view = model_view(layers, labels, title=title)
    return str(view.save(os.path.join(args.output_dir, "attention_view.html")))


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    parser = example_parser(
        "BERT-style masked-LM pre-training on IMDB text, then sentiment "
        "fine-tuning against the same encoder trained from scratch."
    )
    han_imdb.add_data_arguments(parser)
    add_output_dir(parser, "outputs/bert_imdb")
    add_seed(parser)
    add_smoke(parser, "a few steps on 200 reviews of each split, a tiny encoder")
    add = parser.add_argument
    add("--models", nargs="+", choices=MODELS, default=list(MODELS))
    add("--vocabulary-size", type=int, default=8000)
    add("--sequence-length", type=int, default=128)
    add_transformer_size(
        parser, num_layers=4, num_heads=4, hidden_dim=128, intermediate_dim=512,
        dropout=0.1,
    )  # fmt: skip
    add("--attention-impl", default="auto",
        choices=("auto", "dense", "chunked", "fused"))  # fmt: skip
    add("--max-predictions", type=int, default=20,
        help="masked positions per window (15%% of 128, rounded up)")  # fmt: skip
    add("--batch-size", type=int, default=64)
    add("--pretrain-steps", type=int, default=2000)
    add("--warmup-steps", type=int, default=200)
    add(
        "--eval-every", type=int, default=250, help="steps between held-out evaluations"
    )
    add("--pretrain-lr", type=float, default=5e-4)
    add("--held-out", type=float, default=0.01,
        help="fraction of the movies held out of pre-training")  # fmt: skip
    add("--epochs", type=int, default=2, help="fine-tuning epochs")
    add("--fine-tune-lr", type=float, default=1e-4)
    add("--lora-rank", type=int, default=8)
    args = parser.parse_args(argv)
    apply_smoke(args, dict(
        vocabulary_size=300, sequence_length=32, num_layers=1, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_predictions=5, batch_size=16,
        pretrain_steps=6, warmup_steps=2, eval_every=3, epochs=1,
    ), argv)  # fmt: skip
    check_positive(parser, args, (
        "vocabulary_size", "sequence_length", "num_layers", "num_heads", "hidden_dim",
        "intermediate_dim", "max_predictions", "batch_size", "pretrain_steps",
        "eval_every", "epochs", "lora_rank",
    ))  # fmt: skip
    if args.pretrain_steps % args.eval_every:
        parser.error("--pretrain-steps must be a multiple of --eval-every")
    if args.sequence_length < 3:
        parser.error("--sequence-length must leave room for [CLS], a piece, [SEP]")
    return args


def load_reviews(args):
    """`{split: (texts, labels, ids)}`; with `--smoke` 200 of each split
    (100 of each class)."""
    data = {}
    for split in ("train", "test"):
        texts, labels, ids = han_imdb.load_split(
            split, args.data_dir, not args.no_check_hash
        )
        if args.smoke:
            keep = np.concatenate([np.flatnonzero(labels == c)[:100] for c in (0, 1)])
            texts, labels, ids = [texts[i] for i in keep], labels[keep], ids[keep]
        data[split] = (texts, labels, ids)
    return data


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    data = load_reviews(args)
    train_texts, train_labels, train_ids = data["train"]
    test_texts, test_labels, test_ids = data["test"]
    vocabulary = load_vocabulary(
        os.path.join(args.output_dir, "vocab.txt"), train_texts, args.vocabulary_size
    )
    tokenizer = make_tokenizer(vocabulary)
    status("Tokenizing the reviews...")
    train_rows, test_rows = (
        pieces(tokenizer, train_texts),
        pieces(tokenizer, test_texts),
    )

    held = {
        "train": han_imdb.validation_mask(train_ids, train_labels, args.held_out),
        "test": han_imdb.validation_mask(test_ids, test_labels, args.held_out),
    }
    rows = {"train": train_rows, "test": test_rows}
    pretrain_rows = [
        r for s in rows for r, h in zip(rows[s], held[s], strict=True) if not h
    ]
    held_rows = [r for s in rows for r, h in zip(rows[s], held[s], strict=True) if h]
    train_windows = windows(pretrain_rows, args.sequence_length)
    held_windows = windows(held_rows, args.sequence_length)
    results = {"pretraining": None, "models": {}}
    encoder = None  # `--models scratch` alone needs no pre-training
    if {"pretrained", "lora"} & set(args.models):
        status(
            f"Pre-training on {len(train_windows):,} windows; "
            f"{len(held_windows):,} held out"
        )
        start = time.perf_counter()
        encoder, pretrain_log = pretrain(args, train_windows, held_windows)
        results["pretraining"] = {
            "windows": len(train_windows),
            "held_out_windows": len(held_windows),
            "log": pretrain_log,
            "seconds_this_run": round(time.perf_counter() - start, 1),
        }

    validation = han_imdb.validation_mask(train_ids, train_labels, 0.1)
    x_train = pack(train_rows, args.sequence_length)
    x_test = pack(test_rows, args.sequence_length)
    split = (x_train[~validation], train_labels[~validation],
             x_train[validation], train_labels[validation], x_test, test_labels)  # fmt: skip
    build = fine_tuning_builder(encoder, args)
    trained = {}
    for name in args.models:
        model, record = han_imdb.train_and_test(name, args, {name: split}, build=build)
        record["trainable_weights"] = trainable_count(model)
        results["models"][name] = record
        trained[name] = model

    if "pretrained" in trained:
        directory, served = export(
            tokenizer, trained["pretrained"], args, test_texts[:4]
        )
        status(
            f"SavedModel in {directory}; the TF1 loader gives {served.round(3).tolist()}"
        )
        results["saved_model"] = directory
        results["attention_view"] = save_attention_pictures(
            trained["pretrained"], tokenizer, test_texts, test_rows, args
        )
    write_results(results, args)
    return results


def write_results(results, args):
    table = [
        "Test accuracy on the IMDB test reviews "
        f"({len(results['models'])} models; sequence length {args.sequence_length})",
        "",
        *runs.markdown_header(
            ["model", "test accuracy", "trainable weights", "epochs"]
        ),
    ]
    for name, record in results["models"].items():
        table.append(runs.markdown_row([
            name, f"{100 * record['test_accuracy']:.2f}%",
            f"{record['trainable_weights']:,}", str(record.get("epochs", "")),
        ]))  # fmt: skip
    last = ((results["pretraining"] or {}).get("log") or [{}])[-1]
    if last:
        table += ["", f"Held-out masked LM after pre-training: loss {float(last['val_loss']):.3f}, "
                  f"accuracy {100 * float(last['val_accuracy']):.2f}%"]  # fmt: skip
    runs.write_results(args.output_dir, results, args, table)
    with open(os.path.join(args.output_dir, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=1)


if __name__ == "__main__":
    main()
