"""
Title: Date normalisation with an attention seq2seq model
Description: Translate human-written dates ("Saturday, 29 November 2026",
"29.11.26", "nov 29 2026", ...) into ISO dates ("2026-11-29") with a
bidirectional-GRU encoder and a Bahdanau or Luong attention decoder
(`--model rnn`, the default) or with a small Transformer (`--model
transformer`, `keras_attention.models.Transformer`).

A small, self-contained translation task: the data comes from a seeded
generator (no download), the model trains in a few minutes on a laptop CPU
with `model.fit(jit_compile=True)`, and the attention heat-maps show the
decoder reading the day, month and year where they are written.

Steps: generate data -> character vocabularies (`TextVectorization` for the
source, `StringLookup` with a fixed vocabulary for the target) -> train with
teacher forcing -> greedy (or `--beams N` beam) search under XLA ->
exact-match accuracy on held-out dates -> attention heat-maps (PNG:
`alignments.png`) and the same alignments as interactive pages
(`alignments_0.html` .. `alignments_2.html`, `alignment_view`: hover a cell
for its weight; self-contained, they open offline in any browser) ->
SavedModel that maps raw date strings to ISO strings, reloaded and checked
(it also serves through the TF1 loader: `saved_model_cli run --dir
outputs/dates/saved_model --tag_set serve --signature_def serving_default
--input_exprs 'dates=["3 March 1999"]'`, or TensorFlow Serving).
Data, vocabularies, search, evaluation, plots and export are shared; the
two builders differ only in the model and how it searches.

Models (defaults; 20000 training dates, batch 128, Adam with cosine decay):
- `rnn`: embeddings of 32, BiGRU encoder 2 x 64, GRU decoder of 128 with
  Bahdanau attention (64 units), 4 epochs at 3e-3. The heat-map shows its
  alignment.
- `transformer`: 2 encoder + 2 decoder post-LN blocks, d_model 64, 4 heads,
  feed-forward 256, sinusoidal positions (238k weights), 4 epochs at 3e-3
  after 150 warm-up steps, no dropout (the generator rarely repeats a
  date; with dropout 0.1, 6 epochs reached only 94%); decoding runs
  `Transformer.generate` with its KV cache. The heat-map shows heads 0 and
  1 of the last decoder layer's cross-attention and the mean of its heads
  (`--plot-heads`).

Measured 2026-12-07 on the code of da4eca3 (exact match on 2000 held-out
dates, greedy search; TensorFlow 2.21.0, Keras 3.15.1; 2 idle cores of an
AMD EPYC VM, one run each, `/usr/bin/time`):

    python examples/nlp/translate_dates.py --model rnn --output-dir outputs/dates_r2_rnn
    python examples/nlp/translate_dates.py --model transformer \
        --output-dir outputs/dates_r2_transformer

    model        accuracy  fit (wall)   whole run: wall / CPU (user)
    rnn          100.00%   85 s         98 s / 84 s    (`make demo`)
    transformer   99.95%   56 s         80 s / 109 s
    (the RNN's four epochs took 19 + 10 + 10 + 11 s by Keras' own count,
    35 s less than its `fit`; a rerun with a clock at each epoch's start
    and end, on cores busy with other jobs, found no time outside the
    epochs: `fit` 106.4 s, epochs 40.3 + 21.6 + 22.9 + 21.4 s, the same
    losses, so that gap is not reproduced)

History: on 2026-11-30 (code bb30460, keras_attention 0.2.0, 2 idle
cores) the same commands gave rnn 99.95%, fit 44 s, whole run 56 s / 71
s, and transformer 100.00%, fit 48 s, 65 s / 90 s; 0.1.0 gave 99.90% for
both, with the Transformer's Q/K/V and Bahdanau's W/U starting equal.

The fit time includes the XLA compilation of the training step. (0.1.0:
with `--beams 4` its Transformer kept 99.90%, the same two errors on the
longest inputs, decoding the 2000 dates in 17 s instead of 8 s; not
re-measured.)

Global vs local attention (Luong et al., 2015), `--attention luong` with
and without `--local-p D` (predictive alignment, a window of 2D+1 source
characters; exact match, greedy, same seed; measured 2026-12-07 on the
code of 259424d, one run each, on cores shared with other training runs,
so no times):

    attention           4 epochs   8 epochs
    global              99.95%     100.00%
    local-p, D = 10     99.80%
    local-p, D = 5      95.70%      99.90%

A window of 5 characters each side learns more slowly (a date's fields
move around in the source: the decoder must learn to jump to the year
first) but nearly gets there with twice the epochs. On 2026-12-01 (code
b607d77) the same commands gave 99.95% / 100.00%, 99.95%, and 94.55% /
100.00%: differences of one run's size.
Commands: `python examples/nlp/translate_dates.py --attention luong
--local-p 5 --epochs 8 --output-dir outputs/dates_luong_p5e8` (and
the same without `--local-p`, or with `--local-p 10`, or `--epochs 4`).

Run: `python examples/nlp/translate_dates.py --output-dir outputs/dates`
(`--model transformer` for the Transformer).

Distributed training (`--strategy`; helpers in `examples/common/distribute.py`,
whose docstring covers GPU clusters and TPUs): `mirrored` trains with
`tf.distribute.MirroredStrategy` over the local GPUs, or over `--devices`
logical CPU devices without one; `multiworker` with
`MultiWorkerMirroredStrategy` over the machines named in each one's
`TF_CONFIG`; try it on one machine with
`python examples/common/local_workers.py --workers 2 -- python
examples/nlp/translate_dates.py --strategy multiworker --batch-size 64`.
`--batch-size` is per replica: 64 on two replicas takes the same steps as
the default 128 on one, with the same numbers up to float32 rounding
(measured in the README, "Distributed training"). Only the chief worker
keeps its outputs.
"""

