"""The `fit` section of `benchmarks/gpu_check.py` (see its docstring).

The parent (`fit_section`) plans the epoch's batches for the report, then
runs each `--fit-paths` path in a fresh process: `gpu_check.py` again, with
the same arguments and `--fit-child PATH --fit-result FILE`, whose entry is
`child_main` (one `model.fit` epoch, its result as JSON in FILE).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

from benchmarks.gpu_common import DRIVER
from benchmarks.gpu_common import FIT_MODELS
from benchmarks.gpu_common import count_text
from benchmarks.gpu_common import plan_names
from benchmarks.gpu_common import short_error

HEADER = (
    "| path | tokens/s | / first | epoch s | compile steps s | steps (timed) "
    "| peak GiB | loss | plans |"
)
RULE = "|---|---|---|---|---|---|---|---|---|"


# -- the data -------------------------------------------------------------------


def synthetic_bundle(seed=0, pairs=1500, vocab=(300, 320), max_length=64):
    """Random pairs in the layout of `benchmarks/gpu_bundle.py` (ids from 4:
    0-3 are PAD, UNK, BOS, EOS), for `--smoke` and the tests."""
    import numpy as np

    rng = np.random.default_rng(seed)
    src_len = rng.integers(3, 40, pairs)
    tgt_len = np.clip(src_len + rng.integers(-4, 6, pairs), 3, max_length + 1)
    src = [np.append(rng.integers(4, vocab[0], n - 1), 3) for n in src_len]
    tgt = [
        np.concatenate([[2], rng.integers(4, vocab[1], n - 2), [3]]) for n in tgt_len
    ]
    return dict(
        source_ids=np.concatenate(src).astype("int16"),
        source_lengths=src_len.astype("int32"),
        target_ids=np.concatenate(tgt).astype("int16"),
        target_lengths=tgt_len.astype("int32"),
        source_vocabulary_size=vocab[0],
        target_vocabulary_size=vocab[1],
        pad_id=0,
        provenance=dict(dataset=f"synthetic: {pairs} random pairs (seed {seed})"),
        sha256="n/a",
    )


def load_bundle(path):
    """The bundle as a dict of numpy arrays and numbers."""
    import hashlib

    import numpy as np

    if path == "synthetic":
        return synthetic_bundle()
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"no bundle at {path}: make it with `make gpu-bundle` where TensorFlow "
            "and the Multi30k files are, and carry `.gpu` with the working tree "
            "(or pass --bundle synthetic)"
        )
    with np.load(path, allow_pickle=False) as data:
        out = {key: data[key] for key in data.files}
    for key in ("source_vocabulary_size", "target_vocabulary_size", "pad_id"):
        out[key] = int(out[key])
    out["provenance"] = json.loads(str(out.get("provenance", "{}")))
    with open(path, "rb") as f:
        out["sha256"] = hashlib.sha256(f.read()).hexdigest()
    return out


def firsts_first(plan):
    """`(plan, n)`: the first batch of each bound moved to the front, in
    order; `n` of them."""
    firsts, seen = [], set()
    for i, (bound, _) in enumerate(plan):
        if bound not in seen:
            seen.add(bound)
            firsts.append(i)
    rest = [p for i, p in enumerate(plan) if i not in firsts]
    return [plan[i] for i in firsts] + rest, len(firsts)


def padded_batch(bound, rows, sources, targets, pad):
    """`(inputs, labels, weights)` of teacher forcing, padded to `bound`."""
    import numpy as np

    source = np.full((len(rows), bound), pad, "int32")
    target = np.full((len(rows), bound + 1), pad, "int32")
    for j, row in enumerate(rows):
        source[j, : len(sources[row])] = sources[row]
        target[j, : len(targets[row])] = targets[row]
    labels = target[:, 1:]
    inputs = {"encoder_tokens": source, "decoder_tokens": target[:, :-1]}
    return inputs, labels, (labels != pad).astype("float32")


def plan_fit_batches(bundle, bounds, batch_tokens, seed):
    """`[(inputs, labels, weights), ...]`: one epoch of teacher-forcing
    batches as `examples/nlp/nmt_common.make_dataset` makes them (bucket by
    `max(len(source), len(target) - 1)`, `batch_tokens // bound` rows, full
    batches only, shuffled), with the first batch of each bucket first.
    Also returns how many of those first batches there are, and the pairs
    left out (longer than the last bound)."""
    import numpy as np

    sources = np.split(bundle["source_ids"], np.cumsum(bundle["source_lengths"])[:-1])
    targets = np.split(bundle["target_ids"], np.cumsum(bundle["target_lengths"])[:-1])
    lengths = np.maximum(bundle["source_lengths"], bundle["target_lengths"] - 1)
    keep = lengths <= bounds[-1]
    buckets = np.searchsorted(bounds, lengths)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    plan = []
    for bucket, bound in enumerate(bounds):
        rows = order[(buckets[order] == bucket) & keep[order]]
        size = max(1, batch_tokens // bound)
        plan += [
            (bound, rows[i : i + size]) for i in range(0, len(rows) - size + 1, size)
        ]
    plan, warm = firsts_first([plan[i] for i in rng.permutation(len(plan))])
    pad = bundle["pad_id"]
    batches = [padded_batch(b, rows, sources, targets, pad) for b, rows in plan]
    return batches, warm, int((~keep).sum())


# -- one path, in its own process -------------------------------------------------

# The schedule and the loss are those of examples/nlp/nmt_transformer.py and
# nmt_common.py, written again here: both modules import TensorFlow at the
# top, which the GPU machine does not have (and Keras'
# SparseCategoricalCrossentropy has no label smoothing).


def learning_rate_schedule(hidden_dim):
    import keras

    class Schedule(keras.optimizers.schedules.LearningRateSchedule):
        """nmt_transformer.py's: 0.4 d^-0.5 min(step^-0.5, step 400^-1.5)."""

        def __call__(self, step):
            step = keras.ops.cast(step, "float32") + 1.0
            factor = keras.ops.minimum(keras.ops.rsqrt(step), step * 400.0**-1.5)
            return 0.4 * hidden_dim**-0.5 * factor

    return Schedule()


