"""
Title: A character language model on tiny Shakespeare, five ways to encode position
Description: a decoder-only (GPT) Transformer, `keras_attention.layers.TransformerDecoder`
with pre-LN blocks, trained to predict the next character of tiny
Shakespeare (1,115,394 characters, 65 distinct; the first 90% train, the
last 10% validate, as in nanoGPT). One script does two things:

1. Reproduces nanoGPT's CPU recipe (4 layers, 4 heads, width 128, context
   64, batch 12, 2000 iterations, dropout 0, AdamW 1e-3 with betas
   (0.9, 0.99), weight decay 0.1 on matrices, gradient clipping at 1,
   100 warm-up steps, then cosine decay to 1e-4; tied input and output
   embeddings, GELU, N(0, 0.02) initialisation). nanoGPT's README reports a
   validation loss of 1.88 nats per character for it.
2. Compares five ways of telling the model where a character is, trained at
   one context length and evaluated at longer ones (length extrapolation):
   `sinusoidal` (Vaswani et al., 2017) and `learned` (GPT) absolute
   positions added to the embeddings; `rope` (rotary, Su et al., 2021),
   `alibi` (linear biases, Press et al., 2022) and `t5` (learned bucketed
   relative bias, Raffel et al., 2020; a table per block) inside the
   attention. The sinusoidal model multiplies the token embeddings by
   sqrt(width), as Vaswani et al. do: unscaled, embeddings of std 0.02
   drown in the unit-amplitude sinusoid, and the model was still at the
   loss of character frequencies (3.35) after 500 iterations.

Validation loss is nanoGPT's (the mean cross-entropy over every position
of a window), computed on the whole validation split cut into consecutive,
non-overlapping windows of the evaluation length (no random windows, so
no sampling noise): 1,742 windows of 64, 435 of 256, 217 of 512, 108 of
1024. Beyond the training length the script also reports the loss on the
positions past it only (positions 256-1023 of the 1024-windows), which is
where the methods differ. The learned table is built with one row per
position up to the longest evaluation length; the rows past the training
length never receive a gradient (they keep their random initialisation,
shrunk slightly by weight decay), so its numbers there show what a learned
table does out of range, not a fair chance at extrapolating.

Samples are drawn with `keras_attention.decoding.sample` (temperature 0.8,
as nanoGPT's `sample.py`) from a sliding window of the last `--context`
characters (nanoGPT's `generate`), so every model stays within the length
it was trained on.

Outputs under `--output-dir`: `results.json` and `results.md` (the loss
table), `val_loss.png` (learning curves, loss against evaluation length and
against position), `samples.txt`, and per method the weights, two
attention views of the trained model over the first `--view-length` (64)
validation characters (`<method>/attention_head_view.html` and
`attention_model_view.html`: `head_view` and `model_view` of
`collect_attention`, self-contained pages that open offline), a CSV log and
(while training) a `BackupAndRestore` backup: run the same command again
after a crash and training continues from the last finished evaluation
interval; finished methods are not trained again.

Run (the data: `--data-dir` holds `input.txt`; without it the canonical
file is downloaded and checked against its SHA-256):
    # nanoGPT's CPU recipe
    python examples/nlp/char_lm.py --data-dir ../shared/data/tinyshakespeare \\
        --output-dir outputs/char_lm_recipe --positions learned --context 64 \\
        --eval-lengths 64 --iterations 2000
    # the position comparison (the defaults)
    python examples/nlp/char_lm.py --data-dir ../shared/data/tinyshakespeare \\
        --output-dir outputs/char_lm_positions

Measured again 2026-12-07, the first command only (nanoGPT's recipe), on
the code of 0f74baf (TensorFlow 2.21.0, Keras 3.15.1), pinned to one core
of a 2-core AMD EPYC VM whose other core trained another model:
validation loss 1.8803 nats per character, the same to four decimals as
below (the losses by evaluation 2.4261, 2.2731, 2.1409, 2.0370, 1.9831,
1.9336, 1.9029, 1.8803), 84 ms per iteration on the one core, 3.0 min of
training. The position comparison (2. below) was not re-measured.

Measured on 2 shared CPU cores, no GPU (TensorFlow 2.21, Keras 3.15,
keras_attention 0.2.0), 2026-11-30, on the code of c99fbbb. The script
changed since in how it is organised and invoked (93f097c, 4158c6b,
06ab70b, 5071ffd, fdc9892, 9396200: logs, records, tables and arguments
through `examples/common`, the embedding frame and the training loop in
functions that `char_lstmn.py` shares; the same layers in the same order,
the same defaults), in what else it writes (9a41a19: status lines on
standard error; 640e732: provenance in `results.json`; 7e68f4e, 27beccf:
attention views of each trained model) and in tracing the sampler without
autograph (4277fca), not in the data, model, training or evaluation; the
whole-run times may differ. The same 4277fca changed the library's
attention gradients under XLA, which may change the times per iteration
and, by rounding, the losses:

1. nanoGPT's recipe (the first command): validation loss 1.8803 nats per
   character (seeds 1 and 2, `--seed`: 1.8823, 1.8727), 809,856 weights,
   41 ms per iteration, 2 min 11 s in all. nanoGPT itself (its `train.py`
   at commit 3adf61e, PyTorch 2.13 on the CPU, the README's command) on
   the same machine: 1.8857 by its own estimate (20 random batches),
   1.8982 on the whole validation split measured as here; 7 min 20 s. So
   the example matches nanoGPT's 1.88 (to its two decimals) and beats
   nanoGPT's own run side by side.

2. The comparison (the second command: context 256, 2000 iterations of 12
   windows, the recipe otherwise; 54 min in all, 6-12 min of training per
   method at 176-358 ms per iteration as the load from other jobs varied):

       positions   weights  L=256   L=512   L=1024  positions 256-1023
       sinusoidal  801,664  1.8372  2.6568  3.1171  3.5420
       learned     932,736  1.7719  2.7461  3.2428  3.7314  (untrained rows)
       rope        801,664  1.5968  1.6469  1.7954  1.8588
       alibi       801,664  1.6177  1.6099  1.6054  1.6001
       t5          802,176  1.8063  1.8576  2.0465  2.1258

   The loss by position in the 1024-windows, positions 128-255 (inside the
   training length) / 256-511 / 512-767 / 768-1023:

       sinusoidal  1.830 / 3.463 / 3.489 / 3.673
       learned     1.762 / 3.707 / 3.743 / 3.744
       rope        1.578 / 1.673 / 1.881 / 2.023
       alibi       1.593 / 1.581 / 1.606 / 1.613
       t5          1.796 / 1.894 / 2.131 / 2.352

What that says. Within the training length RoPE and ALiBi are best: with
the same 2000 iterations they learn faster than the absolute methods and
the T5 bias (the learning curves in `val_loss.png`). Past it, the two
absolute methods break at the first unseen position: from position 256 on
they predict worse than character frequencies alone (3.35 nats). RoPE
degrades gradually, the T5 bias too (its 32 causal buckets give every
distance from 128 on one shared bias, so a longer window adds keys it
cannot tell apart). ALiBi alone stays flat to 4x its training length, as
Press et al. (2022) report: its penalty grows linearly with distance, so
far keys get almost no weight and a long window looks like a short one.
One seed per method, on a shared machine.
"""