import argparse
import datetime
import json
import os
import pathlib
import random
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The repository root, for the helpers shared by the examples.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import distribute  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_seed  # noqa: E402
from examples.common.cli import add_transformer_size  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.cli import transformer_size  # noqa: E402
from examples.common.export import save_for_serving  # noqa: E402
from keras_attention.decoding import beam_search  # noqa: E402
from keras_attention.decoding import greedy_search  # noqa: E402

# ---------------------------------------------------------------------------
# Data: human-written dates and their ISO form
# ---------------------------------------------------------------------------

MONTHS = [
    "January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December",
]  # fmt: skip
WEEKDAYS = [
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"
]  # fmt: skip
FIRST_DAY = datetime.date(1950, 1, 1)
LAST_DAY = datetime.date(2049, 12, 31)  # two-digit years: 50..99 -> 19xx


def ordinal(day):
    if day in (11, 12, 13):
        return f"{day}th"
    return f"{day}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th') }"


# Each format turns a date into one written form. Slashes mean month first
# (US), dots day first (European), so that no string is ambiguous.
FORMATS = [
    lambda d, m, w: f"{w}, {d.day} {m} {d.year}",  # Saturday, 29 November 2026
    lambda d, m, w: f"{d.day:02d}.{d.month:02d}.{d.year % 100:02d}",  # 29.11.26
    lambda d, m, w: f"{m[:3].lower()} {d.day} {d.year}",  # nov 29 2026
    lambda d, m, w: f"{d.month:02d}/{d.day:02d}/{d.year}",  # 11/29/2026
    lambda d, m, w: f"{ordinal(d.day)} of {m}, {d.year}",  # 29th of November, 2026
    lambda d, m, w: f"{m} {d.day}, {d.year}",  # November 29, 2026
    lambda d, m, w: f"{d.day} {m[:3]} {d.year}",  # 29 Nov 2026
    lambda d, m, w: f"{w[:3]} {d.day} {m[:3]} {d.year}",  # Sat 29 Nov 2026
    lambda d, m, w: f"{d.month}/{d.day}/{d.year % 100:02d}",  # 11/29/26
    lambda d, m, w: f"{d.day}.{d.month}.{d.year}",  # 29.11.2026
    lambda d, m, w: f"{d.isoformat()}",  # 2026-11-29
    lambda d, m, w: f"{d.year}{d.month:02d}{d.day:02d}",  # 20261129
    lambda d, m, w: f"the {ordinal(d.day)} of {m.lower()} {d.year}",
    lambda d, m, w: f"{m[:3].upper()} {ordinal(d.day)}, {d.year}",  # NOV 29th, 2026
    lambda d, m, w: f"{w.lower()} {m.lower()} {d.day} {d.year}",
    lambda d, m, w: f"{d.day} {m.upper()} {d.year}",  # 29 NOVEMBER 2026
]


