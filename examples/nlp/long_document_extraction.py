"""
Title: Extracting facts from long documents: full, local and memory-compressed decoders
Description: the task of Liu et al. (2018, "Generating Wikipedia by
Summarizing Long Sequences") in miniature: a decoder-only model reads a
long document and writes out facts that lie far from where it writes them.
`keras_attention.layers.MemoryCompressedDecoder` with the layer patterns
`FFFFF` (full causal attention, the paper's T-D), `LLLLL` (local attention
only), `MMMMM` and `LMLML` (memory-compressed attention; `LMLML` is the
paper's T-DMCA), trained and tested on the same documents in one run.

The documents: real movie reviews (IMDB, Maas et al., 2011) run together
into `--lengths` (2048) characters, with `--num-facts` (8) records
scattered through them: a key, one upper-case letter (distinct within a
document), followed by a `--value-length` (2) digit code, e.g. `... the
acting was Q48 dreadful ...`. Review text is lower-cased and its digits
removed, so capitals and digits occur in the records only. The document
is followed by the separator `|` and the question-and-answer: every key,
in a random order, each followed by its code (`|Q48B17...`). Input =
document + separator + answer (a decoder-only sequence); the loss is on
the answer's digits only, the keys being the questions. Training documents
come from the 25,000 training reviews and are drawn afresh for every batch
(batch `i` is a function of `(--seed, length, i)`), the test documents
(`--test-documents`, 256) from the 25,000 test reviews, generated once with
`--test-seed`: the same test set for every decoder.

Characters, not words, are the tokens: a fixed vocabulary of 76 (no
tokenizer fitted, no unknown words in the test reviews), a code is copied
digit by digit (an answer of several tokens), and 2,048 tokens are ~400
words, about one and a half reviews.

Why local attention fails by construction: a local layer (`BlockLocal1D`,
blocks of `--local-block-size` 32 and a flange of one block) lets position
`t` read from `floor(t / 32) * 32 - 32` on, and five stacked local layers
reach back to `local_reach` of it, at most 6 blocks (192 characters). Every
record lies before `local_reach` of the first answer position (the first
key of the question), less `--previous-tokens`, so no answer token of
`LLLLL` depends on a record at all (`test_long_document_extraction.py`
checks it on the gradients): `LLLLL` can only guess, and is the
experiment's "no document" control. The full and memory-compressed layers
read every earlier position; at length 2048 the records lie in the
document's first 1,854 characters, from 170 to 2,024 characters before the
question.

Model: character embeddings (`--hidden-dim` 64, plus a convolution over
each character's and the `--previous-tokens` (2) before it, scaled by the
square root of the width) and the sinusoidal encoding (memory-compressed
layers refuse RoPE), the five-layer pre-LayerNorm decoder (`--num-heads` 4, `--intermediate-dim` 256,
`--compression-factor` 3), a dense layer to the 76 logits at the answer's
digits. Adam, `--learning-rate` 3e-3 after `--warmup` (100) iterations,
cosine decay to 10%, gradients clipped at norm 1, batches of
`--batch-size` (8) under XLA: first a `--curriculum` of shorter documents
(400 iterations at 64 characters, then 800 at 256, the records out of the
local layers' reach there too), then `--iterations` (400) at each compared
length.

Measures, per decoder and length, on the test documents: exact match of
the whole answer (every digit right), decoded greedily and autoregressively
with the decoder's cache (`init_cache`, `cache_update_index`; the keys of
the question are given, the digits are the model's own), and token (digit)
accuracy, teacher-forced (each digit predicted from the true ones before
it). Also the exact match of the teacher-forced argmax (equal to the
greedy one unless numerical rounding differs: a greedy answer is right
exactly when every teacher-forced prediction is), training time,
milliseconds per iteration, weights. The chance level: digits are uniform,
so 10% per digit and `10^-(facts x digits)` for a whole answer; the
"answer position" control predicts each answer digit by the digit most
frequent at its place in 512 training answers (`position_prior`).

Outputs under `--output-dir`: `results.json`, `results.md`, and per
decoder and length (`FFFFF-2048`, ...) the weights, a CSV log and (while
training) a `BackupAndRestore` backup: run the same command again after a
crash and training continues from the last finished `--eval-interval`;
finished decoders are loaded and tested, not trained again.

Data: `--data-dir` with `train.jsonl.gz` and `test.jsonl.gz` (as in
`../shared/data/imdb`, checked against their SHA-256), or, without it, the
canonical `aclImdb_v1.tar.gz` from Stanford, downloaded once and checked.

Run:
    python examples/nlp/long_document_extraction.py \\
        --data-dir ../shared/data/imdb --output-dir outputs/long_document_extraction

Time: at the defaults (length 2048) the full decoder trained at 4.6-8.2
s per iteration on one core shared with other jobs (2026-12-06), about
40-60 minutes per decoder; not run to the end.

Measured at length 1024 (the defaults otherwise: the records lie in the
document's first 830 characters, 170 to 1,000 before the question), on
the 256 test documents, 2026-12-06, one core of a 2-core AMD VM that also
ran tests and other jobs (so the times compare poorly across decoders),
code 1279734 plus the example-argument refactor of 9c7881f:

    python examples/nlp/long_document_extraction.py --data-dir ../shared/data/imdb \
        --output-dir outputs/long_document_extraction_1024 --lengths 1024

    decoder  exact match  digit accuracy  training s  ms/iteration  weights
    FFFFF    100.0%       100.0%          901         1540          272,462
    LLLLL      0.0%        10.3%          1341        2126          272,462
    MMMMM     99.2%       100.0%          863         1395          395,982
    LMLML     96.1%        99.8%          648         1093          321,870
    answer-position control  0.0%  10.5%

Local attention alone fails as built (chance is 10% per digit), and the
memory-compressed decoders copy facts from up to 1,000 characters back
nearly as well as full attention: the paper's direction.

Measured at length 2048 (the defaults: the records lie in the document's
first 1,854 characters, 170 to 2,024 before the question), all four
decoders, on the 256 test documents, 2026-12-07 (TensorFlow 2.21.0, Keras
3.15.1), one pinned core of a 2-core AMD VM whose other core trained
another example (so the times compare roughly). LMLML and FFFFF were
trained on the code of 89e128f (`--patterns LMLML FFFFF`); the command
below then trained LLLLL and MMMMM on the code of bbc5ee8 (the same
library and script, the results table's header aside: 4c14076) and
reloaded the two finished ones:

    python examples/nlp/long_document_extraction.py --data-dir ../shared/data/imdb \
        --output-dir outputs/long_document_extraction_2048

    decoder  exact match  digit accuracy  training s  ms/iteration  weights
    FFFFF    100.0%       100.0%          2067        4733          272,462
    LLLLL      0.0%        10.6%          627         1070          272,462
    MMMMM     99.6%       100.0%          1210        2543          395,982
    LMLML     97.7%        99.9%          731         1404          321,870
    answer-position control  0.0%  10.7%

At 2048 characters, as at 1024: local attention alone stays at chance
(the facts are out of its reach by construction), the memory-compressed
decoders copy facts from up to 2,024 characters back, and T-DMCA trains at
3.4x the speed of full attention per iteration (MMMMM at 1.9x) while
getting 97.7% of the whole answers right against 100%. Not run: lengths
above 2048.
"""