import csv
import math
import os
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

import keras_attention as ka  # noqa: E402
from examples.common.cli import add_data_dir  # noqa: E402
from examples.common.cli import add_iterations  # noqa: E402
from examples.common.cli import add_no_check_hash  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_seed  # noqa: E402
from examples.common.cli import add_transformer_size  # noqa: E402
from examples.common.cli import check_iterations  # noqa: E402
from examples.common.cli import check_positive  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.cli import transformer_size  # noqa: E402
from examples.common.files import sha256  # noqa: E402
from examples.common.runs import finish_run  # noqa: E402
from examples.common.runs import learning_curve  # noqa: E402
from examples.common.runs import load_finished_run  # noqa: E402
from examples.common.runs import markdown_header  # noqa: E402
from examples.common.runs import markdown_row  # noqa: E402
from examples.common.runs import provenance  # noqa: E402
from examples.common.runs import write_json  # noqa: E402

DATA_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
    "tinyshakespeare/input.txt"
)
DATA_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "t5")

# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def locate_text(data_dir=None, check_hash=True):
    """The path of `input.txt`: in `data_dir`, or downloaded and cached."""
    expected = DATA_SHA256 if check_hash else None
    if data_dir is None:
        return keras.utils.get_file(
            "input.txt",
            DATA_URL,
            file_hash=expected,
            hash_algorithm="sha256",
            cache_subdir=os.path.join("datasets", "tinyshakespeare"),
        )
    path = os.path.join(data_dir, "input.txt")
    if not os.path.isfile(path):
        raise ValueError(
            f"`data_dir` must contain `input.txt`. Received: data_dir={data_dir!r}"
        )
    if expected is not None and sha256(path) != expected:
        raise ValueError(
            f"Checksum mismatch: `{path}` must have the SHA-256 of tiny "
            f"Shakespeare, {expected}. Received: sha256={sha256(path)}. Pass "
            "`--no-check-hash` to use other text on purpose."
        )
    return path