def random_date(rng):
    span = (LAST_DAY - FIRST_DAY).days
    return FIRST_DAY + datetime.timedelta(days=rng.randint(0, span))


def generate_dates(count, seed):
    """`count` pairs `(human-written date, ISO date)` from a seeded generator."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(count):
        date = random_date(rng)
        fmt = rng.choice(FORMATS)
        sources.append(fmt(date, MONTHS[date.month - 1], WEEKDAYS[date.weekday()]))
        targets.append(date.isoformat())
    return sources, targets


# ---------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------

START, END = "^", "$"  # one-character markers around each target
TARGET_CHARS = [START, END, *"0123456789-"]
TARGET_LENGTH = len("2026-11-29") + 1  # decoder steps: 10 characters + END


def make_vocabularies(train_sources, max_source_length):
    """Source: learned character vocabulary; target: a fixed one.

    `TextVectorization(split="character")` lower-cases, splits into
    characters, pads to a fixed length and keeps id 0 for padding (so the
    encoder's `Embedding(mask_zero=True)` masks it). The target alphabet is
    known in advance, so a `StringLookup` with a fixed vocabulary (and its
    inverse for decoding) is enough.
    """
    source_vectorizer = keras.layers.TextVectorization(
        standardize="lower",
        split="character",
        output_mode="int",
        output_sequence_length=max_source_length,
        name="source_vectorizer",
    )
    source_vectorizer.adapt(tf.constant(train_sources))
    target_lookup = keras.layers.StringLookup(
        vocabulary=TARGET_CHARS, mask_token="", name="target_lookup"
    )
    target_chars = keras.layers.StringLookup(
        vocabulary=TARGET_CHARS, mask_token="", invert=True, name="target_chars"
    )
    return source_vectorizer, target_lookup, target_chars


def make_dataset(sources, targets, vocab, batch_size, shuffle_seed=None, epochs=1):
    """`((source_ids, decoder_inputs), labels)` batches for teacher forcing.

    Without `shuffle_seed`: one pass in order, the last batch possibly
    smaller. With it: `epochs` passes of full batches, each pass in a fresh
    order drawn up front from `shuffle_seed`. The data then holds no random
    state, so every strategy and worker sees the same global batches in the
    same order, whatever iterators Keras creates (under a strategy `fit`
    opens one extra to build the model, which would advance a reshuffling
    `Dataset.shuffle`). Fit it with `steps_per_epoch=len(sources) //
    batch_size`.
    """
    source_vectorizer, target_lookup, _ = vocab
    source_ids = source_vectorizer(tf.constant(sources))
    wrapped = tf.strings.join([START, tf.constant(targets), END])
    target_ids = target_lookup(tf.strings.unicode_split(wrapped, "UTF-8")).to_tensor()
    columns = ((source_ids, target_ids[:, :-1]), target_ids[:, 1:])
    if shuffle_seed is None:
        dataset = tf.data.Dataset.from_tensor_slices(columns).batch(batch_size)
    else:
        rng = np.random.default_rng(shuffle_seed)
        kept = len(sources) // batch_size * batch_size  # full batches only
        order = np.concatenate(
            [rng.permutation(len(sources))[:kept] for _ in range(epochs)]
        )
        dataset = tf.data.Dataset.from_tensor_slices(order).batch(
            batch_size,
            drop_remainder=True,  # nothing to drop: a static batch size
        )

        def gather(rows):
            return tf.nest.map_structure(lambda c: tf.gather(c, rows), columns)

        dataset = dataset.map(gather)
    return dataset.prefetch(tf.data.AUTOTUNE)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def build_rnn_model(
    source_vocab_size,
    target_vocab_size,
    attention="bahdanau",
    embedding_dim=32,
    encoder_units=64,
    decoder_units=128,
    attention_units=64,
    local_p=None,
):
    """BiGRU encoder + GRU decoder with Bahdanau or Luong attention.

    `local_p`: `None` for global attention, or a half-width `D` for local
    attention with predictive alignment (Luong et al., 2015, local-p) with
    the same score.

    Returns `(model, search)`: the training model `(source_ids,
    decoder_inputs) -> logits` (teacher forcing) and `search(source_ids,
    start_id, end_id, num_beams) -> (ids, attention)`, greedy or beam
    search over `TARGET_LENGTH` steps with the same layers (see
    `DateTranslator`). `attention` is `(B, 1, 1, T, S)`: one layer, one head.
    """
    source = keras.Input((None,), dtype="int32", name="source_ids")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")

    source_embedding = keras.layers.Embedding(
        source_vocab_size, embedding_dim, mask_zero=True, name="source_embedding"
    )
    encoder = keras.layers.Bidirectional(
        keras.layers.GRU(encoder_units, return_sequences=True), name="encoder"
    )
    target_embedding = keras.layers.Embedding(
        target_vocab_size, embedding_dim, name="target_embedding"
    )
    local = {} if local_p is None else dict(window=local_p, alignment="predictive")
    if attention == "bahdanau":
        cell = ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(decoder_units),
            ka.layers.BahdanauAttention(attention_units, **local),
            style="bahdanau",
        )
    else:
        cell = ka.layers.AttentionRNNCell(
            keras.layers.GRUCell(decoder_units),
            ka.layers.LuongAttention("general", **local),
            style="luong",
        )
    decoder = ka.layers.AttentionRNNDecoder(cell, name="decoder")
    readout = keras.layers.Dense(target_vocab_size, name="readout")

    memory = encoder(source_embedding(source))  # (B, S, 2 * encoder_units)
    # The memory's Keras mask (from `mask_zero`) keeps attention off padding.
    hidden = decoder(target_embedding(decoder_inputs), memory)
    model = keras.Model([source, decoder_inputs], readout(hidden), name="rnn_seq2seq")

    def encode(source_ids):
        return encoder(source_embedding(source_ids))

    return model, rnn_search(encode, target_embedding, decoder, readout)


def rnn_search(encode, target_embedding, decoder, readout):
    """`search(source_ids, start_id, end_id, num_beams)` of
    `build_rnn_model`: greedy or beam search, one decoder step at a time,
    the source encoded by `encode`."""

    def search(source_ids, start_id, end_id, num_beams=1):
        memory = encode(source_ids)
        cache = decoder.prepare_memory(memory, source_ids != 0)
        state = decoder.get_initial_state(keras.ops.shape(source_ids)[0])
        # Beam search runs B * num_beams rows: the memory follows.
        cache = keras.tree.map_structure(
            lambda x: keras.ops.repeat(x, num_beams, axis=0), cache
        )

        def step_fn(tokens, state, index):
            output, state, alignment = decoder.step(
                target_embedding(tokens), state, cache
            )
            return readout(output), state, alignment

        start = keras.ops.full(keras.ops.shape(source_ids)[:1], start_id, "int32")
        if num_beams == 1:
            ids, alignments = greedy_search(
                step_fn, start, state, TARGET_LENGTH, end_token=end_id
            )
        else:
            ids, alignments, _ = beam_search(
                step_fn, start, state, TARGET_LENGTH, end_id, num_beams=num_beams
            )
        return ids, alignments[:, None, None]  # (B, 1, 1, T, S)

    return search


def build_transformer_model(
    source_vocab_size,
    target_vocab_size,
    hidden_dim=64,
    num_heads=4,
    num_layers=2,
    dropout=0.0,
):
    """`keras_attention.models.Transformer`: `num_layers` + `num_layers` blocks.

    Post-LN blocks as in the paper, sinusoidal positions, a feed-forward
    width of `4 * hidden_dim`. Returns `(model, search)` as
    `build_rnn_model`; `search` is the model's KV-cached `generate` (traced
    into the caller's XLA function), and `attention` holds the
    cross-attention of every layer and head, `(B, L, N, T, S)`.
    """
    model = ka.models.Transformer(
        source_vocab_size,
        target_vocab_size,
        hidden_dim=hidden_dim,
        num_heads=num_heads,
        intermediate_dim=4 * hidden_dim,
        num_encoder_layers=num_layers,
        num_decoder_layers=num_layers,
        dropout=dropout,
        max_length=TARGET_LENGTH,
        name="transformer",
    )
    model.build()  # so that `model.summary()` can count the weights

    def search(source_ids, start_id, end_id, num_beams=1):
        return model.generate(
            source_ids,
            max_length=TARGET_LENGTH,
            start_id=start_id,
            end_id=end_id,
            num_beams=num_beams,
            return_attention_scores=True,
            jit_compile=False,  # DateTranslator.translate_ids compiles it.
        )

    return model, search


MODEL_BUILDERS = {"rnn": build_rnn_model, "transformer": build_transformer_model}


# ---------------------------------------------------------------------------
# Translation, evaluation, plots, export
# ---------------------------------------------------------------------------


class DateTranslator(tf.Module):
    """Raw date strings -> ISO strings, with the trained layers.

    `translate_ids` is the XLA-compiled greedy (or beam) search of either
    model; `__call__` wraps it with the string pre- and post-processing (not
    XLA-compilable) and is the SavedModel's serving signature. The model
    stays off the module: `save_for_serving` tracks the variables the
    search reads (and the vocabularies are tracked here), nothing else.
    """

    def __init__(self, search, vocab, num_beams=1):
        super().__init__()
        self.source_vectorizer, self.target_lookup, self.target_chars = vocab
        self._search = search
        self.num_beams = num_beams
        self.start_id = int(self.target_lookup(tf.constant(START)))
        self.end_id = int(self.target_lookup(tf.constant(END)))

    # One signature for evaluation and export: traced once, compiled per shape.
    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int64, name="source_ids")],
        jit_compile=True,
        autograph=False,  # no Python control flow on tensors; saves seconds of tracing
    )
    def translate_ids(self, source_ids):
        """`(B, S)` ids -> `(B, TARGET_LENGTH)` ids, attention `(B, L, N, T, S)`."""
        return self._search(
            tf.cast(source_ids, "int32"), self.start_id, self.end_id, self.num_beams
        )

    def ids_to_strings(self, ids):
        chars = self.target_chars(ids)
        chars = tf.where(tf.strings.length(chars) == 1, chars, "")  # drop specials
        chars = tf.where((chars == START) | (chars == END), "", chars)
        return tf.strings.reduce_join(chars, axis=-1)

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="dates")],
        autograph=False,
    )
    def __call__(self, dates):
        ids, _ = self.translate_ids(self.source_vectorizer(dates))
        return self.ids_to_strings(ids)


def translate(translator, sources, batch_size=500):
    """ISO strings and attention `(N, L, heads, TARGET_LENGTH, S)` for `sources`."""
    outputs, attention = [], []
    for i in range(0, len(sources), batch_size):
        ids = translator.source_vectorizer(tf.constant(sources[i : i + batch_size]))
        tokens, weights = translator.translate_ids(ids)
        outputs += [s.decode() for s in translator.ids_to_strings(tokens).numpy()]
        attention.append(weights.numpy())
    return outputs, np.concatenate(attention)


def export_and_check(translator, export_dir, sources, expected=None):
    """Save the SavedModel (raw strings -> ISO strings), reload it, compare.

    `save_for_serving` makes it servable by `tf.saved_model.load` and by the
    TF1 loader (`saved_model_cli run`, TensorFlow Serving); see
    `examples/common/export.py`. Raises if the reloaded model translates
    `sources` differently from `expected` (by default: `translator`'s
    translations); returns its translations.
    """
    save_for_serving(translator, export_dir, translator.__call__)
    if expected is None:
        expected, _ = translate(translator, sources)
    reloaded = tf.saved_model.load(export_dir)
    served = reloaded.signatures["serving_default"](dates=tf.constant(sources))
    served = [s.decode() for s in next(iter(served.values())).numpy()]
    if served != expected:
        raise RuntimeError(
            "The reloaded SavedModel gives different outputs:\n"
            f"{served[:3]}\nvs\n{expected[:3]}"
        )
    return served


def attention_panels(attention, layer=-1, heads=(0, 1)):
    """Chosen heads of one layer, plus their average when there are several.

    `attention` is `(L, N, T, S)` for one example; returns `[(title, (T,
    S))]`. The RNN's single alignment (L = N = 1) is one panel.
    """
    weights = attention[layer]  # (N, T, S)
    if len(weights) == 1:
        return [("alignment", weights[0])]
    name = f"layer {layer % len(attention) + 1}"
    panels = [(f"{name}, head {h}", weights[h]) for h in heads if h < len(weights)]
    return panels + [(f"{name}, mean of {len(weights)} heads", weights.mean(0))]


def save_heatmaps(sources, predictions, attention, path, layer=-1, heads=(0, 1)):
    """One column per example, one row per attention panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_attention.visualization import plot_attention

    panels = [attention_panels(a, layer, heads) for a in attention]
    rows, cols = len(panels[0]), len(sources)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.5 * rows), squeeze=False)
    for col, (source, prediction, example_panels) in enumerate(
        zip(sources, predictions, panels, strict=True)
    ):
        for row, (name, weights) in enumerate(example_panels):
            title = f"{source!r} -> {prediction}"
            plot_attention(
                weights,
                ["\u2423" if c == " " else c for c in source.lower()],
                (list(prediction) + [END])[: len(weights)],
                ax=axes[row, col],
                title=title if rows == 1 else f"{title}\n{name}",
            )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def save_alignment_views(
    sources, predictions, attention, output_dir, layer=-1, heads=(0, 1)
):
    """The heat-maps' alignments as interactive pages: one
    `alignment_view` per example, `alignments_<i>.html` (self-contained,
    works offline; hover a cell for its weight), its panels (the RNN's
    alignment, or the chosen heads and their mean) in the page's menu.
    Returns the paths."""
    from keras_attention.visualization import alignment_view

    paths = []
    for i, (source, prediction, weights) in enumerate(
        zip(sources, predictions, attention, strict=True)
    ):
        panels = attention_panels(weights, layer, heads)
        source_tokens = ["\u2423" if c == " " else c for c in source.lower()]
        source_tokens = source_tokens[: panels[0][1].shape[-1]]  # cut inputs
        target_tokens = (list(prediction) + [END])[: panels[0][1].shape[0]]
        view = alignment_view(
            np.stack([w[:, : len(source_tokens)] for _, w in panels]),
            source_tokens,
            target_tokens,
            names=[name for name, _ in panels],
            title=f"{source!r} -> {prediction}",
        )
        paths.append(view.save(os.path.join(output_dir, f"alignments_{i}.html")))
    return paths


