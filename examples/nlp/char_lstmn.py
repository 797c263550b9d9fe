"""
Title: LSTMN against LSTM as character language models on tiny Shakespeare
Description: `keras_attention.layers.LSTMN` (Cheng, Dong and Lapata, 2016:
an LSTM that reads a tape of all its earlier states by attention) against
`keras.layers.LSTM` with as many weights, predicting the next character of
tiny Shakespeare (1,115,394 characters, 65 distinct), at equal training
steps and at equal wall-clock time.

Data as in `char_lm.py` (its functions do the work): the first 90% of the
text trains, the last 10% validates; training windows of `--context`
(128) characters at random offsets, the same batches for both models (one
seed). Validation: the mean cross-entropy over every position of the
consecutive, non-overlapping windows of `--context` covering the
validation split (871 windows of 128), in bits per character (bpc: nats
/ ln 2). Each window starts from the zero state.

Models: embeddings (`--embedding-dim` 64), one recurrent layer returning
every step, a dense layer to the 65 logits.
- `lstmn`: `LSTMN(--units)` (128; attention width 128, the paper's score
  with `W_h~ h~_{t-1}`): 152,449 weights.
- `lstm`: `keras.layers.LSTM` with the width whose model has the nearest
  weight count (`matched_lstm_units`: 156 units, 152,269 weights, 0.12%
  fewer). Both counts are printed at the start and kept in `results.md`.

Training: Adam at a constant `--lr` 2e-3 (char-rnn's; constant, so that a
model's loss at any time is that of a run stopped there), gradients
clipped at global norm `--grad-clip` 1, batches of 32 windows,
`--iterations` 3000, both models under XLA. Every `--eval-interval` (100)
iterations the validation bpc is logged with the iteration and the
elapsed training time (without the validations; the first interval holds
the XLA compilation). The report compares the two at the same iteration
(the last both reached) and at the same elapsed time: when the first
model finished, each model's bpc at its last evaluation at or before that
time. The LSTM is the faster, so by default that is the LSTM's time for
3000 iterations. `--lstm-iterations` lets the LSTM run longer, e.g. as long
as the LSTMN takes: with a constant learning rate and batch `i` a function
of `(seed, i)`, its first 3000 iterations see the batches and the learning
rate of the shorter run, so the same-iteration comparison holds, and the
same-time one moves to the end of the LSTMN's run.

Outputs under `--output-dir`: `results.json` (with every logged point),
`results.md`, `val_bpc.png` (validation bpc against iterations and
against seconds), `intra_attention.png` / `.json` (the trained LSTMN's
intra-attention over the first validation line of 30-45 characters, read
alone: Figure 1 of Cheng et al. at character level), per model the weights, a CSV log and (while training) a
`BackupAndRestore` backup: rerun the same command after a crash and
training continues from the last finished evaluation interval; finished
models are loaded, not trained again.

Run (`--data-dir` holds `input.txt`; without it the canonical file is
downloaded and checked against its SHA-256):
    python examples/nlp/char_lstmn.py --data-dir ../shared/data/tinyshakespeare \\
        --output-dir outputs/char_lstmn

Measured (2026-12-05, commit 0a114fd, TensorFlow 2.21.0, Keras 3.15.1,
Python 3.11.7; a 2-vCPU Intel Xeon VM, the script pinned to one core with
`taskset -c 0` while the other core ran tests; one seed, 1337, default
flags; the command above, prefixed by `taskset -c 0`). The script changed
since only in what else it writes (ef4ca25: the intra-attention picture,
drawn from the saved LSTMN after the comparison) and in how it is
organised and invoked (5071ffd, 9396200: its arguments and training loop
shared with `char_lm.py`, whose `fit_windows` runs the same fit on the
same batches with the same defaults), not in what this command computes:

    model  units  weights  val bpc @3000 it  @461 s (iteration)  ms/it
    lstmn    128  152,449            2.8800      3.0951 (1100)     381
    lstm     156  152,269            2.4234      2.4234 (3000)     152

The LSTM wins at equal steps (by 0.46 bpc) and more at equal time: the
LSTMN, 2.5x slower per step, was behind at every evaluation (2.88 against
2.42 at 3000 steps, 2.97 against 2.52 at 2000, 3.12 against 2.71 at
1000). Cheng et al. report LSTMN language models ahead of LSTMs on the
Penn Treebank at word level after full training; this short,
constant-rate, character-level budget does not reproduce that direction.
Longer runs (`--iterations`) and other seeds are not measured.
"""