def load_text(path):
    """`(ids, chars)`: the text as int32 ids into `chars`, its sorted
    characters (nanoGPT's vocabulary: every character of the whole file)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    return np.array([lookup[c] for c in text], dtype="int32"), chars


def training_batches(ids, context, batch_size, seed):
    """An endless `tf.data` stream of `(x, y)` `(B, T)` pairs, `y` = `x`
    shifted by one, at random offsets (nanoGPT's `get_batch`). Batch `i`
    is a pure function of `(seed, i)`."""
    data = tf.constant(ids)
    steps = tf.range(context + 1)

    def batch(i):
        offsets = tf.random.stateless_uniform(
            (batch_size,), seed=tf.stack([tf.cast(seed, tf.int64), i]),
            minval=0, maxval=len(ids) - context, dtype=tf.int32,
        )  # fmt: skip
        windows = tf.gather(data, offsets[:, None] + steps)  # (B, T + 1)
        return windows[:, :-1], windows[:, 1:]

    return tf.data.Dataset.range(2**62).map(batch).prefetch(tf.data.AUTOTUNE)


def strided_windows(ids, length):
    """`(x, y)` `(W, length)`: consecutive non-overlapping windows covering
    `ids` (a last partial window is dropped)."""
    count = (len(ids) - 1) // length
    index = np.arange(count)[:, None] * length + np.arange(length + 1)  # (W, L + 1)
    windows = ids[index]
    return windows[:, :-1], windows[:, 1:]


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


def attention_positions(positions, num_heads):
    """The `TransformerDecoder` arguments of the in-attention methods."""
    if positions == "rope":
        return {"rope_max_wavelength": 10000}
    if positions == "alibi":
        return {"score_modifier": ka.modifiers.ALiBi(num_heads)}
    if positions == "t5":
        # Causal buckets; the stack gives every block its own table.
        bias = ka.modifiers.RelativePositionBias(num_heads, bidirectional=False)
        return {"score_modifier": bias}
    return {}


class TiedEmbeddingLM(keras.Model):
    """nanoGPT's frame around a causal decoder: token embeddings, and the
    same embeddings (transposed) as the output layer (`logits`). Its
    tables start N(0, 0.02), a stream of its own each (`initializer`);
    a subclass builds `self.decoder` with `decoder_options`."""

    def __init__(self, vocabulary_size, hidden_dim, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.init_seed = seed
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=self.initializer(0),
            name="tokens",
        )

    def initializer(self, offset):
        """N(0, 0.02), seeded `seed + offset` (unseeded without a seed)."""
        seed = None if self.init_seed is None else self.init_seed + offset
        return keras.initializers.RandomNormal(stddev=0.02, seed=seed)

    def decoder_options(self):
        """The decoder's keyword arguments: pre-LN GELU blocks, N(0, 0.02)
        kernels (the stack varies the seed per kernel)."""
        return dict(
            activation="gelu",
            normalize_first=True,
            kernel_initializer=self.initializer(2),
            seed=self.init_seed,
            name="decoder",
        )

    def embed(self, tokens, scale=False):
        """`(B, T)` ids -> `(B, T, D)` embeddings; `scale`: times sqrt(D),
        as Vaswani et al. (3.4) before adding the sinusoid (amplitude 1:
        unscaled, embeddings of std 0.02 drown in it)."""
        x = self.token_embedding(tokens)
        if scale:
            x = x * ops.cast(math.sqrt(ops.shape(x)[-1]), x.dtype)
        return x

    def logits(self, x):
        """`(B, T, D)` decoder outputs -> `(B, T, V)` logits."""
        kernel = ops.transpose(self.token_embedding.embeddings)  # (D, V)
        return ops.matmul(x, kernel)


class CharTransformer(TiedEmbeddingLM):
    """nanoGPT's GPT: token embedding (+ absolute positions), a pre-LN
    causal `TransformerDecoder` with a final LayerNorm, and the token
    embedding again (transposed) as the output layer."""

    def __init__(
        self,
        vocabulary_size,
        positions,
        num_layers,
        num_heads,
        hidden_dim,
        dropout=0.0,
        max_positions=1024,
        seed=None,
        **kwargs,
    ):
        if positions not in POSITIONS:
            raise ValueError(
                f"`positions` must be one of {POSITIONS}. Received: {positions!r}"
            )
        super().__init__(vocabulary_size, hidden_dim, seed=seed, **kwargs)
        self.positions = positions
        self.position_layer = None
        if positions == "sinusoidal":
            self.position_layer = ka.layers.SinusoidalPositionEncoding()
        elif positions == "learned":
            self.position_layer = ka.layers.PositionEmbedding(
                max_positions, initializer=self.initializer(1), name="positions"
            )
        self.embedding_dropout = keras.layers.Dropout(dropout, seed=seed)
        self.decoder = ka.layers.TransformerDecoder(
            num_layers,
            num_heads=num_heads,
            intermediate_dim=4 * hidden_dim,
            dropout=dropout,
            **self.decoder_options(),
            **attention_positions(positions, num_heads),
        )

    def call(self, tokens, training=None):
        x = self.embed(tokens, scale=self.positions == "sinusoidal")  # (B, T, D)
        if self.position_layer is not None:
            x = x + self.position_layer(x)
        x = self.embedding_dropout(x, training=training)
        x = self.decoder(x, training=training)  # (B, T, D), causal
        return self.logits(x)


def build_optimizer(args):
    """nanoGPT's AdamW: linear warm-up, cosine decay to `min_lr` at the
    last iteration, global norm clipping."""
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(args.iterations - args.warmup_iters, 1),
        alpha=args.min_lr / args.lr,
        warmup_target=args.lr,
        warmup_steps=args.warmup_iters,
    )
    return keras.optimizers.AdamW(
        schedule,
        weight_decay=args.weight_decay,
        beta_1=0.9,
        beta_2=args.beta2,
        epsilon=1e-8,  # PyTorch's default
        global_clipnorm=args.grad_clip,
    )


def compile_model(model, args):
    """`model` (built) compiled under XLA with `build_optimizer`'s AdamW and
    the cross-entropy of its logits. As nanoGPT, only the matrices (and
    embeddings) decay, not the biases and norms."""
    optimizer = build_optimizer(args)
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in model.trainable_variables if len(v.shape) < 2]
    )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )


# ---------------------------------------------------------------------------
# Evaluation and sampling
# ---------------------------------------------------------------------------


def position_losses(model, val_ids, length, eval_tokens=8192):
    """The mean cross-entropy at each position `(length,)` over the strided
    validation windows of `length` (nanoGPT's loss is their mean)."""
    x, y = strided_windows(val_ids, length)
    batch = max(1, eval_tokens // length)
    padded = -len(x) % batch  # repeat windows: one compiled shape per length
    x_all = np.concatenate([x, x[:padded]])
    total = np.zeros(length)
    for start in range(0, len(x), batch):
        logits = np.asarray(model.predict_on_batch(x_all[start : start + batch]))
        logits = logits[: len(x) - start].astype("float64")  # (b, L, V)
        top = logits.max(-1, keepdims=True)
        log_z = top[..., 0] + np.log(np.exp(logits - top).sum(-1))  # (b, L)
        target = np.take_along_axis(logits, y[start : start + batch, :, None], -1)
        total += (log_z - target[..., 0]).sum(0)
    return total / len(x)


def generate(model, prompt_ids, length, context, temperature, seed, num_samples):
    """Sample `length` characters after `prompt_ids`, `num_samples` rows.

    As nanoGPT's `generate`, the model sees the last `context` characters
    only: the state is a fixed `(B, context)` window, filled from the left,
    then shifted by one character per step (a fixed shape, so the loop
    compiles once). `sample` feeds back the character it drew.
    """
    prompt = list(prompt_ids)[-context:]
    window = np.zeros((num_samples, context), "int32")
    window[:, : len(prompt) - 1] = prompt[:-1]
    start = np.full((num_samples,), prompt[-1], "int32")
    slots = ops.arange(context, dtype="int32")[None, :]  # (1, T)

    def step_fn(tokens, state, index):
        window, count = state  # count: characters in the window so far
        full = count >= context
        shifted = ops.concatenate([window[:, 1:], window[:, :1]], axis=1)
        window = ops.where(full, shifted, window)
        position = ops.minimum(count, context - 1)
        window = ops.where(slots == position, tokens[:, None], window)  # (B, T)
        logits = model(window, training=False)  # (B, T, V)
        return ops.take(logits, position, axis=1), (window, count + 1), None

    def run(start, window, seed):
        state = (window, ops.convert_to_tensor(len(prompt) - 1, "int32"))
        tokens, _ = ka.decoding.sample(
            step_fn, start, state, length, temperature=temperature, seed=seed
        )
        return tokens

    if keras.config.backend() == "tensorflow":
        run = tf.function(run, jit_compile=True, autograph=False)
    seed = ka.decoding.sampling.seed_tensor(seed)
    return np.asarray(run(ops.convert_to_tensor(start), window, seed))


# ---------------------------------------------------------------------------
# Training one method
# ---------------------------------------------------------------------------

TRAINING_KEYS = (
    "num_layers", "num_heads", "hidden_dim", "context", "batch_size",
    "iterations", "eval_interval", "dropout", "lr", "min_lr", "warmup_iters",
    "beta2", "weight_decay", "grad_clip", "seed",
)  # fmt: skip


class Progress(keras.callbacks.Callback):
    """Per evaluation interval: a line on stdout and a row in `log_path`
    (iteration time, without the validation; the first interval of a call
    includes the XLA compilation). Listed before `BackupAndRestore`: a run
    killed in between repeats the interval and its row."""

    def __init__(self, name, steps_per_epoch, log_path):
        super().__init__()
        self.name, self.steps_per_epoch = name, steps_per_epoch
        self.log_path = log_path
        self.seconds = []  # per epoch of this call

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_test_begin(self, logs=None):
        self._train_seconds = time.perf_counter() - self._start

    def on_epoch_end(self, epoch, logs=None):
        seconds = self._train_seconds
        self.seconds.append(seconds)
        new_file = not os.path.exists(self.log_path)
        with open(self.log_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(["epoch", "loss", "val_loss", "seconds"])
            writer.writerow([epoch, logs["loss"], logs["val_loss"], seconds])
        print(
            f"[{self.name}] iter {(epoch + 1) * self.steps_per_epoch}: "
            f"train loss {logs['loss']:.4f}, val loss {logs['val_loss']:.4f}, "
            f"{1000 * seconds / self.steps_per_epoch:.0f} ms/iter, validation "
            f"{time.perf_counter() - self._start - seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )


def fit_windows(model, name, args, train_ids, validation, **options):
    """Fit `model` (the run `name` in `--output-dir`) on `--iterations`
    random batches of `train_ids` (`training_batches`), validating on the
    windows `validation` and logging (`Progress`) every `--eval-interval`,
    with a backup a killed run resumes from. `options`: `iterations`,
    `progress_type` (a `Progress`), `validation_batch_size` (default:
    8192 characters). Returns the `Progress` and `{"fit_wall_seconds",
    "epochs_this_call"}` of this call."""
    directory = os.path.join(args.output_dir, name)
    steps = args.eval_interval
    progress_type = options.get("progress_type", Progress)
    progress = progress_type(name, steps, os.path.join(directory, "log.csv"))
    default_batch = max(1, 8192 // args.context)
    start = time.perf_counter()
    model.fit(
        training_batches(train_ids, args.context, args.batch_size, args.seed),
        epochs=options.get("iterations", args.iterations) // steps,
        steps_per_epoch=steps,
        validation_data=validation,
        validation_batch_size=options.get("validation_batch_size", default_batch),
        callbacks=[
            progress,
            keras.callbacks.BackupAndRestore(os.path.join(directory, "backup")),
        ],
        shuffle=False,  # the batches are drawn at random
        verbose=0,
    )
    timing = {
        "fit_wall_seconds": time.perf_counter() - start,  # with the validations
        "epochs_this_call": len(progress.seconds),
    }
    return progress, timing


def train_method(args, positions, train_ids, val_ids, vocabulary_size):
    """Train (or resume, or reload) one model; returns it and its record."""
    directory = os.path.join(args.output_dir, positions)
    os.makedirs(directory, exist_ok=True)
    config = {k: getattr(args, k) for k in TRAINING_KEYS}
    config["max_positions"] = max([args.context, *args.eval_lengths])
    config["positions"] = positions
    record_path = os.path.join(directory, "training.json")
    weights_path = os.path.join(directory, "model.weights.h5")

    keras.utils.set_random_seed(args.seed)
    model = CharTransformer(
        vocabulary_size,
        positions,
        max_positions=config["max_positions"],
        seed=args.seed,
        name=f"char_lm_{positions}",
        **transformer_size(args),
    )
    model(np.zeros((1, args.context), "int32"))  # build
    compile_model(model, args)

    record = load_finished_run(model, config, record_path, weights_path, positions)
    if record is not None:
        return model, record

    steps = args.eval_interval
    validation = strided_windows(val_ids, args.context)
    progress, timing = fit_windows(model, positions, args, train_ids, validation)
    record, rows = finish_run(model, config, weights_path, progress.log_path)
    record |= timing | {
        # The median interval: without the first one's XLA compilation.
        "ms_per_iteration": (
            1000 * float(np.median(progress.seconds)) / steps
            if progress.seconds
            else None
        ),
        "curve": learning_curve(rows, "iteration", steps, ["loss", "val_loss"]),
    }
    write_json(record_path, record)
    return model, record


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def save_attention_views(model, ids, chars, length, directory):
    """The attention of the trained `model` over the first `length`
    characters of `ids` (a validation snippet), as two self-contained pages
    in `directory` (they open offline in any browser):
    `attention_head_view.html` (`head_view`: the characters joined by their
    attention, per layer and head) and `attention_model_view.html`
    (`model_view`: every layer x head as a small map with its entropy and
    mean attended distance). The weights come from `collect_attention`
    (one eager call). Newlines show as "\u23ce", spaces as "\u2423".
    Returns the two paths."""
    from keras_attention.visualization import collect_attention
    from keras_attention.visualization import head_view
    from keras_attention.visualization import model_view

    snippet = np.asarray(ids[:length], "int32")[None]  # (1, T)
    shown = {"\n": "\u23ce", " ": "\u2423"}
    tokens = [shown.get(chars[i], chars[i]) for i in snippet[0]]
    attention = collect_attention(model, snippet)
    name = model.name
    paths = []
    for kind, view in (("head", head_view), ("model", model_view)):
        title = f"{name}: {kind} view of {len(tokens)} validation characters"
        page = view(attention, tokens, title=title)
        paths.append(page.save(os.path.join(directory, f"attention_{kind}_view.html")))
    return paths


def write_table(results, args, path):
    """`results.md`: validation loss per method and evaluation length."""
    lengths = args.eval_lengths
    longest = max(lengths)
    past = longest > args.context
    header = ["positions", "weights", "training", *(f"L={n}" for n in lengths)]
    if past:
        header.append(f"positions {args.context}-{longest - 1} of L={longest}")
    lines = [
        f"Validation loss (nats per character; trained at context {args.context}, "
        f"{args.iterations} iterations of {args.batch_size}; evaluated on "
        "consecutive windows of length L covering the validation split)",
        "",
        *markdown_header(header),
    ]
    for name, result in results.items():
        cells = [
            f"`{name}`",
            f"{result['parameters']:,}",
            f"{result['train_seconds'] / 60:.1f} min",
            *(f"{result['val_loss'][str(n)]:.4f}" for n in lengths),
        ]
        if past:
            cells.append(f"{result['past_context_loss']:.4f}")
        lines.append(markdown_row(cells))
    if past and "learned" in results:
        lines += [
            "",
            f"`learned`: positions >= {args.context} use table rows that "
            "were never trained (random initialisation).",
        ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def plot(results, args, path):
    """Learning curves, loss against evaluation length, loss by position."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, lengths, by_position) = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, (name, result) in enumerate(results.items()):
        color = f"C{i}"
        curve = result["curve"]
        curves.plot(curve["iteration"], curve["val_loss"], "-", color=color, label=name)
        losses = [result["val_loss"][str(n)] for n in args.eval_lengths]
        lengths.plot(args.eval_lengths, losses, "o-", color=color, label=name)
        per_position = np.asarray(result["position_loss"])
        bin_size = max(1, len(per_position) // 64)
        binned = per_position[: len(per_position) // bin_size * bin_size]
        binned = binned.reshape(-1, bin_size).mean(1)
        centers = np.arange(len(binned)) * bin_size + bin_size / 2
        by_position.plot(centers, binned, "-", color=color, label=name)
    curves.set(xlabel="iteration", ylabel=f"validation loss at L={args.context}",
               title="learning curves")  # fmt: skip
    lengths.set(xlabel="evaluation length L", ylabel="validation loss (mean over L)",
                xscale="log", title="length extrapolation")  # fmt: skip
    lengths.set_xticks(args.eval_lengths, [str(n) for n in args.eval_lengths])
    lengths.minorticks_off()
    longest = max(args.eval_lengths)
    by_position.set(xlabel="position in the window", ylabel="validation loss",
                    title=f"loss by position (L={longest}, bins of {bin_size})")  # fmt: skip
    for ax in (lengths, by_position):
        ax.axvline(args.context, color="gray", linestyle="--", linewidth=1)
    for ax in (curves, lengths, by_position):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    top = max(max(r["val_loss"].values()) for r in results.values())
    low = min(min(r["val_loss"].values()) for r in results.values())
    if top > low + 2.0:  # a method that breaks down would hide the others
        for ax in (lengths, by_position):
            ax.set_ylim(low - 0.1, low + 2.0)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def add_text_arguments(parser):
    """The flags of `locate_text`, which `char_lstmn.py` reads the text
    with too: `--data-dir` (holding `input.txt`) and `--no-check-hash`."""
    add_data_dir(parser, "input.txt")
    add_no_check_hash(parser, "accept an input.txt that is not tiny Shakespeare")


def add_training_arguments(parser, context, batch_size, iterations, eval_interval):
    """The flags of `fit_windows`, which `char_lstmn.py` and
    `long_context_lm.py` train with too: `--context`, `--batch-size`,
    `--iterations`, `--eval-interval`, `--grad-clip` and `--seed`."""
    add = parser.add_argument
    add("--context", type=int, default=context, help="training window (characters)")
    add("--batch-size", type=int, default=batch_size, help="windows per iteration")
    add_iterations(parser, iterations, eval_interval)
    add("--grad-clip", type=float, default=1.0, help="global gradient norm clip")
    add_seed(parser)


def add_optimizer_arguments(parser, min_lr, min_lr_help, warmup_iters):
    """The flags of `build_optimizer` (with `--iterations` and
    `--grad-clip`), which `long_context_lm.py` trains with too: `--lr`,
    `--min-lr`, `--warmup-iters`, `--beta2` and `--weight-decay`."""
    add = parser.add_argument
    add("--lr", type=float, default=1e-3, help="peak learning rate (after the warm-up)")
    add("--min-lr", type=float, default=min_lr, help=min_lr_help)
    add("--warmup-iters", type=int, default=warmup_iters,
        help="linear warm-up iterations")  # fmt: skip
    add("--beta2", type=float, default=0.99, help="AdamW beta_2")
    add("--weight-decay", type=float, default=0.1, help="AdamW weight decay")


def parse_args(argv=None):
    parser = example_parser(
        "Train character language models on tiny Shakespeare and "
        "compare position encodings beyond the training length."
    )
    add_text_arguments(parser)
    add_output_dir(parser, "outputs/char_lm", "results, plots, weights")
    add = parser.add_argument
    add("--positions", nargs="+", choices=POSITIONS, default=list(POSITIONS),
        help="position methods to train, one model each")  # fmt: skip
    add("--eval-lengths", nargs="+", type=int, default=[256, 512, 1024],
        help="validation window lengths")  # fmt: skip
    add_transformer_size(parser, num_layers=4, num_heads=4, hidden_dim=128, dropout=0.0)
    add_training_arguments(parser, context=256, batch_size=12, iterations=2000,
                           eval_interval=250)  # fmt: skip
    add_optimizer_arguments(parser, 1e-4, "learning rate at the end", warmup_iters=100)
    add("--prompt", default="\n", help="text that starts each sample")
    add("--sample-length", type=int, default=500, help="characters per sample")
    add("--num-samples", type=int, default=2, help="samples per method")
    add("--temperature", type=float, default=0.8, help="sampling temperature")
    add("--view-length", type=int, default=64,
        help="validation characters shown in each method's attention views "
        "(<method>/attention_head_view.html, attention_model_view.html); at most "
        "the longest of --context and --eval-lengths, the most that learned "
        "positions can read")  # fmt: skip
    args = parser.parse_args(argv)
    check_positive(parser, args, ("num_layers", "num_heads", "hidden_dim", "context",
                                  "batch_size", "iterations", "eval_interval",
                                  "sample_length", "num_samples", "view_length"))  # fmt: skip
    check_iterations(parser, args)
    if args.hidden_dim % args.num_heads:
        parser.error("--hidden-dim must be a multiple of --num-heads")
    if min(args.eval_lengths) < 1 or not args.prompt:
        parser.error("--eval-lengths must be positive and --prompt non-empty")
    args.eval_lengths = sorted(set(args.eval_lengths))
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    ids, chars = load_text(locate_text(args.data_dir, not args.no_check_hash))
    split = int(0.9 * len(ids))
    train_ids, val_ids = ids[:split], ids[split:]
    status(f"{len(ids):,} characters, {len(chars)} distinct: {len(train_ids):,} "
          f"train, {len(val_ids):,} validation")  # fmt: skip
    lookup = {c: i for i, c in enumerate(chars)}
    unknown = sorted(set(args.prompt) - set(lookup))
    if unknown:
        raise ValueError(f"`--prompt` has characters not in the text: {unknown}")
    prompt_ids = [lookup[c] for c in args.prompt]

    results, samples = {}, []
    for number, positions in enumerate(args.positions):
        keras.backend.clear_session()
        model, record = train_method(args, positions, train_ids, val_ids, len(chars))
        start = time.perf_counter()
        curves = {n: position_losses(model, val_ids, n) for n in args.eval_lengths}
        result = {
            **record,
            "val_loss": {str(n): float(c.mean()) for n, c in curves.items()},
            "position_loss": curves[max(args.eval_lengths)].tolist(),
            "eval_seconds": time.perf_counter() - start,
        }
        longest = max(args.eval_lengths)
        if longest > args.context:
            result["past_context_loss"] = float(curves[longest][args.context :].mean())
        directory = os.path.join(args.output_dir, positions)
        # Learned positions have a table of `max([context, *eval_lengths])`
        # rows: every method's view stops there, so that they compare.
        view_length = min(args.view_length, max([args.context, *args.eval_lengths]))
        save_attention_views(model, val_ids, chars, view_length, directory)
        tokens = generate(model, prompt_ids, args.sample_length, args.context,
                          args.temperature, args.seed + number, args.num_samples)  # fmt: skip
        texts = [args.prompt + "".join(chars[t] for t in row) for row in tokens]
        result["samples"] = texts
        results[positions] = result
        print(f"[{positions}] validation loss "
              + ", ".join(f"L={n}: {v:.4f}" for n, v in result["val_loss"].items())
              + (f"; positions >= {args.context} of L={longest}: "
                 f"{result['past_context_loss']:.4f}"
                 if "past_context_loss" in result else ""),
              flush=True)  # fmt: skip
        for text in texts:
            samples.append(f"===== {positions} =====\n{text}\n")

    table = write_table(results, args, os.path.join(args.output_dir, "results.md"))
    print(table)
    plot(results, args, os.path.join(args.output_dir, "val_loss.png"))
    with open(os.path.join(args.output_dir, "samples.txt"), "w") as f:
        f.write("\n".join(samples))
    print(samples[0])
    summary = {"args": vars(args), "results": results,
               "provenance": provenance(__file__, argv)}  # fmt: skip
    write_json(os.path.join(args.output_dir, "results.json"), summary)
    return summary


if __name__ == "__main__":
    main()