def save_pictures(sources, predictions, attention, output_dir, heads):
    """The alignments of the first three held-out dates: heat-maps
    (`alignments.png`) and interactive views (`alignments_<i>.html`)."""
    picks = [0, 1, 2]
    picked = [
        [column[i] for i in picks] for column in (sources, predictions, attention)
    ]
    heatmap_path = os.path.join(output_dir, "alignments.png")
    save_heatmaps(*picked, heatmap_path, heads=heads)
    status(f"Saved alignment heat-maps to {heatmap_path}")
    view_paths = save_alignment_views(*picked, output_dir, heads=heads)
    status(
        f"Saved interactive alignment views (open in a browser) to "
        f"{', '.join(str(p) for p in view_paths)}"
    )


# Per-model defaults of the flags that differ (measured in the header).
MODEL_DEFAULTS = {
    "rnn": dict(epochs=4, units=128, learning_rate=3e-3, warmup_steps=0),
    "transformer": dict(epochs=4, units=64, learning_rate=3e-3, warmup_steps=150),
}


def parse_args(argv):
    parser = example_parser(
        "Train an attention seq2seq model that turns human-written dates into "
        "ISO dates, evaluate it, plot its alignments and export a SavedModel."
    )

    def per_model(name, text):  # a flag whose default depends on --model
        values = ", ".join(f"{m}: {d[name]}" for m, d in MODEL_DEFAULTS.items())
        return dict(default=argparse.SUPPRESS, help=f"{text} (default {values})")

    parser.add_argument("--model", choices=sorted(MODEL_BUILDERS), default="rnn",
                        help="model family")  # fmt: skip
    parser.add_argument("--attention", choices=["bahdanau", "luong"],
                        default="bahdanau", help="attention style of the RNN decoder")  # fmt: skip
    parser.add_argument("--local-p", type=int, default=None, metavar="D",
                        help="RNN decoder: local attention with predictive alignment "
                             "(Luong et al. 2015) over 2D+1 source characters, "
                             "instead of global attention")  # fmt: skip
    parser.add_argument("--epochs", type=int, **per_model("epochs", "training epochs"))
    parser.add_argument("--num-train", type=int, default=20000,
                        help="number of generated training dates")  # fmt: skip
    parser.add_argument("--num-test", type=int, default=2000,
                        help="number of held-out dates for the exact-match accuracy")  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=128,
                        help="batch size per replica (global batch: this x the "
                        "number of replicas of --strategy)")  # fmt: skip
    parser.add_argument("--learning-rate", type=float, **per_model(
        "learning_rate", "Adam peak learning rate, cosine decay to 0"))  # fmt: skip
    parser.add_argument("--warmup-steps", type=int, **per_model(
        "warmup_steps", "linear learning-rate warm-up steps"))  # fmt: skip
    parser.add_argument("--units", type=int, **per_model(
        "units", "model width: RNN decoder units (encoder: half per direction) "
        "or Transformer d_model"))  # fmt: skip
    add_transformer_size(
        parser, num_heads=4, num_layers=2, dropout=0.0,
        help={"num_heads": "Transformer attention heads",
              "num_layers": "Transformer encoder and decoder blocks (each)",
              "dropout": "Transformer dropout rate"},
    )  # fmt: skip
    parser.add_argument("--beams", type=int, default=1,
                        help="beam width at test time (1: greedy search)")  # fmt: skip
    parser.add_argument("--plot-heads", type=int, nargs="+", default=[0, 1],
                        help="Transformer heads of the last layer to plot (and their mean)")  # fmt: skip
    parser.add_argument("--max-source-length", type=int, default=32,
                        help="source characters kept (longer inputs are cut)")  # fmt: skip
    add_seed(parser)
    distribute.add_strategy_flags(parser)
    parser.add_argument("--jit-compile", action=argparse.BooleanOptionalAction,
                        default=None, help="compile the training step with XLA "
                        "(default: only with --strategy default)")  # fmt: skip
    add_output_dir(parser, "outputs/dates", "where the heat-maps (alignments.png), "
                   "the alignment views (alignments_<i>.html), the trained "
                   "weights, the training history and the SavedModel go")  # fmt: skip
    parser.add_argument("--no-export", action="store_true",
                        help="skip the SavedModel export and reload check")  # fmt: skip
    args = parser.parse_args(argv)
    for name, value in MODEL_DEFAULTS[args.model].items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return args


