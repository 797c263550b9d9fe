"""
Title: Long-context character language models: the decoders of Liu et al. (2018)
Description: `keras_attention.layers.MemoryCompressedDecoder`, the decoder
of "Generating Wikipedia by Summarizing Long Sequences" (Liu et al., 2018),
trained as a character language model on windows of `--context` (2048)
characters, four layer patterns compared in one run (one letter per layer,
bottom first):

- `FFFFF`: T-D, the decoder-only Transformer with full causal attention in
  every layer, the paper's baseline;
- `LLLLL`: local attention only: each query sees the earlier positions of
  its block of `--block-size` (256) and the block before it
  (`BlockLocal1D`; `--flange 0`: its own block only, as in the paper);
- `MMMMM`: memory-compressed attention only: the keys and values of
  `--factor` (3) positions are merged by learned strided convolutions, and
  a query reads the first position and the complete merged slots before it;
- `LMLML`: T-DMCA, local and memory-compressed layers alternated, the
  paper's model.

Data (`--corpus`):
- `shakespeare`: tiny Shakespeare (1,115,394 characters, 65 distinct), the
  first 90% train, the last 10% validate (as `char_lm.py`, whose
  functions read it; `--data-dir` holds `input.txt`).
- `imdb`: the 25,000 training reviews of the Large Movie Review Dataset
  (Maas et al., 2011; `--data-dir` holds `train.jsonl.gz`, read by
  `han_imdb.py`'s functions), each review's `<br />` turned into a line
  break and the reviews joined by line breaks, in file order. The 10% of
  each class with the highest review ids (2,500 reviews of whole held-out
  movies, `han_imdb.validation_mask`) validate, the other 22,500 train. The
  vocabulary is every character of the two (printed at the start).

Without `--data-dir` the canonical files are downloaded and checked
against their SHA-256.

Models: character embeddings (`--width` 128, multiplied by sqrt(width)) plus
the sinusoidal position encoding (memory-compressed layers take no RoPE),
the pre-LN `MemoryCompressedDecoder` (`--heads` 4, feed-forward 4 x width,
GELU, a final LayerNorm, N(0, 0.02) initialisation), the embeddings again
(tied) as output layer. The full and local layers have the same weights;
each memory-compressed layer adds its two convolutions, 2 (f width + 1)
width weights.

Training: windows of `--context` characters at random offsets of the
training text, `--batch-size` (2) per iteration, `--iterations` (500), the
same batches for every pattern (`char_lm.training_batches`, one seed);
AdamW (weight decay 0.1 on the matrices, betas 0.9 / 0.99, clipping at
global norm 1) with a linear warm-up over `--warmup-iters` (50) iterations
to `--lr` (1e-3), then constant (`--min-lr` decays it, cosine, to the last
iteration): with a constant rate a model's loss at any time is that of a
run stopped there, which is what the equal-time comparison reads. All
under XLA (`jit_compile=True`).

Attention path (`--attention-impl`, default `auto`): the library's rule on
a CPU, dense below T x S = 2048 x 2048 score entries per head and chunked
from there on. At the default context that puts the full and local
layers on the chunked path, which skips the key blocks a query block
cannot see (above the causal diagonal; outside a local block's memory),
and the memory-compressed ones (2048 x 684: the first position and 683
slots) on the dense path; at `--context 8192` all on the chunked path. The layers' paths are kept in
`results.json` (`attention_paths`). Seconds per training iteration at
the defaults (context 2048, width 128, batch 2; the median of 6
iterations after the compiling one, as `--time-iterations 6` times them;
`taskset -c 1` on a 2-core VM, both cores shared with other jobs,
2026-12-06):

    pattern  auto (its paths)              dense  chunked
    FFFFF    2.69 (chunked)                3.49   2.69
    LLLLL    1.54 (chunked)                -      1.54
    MMMMM    1.99 (dense)                  1.99   2.46
    LMLML    1.91 (L chunked, M dense)     -      -

(at batch 4: FFFFF 8.4 s dense against 5.9 chunked, MMMMM 2.7 dense
against 3.9 chunked). So the full baseline runs on the fastest exact path
the library has on a CPU, and each memory-compressed layer on its own.
`--attention-impl chunked` or `dense` puts every layer on one path.

Reported per pattern (`results.md`, `results.json` under `--output-dir`):
- validation loss, in nats and bits per character, on a fixed set of
  consecutive, non-overlapping windows of `--context` characters of the
  validation text (the mean cross-entropy over all their positions; every
  window starts from nothing, no state carries over): all of them, or
  `--eval-windows` (64) evenly spaced ones when there are more (tiny
  Shakespeare at 2048: all 54, at 8192: all 13; IMDB: 64 of 1,614).
  Evaluated every `--eval-interval` (50) iterations, compared at the same
  iteration (the last) and at the same training time: when the fastest
  pattern finished, each pattern's loss at its last evaluation by then
  (`char_lstmn.compare`);
- training tokens per second (batch x context / the median seconds per
  iteration over the evaluation intervals; the validations and the XLA
  compilation left out: the first iteration of a `fit` call, which
  compiles, counts as long as the others of its interval, and the rest
  is kept as `compile_seconds`; the learning curves' seconds leave it out
  too);
- the memory of one training step, measured once per pattern in a fresh
  process that runs two steps of it on one random batch (`--no-memory`
  skips it; it costs one more compilation per pattern): `xla_step_mib`,
  the "total bytes used" of XLA's buffer assignment for the compiled step
  (`XLA_FLAGS=--xla_dump_to`: weights, optimizer state, the activations
  kept for the backward pass and the temporaries; at the defaults 275
  MiB for `FFFFF` and `LLLLL` on the chunked path, 506 for `MMMMM` on the
  dense one, 320 for it with `--attention-impl chunked`: the default
  buys its speed with memory). `results.json` also keeps `peak_rss_mib`,
  the rise of that process's peak resident set over the two steps, which
  XLA's compilation dominates (1.2-1.9 GiB for each of those), so the
  table leaves it out. The resident set of the training process itself hardly rose during
  a step (4-7 MiB for every pattern, with `malloc_trim` and the peak reset
  before it): the allocators keep the memory of the steps before;
- weights and training minutes.

Plus `val_bpc.png` (validation bits per character against iterations and
against training seconds), and per pattern its weights, a CSV log and
(while training) a `BackupAndRestore` backup: run the same command again
after a crash and training continues from the last finished evaluation
interval; finished patterns are loaded, not trained again.

Data sizes: tiny Shakespeare 1,003,854 training and 111,540 validation
characters (65 distinct); IMDB 29,284,873 and 3,306,581 (179 distinct).

Run (the real run pins one core, as the project does):
    taskset -c 0 python examples/nlp/long_context_lm.py \\
        --data-dir ../shared/data/tinyshakespeare --output-dir outputs/long_context_lm
    # IMDB reviews, the same models:
    taskset -c 0 python examples/nlp/long_context_lm.py --corpus imdb \\
        --data-dir ../shared/data/imdb --output-dir outputs/long_context_lm_imdb
    # seconds per training iteration of each pattern, no training:
    taskset -c 1 python examples/nlp/long_context_lm.py --time-iterations 6
    # tiny models on the same text, a few minutes (mostly XLA compilation):
    python examples/nlp/long_context_lm.py --smoke \\
        --data-dir ../shared/data/tinyshakespeare --output-dir /tmp/long_context_lm

Time, an estimate (not a measurement of the whole run): with the seconds
per iteration above, the four patterns' 500 iterations take 500 x (2.69 +
1.54 + 1.99 + 1.91) s = 68 minutes of training; a validation (54 windows
of 2048) took 10 s for `MMMMM` and 20 s for `FFFFF` (10 validations of
the four: about 10 minutes); compiling took 35-80 s per training step and
7-19 s per validation step, and each memory process about 45 s (8 minutes
for both): about 85 minutes in all on tiny Shakespeare. The core was
shared with another job while those were taken (one pattern's steps took
0.8 s before it started and 1.7 s after); a short run of the script itself
(6 iterations) then gave 1.93-2.08 s per iteration for `FFFFF` and
0.82-0.85 s for `MMMMM`, which would make it about 60 minutes.

Measured on tiny Shakespeare with the first command above, at the defaults
(context 2048, 500 iterations of 2 windows), one pinned core of the 2-core
VM with the other core busy, 2026-12-06, 43 minutes in all:

    pattern  weights    val bpc  bpc at 370 s (iteration)  tokens/s  XLA step MiB  training min
    FFFFF      999,936  3.5981   3.6741 (250)              3,399     275           10.2
    LLLLL      999,936  3.6006   3.6103 (450)              5,388     275            6.3
    MMMMM    1,492,736  3.6020   3.6258 (400)              4,766     506            7.2
    LMLML    1,197,056  3.6020   3.6020 (500)              5,557     370            6.2

At equal steps the four are within 0.004 bits per character of each other,
far inside what one seed can separate. After 500 iterations (2 M
characters, about two passes over the text) every model sits at 3.60 bpc:
well below the unigram's 4.83 on the validation text, but a short-context
model still. So this run measures cost, not the paper's claim about
reach. At this context the local and T-DMCA stacks train 1.6x faster
than full attention on its fastest path (chunked), and reach the lowest
loss at equal training time. The IMDB corpus: below. The M layers were
measured before `MemoryCompressedAttention` passed its causal rule to the
chunked path as `CompressedCausalMask` (2026-12-06, later): the same outputs and gradients, so the losses stand,
but MMMMM and LMLML now skip about half of their scores, and their tokens
per second, step memory and the times at equal training time above are
stale (not re-measured yet).

Measured on IMDB with the second command above (output
`outputs/long_context_lm_imdb`), 2026-12-07 on the code of 0f74baf (with
`CompressedCausalMask`), pinned to one core of the 2-core VM with the
other core busy, 49 minutes in all; 29.3 M training characters, so 500
iterations of 2 x 2048 see 7% of them once:

    pattern  weights    val bpc  bpc at 397 s (iteration)  tokens/s  XLA step MiB  training min
    FFFFF    1,014,528  3.6177   3.6626 (250)              3,205     278           11.4
    LLLLL    1,014,528  3.6159   3.6198 (450)              5,202     278            7.0
    MMMMM    1,507,328  3.6461   3.6819 (400)              4,410     537            7.9
    LMLML    1,211,648  3.6189   3.6189 (500)              5,204     367            6.6

The same picture as on tiny Shakespeare: after 500 iterations the four
are short-context models within 0.03 bits per character (MMMMM last, by
0.03), so reach is not tested at this budget; what differs is cost.
LMLML and LLLLL train 1.6x faster than FFFFF per token, and LMLML has the
lowest loss at equal training time (3.619 against FFFFF's 3.663). MMMMM's
step takes the most memory by XLA's account (537 MiB: on the dense path by
default).

Measured at context 8192 on tiny Shakespeare (the first command above
with `--context 8192 --output-dir outputs/long_context_lm_8192`: 500
iterations of 2 windows of 8192 characters, 8 M characters, all 13
validation windows, every layer on the chunked path), on the code of
395a9ef, one pinned core of the 2-core VM with the other core training
SAGAN, 2026-12-06 to 2026-12-07 (resumed from its backups in three
sessions; 4.8 hours of training in all):

    pattern  weights    val bpc  bpc at 2224 s (iteration)  tokens/s  XLA step MiB  training min
    FFFFF      999,936  3.6061   3.7076 (150)               867       1067          146.6
    LLLLL      999,936  3.6009   3.5879 (450)               3,364     1067           39.7
    MMMMM    1,492,736  3.5888   3.7638 (200)               2,528     1102           67.2
    LMLML    1,197,056  3.6012   3.6012 (500)               3,708     1081           37.1

After 500 iterations the four are again within 0.02 bits per character
(3.589 to 3.606), still short-context models: this budget does not test
reach at 8192 either. The cost is what moved: per token, LMLML trains
4.3x as fast as full attention on its fastest exact path (an iteration
takes 0.23x as long), LLLLL 3.9x, MMMMM 2.9x (at context 2048: 1.6x,
1.6x and 1.4x), so at equal training time (2224 s, when LMLML finished)
LLLLL and LMLML are at 3.59-3.60 and FFFFF, at iteration 150, at 3.71.
XLA's account of a training step hardly differs (1067-1102 MiB): on the
chunked path no pattern holds its scores, so the step is the activations,
the weights and the optimizer state.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the repository root, for the shared helpers

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import add_data_dir  # noqa: E402
from examples.common.cli import add_no_check_hash  # noqa: E402
from examples.common.cli import add_output_dir  # noqa: E402
from examples.common.cli import add_smoke  # noqa: E402
from examples.common.cli import apply_smoke  # noqa: E402
from examples.common.cli import check_iterations  # noqa: E402
from examples.common.cli import check_positive  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.memory import proc_status  # noqa: E402
from examples.common.memory import xla_bytes_used  # noqa: E402

try:  # run from the repository root (the tests) or as a script (a sibling)
    from examples.nlp import char_lm  # noqa: E402
    from examples.nlp import char_lstmn  # noqa: E402
except ModuleNotFoundError:
    import char_lm  # noqa: E402
    import char_lstmn  # noqa: E402

PATTERNS = ("FFFFF", "LLLLL", "MMMMM", "LMLML")
CORPORA = ("shakespeare", "imdb")
TRAINING_KEYS = (
    "corpus", "context", "batch_size", "width", "heads", "block_size", "factor",
    "flange", "attention_impl", "iterations", "eval_interval", "eval_windows",
    "lr", "min_lr", "warmup_iters", "beta2", "weight_decay", "grad_clip", "seed",
)  # fmt: skip
MODEL_FLAGS = (
    "context", "batch_size", "width", "heads", "block_size", "factor", "flange",
    "attention_impl", "warmup_iters", "lr", "min_lr", "seed",
)  # fmt: skip
# --smoke: the values of the flags the command line leaves out.
SMOKE = dict(context=64, batch_size=2, width=16, heads=2, block_size=16,
             iterations=20, eval_interval=10, eval_windows=4, warmup_iters=5,
             lr=3e-3)  # fmt: skip

# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def encode(texts):
    """`(ids, chars)`: each text as int32 ids into `chars`, the sorted
    characters of all of them (NumPy on the code points: a Python loop over
    the IMDB reviews' 30 million characters takes minutes)."""
    codes = [np.frombuffer(t.encode("utf-32-le"), dtype="<u4") for t in texts]
    alphabet = np.unique(np.concatenate(codes))
    ids = [np.searchsorted(alphabet, c).astype("int32") for c in codes]
    return ids, [chr(c) for c in alphabet]


def imdb_texts(data_dir, check_hash):
    """`(train_text, val_text)`: the IMDB training reviews, the held-out
    movies' ones in the second (see the header)."""
    try:  # imported here: it loads tensorflow-text and SciPy
        from examples.nlp import han_imdb
    except ModuleNotFoundError:
        import han_imdb
    texts, labels, ids = han_imdb.load_split("train", data_dir, check_hash)
    held_out = han_imdb.validation_mask(ids, labels, 0.1)
    texts = [t.replace("<br /><br />", "\n").replace("<br />", "\n") for t in texts]
    train = "\n".join(t for t, h in zip(texts, held_out, strict=True) if not h)
    val = "\n".join(t for t, h in zip(texts, held_out, strict=True) if h)
    return train, val


def load_corpus(args):
    """`(train_ids, val_ids, chars)` of `--corpus`."""
    if args.corpus == "imdb":
        (train_ids, val_ids), chars = encode(
            imdb_texts(args.data_dir, not args.no_check_hash)
        )
        return train_ids, val_ids, chars
    path = char_lm.locate_text(args.data_dir, not args.no_check_hash)
    ids, chars = char_lm.load_text(path)
    split = int(0.9 * len(ids))  # the first 90% train, the last 10% validate
    return ids[:split], ids[split:], chars


def validation_windows(val_ids, context, count):
    """`(x, y)` `(W, context)`: the consecutive windows covering `val_ids`
    (`char_lm.strided_windows`), or `count` evenly spaced ones of them."""
    x, y = char_lm.strided_windows(val_ids, context)
    if len(x) == 0:
        raise ValueError(
            f"The validation text ({len(val_ids):,} characters) is shorter than "
            f"one window of `--context` {context}."
        )
    if len(x) > count:
        keep = np.linspace(0, len(x) - 1, count).round().astype(int)
        x, y = x[keep], y[keep]
    return x, y


def eval_batch_size(windows, context, tokens=8192):
    """The largest divisor of `windows` with at most `tokens` characters per
    batch: one batch shape for XLA to compile."""
    most = max(1, tokens // context)
    return max(d for d in range(1, most + 1) if windows % d == 0)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


class LongContextLM(char_lm.TiedEmbeddingLM):
    """Embeddings (x sqrt(D)) + sinusoidal positions, the
    `MemoryCompressedDecoder` of `pattern`, the embeddings (transposed) as
    output layer: `char_lm.CharTransformer` with another decoder."""

    def __init__(self, vocabulary_size, pattern, args, seed=None, **kwargs):
        super().__init__(vocabulary_size, args.width, seed=seed, **kwargs)
        self.positions = ka.layers.SinusoidalPositionEncoding(name="positions")
        self.decoder = ka.layers.MemoryCompressedDecoder(
            pattern,
            num_heads=args.heads,
            intermediate_dim=4 * args.width,
            compression_factor=args.factor,
            local_block_size=args.block_size,
            local_memory_flange=args.flange,
            attention_impl=args.attention_impl,
            **self.decoder_options(),
        )

    def call(self, tokens, training=None):
        x = self.embed(tokens, scale=True)  # (B, T, D)
        x = x + self.positions(x)
        x = self.decoder(x, training=training)  # (B, T, D), causal
        return self.logits(x)


def build_model(pattern, args, vocabulary_size):
    """A built and compiled `LongContextLM` (AdamW of `char_lm.py`);
    `model.attention_paths`: the path each layer's attention takes at
    `--context` (`"dense"` or `"chunked"`, bottom first)."""
    keras.utils.set_random_seed(args.seed)
    model = LongContextLM(vocabulary_size, pattern, args, seed=args.seed,
                          name=f"lm_{pattern}")  # fmt: skip
    tokens = np.zeros((1, args.context), "int32")
    model(tokens)  # build (its first call also traces the layers' output specs)
    with ka.ops.recording_attention_plans() as plans:
        model(tokens)
    model.attention_paths = [plan.impl for plan in plans]  # one per layer
    char_lm.compile_model(model, args)
    return model


# ---------------------------------------------------------------------------
# Training one pattern
# ---------------------------------------------------------------------------


class Progress(char_lm.Progress):
    """`char_lm.Progress` with the XLA compilation taken out of the time of
    the first interval of each `fit` call: its first iteration (compilation
    and one step) counts as long as the interval's others, and the
    difference is kept in `compile_seconds`."""

    def on_train_begin(self, logs=None):
        self.compile_seconds, self._first = 0.0, True

    def on_train_batch_begin(self, batch, logs=None):
        if self._first and batch == 0:
            self._batch_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._first and batch == 0:
            self._first_seconds = time.perf_counter() - self._batch_start

    def on_test_begin(self, logs=None):
        super().on_test_begin(logs)
        if self._first and self.steps_per_epoch > 1:
            rest = self._train_seconds - self._first_seconds
            step = rest / (self.steps_per_epoch - 1)
            self.compile_seconds = max(self._first_seconds - step, 0.0)
            self._train_seconds -= self.compile_seconds
            self._start += self.compile_seconds  # nor in the validation's
        self._first = False


def train_pattern(args, pattern, train_ids, validation, vocabulary_size):
    """Train (or resume, or reload) one pattern; returns its record."""
    directory = os.path.join(args.output_dir, pattern)
    os.makedirs(directory, exist_ok=True)
    config = {k: getattr(args, k) for k in TRAINING_KEYS} | {"pattern": pattern}
    record_path = os.path.join(directory, "training.json")
    weights_path = os.path.join(directory, "model.weights.h5")
    model = build_model(pattern, args, vocabulary_size)
    record = runs.load_finished_run(model, config, record_path, weights_path, pattern)
    if record is not None:
        return record

    steps = args.eval_interval
    progress, timing = char_lm.fit_windows(
        model, pattern, args, train_ids, validation, progress_type=Progress,
        validation_batch_size=eval_batch_size(len(validation[0]), args.context),
    )  # fmt: skip
    record, rows = runs.finish_run(model, config, weights_path, progress.log_path)
    curve = char_lstmn.bpc_curve(rows, steps)  # seconds: training only
    seconds = float(np.median([float(r["seconds"]) for r in rows])) / steps
    record |= timing | {
        "compile_seconds": progress.compile_seconds,  # this call's
        "ms_per_iteration": 1000 * seconds,
        "tokens_per_second": args.batch_size * args.context / seconds,
        "attention_paths": model.attention_paths,
        "curve": curve,
        "val_bpc": curve["val_bpc"][-1],
        "val_nats": curve["val_bpc"][-1] * math.log(2),
    }
    runs.write_json(record_path, record)
    return record


def time_iterations(args, vocabulary_size=65):
    """`--time-iterations N`: per pattern, the seconds of its first training
    iteration (XLA compilation and one step) and the median of the `N`
    after it, on one random batch (no data, no training run); printed, and
    returned as `{pattern: {...}}`."""
    timings = {}
    for pattern in args.patterns:
        keras.backend.clear_session()
        model = build_model(pattern, args, vocabulary_size)
        rng = np.random.default_rng(args.seed)
        shape = (args.batch_size, args.context)
        x = rng.integers(0, vocabulary_size, size=shape).astype("int32")
        seconds = []
        for _ in range(args.time_iterations + 1):
            start = time.perf_counter()
            model.train_on_batch(x, x)
            seconds.append(time.perf_counter() - start)
        timings[pattern] = {
            "first_seconds": seconds[0],
            "seconds_per_iteration": float(np.median(seconds[1:])),
            "attention_paths": model.attention_paths,
        }
        print(f"{pattern}: {timings[pattern]['seconds_per_iteration']:.3f} s per "
              f"iteration (median of {args.time_iterations}), the first "
              f"{seconds[0]:.1f} s; paths {model.attention_paths}", flush=True)  # fmt: skip
    return timings


# ---------------------------------------------------------------------------
# The memory of one training step, in a fresh process
# ---------------------------------------------------------------------------


def memory_point(args):
    """Child process (`--memory-point PATTERN`): two training steps of the
    pattern on one random batch; prints `RESULT {...}` with the resident
    set before them and its peak after."""
    vocabulary = args.memory_vocabulary
    model = build_model(args.memory_point, args, vocabulary)
    shape = (args.batch_size, args.context)
    x = np.random.default_rng(0).integers(0, vocabulary, size=shape).astype("int32")
    base = proc_status("VmRSS:")
    for _ in range(2):  # the first compiles
        model.train_on_batch(x, x)
    peak = proc_status("VmHWM:")
    print("RESULT " + json.dumps({"base": base, "peak": peak}), flush=True)


def memory_flags(args, pattern, vocabulary_size):
    """The command line of `memory_point` for `pattern` under `args`."""
    flags = ["--memory-point", pattern, "--memory-vocabulary", str(vocabulary_size)]
    for name in MODEL_FLAGS:
        if getattr(args, name) is not None:
            flags += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return flags


def measure_memory(args, pattern, vocabulary_size):
    """`{"xla_step_mib", "peak_rss_mib"}` of one training step of `pattern`
    in a fresh process (see the header), kept in the pattern's
    `memory.json`; `{}` with `--no-memory`, `{"memory_error": ...}` when
    the child fails."""
    path = os.path.join(args.output_dir, pattern, "memory.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    if args.no_memory:
        return {}
    argv = [sys.executable, os.path.abspath(__file__)]
    argv += memory_flags(args, pattern, vocabulary_size)
    status(f"[{pattern}] the memory of a training step, in a fresh process")
    with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ, PYTHONPATH=ROOT)
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
        child = subprocess.run(argv, capture_output=True, text=True, env=env)
        lines = [x for x in child.stdout.splitlines() if x.startswith("RESULT ")]
        if not lines:
            tail = (child.stderr or child.stdout).strip().splitlines()[-3:]
            return {"memory_error": " ".join(tail)[:300]}
        memory = {"xla_step_mib": xla_bytes_used(dump) / 2**20}
    result = json.loads(lines[-1][len("RESULT ") :])
    if None not in (result["base"], result["peak"]):  # /proc: Linux only
        memory["peak_rss_mib"] = max(result["peak"] - result["base"], 0) / 2**20
    runs.write_json(path, memory)
    return memory


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def table(results, comparison, args, vocabulary_size):
    """The lines of `results.md`."""
    lines = [
        f"Validation loss on {args.corpus} ({vocabulary_size} characters), "
        f"{args.eval_windows_used} windows of {args.context} characters, after "
        f"{comparison['iteration']} iterations of {args.batch_size} windows and "
        f"after {comparison['seconds']:.0f} s of training (when the fastest "
        "pattern finished: each pattern's last evaluation by then). XLA step "
        "MiB: the buffers of one compiled training step.",
        "",
        *runs.markdown_header(
            ["pattern", "weights", "nats / char", "bits / char",
             "bits / char, same time (iteration)", "tokens / s", "ms / iteration",
             "XLA step MiB", "training min"]
        ),
    ]  # fmt: skip
    for name, r in results.items():
        bits = comparison["at_iteration"][name]
        point = comparison["at_seconds"][name]
        same_time = "not evaluated yet" if point is None else (
            f"{point[2]:.4f} ({point[0]})"
        )  # fmt: skip
        memory = r.get("xla_step_mib")
        memory = "-" if memory is None else f"{memory:.0f}"
        lines.append(
            f"| `{name}` | {r['parameters']:,} | {bits * math.log(2):.4f} | "
            f"{bits:.4f} | {same_time} | {r['tokens_per_second']:,.0f} | "
            f"{r['ms_per_iteration']:.0f} | {memory} | "
            f"{r['train_seconds'] / 60:.1f} |"
        )
    return lines


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    parser = example_parser(
        "Character language models with the decoders of Liu et al. (2018): "
        "full, local, memory-compressed and T-DMCA layer patterns."
    )
    add_data_dir(parser, "input.txt (shakespeare) or train.jsonl.gz (imdb)")
    add = parser.add_argument
    add("--corpus", choices=CORPORA, default="shakespeare", help="the text")
    add_no_check_hash(parser, "accept data files with other checksums (other text)")
    add_output_dir(parser, "outputs/long_context_lm", "results, plot, weights")
    add("--patterns", nargs="+", default=list(PATTERNS),
        help="layer patterns to train, one model each (letters L, M, F)")  # fmt: skip
    char_lm.add_training_arguments(parser, context=2048, batch_size=2,
                                   iterations=500, eval_interval=50)  # fmt: skip
    add("--eval-windows", type=int, default=64,
        help="at most this many validation windows (evenly spaced)")  # fmt: skip
    add("--width", type=int, default=128, help="model width")
    add("--heads", type=int, default=4, help="attention heads")
    add("--block-size", type=int, default=256, help="blocks of the local layers")
    add("--flange", type=int, default=None,
        help="positions before its block a local query sees (default: a block)")  # fmt: skip
    add("--factor", type=int, default=3, help="compression of the M layers")
    add("--attention-impl", choices=("auto", "chunked", "dense"), default="auto",
        help="attention path of every layer (see the header)")  # fmt: skip
    char_lm.add_optimizer_arguments(
        parser, None, "cosine decay to this at the end (default: constant --lr)",
        warmup_iters=50,
    )  # fmt: skip
    add("--no-memory", action="store_true",
        help="skip the memory measurement (a fresh process per pattern)")  # fmt: skip
    add("--time-iterations", type=int, default=0,
        help="only time this many training iterations of each pattern")  # fmt: skip
    add_smoke(parser, f"a tiny run: {SMOKE} unless given")
    add("--memory-point", default=None, help=argparse.SUPPRESS)
    add("--memory-vocabulary", type=int, default=65, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return finish_arguments(parser, args, sys.argv[1:] if argv is None else argv)


def finish_arguments(parser, args, argv):
    """`--smoke` applied to the flags `argv` leaves out, then the checks."""
    apply_smoke(args, SMOKE, argv)
    check_positive(parser, args, ("context", "batch_size", "iterations",
                                  "eval_interval", "eval_windows", "width", "heads",
                                  "block_size", "factor"))  # fmt: skip
    if min(args.flange or 0, args.time_iterations) < 0:
        parser.error("--flange and --time-iterations must be >= 0")
    check_iterations(parser, args)
    if args.width % args.heads:
        parser.error("--width must be a multiple of --heads")
    bad = [p for p in args.patterns if not p or set(p) - set("LMF")]
    if bad or len(set(args.patterns)) < len(args.patterns):
        parser.error(
            "--patterns must be distinct strings of the letters L (local), M "
            f"(memory-compressed) and F (full), e.g. LMLML. Received: {bad or args.patterns}"
        )
    args.min_lr = args.lr if args.min_lr is None else args.min_lr
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.memory_point:
        return memory_point(args)
    if args.time_iterations > 0:
        return time_iterations(args)
    os.makedirs(args.output_dir, exist_ok=True)
    train_ids, val_ids, chars = load_corpus(args)
    validation = validation_windows(val_ids, args.context, args.eval_windows)
    args.eval_windows_used = len(validation[0])
    status(f"{args.corpus}: {len(chars)} distinct characters, {len(train_ids):,} "
           f"train, {len(val_ids):,} validation ({args.eval_windows_used} windows "
           f"of {args.context})")  # fmt: skip
    results = {}
    for pattern in args.patterns:
        keras.backend.clear_session()
        record = train_pattern(args, pattern, train_ids, validation, len(chars))
        record |= measure_memory(args, pattern, len(chars))
        results[pattern] = record
        status(f"[{pattern}] validation {record['val_nats']:.4f} nats, "
               f"{record['val_bpc']:.4f} bits per character after "
               f"{args.iterations} iterations; {record['tokens_per_second']:,.0f} "
               "tokens per second")  # fmt: skip
    comparison = char_lstmn.compare(results)
    char_lstmn.plot(results, os.path.join(args.output_dir, "val_bpc.png"))
    runs.write_results(
        args.output_dir,
        {"patterns": results, "comparison": comparison, "vocabulary": len(chars)},
        args,
        table(results, comparison, args, len(chars)),
        source=runs.provenance(__file__, argv),
    )
    return {"patterns": results, "comparison": comparison}


if __name__ == "__main__":
    main()
