"""Attention layers and a Multi30k Transformer under JAX on one device.

The benchmark half of `benchmarks/gpu_check.sh` (issue 6, "GPU"), for
machines that have JAX but neither TensorFlow nor a package registry. It
runs on whatever device JAX gives (a GPU, or a CPU with `--smoke`), with
`KERAS_BACKEND=jax`, and imports no TensorFlow. Two sections
(`--sections`, both by default):

`layers`: first a square bfloat16 matmul (`--matmul-size` 8192, `jax.jit`)
timed in this run: the ceiling. Then, for each shape `(B, L, N, H)` of the
grid (`--shapes`, default per `--dtypes` below) three candidates,
forward+backward (the gradients of `sum(out * g)` for a fixed random `g`
with respect to the input and every weight, through `layer.stateless_call`
inside `jax.jit`):

- `ours`: `keras_attention.layers.MultiHeadSelfAttention(N, H)` on
  `x` `(B, L, N H)` (`attention_impl="auto"`);
- `keras`: `keras.layers.MultiHeadAttention(N, H)` on `(x, x)`;
- `op`: `keras.ops.dot_product_attention` alone on `q, k, v` `(B, L, N, H)`
  (gradients of q, k, v).

bfloat16 rows run the layers under Keras' `mixed_bfloat16` policy (float32
weights, bfloat16 compute; `x`, `q`, `k`, `v` in bfloat16); float32 rows
at JAX's default matmul precision. Each candidate is compiled once
(`.lower().compile()`, timed as the compile time; XLA's temporary buffer
size reported) and run once, then timed in rounds interleaved across the
three (`--rounds` at most; a candidate stops once it has used
`--max-candidate-s` seconds after 2 rounds), each sample ended by
`block_until_ready` (calls under 20 ms run back to back within a sample,
up to 50 times, and the sample is divided by their number). A row gives
the median ms per call, the achieved TFLOP/s (attention `4 B N L^2 H`
forward, halved with `--causal`; the layers add their four projections,
`8 B L D^2` with `D = N H`; 3x both for forward+backward), their share
of the matmul ceiling, the time ratio to `keras` (median of the
per-round ratios; the issue's target is ours/keras <= 1.05 where both run
the fused kernel), whether cuDNN's fused attention is in the compiled
program (`fmha`: lines of `exe.as_text()` naming both "cudnn" and "fmha")
and, for `ours`, the plans its attention took while it was traced
(`keras_attention.ops.recording_attention_plans`: `impl/kernel`); for
both layers, the largest difference of their input gradient to Keras'
(`ours` gets Keras' weights, so both compute the same function).

`fit`: one epoch of the Multi30k de->en Transformer of
`examples/nlp/nmt_transformer.py` (3+3 layers, d_model 256, 8 heads,
feed-forward 512, dropout 0.1, attention dropout 0, tied embeddings,
label smoothing 0.1, Adam(0.9, 0.98, 1e-9) with its inverse-square-root
schedule; `--fit-dtype` `mixed_bfloat16`) under `model.fit(jit_compile=True)`
on the training split of `--bundle` (`.gpu/multi30k_de_en.npz`, made by
`make gpu-bundle` where TensorFlow is; with `--smoke` and no bundle, or with
`--bundle synthetic`, random pairs), in batches of about `--batch-tokens`
target tokens padded to `--fit-buckets` (16, 32, 64: three shapes, three
compilations), once per `--fit-paths` (`attention_impl`: fused, dense,
chunked), each in a fresh Python process so that its peak memory is its
own. The epoch starts with one batch of each shape (those steps compile);
the others follow in a shuffled order. A row gives the target tokens (no
padding) per second after those first steps, the wall time of the epoch and
of its compiling steps, the peak device memory
(`memory_stats()["peak_bytes_in_use"]`; n/a on a CPU), the epoch's mean
training loss (the same seed in every process: the paths should agree) and
the plans of the model's attention calls while the first training step
was traced (`recording_attention_plans`).

`--smoke` (a CPU, the tests; well under a minute on 2 cores): one shape
(1, 128, 2, 16) in float32, a 256^3 matmul, 2 rounds; a 1+1-layer model
of d_model 32, one bucket (64), 256 tokens per batch, 3 steps per path.

A markdown report goes to stdout and to `--output` (default
`$OUT/gpu_check.md`, `$OUT` defaulting to `outputs/gpu_check`;
`gpu_check_layers.md` or `gpu_check_fit.md` for one section), rewritten
after every row so that a run cut short keeps what it measured, with a
JSON twin beside it. A row that fails (out of memory, say) is reported and
the run goes on; rows not started after `--budget-s` seconds are reported
as skipped. Exit status 1 when a row failed or was skipped.

This module parses the arguments, writes the report and runs the two
sections, `benchmarks/gpu_layers.py` and `benchmarks/gpu_fit.py` (which
also holds the entry of a fit path's process, `--fit-child`); the names
all three share are in `benchmarks/gpu_common.py`, which imports none of
them. They are imported as `benchmarks.*`: the repository root goes on
`PYTHONPATH`, as below and in `gpu_check.sh`.

    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/gpu_check.py
    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/gpu_check.py --smoke
    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/gpu_check.py \\
        --sections layers --shapes 1,8192,16,128 --dtypes bfloat16 --causal
"""