def build_model(args, vocab):
    """The chosen model family with the flags that concern it."""
    sizes = dict(
        source_vocab_size=vocab[0].vocabulary_size(),
        target_vocab_size=vocab[1].vocabulary_size(),
    )
    if args.model == "rnn":
        return build_rnn_model(
            **sizes,
            attention=args.attention,
            encoder_units=args.units // 2,
            decoder_units=args.units,
            attention_units=args.units // 2,
            local_p=args.local_p,
        )
    return build_transformer_model(
        **sizes,
        hidden_dim=args.units,
        **transformer_size(args),
    )


def training_and_held_out_dates(args):
    """`(train_src, train_tgt, test_src, test_tgt)`, printed in part.

    Held-out dates come from a different seed; any that also occur (same
    written form) in the training set are dropped.
    """
    train_src, train_tgt = generate_dates(args.num_train, args.seed)
    seen = set(train_src)
    test_src, test_tgt = generate_dates(args.num_test * 2, args.seed + 1)
    test = [(s, t) for s, t in zip(test_src, test_tgt, strict=True) if s not in seen]
    test_src, test_tgt = map(list, zip(*test[: args.num_test], strict=True))
    status(f"{len(train_src)} training dates, {len(test_src)} held-out dates, e.g.:")
    for s, t in zip(train_src[:5], train_tgt[:5], strict=True):
        status(f"  {s!r:36} -> {t}")
    return train_src, train_tgt, test_src, test_tgt