import argparse
import csv
import os
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The repository root, for the helpers shared by the examples.
sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import add_iterations  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_seed  # noqa: E402
from examples.common.cli import add_smoke  # noqa: E402
from examples.common.cli import add_transformer_size  # noqa: E402
from examples.common.cli import apply_smoke  # noqa: E402
from examples.common.cli import check_iterations  # noqa: E402
from examples.common.cli import check_positive  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402

try:  # run from the repository root (the tests) or as a script (a sibling)
    from examples.nlp import han_imdb  # noqa: E402
except ModuleNotFoundError:
    import han_imdb  # noqa: E402

PATTERNS = ("FFFFF", "LLLLL", "MMMMM", "LMLML")
TEXT = " abcdefghijklmnopqrstuvwxyz.,!?'-():;\"/&*"  # what the reviews keep
KEYS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DIGITS = "0123456789"
SEPARATOR = "|"
CHARACTERS = TEXT + KEYS + DIGITS + SEPARATOR
TRAINING_KEYS = (
    "hidden_dim", "num_heads", "intermediate_dim", "compression_factor",
    "local_block_size", "local_memory_flange", "attention_impl", "num_facts",
    "value_length", "previous_tokens", "curriculum", "batch_size", "iterations",
    "eval_interval", "learning_rate", "warmup", "seed",
)  # fmt: skip

