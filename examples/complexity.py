"""Title: Why self-attention: convolution, recurrence and self-attention, measured
Description: times one `Conv1D` (kernel 3), one `GRU` and one
`keras_attention.layers.MultiHeadSelfAttention` of the same width `d` on
sequences of length L = 16 ... 4096, and measures their peak memory, to put
numbers on the complexity table of Vaswani et al. (2017, Table 1):

    layer            per-layer cost   sequential ops   max path length
    convolution      O(k L d^2)       O(1)             O(log_k L)
    recurrent        O(L d^2)         O(L)             O(L)
    self-attention   O(L^2 d)         O(1)             O(1)

Method. One forward pass, batch 1 (`--batch`), float32, inside a
`tf.function` traced once with an unknown length. Each point runs in a fresh
child process (so that one point's memory cannot hide another's): the child
builds the layer, traces it on a short input, then times `--rounds` rounds of
the forward pass at length L (each round repeats the call until it lasts 50
ms) and reports the median time per call. Memory is the peak resident set of
the child during those calls, minus its resident set just before them
(`VmHWM - VmRSS` from `/proc/self/status`; `tf.config.experimental.
get_memory_info` does not work on CPU). The script also reports an analytic
activation size for each point (the tensors a forward pass must hold: the
output for conv and GRU, Q, K, V, the N L^2 weights and the output for
attention). Self-attention uses the dense path (`attention_impl="dense"`),
whose weights are the O(L^2) memory of the table;
`attention_impl="chunked"` (`--layers ... attention_chunked`) is the exact
O(L)-memory alternative, measured under XLA (`jit_compile=True`), where it
keeps that memory (in a plain graph it peaked at about the dense footprint).

The crossovers are the lengths where self-attention becomes slower than (or
needs more memory than) the convolution and the GRU, interpolated on the
log-log curves between the two measured lengths that bracket them.

    python examples/complexity.py --output-dir outputs/complexity
    python examples/complexity.py --smoke --output-dir /tmp/complexity  # seconds

Outputs under `--output-dir`: `complexity.json` (every point and the
crossovers), `complexity.csv`, `complexity.md` (a markdown table) and
`complexity.png` (time and memory against L, log-log).

Measured (2026-11-29, 2 CPU cores shared with other training jobs at load
5-8, so times are noisy; TensorFlow 2.21, d=64, 4 heads, batch 1, L = 16 ...
4096 plus a second run at L = 8192, merged with `--from-json`): dense
self-attention is slower than the kernel-3 Conv1D at every L (1.4x at 16,
170x at 8192) and becomes slower than the GRU at L ~ 6000 (an earlier run:
~3800), where the arithmetic alone would put that crossover at L = d = 64;
its memory reaches 1.05 GiB at L = 8192 (GRU 16.5 MiB), the chunked path 31
MiB. `docs/why-self-attention.md` embeds the plot and discusses it.
These are figures of the code of 744dea5 (2026-11-29). The script changed
since only in how it is organised (75713bc, 4158c6b, 06ab70b, 3b61941: the
/proc reading and the argument parser shared with other examples, `main`
split into functions) and in printing its last status line to standard
error (9a41a19), not in what it measures.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.memory import proc_status  # noqa: E402
from examples.common.runs import markdown_header  # noqa: E402

LAYERS = ("conv", "gru", "attention", "attention_chunked")
DEFAULT_LAYERS = ("conv", "gru", "attention")
LABELS = {
    "conv": "Conv1D (k=3)",
    "gru": "GRU",
    "attention": "self-attention (dense)",
    "attention_chunked": "self-attention (chunked, XLA)",
}
KERNEL_SIZE = 3
MIB = 1024**2


def parse_args(argv=None):
    parser = example_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[2**i for i in range(4, 13)],
        help="sequence lengths L",
    )
    parser.add_argument("--width", type=int, default=64, help="model width d")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--batch", type=int, default=1, help="batch size")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds")
    parser.add_argument(
        "--round-seconds",
        type=float,
        default=0.05,
        help="each round repeats the call until it lasts this long",
    )
    parser.add_argument(
        "--layers",
        nargs="+",
        choices=LAYERS,
        default=list(DEFAULT_LAYERS),
        help="layers to compare",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="measure in this process (no child processes): faster, but then "
        "only the analytic memory is reported",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per child process"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run for the tests: L = 16 and 64, 1 short round, in process",
    )
    parser.add_argument(
        "--from-json",
        nargs="+",
        metavar="JSON",
        help="measure nothing: merge the points of earlier complexity.json files "
        "(later files win at equal L) and redo the analysis, table and plot",
    )
    parser.add_argument("--output-dir", default="outputs/complexity")
    # Internal: measure one point and print it (the child process).
    parser.add_argument(
        "--point", nargs=2, metavar=("LAYER", "L"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.lengths = [16, 64]
        args.rounds = 1
        args.round_seconds = 0.005
        args.in_process = True
    if args.width % args.heads:
        parser.error(
            f"--width must be a multiple of --heads. Received: width={args.width}, "
            f"heads={args.heads}"
        )
    return args


# -- one measurement ---------------------------------------------------------


def make_layer(kind, width, heads):
    """The layer `kind`, mapping `(B, L, width)` to `(B, L, width)`."""
    import keras

    import keras_attention as ka

    if kind == "conv":
        return keras.layers.Conv1D(width, KERNEL_SIZE, padding="same")
    if kind == "gru":
        return keras.layers.GRU(width, return_sequences=True)
    impl = "chunked" if kind == "attention_chunked" else "dense"
    return ka.layers.MultiHeadSelfAttention(
        num_heads=heads, key_dim=width // heads, attention_impl=impl
    )


def analytic_bytes(kind, length, width, heads, batch):
    """float32 bytes of the activations one forward pass must hold."""
    if kind in ("conv", "gru"):
        floats = batch * length * width  # the output sequence
    elif kind == "attention":
        # Q, K, V and the output, plus the N L^2 attention weights.
        floats = 4 * batch * length * width + batch * heads * length**2
    else:  # chunked: Q, K, V, output and one (L, 512)-key block of scores
        floats = 4 * batch * length * width + batch * heads * length * min(length, 512)
    return 4 * floats


def measure_point(
    kind, length, width=64, heads=4, batch=1, rounds=7, round_seconds=0.05
):
    """Median seconds per forward call (and memory) of one layer at length L."""
    import tensorflow as tf

    layer = make_layer(kind, width, heads)
    forward = tf.function(
        layer.__call__,
        input_signature=[tf.TensorSpec((batch, None, width), tf.float32)],
        # The chunked path keeps its O(L) memory under XLA; in a plain graph
        # it peaked at about the dense footprint (249 MiB at L=4096).
        jit_compile=kind == "attention_chunked",
    )
    rng = np.random.default_rng(0)
    short = tf.constant(rng.normal(size=(batch, 8, width)).astype("float32"))
    forward(short).numpy()  # build and trace once, on a short input
    x = tf.constant(rng.normal(size=(batch, length, width)).astype("float32"))
    base = proc_status("VmRSS:")
    start = time.perf_counter()
    forward(x).numpy()  # warm-up at the real length
    warm = time.perf_counter() - start
    repeats = max(1, int(round_seconds / max(warm, 1e-6)))
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            forward(x).numpy()
        per_call.append((time.perf_counter() - start) / repeats)
    peak = proc_status("VmHWM:")
    memory = None if base is None or peak is None else max(peak - base, 0)
    return {
        "layer": kind,
        "length": length,
        "seconds": float(np.median(per_call)),
        "seconds_min": float(min(per_call)),
        "seconds_max": float(max(per_call)),
        "peak_bytes": memory,
        "analytic_bytes": analytic_bytes(kind, length, width, heads, batch),
    }


def run_child(kind, length, args):
    """`measure_point` in a fresh process (a clean peak resident set)."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--point",
        kind,
        str(length),
        "--width",
        str(args.width),
        "--heads",
        str(args.heads),
        "--batch",
        str(args.batch),
        "--rounds",
        str(args.rounds),
        "--round-seconds",
        str(args.round_seconds),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=args.timeout
        )
    except subprocess.TimeoutExpired:
        return {"layer": kind, "length": length, "error": f"> {args.timeout:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    return {"layer": kind, "length": length, "error": " ".join(tail)[:200]}


# -- analysis ----------------------------------------------------------------


def crossover(lengths, ours, theirs):
    """Where `ours` overtakes `theirs` for good, interpolated on log-log axes.

    The crossover is taken before the first length from which `ours` stays
    above `theirs` up to the last length, so that a noisy point at small L
    (where both are a fixed overhead) is not mistaken for it.

    Returns `(length, status)`: status `"crossed"` with the interpolated
    length, `"always"` (ours is above at every length) or `"never"` (ours
    is not above at the last length), with `None`.
    """
    pairs = [
        (length, a, b)
        for length, a, b in zip(lengths, ours, theirs, strict=True)
        if a is not None and b is not None and a > 0 and b > 0
    ]
    if not pairs or pairs[-1][1] <= pairs[-1][2]:
        return None, "never"
    first = len(pairs) - 1
    while first > 0 and pairs[first - 1][1] > pairs[first - 1][2]:
        first -= 1
    if first == 0:
        return None, "always"
    (l0, a0, b0), (l1, a1, b1) = pairs[first - 1], pairs[first]
    d0 = math.log(a0) - math.log(b0)  # <= 0
    d1 = math.log(a1) - math.log(b1)  # > 0
    fraction = d0 / (d0 - d1)
    return math.exp(math.log(l0) + fraction * (math.log(l1) - math.log(l0))), "crossed"


def describe(name, result, lengths):
    length, status = result
    if status == "crossed":
        return f"self-attention becomes slower than {name} at L ~ {length:.0f}"
    if status == "always":
        return f"self-attention is slower than {name} at every L >= {lengths[0]}"
    return f"self-attention stays faster than {name} up to L = {lengths[-1]}"


def series(points, kind, key):
    return [p.get(key) if "error" not in p else None for p in points[kind]]


def analyse(points, lengths, layers):
    """Crossovers of the dense self-attention against the other layers."""
    out = {}
    if "attention" not in layers:
        return out
    for other in ("conv", "gru"):
        if other not in layers:
            continue
        for key in ("seconds", "peak_bytes", "analytic_bytes"):
            length, status = crossover(
                lengths,
                series(points, "attention", key),
                series(points, other, key),
            )
            out[f"{other}_{key}"] = {"length": length, "status": status}
    return out


# -- outputs -----------------------------------------------------------------


def plot(points, lengths, layers, crossovers, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4), dpi=80)
    styles = {"conv": "C0o-", "gru": "C1s-", "attention": "C3^-"}
    styles["attention_chunked"] = "C2v-"
    for kind in layers:
        ax_t.plot(
            lengths, series(points, kind, "seconds"), styles[kind], label=LABELS[kind]
        )
        measured = series(points, kind, "peak_bytes")
        if any(m is not None for m in measured):
            ax_m.plot(
                lengths,
                [None if m is None else max(m, 1) / MIB for m in measured],
                styles[kind],
                label=LABELS[kind] + " (peak RSS)",
            )
        ax_m.plot(
            lengths,
            [b / MIB for b in series(points, kind, "analytic_bytes")],
            styles[kind][:2] + ":",
            alpha=0.6,
            label=LABELS[kind] + " (analytic)",
        )
    for other, ax, key in (
        ("conv", ax_t, "seconds"),
        ("gru", ax_t, "seconds"),
        ("conv", ax_m, "peak_bytes"),
        ("gru", ax_m, "peak_bytes"),
    ):
        found = crossovers.get(f"{other}_{key}", {})
        if found.get("status") == "crossed":
            ax.axvline(found["length"], color="gray", lw=0.8, ls="--")
            ax.annotate(
                f"vs {other}\nL~{found['length']:.0f}",
                (found["length"], 0.02),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                color="gray",
            )
    for ax, ylabel in ((ax_t, "seconds per forward pass"), (ax_m, "MiB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    ax_t.set_title("time (median)")
    ax_m.set_title("memory of one forward pass")
    ax_t.legend(fontsize=7)
    ax_m.legend(fontsize=6, ncol=1)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_table(points, lengths, layers, path_csv, path_md):
    fields = ["layer", "length", "seconds", "seconds_min", "seconds_max"]
    fields += ["peak_bytes", "analytic_bytes", "error"]
    with open(path_csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for kind in layers:
            for p in points[kind]:
                writer.writerow({k: p.get(k) for k in fields})
    lines = markdown_header(
        ["L"]
        + [f"{LABELS[k]} ms" for k in layers]
        + [f"{LABELS[k]} MiB" for k in layers]
    )
    for i, length in enumerate(lengths):
        times = []
        mems = []
        for kind in layers:
            p = points[kind][i]
            if "error" in p:
                times.append("-")
                mems.append("-")
                continue
            times.append(f"{1000 * p['seconds']:.3g}")
            m = p.get("peak_bytes")
            mems.append("-" if m is None else f"{m / MIB:.3g}")
        lines.append(f"| {length} | " + " | ".join(times + mems) + " |")
    with open(path_md, "w") as f:
        f.write("\n".join(lines) + "\n")


def merge_runs(paths):
    """Lengths, points and layers of several `complexity.json` files."""
    by_length = {}
    layers = []
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        for kind, kind_points in run["points"].items():
            if kind not in layers:
                layers.append(kind)
            for p in kind_points:
                by_length.setdefault(p["length"], {})[kind] = p
    lengths = sorted(
        length for length, row in by_length.items() if len(row) == len(layers)
    )
    points = {kind: [by_length[length][kind] for length in lengths] for kind in layers}
    return lengths, points, layers


def point_options(args):
    """`measure_point`'s keyword arguments from the command line's."""
    names = ("width", "heads", "batch", "rounds", "round_seconds")
    return {name: getattr(args, name) for name in names}


def measure_all(args):
    """Every layer at every length (each in a child process unless
    `--in-process`), printed as it comes: `{kind: [point, ...]}`."""
    points = {kind: [] for kind in args.layers}
    for length in args.lengths:
        for kind in args.layers:
            if args.in_process:
                p = measure_point(kind, length, **point_options(args))
                p["peak_bytes"] = None  # a process' peak RSS never goes down
            else:
                p = run_child(kind, length, args)
            points[kind].append(p)
            if "error" in p:
                print(f"L={length:5d} {LABELS[kind]:26s} failed: {p['error']}")
            else:
                mem = p["peak_bytes"]
                mem = "-" if mem is None else f"{mem / MIB:8.1f} MiB"
                print(
                    f"L={length:5d} {LABELS[kind]:26s} "
                    f"{1000 * p['seconds']:9.3f} ms  {mem}",
                    flush=True,
                )
    return points


def summary_lines(crossovers, args):
    """Where attention gets slower (and larger) than the conv and GRU
    baselines, one line each."""
    lines = []
    memory_key = "analytic_bytes" if args.in_process else "peak_bytes"
    for other in ("conv", "gru"):
        for what, key, verb in (
            ("time:   ", "seconds", "slower"),
            ("memory: ", memory_key, "larger"),
        ):
            found = crossovers.get(f"{other}_{key}")
            if found is not None:
                text = describe(
                    LABELS[other], (found["length"], found["status"]), args.lengths
                )
                lines.append(what + text.replace("slower", verb))
    return lines


def main(argv=None):
    args = parse_args(argv)
    if args.point:
        kind, length = args.point[0], int(args.point[1])
        result = measure_point(kind, length, **point_options(args))
        print("RESULT " + json.dumps(result), flush=True)
        return result

    os.makedirs(args.output_dir, exist_ok=True)
    started = time.time()
    if args.from_json:
        args.lengths, points, args.layers = merge_runs(args.from_json)
    else:
        points = measure_all(args)
    crossovers = analyse(points, args.lengths, args.layers)
    lines = summary_lines(crossovers, args)
    for line in lines:
        print(line)

    title = (
        f"d={args.width}, {args.heads} heads, batch {args.batch}, float32 forward, "
        f"{os.cpu_count()} CPU cores (shared)"
    )
    result = {
        "config": {
            k: getattr(args, k)
            for k in ("lengths", "width", "heads", "batch", "rounds", "layers")
        },
        "in_process": args.in_process,
        "merged_from": args.from_json,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "wall_seconds": time.time() - started,
        "points": points,
        "crossovers": crossovers,
        "summary": lines,
    }
    with open(os.path.join(args.output_dir, "complexity.json"), "w") as f:
        json.dump(result, f, indent=1)
    write_table(
        points,
        args.lengths,
        args.layers,
        os.path.join(args.output_dir, "complexity.csv"),
        os.path.join(args.output_dir, "complexity.md"),
    )
    plot(
        points,
        args.lengths,
        args.layers,
        crossovers,
        os.path.join(args.output_dir, "complexity.png"),
        title,
    )
    status(f"wrote {args.output_dir}/complexity.{{json,csv,md,png}}")
    return result


if __name__ == "__main__":
    main()