def compile_model(model, args, steps, jit_compile):
    """Adam on a cosine schedule with warm-up, over `steps` training steps."""
    warmup = min(args.warmup_steps, steps // 2)
    # Keras clips each replica's gradient before the all-reduce; this Adam
    # clips the summed one, so every strategy takes the single-device step.
    adam = distribute.clip_after_all_reduce(keras.optimizers.Adam)
    model.compile(
        optimizer=adam(
            keras.optimizers.schedules.CosineDecay(
                0.0 if warmup else args.learning_rate,
                steps - warmup,
                warmup_target=args.learning_rate if warmup else None,
                warmup_steps=warmup,
            ),
            clipnorm=1.0,
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )


def evaluate(translator, test_src, test_tgt, beams):
    """Translate the held-out dates and print the exact-match accuracy, a
    few translations and a few errors: `(predictions, attention, accuracy)`."""
    start = time.perf_counter()
    predictions, attention = translate(translator, test_src)
    accuracy = np.mean([p == t for p, t in zip(predictions, test_tgt, strict=True)])
    print(
        f"Exact-match accuracy on {len(test_src)} held-out dates: {accuracy:.2%} "
        f"({'greedy' if beams == 1 else f'{beams}-beam'} search, "
        f"{time.perf_counter() - start:.1f} s)"
    )
    for s, p, t in list(zip(test_src, predictions, test_tgt, strict=True))[:8]:
        print(f"  {s!r:36} -> {p}  {'ok' if p == t else 'WRONG, expected ' + t}")
    errors = [
        (s, p, t)
        for s, p, t in zip(test_src, predictions, test_tgt, strict=True)
        if p != t
    ]
    for s, p, t in errors[:5]:
        print(f"  error: {s!r} -> {p} (expected {t})")
    return predictions, attention, accuracy


def main(argv=None):
    args = parse_args(argv)
    # First, before any other TensorFlow op: `mirrored` on a CPU splits it
    # into logical devices, `multiworker` connects to the other workers.
    strategy = distribute.make_strategy(args)
    status(f"Strategy: {distribute.describe(strategy)}")
    keras.utils.set_random_seed(args.seed)
    # Only the chief's outputs are kept (other workers write to a temp dir).
    output_dir = distribute.output_dir_for(args.output_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)

    train_src, train_tgt, test_src, test_tgt = training_and_held_out_dates(args)
    vocab = make_vocabularies(train_src, args.max_source_length)
    # `fit` splits each global batch across the replicas (and workers).
    batch_size = distribute.global_batch_size(args.batch_size, strategy)
    train_ds = make_dataset(
        train_src, train_tgt, vocab, batch_size, args.seed, epochs=args.epochs
    )
    train_ds = distribute.shard_by_data(train_ds)
    steps_per_epoch = len(train_src) // batch_size
    jit_compile = args.jit_compile
    if jit_compile is None:
        jit_compile = distribute.jit_compile_default(strategy)
    with strategy.scope():  # variables are created mirrored on every replica
        model, search = build_model(args, vocab)
        compile_model(model, args, args.epochs * steps_per_epoch, jit_compile)
    model.summary()
    status(
        f"Global batch {batch_size}, {steps_per_epoch} steps per epoch, XLA {jit_compile}"
    )
    start = time.perf_counter()
    history = model.fit(
        train_ds,
        epochs=args.epochs,
        steps_per_epoch=steps_per_epoch,  # one iterator over all epochs
        shuffle=False,  # make_dataset already shuffles
        verbose=1 if sys.stdout.isatty() else 2,
    )
    train_seconds = time.perf_counter() - start
    status(f"Training time: {train_seconds:.1f} s")
    # Trained weights and losses, e.g. to compare strategies
    # (`python examples/common/compare_runs.py DIR DIR ...`).
    model.save_weights(os.path.join(output_dir, "model.weights.h5"))
    with open(os.path.join(output_dir, "history.json"), "w") as f:
        json.dump(history.history, f)

    translator = DateTranslator(search, vocab, args.beams)
    predictions, attention, accuracy = evaluate(
        translator, test_src, test_tgt, args.beams
    )

    save_pictures(test_src, predictions, attention, output_dir, args.plot_heads)

    if not args.no_export:
        export_dir = os.path.join(output_dir, "saved_model")
        served = export_and_check(
            translator, export_dir, test_src[:256], predictions[:256]
        )
        status(
            f"Exported SavedModel to {export_dir}; reloaded outputs match the "
            f"in-memory model on {len(served)} dates. "
            f"E.g. {test_src[0]!r} -> {served[0]!r}"
        )
    distribute.cleanup_output_dir(output_dir, strategy)
    return {
        "accuracy": float(accuracy),
        "train_seconds": train_seconds,
        "loss": history.history["loss"],
    }


if __name__ == "__main__":
    main()