import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The repository root, for the helpers shared by the examples.
sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import check_positive  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from keras_attention.visualization import plot_attention  # noqa: E402

try:  # run from the repository root (the tests) or as a script (a sibling)
    from examples.nlp import char_lm  # noqa: E402
except ModuleNotFoundError:
    import char_lm  # noqa: E402

MODELS = ("lstmn", "lstm")
TRAINING_KEYS = (
    "embedding_dim", "context", "batch_size", "eval_interval", "lr", "grad_clip",
    "seed",
)  # fmt: skip

# ---------------------------------------------------------------------------
# Models and their weights
# ---------------------------------------------------------------------------


def parameter_count(kind, units, embedding_dim, vocabulary_size):
    """The trainable weights of `build_model(kind, units, ...)`: embeddings,
    the recurrent layer, the output layer. An LSTM has `4 (D U + U^2 + U)`;
    the LSTMN (attention width `U`) adds its score: `W_x (D, U)`,
    `W_h (U, U)`, `W_h~ (U, U)`, `v (U,)`."""
    if kind not in MODELS:
        raise ValueError(f"`kind` must be one of {MODELS}. Received: kind={kind!r}")
    d, u, v = embedding_dim, units, vocabulary_size
    recurrent = 4 * (d * u + u * u + u)
    if kind == "lstmn":
        recurrent += d * u + 2 * u * u + u
    return v * d + recurrent + u * v + v


def matched_lstm_units(lstmn_units, embedding_dim, vocabulary_size):
    """The LSTM width whose model has the weight count nearest the LSTMN
    model's (the narrower on a tie)."""
    target = parameter_count("lstmn", lstmn_units, embedding_dim, vocabulary_size)

    def gap(units):
        count = parameter_count("lstm", units, embedding_dim, vocabulary_size)
        return abs(count - target)

    return min(range(1, 4 * lstmn_units + 1), key=gap)


def build_model(kind, units, embedding_dim, vocabulary_size):
    """Embeddings, `LSTMN(units)` or `LSTM(units)` over every step, dense
    logits: `(B, T)` ids -> `(B, T, V)`."""
    if kind not in MODELS:
        raise ValueError(f"`kind` must be one of {MODELS}. Received: kind={kind!r}")
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocabulary_size, embedding_dim, name="embedding")(tokens)
    if kind == "lstmn":
        rnn = ka.layers.LSTMN(units, return_sequences=True, name="lstmn")
    else:
        rnn = keras.layers.LSTM(units, return_sequences=True, name="lstm")
    logits = keras.layers.Dense(vocabulary_size, name="logits")(rnn(x))
    return keras.Model(tokens, logits, name=f"char_{kind}")


# ---------------------------------------------------------------------------
# The intra-attention picture
# ---------------------------------------------------------------------------


def pick_line(val_ids, chars, shortest=30, longest=45):
    """The ids of the first line of the validation text that has between
    `shortest` and `longest` characters (without its newline)."""
    text = "".join(chars[i] for i in val_ids)
    start = 0
    for line in text.split("\n"):
        if shortest <= len(line.strip()) <= longest:
            return np.asarray(val_ids[start : start + len(line)])
        start += len(line) + 1
    raise ValueError(f"no validation line of {shortest}-{longest} characters")


def save_intra_attention(model, ids, chars, path):
    """`path` (PNG) and `.json`: the trained LSTMN's intra-attention over
    the characters `ids` read alone (no dropout), as Figure 1 of Cheng et
    al.: row `t` is character `t`, column 0 the initial (zero) state, then
    the earlier characters. Each row is drawn scaled to its largest weight
    (step t spreads about 1 / t); the JSON keeps the weights."""
    embedded = model.get_layer("embedding")(np.asarray(ids)[None])  # (1, T, D)
    _, weights = model.get_layer("lstmn")(
        embedded, training=False, return_attention_scores=True
    )
    weights = np.asarray(weights, "float32")[0]  # (T, T), strictly lower
    weights = np.concatenate([1.0 - weights.sum(-1, keepdims=True), weights], -1)
    labels = [chars[i] if chars[i] != " " else "\u2423" for i in ids]
    shown = weights / np.max(weights, axis=-1, keepdims=True)
    figure = plot_attention(shown, ["<start>", *labels], labels, cmap="Reds")
    ax = figure.axes[0]
    ax.set_title("trained character LSTMN, each row scaled to its largest weight",
                 pad=12, fontsize=10)  # fmt: skip
    ax.set_xlabel("character read (the initial state, then the earlier ones)")
    ax.set_ylabel("character at step t")
    figure.savefig(path, dpi=110, bbox_inches="tight")
    text = "".join(chars[i] for i in ids)
    runs.write_json(os.path.splitext(path)[0] + ".json",
                    {"text": text, "weights": np.round(weights, 5).tolist()})  # fmt: skip
    return weights