def smoothed_crossentropy(label_smoothing):
    import keras

    class SmoothedCrossentropy(keras.losses.Loss):
        """nmt_common.py's: label-smoothed cross-entropy from logits, the
        mean over the real (weighted) tokens."""

        def __init__(self, label_smoothing=0.1):
            super().__init__(reduction="mean_with_sample_weight", name="smoothed_ce")
            self.label_smoothing = label_smoothing

        def call(self, y_true, y_pred):
            ops = keras.ops
            log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
            labels = ops.expand_dims(ops.cast(y_true, "int32"), -1)
            nll = -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)
            uniform = -ops.mean(log_probs, axis=-1)
            e = self.label_smoothing
            return (1.0 - e) * nll + e * uniform

    return SmoothedCrossentropy(label_smoothing)


def batch_sequence(batches):
    import keras

    class Batches(keras.utils.PyDataset):
        def __init__(self, batches):
            super().__init__()
            self.batches = batches

        def __len__(self):
            return len(self.batches)

        def __getitem__(self, index):
            return self.batches[index]

    return Batches(batches)


def step_timer(plans):
    import keras

    class StepTimes(keras.callbacks.Callback):
        """When each step's results are ready, and where the plans of the
        first step's trace start and end. Async-safe: Keras runs its batch
        ends on a thread pool, where reading the logs waits for the step
        while the main thread goes on dispatching."""

        async_safe = True

        def __init__(self, plans):
            super().__init__()
            self.plans = plans
            self.done = {}
            self.first_trace = [None, None]

        def on_train_begin(self, logs=None):
            self.begin = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):  # synchronous
            if batch in (0, 1):
                self.first_trace[batch] = len(self.plans)

        def on_train_batch_end(self, batch, logs=None):
            # `logs` were turned into floats (which waited for the step).
            self.done[batch] = time.perf_counter()

    return StepTimes(plans)


def child_batches(args):
    """`(bundle, batches, warm, left_out)` of the epoch, capped at
    `--fit-steps`."""
    bundle = load_bundle(args.bundle)
    batches, warm, left_out = plan_fit_batches(
        bundle, args.fit_buckets, args.batch_tokens, args.seed
    )
    if args.fit_steps:
        batches = batches[: args.fit_steps]
        warm = min(warm, len(batches))
    if not batches:
        raise ValueError("no full batch: lower --batch-tokens or raise --fit-buckets")
    return bundle, batches, warm, left_out


def build_model(args, bundle):
    import keras_attention as ka

    size = FIT_MODELS[args.fit_model]
    model = ka.models.Transformer(
        bundle["source_vocabulary_size"],
        bundle["target_vocabulary_size"],
        hidden_dim=size["hidden_dim"],
        num_heads=size["num_heads"],
        intermediate_dim=size["intermediate_dim"],
        num_encoder_layers=size["num_layers"],
        num_decoder_layers=size["num_layers"],
        dropout=0.1,
        attention_dropout=0.0,
        tie_weights=True,
        padding_id=bundle["pad_id"],
        seed=args.seed,
        attention_impl=args.fit_child,
        dtype=args.fit_dtype,
        name="transformer",
    )
    model.build()
    return model