# ---------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------


def clean_review(text):
    """A review as document text: lower case, `<br />` and white space as
    one space, digits and every character outside `TEXT` dropped (so that
    capitals and digits occur in the records only)."""
    text = re.sub(r"<br\s*/?>", " ", text).lower()
    text = re.sub(r"\s+", " ", text)
    text = re.sub(f"[^{re.escape(TEXT)}]", "", text)
    return re.sub(" +", " ", text).strip()


def load_reviews(split, args):
    """The cleaned reviews of `split` ("train" or "test"), empty ones left
    out."""
    texts, _, _ = han_imdb.load_split(split, args.data_dir, not args.no_check_hash)
    reviews = [clean_review(t) for t in texts]
    return [r for r in reviews if r]


def local_reach(position, block_size, flange, num_layers):
    """The earliest position that can reach `position` through `num_layers`
    causal block-local layers (`BlockLocal1D(block_size, flange)`: a query
    reads its own block's earlier positions and the `flange` before it)."""
    for _ in range(num_layers):
        position = max(0, position // block_size * block_size - flange)
    return position


class Layout:
    """Where everything lies in a sequence of `length + 1` characters (the
    inputs are the first `length`, the targets the last `length`):

    - `[0, document)`: the document; its records lie in `[0, limit)`,
      `limit = local_reach(first_target, ...)` for `num_layers` local
      layers;
    - `document`: the separator;
    - then per fact, in the question's order, a key and `value_length`
      digits. `targets`: the input positions whose next character is an
      answer digit (each fact's key and its digits but the last);
      `first_target` is the first of them.
    """

    def __init__(self, length, num_facts, value_length, block_size, flange,
                 num_layers, previous_tokens=0):  # fmt: skip
        self.length, self.num_facts = length, num_facts
        self.value_length = value_length
        self.record = 2 + value_length  # " K" and the digits
        self.document = length - num_facts * (1 + value_length)
        keys = self.document + 1 + (1 + value_length) * np.arange(num_facts)
        self.targets = (keys[:, None] + np.arange(value_length)).reshape(-1)
        self.first_target = int(self.targets[0])
        # The embedding of position t also reads the `previous_tokens` before it.
        self.limit = (
            local_reach(self.first_target, block_size, flange, num_layers)
            - previous_tokens
        )
        if self.limit < num_facts * self.record:
            raise ValueError(
                f"A length of {length} leaves {self.limit} characters before "
                f"the local reach of the answer for {num_facts} records of "
                f"{self.record}: use longer documents, fewer facts or smaller "
                f"local blocks. Received: length={length}, local_block_size="
                f"{block_size}, local_memory_flange={flange}"
            )


def filler_text(reviews, rng, size):
    """`size` characters of reviews drawn at random, joined by spaces."""
    pieces, total = [], 0
    while total <= size:  # the joined text has `total - 1` characters
        pieces.append(reviews[rng.integers(len(reviews))])
        total += len(pieces[-1]) + 1
    return " ".join(pieces)[:size]


def make_document(reviews, rng, layout):
    """One sequence `(length + 1,)` int32 and its facts `[(key, code,
    position)]` in document order (`position`: the key's index). Each
    record, `" K"` and its digits, goes in after a space of the filler, at
    random places that keep every record before `layout.limit`."""
    k, size = layout.num_facts, layout.record
    filler = filler_text(reviews, rng, layout.document - k * size)
    # Record i ends at cut_i + (i + 1) size <= limit when every cut <= last.
    last = min(layout.limit - k * size, len(filler))
    spaces = [i for i, c in enumerate(filler[: last + 1]) if c == " "]
    places = spaces if len(spaces) >= k else range(last + 1)
    cuts = np.sort(rng.choice(places, k, replace=False))
    keys = rng.choice(list(KEYS), k, replace=False)
    codes = ["".join(rng.choice(list(DIGITS), layout.value_length)) for _ in keys]
    text, facts, start = [], [], 0
    for i, cut in enumerate(cuts):
        text += [filler[start:cut], f" {keys[i]}{codes[i]}"]
        facts.append((str(keys[i]), codes[i], int(cut + i * size + 1)))
        start = cut
    text.append(filler[start:])
    order = rng.permutation(k)
    answer = "".join(keys[i] + codes[i] for i in order)
    sequence = "".join(text) + SEPARATOR + answer
    return encode(sequence), facts


def encode(text):
    """`text` as int32 ids into `CHARACTERS`."""
    lookup = {c: i for i, c in enumerate(CHARACTERS)}
    return np.array([lookup[c] for c in text], "int32")


def decode(ids):
    return "".join(CHARACTERS[i] for i in ids)


def make_batch(reviews, rng, layout, size):
    """`(x, y)`: `size` documents' inputs `(B, length)` and answer digits
    `(B, facts x digits)`, the digits as ids."""
    sequences = np.stack([make_document(reviews, rng, layout)[0] for _ in range(size)])
    return sequences[:, :-1], sequences[:, layout.targets + 1]


def training_batches(reviews, layout, batch_size, seed, start, stop):
    """Training batches `start` to `stop` (excluded) of `layout`; batch `i`
    is a function of `(seed, length, i)`, the same for every decoder."""
    for i in range(start, stop):
        rng = np.random.default_rng([seed, layout.length, i])
        yield make_batch(reviews, rng, layout, batch_size)


def position_prior(train_answers, test_answers):
    """The "answer position" control: each answer digit predicted by the
    digit most frequent at its place in `train_answers` `(N, A)`. Its
    `(token accuracy, exact match)` on `test_answers` `(M, A)`."""
    guess = [np.bincount(column).argmax() for column in np.asarray(train_answers).T]
    right = np.asarray(test_answers) == np.array(guess)[None]
    return float(right.mean()), float(right.all(axis=1).mean())


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


class ExtractionDecoder(keras.Model):
    """Character embeddings (scaled by `sqrt(width)`) plus the sinusoidal
    encoding, a pre-LN `MemoryCompressedDecoder`, dense logits. `call`
    returns the logits at the answer digits only, `(B, A, V)`;
    `step` runs new tokens through the decoder's cache, all logits."""

    def __init__(self, layer_pattern, answer_offsets, args, **kwargs):
        super().__init__(**kwargs)
        # The answer digits' input positions, from the end (any length).
        self.answer_offsets = [int(t) for t in answer_offsets]
        self.previous_tokens = args.previous_tokens
        # Id len(CHARACTERS) stands for "before the start".
        self.embedding = keras.layers.Embedding(
            len(CHARACTERS) + 1, args.hidden_dim, name="embedding"
        )
        # A causal convolution over the character and the ones before it.
        self.mixing = None
        if self.previous_tokens:
            self.mixing = keras.layers.Conv1D(
                args.hidden_dim, self.previous_tokens + 1, use_bias=False,
                name="previous_characters",
            )  # fmt: skip
        self.positions = ka.layers.SinusoidalPositionEncoding(name="positions")
        self.decoder = ka.layers.MemoryCompressedDecoder(
            layer_pattern,
            num_heads=args.num_heads,
            intermediate_dim=args.intermediate_dim,
            compression_factor=args.compression_factor,
            local_block_size=args.local_block_size,
            local_memory_flange=args.local_memory_flange,
            attention_impl=args.attention_impl,
            normalize_first=True,
            seed=args.seed,
            name="decoder",
        )
        self.logits = keras.layers.Dense(len(CHARACTERS), name="logits")

    def embed(self, context, start_index=0):
        """`(B, t, D)`: the embeddings of the last `t` of `context` `(B, S +
        t)`, its first `S = previous_tokens` the characters before them."""
        S = self.previous_tokens
        embedded = self.embedding(context)  # (B, S + t, D)
        x = embedded[:, S:]  # (B, t, D)
        if self.mixing is not None:
            x = x + self.mixing(embedded)  # output i reads S + 1 inputs to i + S
        x = x * ops.cast(ops.sqrt(ops.cast(ops.shape(x)[-1], "float32")), x.dtype)
        return x + self.positions(x, start_index=start_index)

    def call(self, tokens, training=None):
        x = self.embed(with_start(tokens, self.previous_tokens))
        x = self.decoder(x, training=training)  # (B, T, D)
        targets = ops.convert_to_tensor(self.answer_offsets) + ops.shape(x)[1]
        return self.logits(ops.take(x, targets, axis=1))  # (B, A, V)

    def step(self, context, cache, index):
        """`(logits (B, t, V), cache)` of the last `t` characters of
        `context` `(B, previous_tokens + t)`, at positions `index ...`."""
        x = self.embed(context, start_index=index)
        x, cache = self.decoder(x, cache=cache, cache_update_index=index)
        return self.logits(x), cache


def with_start(tokens, count):
    """`tokens` `(B, T)` after `count` ids `len(CHARACTERS)` ("before the
    start"): `(B, count + T)`."""
    start = ops.full((ops.shape(tokens)[0], count), len(CHARACTERS), "int32")
    return ops.concatenate([start, ops.cast(tokens, "int32")], axis=1)


def greedy_answers(model, sequences, layout):
    """`(B, A)` answer digits decoded greedily with the decoder's cache: the
    document, the separator and the question's keys come from `sequences`
    `(B, length + 1)`; every digit is the argmax after the model's own
    earlier digits of that answer."""
    first, S = layout.first_target, model.previous_tokens
    targets = set(layout.targets.tolist())
    if not model.built:
        model(sequences[:1, : layout.length])
    cache = model.decoder.init_cache(len(sequences), layout.length)
    tokens = np.array(with_start(sequences[:, : layout.length], S))  # at t + S
    logits, cache = model.step(tokens[:, : S + first + 1], cache, 0)
    answers = []
    for position in range(first, layout.length):
        if position > first:
            if position - 1 in targets:  # a digit: the model's own
                tokens[:, S + position] = answers[-1]
            context = tokens[:, position : S + position + 1]
            logits, cache = model.step(context, cache, position)
        if position in targets:
            answers.append(np.argmax(np.asarray(logits[:, -1]), axis=-1))
    return np.stack(answers, axis=1)


def evaluate(model, sequences, layout, batch_size):
    """Test measures: greedy exact match (cached decoding), teacher-forced
    token accuracy and teacher-forced exact match."""
    digits = sequences[:, layout.targets + 1]
    forced, greedy = [], []
    for start in range(0, len(sequences), batch_size):
        part = sequences[start : start + batch_size]
        logits = model.predict_on_batch(part[:, :-1])
        forced.append(np.argmax(np.asarray(logits), axis=-1))
        greedy.append(greedy_answers(model, part, layout))
    forced, greedy = np.concatenate(forced), np.concatenate(greedy)
    return {
        "exact_match": float(np.all(greedy == digits, axis=1).mean()),
        "token_accuracy": float(np.mean(forced == digits)),
        "exact_match_teacher_forced": float(np.all(forced == digits, axis=1).mean()),
        "greedy_token_accuracy": float(np.mean(greedy == digits)),
        "documents": len(sequences),
    }


# ---------------------------------------------------------------------------
# Training one decoder
# ---------------------------------------------------------------------------


class Progress(keras.callbacks.Callback):
    """Per `--eval-interval`: a status line and a row of `log_path` (the
    training loss and digit accuracy of the interval, its seconds; the
    first interval of a call holds the XLA compilation). Listed before
    `BackupAndRestore`: a run killed in between repeats the interval."""

    def __init__(self, name, steps, log_path, length, offset):
        super().__init__()
        self.name, self.steps, self.log_path = name, steps, log_path
        self.length, self.offset = length, offset  # the phase's, its first epoch

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._start
        epoch, length = epoch + self.offset, self.length
        new_file = not os.path.exists(self.log_path)
        with open(self.log_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(["epoch", "length", "loss", "accuracy", "seconds"])
            writer.writerow([epoch, length, logs["loss"], logs["accuracy"], seconds])
        status(f"[{self.name}] iteration {(epoch + 1) * self.steps} (length "
               f"{length}): loss "
               f"{logs['loss']:.4f}, digit accuracy {logs['accuracy']:.3f}, "
               f"{1000 * seconds / self.steps:.0f} ms/iteration")  # fmt: skip


def build_model(pattern, layout, args, iterations):
    """A compiled `ExtractionDecoder`, built; its learning rate decays over
    `iterations`."""
    keras.utils.set_random_seed(args.seed)
    model = ExtractionDecoder(pattern, layout.targets - layout.length, args,
                              name=pattern)  # fmt: skip
    model(np.zeros((1, layout.length), "int32"))
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, max(iterations - args.warmup, 1), alpha=0.1,
        warmup_target=args.learning_rate, warmup_steps=args.warmup,
    )  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, global_clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=args.jit_compile,
    )
    return model