import argparse
import json
import os
import platform
import shlex
import sys
import time
import traceback

from benchmarks import gpu_fit
from benchmarks import gpu_layers
from benchmarks.gpu_common import CANDIDATES
from benchmarks.gpu_common import DRIVER
from benchmarks.gpu_common import FIT_MODELS
from benchmarks.gpu_common import short_error

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(DRIVER))
SECTIONS = ("layers", "fit")
DTYPES = ("bfloat16", "float16", "float32")
FIT_PATHS = ("auto", "fused", "dense", "chunked")
DEFAULT_BUNDLE = os.path.join(ROOT, ".gpu", "multi30k_de_en.npz")
BUDGETS = {"layers": 150.0, "fit": 100.0}  # default --budget-s, per section
REPORTED_ENV = (
    "XLA_FLAGS",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
)


# -- arguments ----------------------------------------------------------------


def shape_arg(text):
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise argparse.ArgumentTypeError(
            f"a shape is B,L,N,H: four positive integers. Received: {text!r}"
        )
    return shape


def add_run_arguments(parser):
    add = parser.add_argument
    add("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    add("--smoke", action="store_true", help="tiny sizes (a CPU, the tests)")
    add("--output", default=None, help="markdown report path (JSON beside it)")
    add(
        "--budget-s",
        type=float,
        default=None,
        help="skip the rows not started after this many seconds (default: "
        f"{BUDGETS['layers']:g} for layers + {BUDGETS['fit']:g} for fit)",
    )


def add_layers_arguments(group):
    group.add_argument(
        "--shapes",
        type=shape_arg,
        nargs="+",
        default=None,
        metavar="B,L,N,H",
        help="shapes for every --dtypes (default: a grid per dtype)",
    )
    group.add_argument("--dtypes", nargs="+", choices=DTYPES, default=None)
    group.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=None)
    group.add_argument("--causal", action="store_true")
    group.add_argument("--rounds", type=int, default=None, help="at most")
    group.add_argument(
        "--max-candidate-s",
        type=float,
        default=None,
        help="stop timing a candidate after this many seconds (and 2 rounds)",
    )
    group.add_argument("--matmul-size", type=int, default=None)