# ---------------------------------------------------------------------------
# Training one model
# ---------------------------------------------------------------------------


def bpc_curve(rows, steps):
    """`{iteration, seconds, loss_bpc, val_bpc}` from the log rows: the
    training seconds summed up to each evaluation, the losses in bits."""
    curve = runs.learning_curve(rows, "iteration", steps, ["loss", "val_loss"])
    seconds = np.cumsum([float(r["seconds"]) for r in rows])
    return {
        "iteration": curve["iteration"],
        "seconds": [round(float(s), 2) for s in seconds],
        "loss_bpc": [v / math.log(2) for v in curve["loss"]],
        "val_bpc": [v / math.log(2) for v in curve["val_loss"]],
    }


def train_model(kind, units, iterations, args, train_ids, val_ids, vocabulary_size):
    """Train (or resume, or reload) one model; returns its record."""
    directory = os.path.join(args.output_dir, kind)
    os.makedirs(directory, exist_ok=True)
    config = {k: getattr(args, k) for k in TRAINING_KEYS}
    config.update(kind=kind, units=units, iterations=iterations)
    record_path = os.path.join(directory, "training.json")
    weights_path = os.path.join(directory, "model.weights.h5")

    keras.utils.set_random_seed(args.seed)
    model = build_model(kind, units, args.embedding_dim, vocabulary_size)
    model.compile(
        optimizer=keras.optimizers.Adam(args.lr, global_clipnorm=args.grad_clip),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    record = runs.load_finished_run(model, config, record_path, weights_path, kind)
    if record is not None:
        return record

    steps = args.eval_interval
    validation = char_lm.strided_windows(val_ids, args.context)
    progress, timing = char_lm.fit_windows(
        model, kind, args, train_ids, validation, iterations=iterations
    )
    record, rows = runs.finish_run(model, config, weights_path, progress.log_path)
    curve = bpc_curve(rows, steps)
    interval = float(np.median([float(r["seconds"]) for r in rows]))
    record |= timing | {
        # The median interval: without the first one's XLA compilation.
        "ms_per_iteration": 1000 * interval / steps,
        "curve": curve,
        "val_bpc": curve["val_bpc"][-1],
    }
    runs.write_json(record_path, record)
    return record


# ---------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------


def point_at(curve, seconds):
    """`(iteration, seconds, val_bpc)` of the last evaluation at or before
    `seconds` of training, or `None` before the first."""
    done = [i for i, s in enumerate(curve["seconds"]) if s <= seconds + 1e-6]
    if not done:
        return None
    i = done[-1]
    return curve["iteration"][i], curve["seconds"][i], curve["val_bpc"][i]


def compare(results):
    """`{"iteration", "at_iteration", "seconds", "at_seconds"}`: each model's
    validation bpc at the last iteration all of them reached and at the
    training time the fastest one needed for all its iterations."""
    curves = {name: r["curve"] for name, r in results.items()}
    iteration = min(c["iteration"][-1] for c in curves.values())
    seconds = min(c["seconds"][-1] for c in curves.values())
    at_iteration = {
        name: c["val_bpc"][c["iteration"].index(iteration)]
        for name, c in curves.items()
    }
    at_seconds = {name: point_at(c, seconds) for name, c in curves.items()}
    return dict(
        iteration=iteration, at_iteration=at_iteration,
        seconds=seconds, at_seconds=at_seconds,
    )  # fmt: skip


def table(results, comparison, args):
    """The lines of `results.md`."""
    lines = [
        f"Validation bits per character (consecutive windows of {args.context} "
        f"covering the last 10% of the text), after {comparison['iteration']} "
        f"iterations of {args.batch_size} windows and after "
        f"{comparison['seconds']:.0f} s of training (when the first model "
        "finished: each model's last evaluation by then).",
        "",
        *runs.markdown_header(
            ["model", "units", "weights", "val bpc, same iterations",
             "val bpc, same time (iteration)", "iterations", "training s",
             "ms / iteration"]
        ),
    ]  # fmt: skip
    for name, r in results.items():
        point = comparison["at_seconds"][name]
        same_time = "not evaluated yet" if point is None else (
            f"{point[2]:.4f} ({point[0]})"
        )  # fmt: skip
        lines.append(
            f"| `{name}` | {r['config']['units']} | {r['parameters']:,} | "
            f"{comparison['at_iteration'][name]:.4f} | {same_time} | "
            f"{r['config']['iterations']} | {r['train_seconds']:.0f} | "
            f"{r['ms_per_iteration']:.0f} |"
        )
    return lines


def plot(results, path):
    """Validation bpc against iterations and against training seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for name, result in results.items():
        curve = result["curve"]
        label = f"{name} ({result['parameters']:,} weights)"
        by_step.plot(curve["iteration"], curve["val_bpc"], "o-", ms=3, label=label)
        by_time.plot(curve["seconds"], curve["val_bpc"], "o-", ms=3, label=label)
    by_step.set(xlabel="iteration", ylabel="validation bits per character")
    by_time.set(xlabel="training seconds", ylabel="validation bits per character")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    parser = example_parser(
        "LSTMN against an LSTM of as many weights, as character language "
        "models on tiny Shakespeare."
    )
    char_lm.add_text_arguments(parser)
    add_output_dir(parser, "outputs/char_lstmn", "results, plots, weights")
    add = parser.add_argument
    add("--models", nargs="+", choices=MODELS, default=list(MODELS),
        help="models to train")  # fmt: skip
    add("--units", type=int, default=128,
        help="LSTMN units (the LSTM's width matches its weight count)")  # fmt: skip
    add("--embedding-dim", type=int, default=64, help="character embedding width")
    char_lm.add_training_arguments(parser, context=128, batch_size=32,
                                   iterations=3000, eval_interval=100)  # fmt: skip
    add("--lstm-iterations", type=int, default=0,
        help="the LSTM's iterations, if not --iterations (see the header)")  # fmt: skip
    add("--lr", type=float, default=2e-3, help="Adam's (constant) learning rate")
    args = parser.parse_args(argv)
    check_positive(parser, args, ("units", "embedding_dim", "context", "batch_size",
                                  "iterations", "eval_interval"))  # fmt: skip
    args.lstm_iterations = args.lstm_iterations or args.iterations
    if (
        args.iterations % args.eval_interval
        or args.lstm_iterations % args.eval_interval
    ):
        parser.error("--eval-interval must divide --iterations and --lstm-iterations")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    path = char_lm.locate_text(args.data_dir, not args.no_check_hash)
    ids, chars = char_lm.load_text(path)
    split = int(0.9 * len(ids))  # the first 90% train, the last 10% validate
    train_ids, val_ids = ids[:split], ids[split:]
    vocabulary = len(chars)
    units = {
        "lstmn": args.units,
        "lstm": matched_lstm_units(args.units, args.embedding_dim, vocabulary),
    }
    counts = {
        kind: parameter_count(kind, units[kind], args.embedding_dim, vocabulary)
        for kind in MODELS
    }
    status(f"{len(ids):,} characters, {vocabulary} distinct: {len(train_ids):,} "
           f"train, {len(val_ids):,} validation; weights: lstmn {counts['lstmn']:,} "
           f"({units['lstmn']} units), lstm {counts['lstm']:,} ({units['lstm']} "
           f"units), {counts['lstm'] / counts['lstmn'] - 1:+.2%}")  # fmt: skip
    iterations = {"lstmn": args.iterations, "lstm": args.lstm_iterations}
    results = {}
    for kind in args.models:
        keras.backend.clear_session()
        record = train_model(kind, units[kind], iterations[kind], args, train_ids,
                             val_ids, vocabulary)  # fmt: skip
        results[kind] = record
        status(f"[{kind}] validation {record['val_bpc']:.4f} bpc after "
               f"{iterations[kind]} iterations, {record['train_seconds']:.0f} s "
               "of training")  # fmt: skip
    comparison = compare(results)
    plot(results, os.path.join(args.output_dir, "val_bpc.png"))
    if "lstmn" in results:
        keras.backend.clear_session()
        model = build_model("lstmn", units["lstmn"], args.embedding_dim, vocabulary)
        model.load_weights(os.path.join(args.output_dir, "lstmn", "model.weights.h5"))
        path = os.path.join(args.output_dir, "intra_attention.png")
        save_intra_attention(model, pick_line(val_ids, chars), chars, path)
        status(f"intra-attention picture: {path}")
    runs.write_results(
        args.output_dir,
        {"models": results, "comparison": comparison, "matched_weights": counts},
        args,
        table(results, comparison, args),
        source=runs.provenance(__file__, argv),
    )
    return {"models": results, "comparison": comparison}


if __name__ == "__main__":
    main()