def fit(model, name, directory, phases, args, train_reviews):
    """Train `model` through `phases` `[(length, iterations, layout)]`, one
    `fit` each (a length per `fit`), or resume; the log's path. Each phase
    but the last leaves its weights (and the optimizer's state) in
    `phase-K.weights.h5`, from which the next one starts."""
    steps = args.eval_interval
    log_path = os.path.join(directory, "log.csv")
    # A resumed run goes on with the batches after the last logged interval.
    done = len(runs.last_epoch_rows(log_path)) if os.path.exists(log_path) else 0
    first = 0  # the phase's first iteration
    for k, (length, iterations, layout) in enumerate(phases):
        saved = os.path.join(directory, f"phase-{k}.weights.h5")
        last = k == len(phases) - 1
        if not last and os.path.exists(saved):
            first += iterations
            continue
        if k > 0:
            # The file holds the optimizer's state too: its variables must exist.
            model.optimizer.build(model.trainable_variables)
            model.load_weights(os.path.join(directory, f"phase-{k - 1}.weights.h5"))
        start = max(first, done * steps)
        batches = training_batches(train_reviews, layout, args.batch_size,
                                   args.seed, start, first + iterations)  # fmt: skip
        backup = os.path.join(directory, f"backup-{k}")
        model.fit(
            batches,
            epochs=iterations // steps,
            steps_per_epoch=steps,
            shuffle=False,  # a generator: the batches are drawn at random already
            callbacks=[Progress(name, steps, log_path, length, first // steps),
                       keras.callbacks.BackupAndRestore(backup)],
            verbose=0,
        )  # fmt: skip
        if not last:
            model.save_weights(saved)
        first += iterations
    return log_path


def iteration_ms(rows, length, steps):
    """The median milliseconds per iteration of the intervals at `length`
    but the first (which holds the XLA compilation, unless it is alone)."""
    seconds = [float(r["seconds"]) for r in rows if int(r["length"]) == length]
    seconds = sorted(seconds[1:] or seconds)
    return 1000 * seconds[(len(seconds) - 1) // 2] / steps


def train_and_test(pattern, layout, args, train_reviews, test_sequences):
    """Train (or resume, or reload) one decoder for `layout` (after the
    `--curriculum`), test it; returns its record."""
    phases = [(n, i, curriculum_layout(n, args)) for n, i in args.curriculum]
    phases.append((layout.length, args.iterations, layout))
    name = f"{pattern}-{layout.length}"
    directory = os.path.join(args.output_dir, name)
    os.makedirs(directory, exist_ok=True)
    config = {k: getattr(args, k) for k in TRAINING_KEYS}
    config.update(
        pattern=pattern,
        length=layout.length,
        curriculum=[list(phase) for phase in args.curriculum],
    )  # as JSON
    record_path = os.path.join(directory, "training.json")
    weights_path = os.path.join(directory, "model.weights.h5")
    keras.backend.clear_session()
    model = build_model(pattern, layout, args, sum(phase[1] for phase in phases))
    record = runs.load_finished_run(model, config, record_path, weights_path, name)
    if record is not None and "test" in record:
        return record
    if record is None:
        log_path = fit(model, name, directory, phases, args, train_reviews)
        record, rows = runs.finish_run(model, config, weights_path, log_path)
        record |= {
            "ms_per_iteration": iteration_ms(rows, layout.length, args.eval_interval),
            "final_loss": float(rows[-1]["loss"]),
            "final_train_accuracy": float(rows[-1]["accuracy"]),
        }
    start = time.perf_counter()
    record["test"] = evaluate(model, test_sequences, layout, args.eval_batch_size)
    record["test_seconds"] = time.perf_counter() - start
    runs.write_json(record_path, record)
    status(f"[{name}] test: exact match {record['test']['exact_match']:.3f}, "
           f"digit accuracy {record['test']['token_accuracy']:.3f}")  # fmt: skip
    return record


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def curriculum_phase(text):
    """`"LENGTH:ITERATIONS"` as `(length, iterations)`, both positive."""
    try:
        length, iterations = (int(part) for part in text.split(":"))
    except ValueError:
        length = iterations = 0
    if length < 1 or iterations < 1:
        raise argparse.ArgumentTypeError(
            f"a phase is LENGTH:ITERATIONS, two positive integers: {text!r}"
        )
    return length, iterations


def check_pattern(text):
    """`--patterns`' type: a string of L, M and F."""
    if not text or set(text) - set("LMF"):
        raise argparse.ArgumentTypeError(
            f"a layer pattern is a string of L, M and F: {text!r}"
        )
    return text


def parse_args(argv=None):
    parser = example_parser(
        "Extracting facts from long documents: full, local and memory-compressed "
        "decoders (Liu et al., 2018)."
    )
    han_imdb.add_data_arguments(parser)
    add = parser.add_argument
    add_output_dir(parser, "outputs/long_document_extraction",
                   "results and, per decoder and length, weights and logs")  # fmt: skip
    add("--lengths", type=int, nargs="+", default=[2048],
        help="input lengths in characters (document, separator and answer)")  # fmt: skip
    add("--patterns", type=check_pattern, nargs="+", default=list(PATTERNS),
        help="decoders to compare: layer patterns of L (local), M "
             "(memory-compressed) and F (full), all of one length")  # fmt: skip
    add("--num-facts", type=int, default=8, help="records per document")
    add("--value-length", type=int, default=2, help="digits per record")
    add("--previous-tokens", type=int, default=2,
        help="the embedding of a character adds those of this many before it")  # fmt: skip
    add_transformer_size(parser, hidden_dim=64, num_heads=4, intermediate_dim=256)
    add("--compression-factor", type=int, default=3, help="f of the M layers")
    add("--local-block-size", type=int, default=32, help="blocks of the L layers")
    add("--local-memory-flange", type=int, default=None,
        help="positions before its block a local query reads (default: a block)")  # fmt: skip
    add("--attention-impl", default="auto",
        choices=("auto", "dense", "chunked", "fused"), help="attention path")  # fmt: skip
    add("--batch-size", type=int, default=8, help="documents per iteration")
    add("--curriculum", type=curriculum_phase, nargs="*", default=[(64, 400), (256, 800)],
        metavar="LENGTH:ITERATIONS",
        help="shorter documents trained on first, facts anywhere in them "
             "(nothing: none)")  # fmt: skip
    add_iterations(
        parser, 400, 50,
        help="training iterations at each compared length, after the curriculum",
        interval_help="iterations between log rows and backups",
    )  # fmt: skip
    add("--learning-rate", type=float, default=3e-3, help="Adam's peak rate")
    add("--warmup", type=int, default=100, help="warm-up iterations")
    add("--jit-compile", action=argparse.BooleanOptionalAction, default=True,
        help="train under XLA (--no-jit-compile: graph mode, which compiles "
             "faster: --smoke's default)")  # fmt: skip
    add("--test-documents", type=int, default=256, help="held-out test documents")
    add("--eval-batch-size", type=int, default=32, help="test documents per batch")
    add("--test-seed", type=int, default=0, help="seed of the test documents")
    add_seed(parser, help="seed of training and weights")
    add_smoke(parser, "a tiny run: short documents, a tiny model, a few iterations")
    args = parser.parse_args(argv)
    return finish_arguments(parser, args, argv)


SMOKE = dict(lengths=[96], num_facts=2, hidden_dim=16, num_heads=2,
             intermediate_dim=32, local_block_size=4, batch_size=2, iterations=4,
             eval_interval=2, warmup=1, test_documents=4, eval_batch_size=2,
             curriculum=[(64, 2)], jit_compile=False)  # fmt: skip


def finish_arguments(parser, args, argv):
    """`args` checked, after `--smoke` set the values of `SMOKE` that the
    command line leaves out; the local flange resolved."""
    apply_smoke(args, SMOKE, argv)
    check_positive(parser, args, ("num_facts", "value_length", "hidden_dim",
                                  "num_heads", "intermediate_dim",
                                  "compression_factor", "local_block_size",
                                  "batch_size", "iterations", "eval_interval",
                                  "test_documents", "eval_batch_size"))  # fmt: skip
    if args.previous_tokens < 0:
        parser.error("--previous-tokens must be >= 0")
    if args.num_facts > len(KEYS):
        parser.error(f"--num-facts must be at most {len(KEYS)} (one key letter each)")
    check_iterations(parser, args)
    if len({len(p) for p in args.patterns}) != 1:
        parser.error("--patterns must all have the same number of layers")
    if args.local_memory_flange is None:
        args.local_memory_flange = args.local_block_size
    try:
        for length in args.lengths:
            make_layout(length, args)
        for length, iterations in args.curriculum:
            make_layout(length, args, out_of_reach=False)
            if iterations % args.eval_interval:
                parser.error("--eval-interval must divide the --curriculum's "
                             f"iterations. Received: {length}:{iterations}")  # fmt: skip
    except ValueError as error:
        parser.error(str(error))
    return args


def make_layout(length, args, out_of_reach=True):
    """The `Layout` of `length`: its records out of the local layers' reach
    (the compared lengths, and the `--curriculum`'s where they fit), or
    anywhere before the question (`out_of_reach=False`)."""
    if not out_of_reach:
        return Layout(length, args.num_facts, args.value_length, 1, 0, 0)
    return Layout(length, args.num_facts, args.value_length, args.local_block_size,
                  args.local_memory_flange, len(args.patterns[0]),
                  args.previous_tokens)  # fmt: skip


def curriculum_layout(length, args):
    """A `--curriculum` phase's `Layout`: the records out of the local
    layers' reach where the length leaves room for them, else anywhere."""
    try:
        return make_layout(length, args)
    except ValueError:
        return make_layout(length, args, out_of_reach=False)


def test_set(test_reviews, layout, args):
    """The held-out documents `(N, length + 1)`, a function of
    `(--test-seed, length)`."""
    rng = np.random.default_rng([args.test_seed, layout.length])
    return np.stack(
        [
            make_document(test_reviews, rng, layout)[0]
            for _ in range(args.test_documents)
        ]
    )


def controls(train_reviews, test_sequences, layout, args):
    """Chance and the answer-position control at one length."""
    # A stream of its own: the training batches use `(seed, length, i)`.
    rng = np.random.default_rng([args.seed, layout.length, 2**32 - 1])
    _, train_answers = make_batch(train_reviews, rng, layout, 512)
    accuracy, exact = position_prior(
        train_answers, test_sequences[:, layout.targets + 1]
    )
    digits = len(layout.targets)
    return {"chance_token_accuracy": 0.1, "chance_exact_match": 10.0**-digits,
            "position_prior_token_accuracy": accuracy,
            "position_prior_exact_match": exact, "answer_digits": digits,
            "facts_before": layout.limit, "first_answer_position": layout.first_target}  # fmt: skip


def write_results(results, args, argv=None):
    lines = [
        f"Test: {args.test_documents} documents of held-out test reviews per "
        f"length, {args.num_facts} facts of {args.value_length} digits each. Exact "
        "match: the whole answer right, greedy decoding with the cache; digit "
        "accuracy: teacher-forced.",
        "",
        *runs.markdown_header(
            ["length", "decoder", "exact match", "digit accuracy", "training s",
             "ms / iteration", "weights"]
        ),
    ]  # fmt: skip
    for length, entry in results.items():
        for pattern, r in entry["decoders"].items():
            lines.append(
                f"| {length} | `{pattern}` | {100 * r['test']['exact_match']:.1f}% | "
                f"{100 * r['test']['token_accuracy']:.1f}% | {r['train_seconds']:.0f} "
                f"| {r['ms_per_iteration']:.0f} | {r['parameters']:,} |"
            )
        c = entry["controls"]
        lines.append(
            f"| {length} | answer-position control | "
            f"{100 * c['position_prior_exact_match']:.1f}% | "
            f"{100 * c['position_prior_token_accuracy']:.1f}% | | | |"
        )
    lines += ["", "Chance: 10% per digit; a whole answer 1e-"
              f"{args.num_facts * args.value_length}. The records lie before "
              + ", ".join(f"{c['controls']['facts_before']} (length {n})"
                          for n, c in results.items())
              + ", out of the local decoder's reach by construction."]  # fmt: skip
    runs.write_results(
        args.output_dir, results, args, lines, runs.provenance(__file__, argv)
    )


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    status("reading the reviews...")
    train_reviews = load_reviews("train", args)
    test_reviews = load_reviews("test", args)
    status(f"{len(train_reviews):,} training and {len(test_reviews):,} test reviews")
    results = {}
    for length in args.lengths:
        layout = make_layout(length, args)
        sequences = test_set(test_reviews, layout, args)
        entry = {"controls": controls(train_reviews, sequences, layout, args),
                 "decoders": {}}  # fmt: skip
        for pattern in args.patterns:
            entry["decoders"][pattern] = train_and_test(
                pattern, layout, args, train_reviews, sequences
            )
        results[length] = entry
    write_results(results, args, argv)
    return results


if __name__ == "__main__":
    main()