def add_fit_arguments(group):
    add = group.add_argument
    add(
        "--bundle",
        default=None,
        help=f"npz of `make gpu-bundle` (default {os.path.relpath(DEFAULT_BUNDLE)}) "
        "or 'synthetic'",
    )
    add("--fit-paths", nargs="+", choices=FIT_PATHS, default=None)
    add(
        "--fit-dtype",
        choices=("mixed_bfloat16", "mixed_float16", "float32"),
        default="mixed_bfloat16",
    )
    add("--fit-model", choices=tuple(FIT_MODELS), default=None)
    add("--batch-tokens", type=int, default=None)
    add("--fit-buckets", type=int, nargs="+", default=None)
    add("--fit-steps", type=int, default=None, help="cap the steps")
    add(
        "--fit-child-timeout",
        type=float,
        default=None,
        help="seconds one path's process may take",
    )
    add(
        "--time-limit-s",
        type=float,
        default=None,
        help="end a path's process so that this run ends by then (an outer "
        "timeout: gpu_check.sh passes its own, less a few seconds)",
    )
    add("--seed", type=int, default=1337)
    # Internal: one path of the fit section, in a child process.
    add("--fit-child", default=None, help=argparse.SUPPRESS)
    add("--fit-result", default=None, help=argparse.SUPPRESS)


def set_layers_defaults(args):
    small = args.smoke
    if args.dtypes is None:
        args.dtypes = ["float32"] if small else ["bfloat16", "float32"]
    if args.candidates is None:
        args.candidates = list(CANDIDATES)
    if args.rounds is None:
        args.rounds = 2 if small else 10
    if args.max_candidate_s is None:
        args.max_candidate_s = 1.0 if small else 1.5
    if args.matmul_size is None:
        args.matmul_size = 256 if small else 8192


def set_fit_defaults(args):
    small = args.smoke
    if args.fit_paths is None:
        args.fit_paths = ["fused", "dense", "chunked"]
    if args.fit_model is None:
        args.fit_model = "tiny" if small else "multi30k"
    if args.batch_tokens is None:
        args.batch_tokens = 256 if small else 4000
    if args.fit_buckets is None:  # one shape (one compilation) in a smoke run
        args.fit_buckets = [64] if small else [16, 32, 64]
    args.fit_buckets = sorted(set(args.fit_buckets))
    if args.fit_steps is None and small:
        args.fit_steps = 3
    if args.fit_child_timeout is None:
        args.fit_child_timeout = 600.0 if small else 100.0
    if args.bundle is None:
        args.bundle = DEFAULT_BUNDLE
        if small and not os.path.exists(DEFAULT_BUNDLE):
            args.bundle = "synthetic"


def set_run_defaults(args):
    sections = set(args.sections)
    if args.budget_s is None:
        args.budget_s = 600.0 if args.smoke else sum(BUDGETS[s] for s in sections)
    if args.output is None:
        out = os.environ.get("OUT") or os.path.join(ROOT, "outputs", "gpu_check")
        both = len(sections) == len(SECTIONS)
        name = "gpu_check" if both else f"gpu_check_{args.sections[0]}"
        args.output = os.path.join(out, name + ".md")


def check_args(parser, args):
    for name in ("rounds", "matmul_size", "batch_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    if args.fit_steps is not None and args.fit_steps < 1:
        parser.error("--fit-steps must be a positive integer")
    if min(args.fit_buckets) < 2 or any(b % 2 for b in args.fit_buckets):
        parser.error(
            "--fit-buckets must be even integers >= 2 (cuDNN's flash attention "
            f"needs even lengths with a mask). Received: {args.fit_buckets}"
        )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    add_layers_arguments(parser.add_argument_group("layers"))
    add_fit_arguments(parser.add_argument_group("fit"))
    args = parser.parse_args(argv)
    set_layers_defaults(args)
    set_fit_defaults(args)
    set_run_defaults(args)
    check_args(parser, args)
    return args


# -- the report and timing helpers ---------------------------------------------


class Report:
    """Markdown lines printed as they come, and rewritten to `path` (with
    a JSON twin: `meta` and `rows`) after every line."""

    def __init__(self, path):
        self.path = path
        self.lines = []
        self.rows = []
        self.meta = {}
        self.failures = 0
        self.skipped = 0

    def add(self, line=""):
        print(line, flush=True)
        self.lines.append(line)
        self.save()

    def row(self, row, line):
        """A result row: counted when it failed or was skipped."""
        error = row.get("error")
        if error:
            if error.startswith("skipped"):
                self.skipped += 1
            else:
                self.failures += 1
        self.rows.append(row)
        self.add(line)

    def save(self):
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.splitext(self.path)[0] + ".json", "w") as f:
            json.dump({"meta": self.meta, "rows": self.rows}, f, indent=1)