def compile_model(model, hidden_dim):
    import keras

    model.compile(
        optimizer=keras.optimizers.Adam(
            learning_rate_schedule(hidden_dim), beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        loss=smoothed_crossentropy(0.1),
        jit_compile=True,
    )


def fit_epoch(model, batches):
    """`(history, step timer, plans of the first step's trace, seconds)`."""
    import keras_attention as ka

    t0 = time.perf_counter()
    with ka.ops.recording_attention_plans() as plans:
        timer = step_timer(plans)
        history = model.fit(
            batch_sequence(batches),
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[timer],
        )
    fit_s = time.perf_counter() - t0
    start, stop = timer.first_trace
    names = plan_names(plans[start : stop if stop is not None else len(plans)])
    return history, timer, names, fit_s


def step_stats(timer, batches, warm):
    """`(target tokens/s after the first `warm` steps, epoch s, seconds
    until those steps were done, timed steps)`."""
    steps = len(batches)
    tokens = [float(w.sum()) for _, _, w in batches]
    done = [timer.done[i] for i in range(steps)]
    compile_s = max(done[:warm]) - timer.begin
    timed = steps - warm
    tokens_per_s = None
    if timed:
        tokens_per_s = sum(tokens[warm:]) / (max(done) - max(done[:warm]))
    return tokens_per_s, max(done) - timer.begin, compile_s, timed


def peak_bytes():
    """The device's peak memory in use; None where it does not tell."""
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
        if stats and "peak_bytes_in_use" in stats:
            return int(stats["peak_bytes_in_use"])
    except Exception:  # not every backend reports it
        pass
    return None


def fit_child(args):
    """One path of the fit section (in its own process): the result as a
    dict, written as JSON to `--fit-result`."""
    import keras
    import numpy as np

    t_start = time.perf_counter()
    # StepTimes' threads note when a step is done: let them wake up soon.
    sys.setswitchinterval(0.001)
    keras.utils.set_random_seed(args.seed)
    bundle, batches, warm, left_out = child_batches(args)
    model = build_model(args, bundle)
    compile_model(model, FIT_MODELS[args.fit_model]["hidden_dim"])
    history, timer, plans, fit_s = fit_epoch(model, batches)
    tokens_per_s, epoch_s, compile_s, timed = step_stats(timer, batches, warm)
    loss = history.history["loss"][-1]
    shapes = sorted({b[0]["encoder_tokens"].shape for b in batches})
    return dict(
        path=args.fit_child,
        plans=plans,
        tokens_per_s=tokens_per_s,
        epoch_s=epoch_s,
        fit_s=fit_s,
        compile_steps_s=compile_s,
        steps=len(batches),
        timed_steps=timed,
        shapes=[list(s) for s in shapes],
        target_tokens=sum(float(w.sum()) for _, _, w in batches),
        padded_target_tokens=int(sum(b[1].size for b in batches)),
        left_out_pairs=left_out,
        peak_bytes=peak_bytes(),
        loss=float(loss),
        loss_finite=bool(np.isfinite(loss)),
        parameters=int(model.count_params()),
        process_s=time.perf_counter() - t_start,
    )


def child_main(args):
    """`--fit-child`: one path; its result, or its error, as JSON in
    `--fit-result`."""
    try:
        result = fit_child(args)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        result = dict(error=short_error(exc))
    with open(args.fit_result, "w") as f:
        json.dump(result, f)
    return 0


# -- the parent: the report -------------------------------------------------------


def data_text(args, bundle, batches, left_out):
    provenance = bundle["provenance"]
    steps = len(batches) if not args.fit_steps else min(args.fit_steps, len(batches))
    rows_per = {b: max(1, args.batch_tokens // b) for b in args.fit_buckets}
    target = sum(float(w.sum()) for _, _, w in batches)
    padded = sum(w.size for _, _, w in batches)
    digest = "" if args.bundle == "synthetic" else ", sha256 " + bundle["sha256"][:12]
    capped = f", capped at {steps} (--fit-steps)" if steps < len(batches) else ""
    return (
        f"Data: {provenance.get('dataset', '?')} ({os.path.relpath(args.bundle)}"
        f"{digest}): {len(bundle['source_lengths'])} pairs, vocabularies "
        f"{bundle['source_vocabulary_size']}/{bundle['target_vocabulary_size']}; "
        f"buckets {args.fit_buckets} x {list(rows_per.values())} rows (about "
        f"{args.batch_tokens} target tokens; full batches only, "
        f"{left_out} longer pairs left out): {len(batches)} steps per epoch"
        f"{capped}, {target:.0f} target tokens "
        f"({100 * target / max(padded, 1):.0f}% of the padded ones)."
    )


def model_text(args):
    size = FIT_MODELS[args.fit_model]
    return (
        f"Model: ka.models.Transformer, {size['num_layers']}+{size['num_layers']} "
        f"layers, d_model {size['hidden_dim']}, {size['num_heads']} heads, "
        f"feed-forward {size['intermediate_dim']}, dropout 0.1, attention dropout "
        f"0, tied embeddings, `{args.fit_dtype}`, `attention_impl=<path>`; "
        "label-smoothed (0.1) cross-entropy over the real tokens, Adam(0.9, "
        "0.98, 1e-9) with the inverse-sqrt schedule; model.fit(jit_compile=True), "
        f"seed {args.seed}; each path in a fresh process. tokens/s: target "
        "tokens (no padding) per second after the first step of each shape "
        "(those compile, and run first); epoch s: the whole epoch; compile "
        "steps s: until those first steps were done; peak GiB: "
        "memory_stats()['peak_bytes_in_use']; loss: the epoch's mean; plans: "
        "impl/kernel of every attention call in the trace of the first training "
        "step."
    )


def child_timeout(args, clock):
    """`(seconds the path's process may take, None)`, or `(None, why the
    path is skipped)`."""
    if clock.over():
        return None, clock.skip_reason()
    timeout = args.fit_child_timeout
    if args.time_limit_s is not None:
        timeout = min(timeout, args.time_limit_s - clock.elapsed() - 3)
        if timeout < 10:
            return None, f"skipped: --time-limit-s {args.time_limit_s:g}"
    return timeout, None


def run_child(args, argv, path, timeout):
    """`(result, wall seconds)` of one path in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "result.json")
        command = [
            sys.executable, DRIVER, *argv,
            "--fit-child", path, "--fit-result", result_path,
        ]  # fmt: skip
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                stdout=sys.stderr,  # the child's chatter goes to the log
                timeout=timeout,
                check=False,
            )
            if os.path.exists(result_path):
                with open(result_path) as f:
                    result = json.load(f)
            else:
                result = dict(error=f"the process exited {done.returncode}")
        except subprocess.TimeoutExpired:
            result = dict(
                error=f"timed out after {timeout:.0f} s (--fit-child-timeout "
                f"{args.fit_child_timeout:g}, --time-limit-s {args.time_limit_s})"
            )
    return result, time.perf_counter() - t0


def path_line(row, first):
    tps = row["tokens_per_s"]
    versus = "n/a" if not (tps and first) else f"{tps / first:.3f}"
    peak = "n/a" if row["peak_bytes"] is None else f"{row['peak_bytes'] / 2**30:.3g}"
    shapes = len(row["shapes"])
    return (
        f"| {row['path']} | {'n/a' if not tps else f'{tps:,.0f}'} | {versus} "
        f"| {row['epoch_s']:.2f} | {row['compile_steps_s']:.2f} ({shapes} "
        f"shape{'s' if shapes > 1 else ''}) | {row['steps']} "
        f"({row['timed_steps']}) | {peak} | {row['loss']:.4f} "
        f"| {count_text(row['plans'])} |"
    )


def add_path_row(args, argv, report, clock, path, first):
    """One path's row; returns the tokens/s of the first path that had
    some (`/ first`)."""
    base = dict(section="fit", path=path)
    timeout, skip = child_timeout(args, clock)
    if skip:
        row = dict(base, error=skip)
        report.row(row, f"| {path} | {row['error']} |")
        return first
    result, wall_s = run_child(args, argv, path, timeout)
    row = dict(base, wall_s=wall_s, **result)
    if "error" in row:
        report.row(row, f"| {path} | {row['error']} |")
        return first
    if first is None and row["tokens_per_s"]:
        first = row["tokens_per_s"]
    report.row(row, path_line(row, first))
    if not row["loss_finite"]:
        report.failures += 1
        report.add(f"| {path} | (note) the loss is not finite |")
    return first


def add_loss_spread(report):
    losses = [
        r["loss"] for r in report.rows if r.get("section") == "fit" and "loss" in r
    ]
    if len(losses) > 1:
        report.add(
            f"Losses across paths (same seed, same batches): spread "
            f"{max(losses) - min(losses):.2e}."
        )
        report.add()


def fit_section(args, argv, report, clock):
    report.add("### 2. One epoch of the Multi30k Transformer under model.fit")
    report.add()
    try:
        bundle = load_bundle(args.bundle)
        batches, _, left_out = plan_fit_batches(
            bundle, args.fit_buckets, args.batch_tokens, args.seed
        )
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        for path in args.fit_paths:
            row = dict(section="fit", path=path, error=short_error(exc))
            report.row(row, f"| {path} | {row['error']} |")
        report.add()
        return
    report.meta["bundle"] = dict(
        path=args.bundle, sha256=bundle["sha256"], provenance=bundle["provenance"]
    )
    report.add(data_text(args, bundle, batches, left_out))
    report.add()
    report.add(model_text(args))
    report.add()
    report.add(HEADER)
    report.add(RULE)
    first = None
    for path in args.fit_paths:
        first = add_path_row(args, argv, report, clock, path, first)
    report.add()
    add_loss_spread(report)