class Clock:
    """Seconds since the start, against `--budget-s`."""

    def __init__(self, budget_s):
        self.start = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self):
        return time.perf_counter() - self.start

    def over(self):
        return self.elapsed() > self.budget_s

    def skip_reason(self):
        return f"skipped: time budget ({self.elapsed():.0f} s > {self.budget_s:g} s)"


# -- main ---------------------------------------------------------------------


def require_jax():
    """Exit with a message unless jax, keras and numpy import, with Keras
    on JAX."""
    try:
        import jax  # noqa: F401
        import keras
        import numpy  # noqa: F401
    except ImportError as exc:
        sys.exit(
            f"gpu_check.py needs jax, keras and numpy: {exc}. On a machine "
            "without a package registry, bring keras and its dependencies as "
            "wheels (benchmarks/gpu_check.sh, `make gpu-wheels`)."
        )
    if keras.backend.backend() != "jax":
        sys.exit(
            "gpu_check.py measures under JAX: set KERAS_BACKEND=jax. "
            f"Received: backend={keras.backend.backend()!r}"
        )


def run_meta(args, argv):
    """The report's header facts: date, device, versions, command line."""
    import jax
    import keras

    device = jax.devices()[0]
    command = " ".join(shlex.quote(a) for a in ["benchmarks/gpu_check.py", *argv])
    return dict(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        device=f"{device.device_kind} ({device.platform}, {jax.device_count()} "
        "device(s))",
        jax=jax.__version__,
        keras=keras.__version__,
        python=platform.python_version(),
        host=f"{os.cpu_count()} CPUs, {platform.machine()}",
        command=command,
        env={k: os.environ[k] for k in REPORTED_ENV if k in os.environ},
        args={k: v for k, v in vars(args).items() if not k.startswith("fit_child")},
    )


def add_header(args, report):
    meta = report.meta
    title = "## keras-attention GPU check under JAX"
    report.add(title + (" (SMOKE sizes)" if args.smoke else ""))
    report.add()
    report.add(
        f"{meta['date']}; device: {meta['device']}; "
        f"jax {meta['jax']}, keras {meta['keras']} (backend jax), "
        f"Python {meta['python']}, {meta['host']}; `{meta['command']}`."
    )
    report.add()


def run_sections(args, argv, report, clock):
    runs = {
        "layers": lambda: gpu_layers.layers_section(args, report, clock),
        "fit": lambda: gpu_fit.fit_section(args, argv, report, clock),
    }
    for section in SECTIONS:
        if section not in args.sections:
            continue
        try:
            runs[section]()
        except Exception as exc:  # a bug of this script: report, go on
            traceback.print_exc(file=sys.stderr)
            report.failures += 1
            report.add(f"Section {section} FAILED: {short_error(exc)}")
            report.add()


def add_total(report, clock):
    """The last line; the exit status: 1 when a row failed or was skipped."""
    total = clock.elapsed()
    report.meta.update(seconds=total, failures=report.failures, skipped=report.skipped)
    report.add(
        f"Total {total:.0f} s; {report.failures} row(s) failed, "
        f"{report.skipped} skipped (time budget)."
    )
    return 1 if report.failures or report.skipped else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    require_jax()
    if args.fit_child:  # one path of the fit section, in its own process
        return gpu_fit.child_main(args)
    clock = Clock(args.budget_s)
    report = Report(args.output)
    report.meta = run_meta(args, argv)
    add_header(args, report)
    run_sections(args, argv, report, clock)
    return add_total(report, clock)


if __name__ == "__main__":
    sys.exit(main())
