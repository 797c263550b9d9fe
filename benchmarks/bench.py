"""keras-attention against the Keras and keras-hub anchors (issue 6).

One process (plus a fresh child process per memory point) that prints
markdown tables. Every timing is the median of `--rounds` rounds, with the
min-max, after one warm-up call; the candidates of a row run interleaved
(A B A B ...) so that a noisy, shared machine slows both alike. Ratios are
ours / anchor, computed round by round (median and min-max of the per-round
ratios): below 1 means we are faster.

Sections (`--sections`, default all):

- `layer`: `MultiHeadSelfAttention` vs `keras.layers.MultiHeadAttention`,
  forward and forward+backward, B=8, 8 heads, key_dim 64, d_model 512,
  L = 128 ... 1024, in graph mode and under XLA; also as a fraction of the
  fp32 matmul ceiling measured in the same run (FLOPs 8 B L d^2 +
  4 B h L^2 d_k forward, x3 forward+backward).
- `memory`: peak RSS (`VmHWM` of a fresh child process per point) and
  time of one forward+backward under XLA at B=1, 8 heads, key_dim 64, d_model
  512, for growing L: ours (`attention_impl="auto"`, which is chunked from
  2048) vs Keras. A point fails when it passes `--memory-cap-gib` (the parent
  polls the child's RSS and kills it) or `--timeout`; Keras points whose dense
  weights alone would pass the cap are skipped.
- `encoder`: a train step (forward, backward, SGD update) of
  `TransformerEncoderBlock` vs `keras_hub.layers.TransformerEncoder` on
  (8, 256, 512), intermediate 2048, no dropout, graph and XLA.
- `generation`: greedy generation of 128 tokens with a KV cache, decoder only,
  d_model 256, 4 heads, 4 layers, intermediate 1024, vocab 8000, batch 1 and
  16, one XLA-compiled `fori_loop` for both: ours (`TransformerDecoder` stack
  with its cache) vs 4 `keras_hub.layers.TransformerDecoder` with their
  caches (the way keras-hub's causal LMs generate). Same embedding, logits
  and loop; only the decoder layers differ.
- `window` (issue 13): a causal sliding window (`--window`, 512) vs full
  causal attention, `ops.chunked_attention` forward+backward under XLA at
  `--window-length` (32768), B=1, `--window-heads` (1) heads, key_dim 64;
  the window asked for three ways (the `SlidingWindow` mask modifier alone,
  with `causal=True`, and the `sliding_window=` argument); then the peak RSS
  of the sliding window (and of full causal) at `--window-memory-lengths`, a
  fresh child process per point as in `memory`.
- `modifier` (issue 13): `ops.chunked_attention(causal=True)` forward+backward
  under XLA at `--modifier-length` (4096), B=1, 8 heads, key_dim 64, without a
  score modifier vs a learned relative-bias table `(2 L - 1, N)` closed over
  as a `keras.Variable` (its gradient included) and vs
  `modifiers.RelativePositionBias`.
- `gqa` (issue 13): cached greedy generation with our `TransformerDecoder`
  (`--gqa-layers` 4, 8 query heads, d_model 512, intermediate 2048) at batch
  16 and a `--gqa-max-length` (2048) cache, 8 vs 2 key/value heads
  (`num_key_value_heads`): tokens/s of one XLA `fori_loop` writing the last
  `--gqa-steps` (32) positions of the cache.

- `modes` (issue 16): the peak RSS of one `MultiHeadSelfAttention`
  (`attention_impl="auto"`) forward+backward at B=1, 8 heads, key_dim 64, at
  `--mode-lengths` (4096, 16384), in each way a Keras user runs it: `xla`
  and `graph` (a `tf.function`, with and without `jit_compile`, traced for
  the input's shape), `xla-unknown` and `graph-unknown` (traced for
  `(None, None, d)`, the length unknown until the graph runs) and `eager`; a
  fresh child process per point as in `memory`.

- `bf16` (issue 16): the `encoder` section's train step in float32 and
  under the `mixed_bfloat16` policy (bfloat16 matmuls, float32 variables and
  softmax statistics), ours and keras-hub's, in graph mode and under XLA:
  the speed-up of bfloat16 over float32 for each, rounds interleaved.

- `long` (issue 16): causal `ops.chunked_attention` forward+backward under
  XLA at `--long-length` (65536), B=1, 8 heads, key_dim 64, the op's
  default block size on a CPU under XLA (2048 from L=32768 on), in a fresh
  child process (peak RSS and the time of a second call), against the
  time its FLOPs take at the fp32 matmul ceiling measured in the same run.
  FLOPs count the query-key pairs on and below the diagonal: 7 products of
  `2 d_k` FLOPs per pair and head (2 forward; 5 backward, which recomputes
  the scores).

- `lstmn` (issue 42): `ka.layers.LSTMN` vs `keras.layers.LSTM` of the
  same width (`--lstmn-units` 128, as many input features, batch
  `--lstmn-batch` 8), forward+backward under XLA at `--lstmn-lengths`
  (64, 256, 1024): times in interleaved rounds and the LSTMN/LSTM ratio;
  then each point's memory in a fresh child process (XLA's own account of
  the compiled step, and the peak RSS, as in `window`); and how each grows
  from T/4 to T (the LSTMN's time is O(T^2), its memory and the LSTM's
  time and memory O(T)).

- `long_documents` (issue 43, Liu et al. 2018's T-DMCA): causal
  self-attention for long documents, float32 under XLA, B=`--long-batch`
  (1), d_model `--long-width` (256), `--long-heads` (4) heads: one layer
  (`MultiHeadAttention` full causal on the dense and the chunked path,
  local = chunked with `BlockLocal1D(--long-block, --long-block)`,
  `MemoryCompressedAttention(compression_factor=--long-factor)`) and
  stacks of five pre-LN layers (`TransformerDecoder` full dense, full
  chunked and local; `MemoryCompressedDecoder` "LMLML" and "MMMMM", skipped
  with a note where that class is missing). Forward+backward at
  `--long-lengths` (1024 ... 8192), forward only at
  `--long-forward-lengths` (16384, 32768): times in interleaved rounds and
  their ratio to the faster exact full-causal candidate; memory (XLA's
  account and peak RSS) in a fresh child process per point, and its ratio
  to the dense one's; dense candidates whose score tensors alone would
  pass `--memory-cap-gib` are skipped. Then a line on issue 43's targets at
  L=8192: the LMLML stack's step at most 0.4x the fastest exact full
  causal stack's time and 1/3 of the dense stack's memory.

    make bench                                  # everything
    PYTHONPATH=. python benchmarks/bench.py --sections layer --rounds 7
    PYTHONPATH=. python benchmarks/bench.py --sections long_documents --rounds 3
    PYTHONPATH=. python benchmarks/bench.py --smoke   # tiny, 1 round (tests)
"""

import argparse
import functools
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import keras_attention as ka  # noqa: E402
from keras_attention.modifiers import CompressedCausalMask  # noqa: E402
from keras_attention.ops.chunked.block_plan import XLA_BLOCK  # noqa: E402
from keras_attention.ops.chunked.block_plan import plan_blocks  # noqa: E402
from keras_attention.ops.dispatch.attention_plan import plan_attention  # noqa: E402

GIB = 1024**3
SECTIONS = (
    "layer", "memory", "encoder", "generation", "window", "modifier", "gqa", "modes",
    "bf16", "long", "lstmn", "long_documents",
)  # fmt: skip
MEMORY_MODES = ("xla", "xla-unknown", "graph", "graph-unknown", "eager")


# -- timing helpers ----------------------------------------------------------


def interleaved(candidates, rounds):
    """Warm up every candidate, then time `rounds` rounds A B A B ...

    Args:
        candidates: dict name -> zero-argument callable (blocks until done).

    Returns:
        dict name -> list of seconds.
    """
    for fn in candidates.values():
        fn()
    times = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def spread(values, digits=3):
    """`median (min-max)`."""
    v = np.asarray(values)
    return f"{np.median(v):.{digits}f} ({v.min():.{digits}f}-{v.max():.{digits}f})"


def ratio(ours, anchor):
    """Per-round ratios ours / anchor as `median (min-max)`."""
    return spread(np.asarray(ours) / np.asarray(anchor), 2)


def block(result):
    """Wait for every tensor in a nested result."""
    for x in tf.nest.flatten(result):
        if hasattr(x, "numpy"):
            x.numpy()


def compiled(fn, mode):
    return tf.function(fn, jit_compile=mode == "xla", reduce_retracing=False)


def matmul_ceiling(n, rounds):
    """fp32 FLOP/s of an `n x n` matmul: the best round of graph and XLA.

    Graph mode runs matmuls through oneDNN, XLA through its own CPU dot;
    either may be the faster on a given machine.
    """
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    fns = {
        mode: compiled(lambda a, b: tf.reduce_sum(tf.matmul(a, b)), mode)
        for mode in ("graph", "xla")
    }
    times = interleaved(
        {mode: lambda fn=fn: fn(a, b).numpy() for mode, fn in fns.items()},
        max(rounds, 3),
    )
    return 2 * n**3 / min(min(t) for t in times.values())


def block_products_seconds(chunk, heads, dk, rounds, reps=64):
    """Seconds of one block's seven products under XLA, `heads` heads of
    `chunk`-sized blocks: the forward's Q K^T and P V, the backward's Q K^T
    again, dO V^T, P^T dO, dS^T Q and dS K, in that order and with those
    transposes, chained in a loop so that XLA hoists none. What the
    attention's arithmetic takes at the rate XLA runs these shapes, without
    the softmax, masks and loop around it (a rescale of the `(chunk, dk)`
    carry keeps the values normal; it costs 1/chunk of a product)."""
    k = tf.random.normal((1, heads, chunk, dk)) / dk**0.5
    v = tf.random.normal((1, heads, chunk, dk)) / chunk**0.5
    qk, pv = "bnqh,bnkh->bnqk", "bnqk,bnkh->bnqh"
    tr = "bnqk,bnqh->bnkh"  # P^T X

    def products(i, x):
        s = tf.einsum(qk, x, k)  # forward Q K^T
        o = tf.einsum(pv, s, v)  # forward P V
        dp = tf.einsum(qk, o, v)  # dO V^T
        dv = tf.einsum(tr, dp, o)  # P^T dO
        s2 = tf.einsum(qk, dv, k)  # Q K^T recomputed
        dk_ = tf.einsum(tr, s2, x)  # dS^T Q
        dq = tf.einsum(pv, s2, dk_)  # dS K
        return i + 1, dq * tf.math.rsqrt(tf.reduce_mean(tf.square(dq)) + 1e-30)

    loop = compiled(
        lambda x: tf.reduce_sum(
            tf.while_loop(lambda i, x: i < reps, products, (0, x))[1]
        ),
        "xla",
    )
    x = tf.random.normal((1, heads, chunk, dk))
    times = interleaved({"products": lambda: loop(x).numpy()}, max(rounds, 3))
    return min(times["products"]) / reps


def header(args):
    load = os.getloadavg()
    print(
        f"keras-attention benchmarks: keras {keras.__version__}, TF {tf.__version__}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"rounds {args.rounds}{', SMOKE sizes' if args.smoke else ''}"
    )


# -- 1. the attention layer --------------------------------------------------


def projections_alone(d, kind):
    """The four projections' matmuls alone (no biases, no attention): `x`
    `(B, L, d)` times a fused `(d, 3d)` kernel, the three parts summed into
    a stand-in for the heads' output, times a `(d, d)` kernel; with
    `kind="fwd+bwd"` also the gradients of `x` and both kernels (four more
    matmuls' worth each). Every self-attention layer with these projections
    runs these products, ours and Keras' alike, so their time over Keras'
    is the least ratio a faster attention core could reach."""
    w_in = tf.random.normal((d, 3 * d)) / d**0.5
    w_out = tf.random.normal((d, d)) / d**0.5

    def forward(x, w_in, w_out):
        q, k, v = tf.split(tf.einsum("btd,de->bte", x, w_in), 3, axis=-1)
        return tf.einsum("btd,de->bte", q + k + v, w_out)

    def run(x):
        if kind == "forward":
            return forward(x, w_in, w_out)
        with tf.GradientTape() as tape:
            tape.watch([x, w_in, w_out])
            loss = tf.reduce_sum(forward(x, w_in, w_out))
        return tape.gradient(loss, [x, w_in, w_out])

    return run


def layer_section(args):
    b, h, dk = args.batch, args.heads, args.key_dim
    d = h * dk
    ceiling = matmul_ceiling(args.matmul_size, args.rounds)
    print(
        f"\n### 1. MultiHeadSelfAttention vs keras.layers.MultiHeadAttention "
        f"(B={b}, {h} heads, key_dim {dk}, d_model {d})\n"
    )
    print(
        f"fp32 matmul ceiling ({args.matmul_size}^2 matmul, best round of graph "
        "and XLA): "
        f"{ceiling / 1e9:.1f} GFLOP/s\n"
    )
    print(
        "| L | mode | pass | ours s | Keras s | ours/Keras | ours % ceiling "
        "| Keras % ceiling | projections alone / Keras |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for length in args.lengths:
        x = tf.random.normal((b, length, d))
        ours = ka.layers.MultiHeadSelfAttention(h, dk)
        theirs = keras.layers.MultiHeadAttention(h, dk)
        ours(x)
        theirs(x, x)
        flops = 8 * b * length * d**2 + 4 * b * h * length**2 * dk
        for mode in args.modes:
            for kind in ("forward", "fwd+bwd"):
                fns = {}
                for name, layer, call in (
                    ("ours", ours, lambda layer, x: layer(x)),
                    ("keras", theirs, lambda layer, x: layer(x, x)),
                ):

                    def run(x, layer=layer, call=call, kind=kind):
                        if kind == "forward":
                            return call(layer, x)
                        with tf.GradientTape() as tape:
                            tape.watch(x)
                            loss = tf.reduce_sum(call(layer, x))
                        return tape.gradient(loss, [x, *layer.trainable_weights])

                    fn = compiled(run, mode)
                    fns[name] = lambda fn=fn, x=x: block(fn(x))
                fn = compiled(projections_alone(d, kind), mode)
                fns["projections"] = lambda fn=fn, x=x: block(fn(x))
                times = interleaved(fns, args.rounds)
                work = flops * (1 if kind == "forward" else 3)
                o, k = times["ours"], times["keras"]
                row = dict(
                    length=length,
                    mode=mode,
                    kind=kind,
                    ratio=float(np.median(np.asarray(o) / np.asarray(k))),
                )
                rows.append(row)
                print(
                    f"| {length} | {mode} | {kind} | {spread(o, 4)} | {spread(k, 4)} "
                    f"| {ratio(o, k)} | {100 * work / np.median(o) / ceiling:.0f}% "
                    f"| {100 * work / np.median(k) / ceiling:.0f}% "
                    f"| {ratio(times['projections'], k)} |",
                    flush=True,
                )
    return rows


# -- 2. memory: one child process per point ----------------------------------


def memory_point(impl, length, args):
    """Child process: one forward+backward under XLA; print a JSON line.

    `impl`: `"auto"`, `"chunked"`, `"dense"` (our self-attention layer),
    `"keras"` (Keras' layer), or `"op-causal"` / `"op-window"`
    (`ops.chunked_attention` alone, full causal / `SlidingWindow`, see
    `window_section`).
    """
    heads, key_dim = args.heads, args.key_dim
    if impl.startswith("mode-"):
        _mode_point(impl[5:], length, args)
        return
    if impl.startswith("rnn-"):
        recurrent_point(impl[4:], length, args)
        return
    if impl.startswith("long-"):
        long_point(impl[5:], length, args)
        return
    if impl.startswith("op-"):
        shape = (1, length, heads, key_dim)
        qkv = [tf.random.normal(shape) for _ in range(3)]
        kwargs = window_variants(args.window)[impl[3:]][1]
        step = attention_gradients(args.window_chunk, **kwargs)
        _report_memory(lambda: block(step(*qkv)), args.second_call)
        return
    d = heads * key_dim
    x = tf.random.normal((1, length, d))
    if impl == "keras":
        layer = keras.layers.MultiHeadAttention(heads, key_dim)
        layer(x[:, :8], x[:, :8])

        def call(x):
            return layer(x, x)

    else:
        layer = ka.layers.MultiHeadSelfAttention(heads, key_dim, attention_impl=impl)
        layer(x[:, :8])

        def call(x):
            return layer(x)

    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(call(x))
        return tape.gradient(loss, [x, *layer.trainable_weights])

    _report_memory(lambda: block(step(x)), args.second_call)


def _mode_point(mode, length, args):
    """Child process of `modes_section`: our layer (`"auto"`) run `mode`."""
    d = args.heads * args.key_dim
    x = tf.random.normal((1, length, d))
    layer = ka.layers.MultiHeadSelfAttention(args.heads, args.key_dim)
    layer(x[:, :8])

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x))
        return tape.gradient(loss, [x, *layer.trainable_weights])

    _report_memory(lambda: block(compile_for_mode(step, mode, d)(x)), args.second_call)


def compile_for_mode(step, mode, d):
    """`step` as `mode` (one of `MEMORY_MODES`) runs it; the `-unknown`
    modes trace it for inputs `(None, None, d)`."""
    if mode == "eager":
        return step
    signature = None
    if mode.endswith("-unknown"):
        signature = [tf.TensorSpec((None, None, d), tf.float32)]
    jit = mode.startswith("xla")
    return tf.function(step, jit_compile=jit, input_signature=signature)


def modes_section(args):
    h, dk = args.heads, args.key_dim
    print(
        f"\n### 8. Peak RSS (GiB) of one forward+backward of our layer "
        f'(`attention_impl="auto"`), B=1, {h} heads, key_dim {dk}, by how it runs\n'
    )
    print(
        "`-unknown`: a `tf.function` traced for `(None, None, d)`, so the "
        "dense/chunked choice is made when the graph runs. A fresh process "
        "per point, as in section 2.\n"
    )
    print("| L | " + " | ".join(args.memory_modes) + " |")
    print("|---|" + "---|" * len(args.memory_modes))
    rows = []
    for length in args.mode_lengths:
        row, cells = dict(length=length), []
        for mode in args.memory_modes:
            result = run_child(f"mode-{mode}", length, args)
            row[mode] = result
            ok = result["status"] == "ok"
            cells.append(f"{result['peak'] / GIB:.2f}" if ok else result["status"])
        rows.append(row)
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)
    return rows


def _report_memory(call, second_call=False):
    """Run `call` (compiles on the first call) and print the RESULT line:
    RSS before it, this process' peak RSS, and the time of a second call
    (or of the first, compile included, when that took over 30 s, unless
    `second_call`)."""
    base = _proc_status(os.getpid(), "VmRSS:")
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    first = True
    if seconds < 30 or second_call:  # time a second, compiled call
        start = time.perf_counter()
        call()
        seconds = time.perf_counter() - start
        first = False
    # The peak of this process' own memory map: not `ru_maxrss`, which a
    # child inherits from its parent across fork + exec.
    peak = _proc_status(os.getpid(), "VmHWM:")
    print(
        "RESULT "
        + json.dumps(
            dict(base=base, peak=peak, seconds=seconds, includes_compile=first)
        ),
        flush=True,
    )


def run_child(impl, length, args, heads=None, xla_report=False):
    """Run one memory point in a fresh process under an RSS cap and timeout.

    With `xla_report`, the child dumps what XLA compiled
    (`--xla_dump_to`) and the result has `xla_bytes`: the "Total bytes
    used" of the largest program's memory-usage report (arguments, outputs
    and XLA's preallocated temporaries of the compiled step), read from the
    dump, which is then deleted.
    """
    if xla_report:
        with tempfile.TemporaryDirectory() as dump:
            result = _run_child(impl, length, args, heads, dump)
            if result["status"] == "ok":
                result["xla_bytes"] = _xla_bytes_used(dump)
            return result
    return _run_child(impl, length, args, heads, None)


def _xla_bytes_used(dump):
    """The largest "Total bytes used" among the memory-usage reports."""
    totals = [0]
    for name in glob.glob(os.path.join(dump, "*memory-usage-report.txt")):
        with open(name) as f:
            first = f.readline()  # "Total bytes used: 123 (0.12MiB)"
        if first.startswith("Total bytes used:"):
            totals.append(int(first.split(":")[1].split()[0]))
    return max(totals)


def _run_child(impl, length, args, heads, dump):
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--memory-point",
        impl,
        str(length),
        "--heads",
        str(heads or args.heads),
        "--key-dim",
        str(args.key_dim),
        "--window",
        str(args.window),
        "--window-chunk",
        str(args.window_chunk),
        "--lstmn-batch",
        str(args.lstmn_batch),
        "--lstmn-units",
        str(args.lstmn_units),
        "--long-batch",
        str(args.long_batch),
        "--long-width",
        str(args.long_width),
        "--long-heads",
        str(args.long_heads),
        "--long-block",
        str(args.long_block),
        "--long-factor",
        str(args.long_factor),
    ] + (["--second-call"] if getattr(args, "second_call", False) else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if dump:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    cap = args.memory_cap_gib * GIB
    start = time.time()
    status, peak_seen = None, 0
    while proc.poll() is None:
        rss = _proc_status(proc.pid, "VmRSS:")
        peak_seen = max(peak_seen, rss)
        if rss > cap:
            status = f"killed: RSS > {args.memory_cap_gib:g} GiB"
        elif time.time() - start > args.timeout:
            status = f"killed: > {args.timeout:g} s"
        if status:
            proc.kill()
            break
        time.sleep(0.1)
    output = proc.communicate()[0]
    if status:
        return dict(status=status, peak=peak_seen)
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return dict(status="ok", **json.loads(line[7:]))
    last = [line for line in output.splitlines() if line.strip()][-1:]
    return dict(status=f"failed (rc {proc.returncode}): {' '.join(last)[:120]}")


def _proc_status(pid, field):
    """A memory field of `/proc/PID/status` in bytes (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_section(args):
    h, dk = args.heads, args.key_dim
    print(
        f"\n### 2. One forward+backward under XLA, B=1, {h} heads, key_dim {dk}, "
        f"d_model {h * dk}: peak RSS of a fresh process and time\n"
    )
    print(
        "Peak RSS is the whole process (TensorFlow's runtime included; `base` is "
        "the RSS before the first call). Time is one compiled call "
        "(or the first call, compile included, when that took over 30 s).\n"
    )
    print("| L | ours (auto) peak GiB | base | s | Keras peak GiB | base | s |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    failed = {"ours": False, "keras": False}
    for length in args.memory_lengths:
        cells, row = [], dict(length=length)
        for name, impl in (("ours", "auto"), ("keras", "keras")):
            if name not in args.memory_candidates:
                cells.append("not run | | ")
                continue
            # A dense (1, N, L, L) float32 tensor; the backward holds several.
            dense_bytes = 3 * h * length**2 * 4
            if failed[name]:
                cells.append("not run (failed at a shorter L) | | ")
                continue
            if name == "keras" and dense_bytes > args.memory_cap_gib * GIB:
                cells.append(
                    f"skipped (>= {dense_bytes / GIB:.0f} GiB of weights) | | "
                )
                continue
            result = run_child(impl, length, args)
            row[name] = result
            if result["status"] != "ok":
                failed[name] = True
                cells.append(f"{result['status']} | | ")
                continue
            mark = " (incl. compile)" if result["includes_compile"] else ""
            cells.append(
                f"{result['peak'] / GIB:.2f} | {result['base'] / GIB:.2f} "
                f"| {result['seconds']:.2f}{mark}"
            )
        rows.append(row)
        print(f"| {length} | {' | '.join(cells)} |", flush=True)
    return rows


# -- 3. encoder train step ---------------------------------------------------


def encoder_section(args):
    import keras_hub

    b, length, d, inter = args.encoder_shape
    heads = args.heads
    print(
        f"\n### 3. Encoder train step: TransformerEncoderBlock vs "
        f"keras_hub.layers.TransformerEncoder, ({b}, {length}, {d}), "
        f"intermediate {inter}, {heads} heads, no dropout\n"
    )
    print("| mode | ours s | keras-hub s | ours/keras-hub |")
    print("|---|---|---|---|")
    x = tf.random.normal((b, length, d))
    target = tf.random.normal((b, length, d))
    ours = ka.layers.TransformerEncoderBlock(
        num_heads=heads, intermediate_dim=inter, dropout=0.0
    )
    theirs = keras_hub.layers.TransformerEncoder(inter, heads, dropout=0.0)
    ours(x)
    theirs(x)
    rows = []
    for mode in args.modes:
        fns = {
            name: _train_step(layer, x, target, mode)
            for name, layer in (("ours", ours), ("keras-hub", theirs))
        }
        times = interleaved(fns, args.rounds)
        o, k = times["ours"], times["keras-hub"]
        rows.append(dict(mode=mode, ratio=float(np.median(np.asarray(o) / k))))
        print(f"| {mode} | {spread(o, 4)} | {spread(k, 4)} | {ratio(o, k)} |")
    return rows


def _train_step(layer, x, target, mode):
    """A zero-argument train step (forward, backward, SGD) of `layer`."""
    optimizer = keras.optimizers.SGD(1e-4)
    optimizer.build(layer.trainable_variables)

    def train_step(x, y):
        with tf.GradientTape() as tape:
            out = tf.cast(layer(x, training=True), "float32")
            loss = tf.reduce_mean(tf.square(out - y))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply(grads, layer.trainable_variables)
        return loss

    fn = compiled(train_step, mode)
    return lambda: fn(x, target).numpy()


def bf16_section(args):
    import keras_hub

    b, length, d, inter = args.encoder_shape
    heads = args.heads
    print(
        f"\n### 9. Encoder train step in float32 vs `mixed_bfloat16`, "
        f"({b}, {length}, {d}), intermediate {inter}, {heads} heads, no dropout\n"
    )
    print(
        "Speed-up: float32 time / bfloat16 time, round by round (above 1 means "
        "bfloat16 is faster).\n"
    )
    print(
        "| mode | ours fp32 s | ours bf16 s | ours speed-up "
        "| keras-hub fp32 s | keras-hub bf16 s | keras-hub speed-up |"
    )
    print("|---|---|---|---|---|---|---|")
    x = tf.random.normal((b, length, d))
    target = tf.random.normal((b, length, d))
    rows = []
    for mode in args.modes:
        fns = {}
        for policy in ("float32", "mixed_bfloat16"):
            ours = ka.layers.TransformerEncoderBlock(
                num_heads=heads, intermediate_dim=inter, dropout=0.0, dtype=policy
            )
            theirs = keras_hub.layers.TransformerEncoder(
                inter, heads, dropout=0.0, dtype=policy
            )
            for name, layer in (("ours", ours), ("keras-hub", theirs)):
                layer(x)
                fns[name, policy] = _train_step(layer, x, target, mode)
        times = interleaved(fns, args.rounds)
        row, cells = dict(mode=mode), []
        for name in ("ours", "keras-hub"):
            fp32, bf16 = times[name, "float32"], times[name, "mixed_bfloat16"]
            row[name] = float(np.median(np.asarray(fp32) / bf16))
            cells += [spread(fp32, 4), spread(bf16, 4), ratio(fp32, bf16)]
        rows.append(row)
        print(f"| {mode} | " + " | ".join(cells) + " |", flush=True)
    return rows


def long_section(args):
    # The op's plan under TensorFlow's XLA on a CPU for this length
    # (`plan_blocks`), with `--long-chunk`'s block size when it sets one.
    length, heads, dk = args.long_length, args.heads, args.key_dim
    plan = plan_blocks(
        1,
        length,
        length,
        heads,
        dk,
        runtime="tensorflow-xla",
        device="cpu",
        block_sizes=(args.long_chunk, args.long_chunk),
    )
    chunk = plan.query_block
    print(
        f"\n### 10. Causal attention near the matmul limit: `ops.chunked_attention"
        f"(causal=True)` forward+backward under XLA, L={length}, B=1, {heads} "
        f"heads, key_dim {dk}, chunks {chunk}\n\nPlan (`plan_blocks`): {plan.reason}\n"
    )
    ceiling = matmul_ceiling(args.matmul_size, args.rounds)
    blocks = -(-length // chunk)
    visited = blocks * (blocks + 1) // 2  # on and below the diagonal
    # The query-key pairs causal attention needs, whatever the block size
    # (the diagonal blocks' upper halves are not counted).
    flops = length * (length + 1) // 2 * 7 * 2 * dk * heads
    print(
        f"Matmul ceiling (fp32, {args.matmul_size}^2, best of graph and XLA): "
        f"{ceiling / 1e9:.1f} GFLOP/s. FLOPs of causal attention (7 products "
        f"over the pairs on and below the diagonal): {flops / 1e12:.2f} TFLOP, "
        f"{flops / ceiling:.1f} s at the ceiling."
    )
    group = plan.heads_per_group  # as the op groups them
    per_block = block_products_seconds(chunk, group, dk, args.rounds)
    products = visited * -(-heads // group) * per_block
    print(
        f"The products alone, at the rate XLA runs their shapes (a loop of one "
        f"block's seven products, {group} head"
        f"{'s' * (group > 1)} at once, as the op groups them here): "
        f"{per_block * 1e3:.2f} ms per block, {products:.1f} s for the visited "
        f"blocks, {products / (flops / ceiling):.2f}x the time at the ceiling.\n"
    )
    print(
        "| L | peak GiB | base GiB | s | / FLOP time at the ceiling | / products alone |"
    )
    print("|---|---|---|---|---|---|")
    # The time of a second call: the first one compiles.
    child = argparse.Namespace(
        **{**vars(args), "window_chunk": chunk, "second_call": True}
    )
    result = run_child("op-causal", length, child, heads=heads)
    if result["status"] != "ok":
        print(f"| {length} | {result['status']} | | | | |")
        return [dict(length=length, **result)]
    mark = " (incl. compile)" if result["includes_compile"] else ""
    factor = result["seconds"] / (flops / ceiling)
    print(
        f"| {length} | {result['peak'] / GIB:.2f} | {result['base'] / GIB:.2f} "
        f"| {result['seconds']:.1f}{mark} | {factor:.2f} "
        f"| {result['seconds'] / products:.2f} |",
        flush=True,
    )
    return [
        dict(
            length=length,
            ceiling=ceiling,
            flops=flops,
            factor=factor,
            products_seconds=products,
            **result,
        )
    ]


# -- 4. cached greedy generation ---------------------------------------------


def greedy_generators(d, layers, heads, vocab, steps):
    """Greedy generation with a KV cache, ours and keras-hub's, on any
    backend: `{"ours": generate, "keras-hub": generate}`, where
    `generate(batch)` runs `steps` tokens in one `fori_loop` (to compile
    with `tf.function(jit_compile=True)` or `jax.jit`) and returns them.

    A decoder-only stack of `layers` blocks (intermediate `4 d`, no
    dropout): our `TransformerDecoder` with its stacked cache, and
    keras-hub's `TransformerDecoder` layers each given its slice of the same
    cache layout; shared embedding, learned positions and logits.
    """
    import keras_hub

    keras.utils.set_random_seed(0)
    embedding = keras.layers.Embedding(vocab, d)
    positions = ka.layers.PositionEmbedding(steps)
    logits_layer = keras.layers.Dense(vocab)
    ours = ka.layers.TransformerDecoder(
        layers, num_heads=heads, intermediate_dim=4 * d, dropout=0.0
    )
    theirs = [
        keras_hub.layers.TransformerDecoder(4 * d, heads, dropout=0.0)
        for _ in range(layers)
    ]
    probe = ops.zeros((1, 1, d))
    for layer in (ours, logits_layer, positions, *theirs):
        layer(probe)
    embedding(ops.zeros((1, 1), "int32"))

    def ours_step(x, cache, index):
        return ours(x, cache=cache, cache_update_index=index)

    def keras_hub_step(x, cache, index):
        caches = []
        for i, layer in enumerate(theirs):
            x, c = layer(
                x,
                self_attention_cache=cache[:, i],
                self_attention_cache_update_index=index,
            )
            caches.append(c)
        return x, ops.stack(caches, axis=1)

    def generator(step):
        def generate(batch):
            def body(index, carry):
                token, cache, out = carry
                x = embedding(token)  # (B, 1, D)
                x, cache = step(x + positions(x, start_index=index), cache, index)
                token = ops.cast(ops.argmax(logits_layer(x[:, -1]), -1), "int32")
                out = ops.slice_update(out, [0, index], token[:, None])
                return token[:, None], cache, out

            cache = ops.zeros((batch, layers, 2, steps, heads, d // heads))
            out = ops.zeros((batch, steps), "int32")
            token = ops.ones((batch, 1), "int32")
            return ops.fori_loop(0, steps, body, (token, cache, out))[2]

        return generate

    return {"ours": generator(ours_step), "keras-hub": generator(keras_hub_step)}


def generation_times(generators, batch, compile_fn, rounds):
    """`interleaved` rounds of `greedy_generators`' loops at `batch`, each
    compiled with `compile_fn` (`tf.function(jit_compile=True)` or
    `jax.jit`) and waited for: dict name -> seconds."""
    fns = {}
    for name, generate in generators.items():
        fn = compile_fn(lambda generate=generate: generate(batch))
        fns[name] = lambda fn=fn: np.asarray(fn())
    return interleaved(fns, rounds)


def generation_section(args):
    d, layers, vocab, steps = (
        args.gen_dim,
        args.gen_layers,
        args.gen_vocab,
        args.gen_steps,
    )
    heads, inter = 4, 4 * d
    print(
        f"\n### 4. Greedy generation with a KV cache: {steps} tokens, decoder only, "
        f"d_model {d}, {heads} heads, {layers} layers, intermediate {inter}, "
        f"vocab {vocab}, one XLA fori_loop\n"
    )
    print("| batch | ours s | keras-hub s | ours tok/s | keras-hub tok/s | speed-up |")
    print("|---|---|---|---|---|---|")
    generators = greedy_generators(d, layers, heads, vocab, steps)
    rows = []
    xla = functools.partial(tf.function, jit_compile=True)
    for batch in args.gen_batches:
        times = generation_times(generators, batch, xla, args.rounds)
        o, k = times["ours"], times["keras-hub"]
        speedup = np.asarray(k) / np.asarray(o)
        rows.append(dict(batch=batch, speedup=float(np.median(speedup))))
        print(
            f"| {batch} | {spread(o)} | {spread(k)} | {batch * steps / np.median(o):.0f} "
            f"| {batch * steps / np.median(k):.0f} | {spread(speedup, 2)} |",
            flush=True,
        )
    return rows


# -- 5. sliding window vs full causal (issue 13) -----------------------------


def window_variants(window):
    """name -> (label, `chunked_attention` arguments): full causal (the
    anchor) and the same causal sliding window asked for three ways."""
    sliding = ka.modifiers.SlidingWindow(window)
    return {
        "causal": ("full causal: `causal=True`", dict(causal=True)),
        "window": (
            f"`mask_modifier=SlidingWindow({window})`",
            dict(mask_modifier=sliding),
        ),
        "causal-window": (
            f"`causal=True, mask_modifier=SlidingWindow({window})`",
            dict(causal=True, mask_modifier=sliding),
        ),
        "window-arg": (
            f"`causal=True, sliding_window={window}`",
            dict(causal=True, sliding_window=window),
        ),
    }


def attention_gradients(chunk, variables=(), **kwargs):
    """XLA-compiled `(q, k, v) -> gradients of sum(chunked_attention(...))`
    with respect to q, k, v and `variables`."""

    def step(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = ka.ops.chunked_attention(
                q, k, v, query_chunk_size=chunk, key_chunk_size=chunk, **kwargs
            )
            loss = tf.reduce_sum(out)
        return tape.gradient(loss, [q, k, v, *variables])

    return compiled(step, "xla")


def window_section(args):
    length, w, h, dk = args.window_length, args.window, args.window_heads, args.key_dim
    chunk = args.window_chunk
    print(
        f"\n### 5. Sliding window ({w}) vs full causal attention: "
        f"`ops.chunked_attention` forward+backward under XLA, B=1, N={h} heads, "
        f"key_dim {dk}, chunks {chunk}\n"
    )
    print(f"L = {length}; ratios to full causal, round by round.\n")
    print("| attention | s | / full causal |")
    print("|---|---|---|")
    qkv = [tf.random.normal((1, length, h, dk)) for _ in range(3)]
    variants = window_variants(w)
    fns = {}
    for name, (_, kwargs) in variants.items():
        step = attention_gradients(chunk, **kwargs)
        fns[name] = lambda step=step: block(step(*qkv))
    times = interleaved(fns, args.rounds)
    anchor = times["causal"]
    rows = []
    for name, (label, _) in variants.items():
        t = times[name]
        rows.append(
            dict(
                variant=name, ratio=float(np.median(np.asarray(t) / np.asarray(anchor)))
            )
        )
        print(f"| {label} | {spread(t)} | {ratio(t, anchor)} |", flush=True)

    print(
        f"\nMemory of one forward+backward, B=1, N={h} heads, key_dim {dk}, a "
        "fresh process per point: `peak` is the process' peak RSS (`VmHWM`, "
        "TensorFlow's runtime and XLA's compiler included), `XLA` the memory "
        "of the compiled step by XLA's own account (arguments, outputs, "
        "temporaries: `Total bytes used` of its memory-usage report), `s` the "
        "time of a second call (or of the first, compile included, when that "
        "took over 30 s).\n"
    )
    print(
        f"| L | SlidingWindow({w}) peak GiB | XLA MiB | s "
        "| full causal peak GiB | XLA MiB | s |"
    )
    print("|---|---|---|---|---|---|---|")
    failed = set()
    for length in args.window_memory_lengths:
        cells, row = [], dict(length=length)
        for impl in ("op-window", "op-causal"):
            if impl not in args.window_memory_candidates:
                cells.append("not run | | ")
                continue
            if impl in failed:
                cells.append("not run (failed at a shorter L) | | ")
                continue
            result = run_child(impl, length, args, heads=h, xla_report=True)
            row[impl] = result
            if result["status"] != "ok":
                failed.add(impl)
                cells.append(f"{result['status']} | | ")
                continue
            mark = " (incl. compile)" if result["includes_compile"] else ""
            cells.append(
                f"{result['peak'] / GIB:.3f} | {result['xla_bytes'] / 2**20:.1f} "
                f"| {result['seconds']:.2f}{mark}"
            )
        rows.append(row)
        print(f"| {length} | {' | '.join(cells)} |", flush=True)
    return rows


# -- 6. a learned score modifier on the chunked path (issue 13) --------------


def modifier_section(args):
    length, h, dk, chunk = (
        args.modifier_length,
        args.modifier_heads,
        args.key_dim,
        # The op's own block size under XLA unless `--modifier-chunk` sets one.
        args.modifier_chunk or XLA_BLOCK,
    )
    print(
        f"\n### 6. Score modifiers on the chunked path: `ops.chunked_attention"
        f"(causal=True)` forward+backward under XLA, B=1, L={length}, {h} heads, "
        f"key_dim {dk}, chunks {chunk}\n"
    )
    print(
        "Gradients with respect to q, k, v and the modifier's table. Ratios to "
        "no modifier, round by round.\n"
    )
    print("| score modifier | s | / no modifier |")
    print("|---|---|---|")
    rng = np.random.default_rng(0)
    qkv = [tf.random.normal((1, length, h, dk)) for _ in range(3)]
    # A user-written modifier: a learned bias per relative position and head,
    # read from a flat table (`ops.take` of a (2 L - 1) * N vector).
    table = keras.Variable(
        rng.normal(0, 0.1, (2 * length - 1, h)).astype("float32"), name="bias_table"
    )

    def learned_bias(score, batch, head, query, key):
        index = (query - key + length - 1) * h + head
        return score + ops.take(ops.reshape(table, (-1,)), index)

    t5 = ka.modifiers.RelativePositionBias(
        h,
        bidirectional=False,
        embeddings_initializer=keras.initializers.RandomNormal(0.0, 0.1, seed=0),
    )
    t5.build()
    candidates = {
        "none": ("none", None, []),
        "table": (
            f"learned bias table `({2 * length - 1}, {h})` (a `keras.Variable`, "
            "`ops.take`)",
            learned_bias,
            [table],
        ),
        "t5": (
            "`RelativePositionBias(bidirectional=False)` (32 buckets)",
            t5,
            t5.trainable_weights,
        ),
    }
    fns = {}
    for name, (_, modifier, variables) in candidates.items():
        step = attention_gradients(
            chunk, variables, causal=True, score_modifier=modifier
        )
        grads = step(*qkv)  # compiles; the table's gradient must be there
        if variables and (grads[3] is None or not np.any(grads[3].numpy())):
            raise AssertionError(f"no gradient reached the table of {name!r}")
        fns[name] = lambda step=step: block(step(*qkv))
    times = interleaved(fns, args.rounds)
    anchor = times["none"]
    rows = []
    for name, (label, _, _) in candidates.items():
        t = times[name]
        rows.append(
            dict(
                modifier=name,
                ratio=float(np.median(np.asarray(t) / np.asarray(anchor))),
            )
        )
        print(f"| {label} | {spread(t)} | {ratio(t, anchor)} |", flush=True)
    return rows


# -- 7. grouped-query attention in cached generation (issue 13) --------------


def gqa_section(args):
    d, heads, layers = args.gqa_dim, args.gqa_heads, args.gqa_layers
    batch, max_length, steps, vocab = (
        args.gqa_batch,
        args.gqa_max_length,
        args.gqa_steps,
        args.gen_vocab,
    )
    inter = 4 * d
    start = max_length - steps
    print(
        f"\n### 7. Grouped-query attention in cached generation: our "
        f"TransformerDecoder, {layers} layers, {heads} query heads, d_model {d}, "
        f"intermediate {inter}, vocab {vocab}, batch {batch}, cache of "
        f"{max_length} positions, greedy tokens {start}..{max_length - 1} in one "
        "XLA fori_loop\n"
    )
    print("| key/value heads | cache MiB | s | tok/s | speed-up over MHA |")
    print("|---|---|---|---|---|")
    keras.utils.set_random_seed(0)
    embedding = keras.layers.Embedding(vocab, d)
    positions = ka.layers.PositionEmbedding(max_length)
    logits_layer = keras.layers.Dense(vocab)
    decoders = {
        "mha": ka.layers.TransformerDecoder(
            layers, num_heads=heads, intermediate_dim=inter, dropout=0.0
        ),
        "gqa": ka.layers.TransformerDecoder(
            layers,
            num_heads=heads,
            intermediate_dim=inter,
            dropout=0.0,
            num_key_value_heads=args.gqa_kv_heads,
        ),
    }
    probe = tf.zeros((1, 1, d))
    for decoder in decoders.values():
        decoder(probe)
    logits_layer(probe)
    positions(probe)

    def generate(decoder):
        # The cache's content does not change the work (every step reads
        # all `max_length` positions, masked): zeros, and the loop writes
        # the last `steps` positions.
        cache = decoder.init_cache(batch, max_length)
        out = tf.zeros((batch, steps), "int32")
        token = tf.ones((batch, 1), "int32")

        def body(i, carry):
            token, cache, out = carry
            index = start + i
            x = embedding(token)
            x = x + positions(x, start_index=index)
            x, cache = decoder(x, cache=cache, cache_update_index=index)
            token = ops.cast(ops.argmax(logits_layer(x[:, -1]), -1), "int32")[:, None]
            out = ops.slice_update(out, [0, i], token)
            return token, cache, out

        return ops.fori_loop(0, steps, body, (token, cache, out))[2]

    fns = {}
    for name, decoder in decoders.items():
        fn = tf.function(lambda decoder=decoder: generate(decoder), jit_compile=True)
        fns[name] = lambda fn=fn: fn().numpy()
    times = interleaved(fns, args.rounds)
    anchor = np.asarray(times["mha"])
    rows = []
    for name, decoder in decoders.items():
        t = np.asarray(times[name])
        cache_bytes = batch * layers * 2 * max_length * decoder.kv_heads * (d // heads)
        speedup = anchor / t
        rows.append(dict(kv_heads=decoder.kv_heads, speedup=float(np.median(speedup))))
        print(
            f"| {decoder.kv_heads} | {cache_bytes * 4 / 2**20:.0f} | {spread(t)} "
            f"| {batch * steps / np.median(t):.0f} | {spread(speedup, 2)} |",
            flush=True,
        )
    return rows


# -- 11. LSTMN vs keras.layers.LSTM (issue 42) --------------------------------

RECURRENT = ("lstmn", "lstm")  # the candidates of section 11, ours first


def recurrent_layer(name, units):
    """`ka.layers.LSTMN(units)` or `keras.layers.LSTM(units)`, both
    returning every step's output (the loss reads all of them)."""
    if name == "lstmn":
        return ka.layers.LSTMN(units, return_sequences=True)
    return keras.layers.LSTM(units, return_sequences=True)


def recurrent_gradients(layer):
    """XLA-compiled `x -> gradients of sum(layer(x))` with respect to `x`
    and every trainable weight (the gradient of a training step)."""

    @tf.function(jit_compile=True, reduce_retracing=False)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x))
        return tape.gradient(loss, [x, *layer.trainable_weights])

    return step


def recurrent_point(name, length, args):
    """Child process of `lstmn_section`: one forward+backward under XLA of
    `name` (one of `RECURRENT`) at `(--lstmn-batch, length, --lstmn-units)`."""
    units = args.lstmn_units
    x = tf.random.normal((args.lstmn_batch, length, units))
    layer = recurrent_layer(name, units)
    layer(x[:, :4])  # builds the weights
    step = recurrent_gradients(layer)
    _report_memory(lambda: block(step(x)), args.second_call)


def growth(values, factor=4):
    """`{L: values[L] / values[L // factor]}` (None where `L // factor` was
    not measured): how a cost grows when the length is multiplied by
    `factor`."""
    return {
        length: value / values[length // factor]
        if length % factor == 0 and values.get(length // factor)
        else None
        for length, value in values.items()
    }


def times_four(value):
    """A `growth` value as a table cell."""
    return "-" if value is None else f"{value:.1f}x"


def lstmn_section(args):
    b, u, lengths = args.lstmn_batch, args.lstmn_units, args.lstmn_lengths
    print(
        f"\n### 11. LSTMN vs keras.layers.LSTM (issue 42): forward+backward "
        f"under XLA (`tf.function(jit_compile=True)`, gradients of the sum of "
        f"every step's output w.r.t. the input and all weights), B={b}, "
        f"{u} units, {u} input features\n"
    )
    print(
        "Times: median (min-max) of the rounds after a warm-up call, the two "
        "layers interleaved; LSTMN/LSTM round by round; `x T/4`: the median "
        "time over the median at a quarter of the length (O(T^2): 16x, "
        "O(T): 4x).\n"
    )
    print("| T | LSTMN s | LSTM s | LSTMN/LSTM | LSTMN x T/4 | LSTM x T/4 |")
    print("|---|---|---|---|---|---|")
    rows, medians = [], {name: {} for name in RECURRENT}
    for length in lengths:
        x = tf.random.normal((b, length, u))
        fns = {}
        for name in RECURRENT:
            layer = recurrent_layer(name, u)
            layer(x[:, :4])
            step = recurrent_gradients(layer)
            fns[name] = lambda step=step, x=x: block(step(x))
        times = interleaved(fns, args.rounds)
        ours, anchor = times["lstmn"], times["lstm"]
        for name in RECURRENT:
            medians[name][length] = float(np.median(times[name]))
        grow = {name: growth(medians[name])[length] for name in RECURRENT}
        rows.append(
            dict(
                length=length,
                seconds={name: medians[name][length] for name in RECURRENT},
                ratio=float(np.median(np.asarray(ours) / np.asarray(anchor))),
                growth=grow,
            )
        )
        print(
            f"| {length} | {spread(ours, 4)} | {spread(anchor, 4)} "
            f"| {ratio(ours, anchor)} | {times_four(grow['lstmn'])} "
            f"| {times_four(grow['lstm'])} |",
            flush=True,
        )
    return {"time": rows, "memory": lstmn_memory_table(args)}


def lstmn_memory_table(args):
    """Section 11's memory: a fresh process per point, as in section 5."""
    print(
        "\nMemory of one forward+backward, a fresh process per point (as in "
        "section 5): `XLA` is the compiled step's memory by XLA's own account "
        "(arguments, outputs, temporaries), `peak` and `base` the process' "
        "peak RSS and its RSS before the first call (TensorFlow's runtime and "
        "XLA's compiler included; `base` ~0.9 GiB), `s` the time of a second call.\n"
    )
    print(
        "| T | LSTMN XLA MiB | peak GiB | base | s | LSTM XLA MiB | peak GiB | base "
        "| s | XLA LSTMN/LSTM | LSTMN XLA x T/4 | LSTM XLA x T/4 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows, xla = [], {name: {} for name in RECURRENT}
    for length in args.lstmn_lengths:
        row, cells = dict(length=length), []
        for name in RECURRENT:
            result = run_child(f"rnn-{name}", length, args, xla_report=True)
            row[name] = result
            if result["status"] != "ok":
                cells.append(f"{result['status']} | | | ")
                continue
            xla[name][length] = result["xla_bytes"]
            mark = " (incl. compile)" if result["includes_compile"] else ""
            cells.append(
                f"{result['xla_bytes'] / 2**20:.2f} | {result['peak'] / GIB:.2f} "
                f"| {result['base'] / GIB:.2f} | {result['seconds']:.2f}{mark}"
            )
        both = all(length in xla[name] for name in RECURRENT)
        row["xla_ratio"] = xla["lstmn"][length] / xla["lstm"][length] if both else None
        grow = [growth(xla[name]).get(length) for name in RECURRENT]
        rows.append(row)
        share = "-" if row["xla_ratio"] is None else f"{row['xla_ratio']:.2f}"
        print(
            f"| {length} | {' | '.join(cells)} | {share} "
            f"| {times_four(grow[0])} | {times_four(grow[1])} |",
            flush=True,
        )
    return rows


# -- 12. long documents: local and memory-compressed attention (issue 43) ----

LONG_PATTERN = "LMLML"  # Liu et al.'s T-DMCA: L local, M memory-compressed
LONG_LAYERS = ("full-dense", "full-chunked", "local", "memory-compressed")
LONG_STACKS = ("full-dense", "full-chunked", "local", "LMLML", "MMMMM")
LONG_FULL = ("full-dense", "full-chunked")  # exact full causal attention
LONG_PLAIN = LONG_FULL + ("local",)  # as `TransformerDecoder` stacks


def long_names(scope):
    """Section 12's candidates of `scope` (`"layer"` or `"stack"`): the
    LMLML and MMMMM stacks only where `ka.layers.MemoryCompressedDecoder`
    exists (a note says so otherwise)."""
    if scope == "layer":
        return LONG_LAYERS
    if hasattr(ka.layers, "MemoryCompressedDecoder"):
        return LONG_STACKS
    print(
        "Note: this checkout has no `ka.layers.MemoryCompressedDecoder`: the "
        "LMLML and MMMMM stacks are skipped.\n"
    )
    return tuple(name for name in LONG_STACKS if name in LONG_PLAIN)


def long_layer(name, args):
    """One causal self-attention layer of section 12: `(layer, call)`,
    `call(x)` `(B, T, D)` -> `(B, T, D)`."""
    heads, size = args.long_heads, args.long_width // args.long_heads
    if name == "memory-compressed":
        layer = ka.layers.MemoryCompressedAttention(
            heads, size, compression_factor=args.long_factor
        )
    else:
        # `local`: t2t's local_mask_right, on the chunked path.
        local = ka.modifiers.BlockLocal1D(args.long_block, args.long_block)
        layer = ka.layers.MultiHeadAttention(
            heads,
            size,
            attention_impl="dense" if name == "full-dense" else "chunked",
            mask_modifier=local if name == "local" else None,
        )
    return layer, lambda x: layer(x, x, use_causal_mask=True)


def long_stack(name, args):
    """A decoder-only stack of `len(LONG_PATTERN)` pre-LN layers:
    `(layer, call)` as `long_layer`."""
    common = dict(
        num_heads=args.long_heads,
        intermediate_dim=4 * args.long_width,
        normalize_first=True,
    )
    if name in LONG_PLAIN:
        local = ka.modifiers.BlockLocal1D(args.long_block, args.long_block)
        layer = ka.layers.TransformerDecoder(
            len(LONG_PATTERN),
            attention_impl="dense" if name == "full-dense" else "chunked",
            mask_modifier=local if name == "local" else None,
            **common,
        )
    else:
        layer = ka.layers.MemoryCompressedDecoder(
            layer_pattern=name,
            compression_factor=args.long_factor,
            local_block_size=args.long_block,
            attention_impl="chunked",
            **common,
        )
    return layer, lambda x: layer(x)


def long_step(scope, name, backward, args):
    """Candidate `name` of `scope` built, as an XLA-compiled `x -> output`,
    or with `backward` `x -> gradients of sum(output)` w.r.t. `x` and every
    trainable weight."""
    layer, call = (long_layer if scope == "layer" else long_stack)(name, args)
    call(tf.zeros((args.long_batch, min(8, args.long_block), args.long_width)))

    @tf.function(jit_compile=True, reduce_retracing=False)
    def step(x):
        if not backward:
            return call(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(call(x))
        return tape.gradient(loss, [x, *layer.trainable_weights])

    return step


def long_point(spec, length, args):
    """Child process of `long_documents_section`: `spec` is
    `MODE-SCOPE-NAME`, MODE `fb` (forward+backward) or `fwd`."""
    mode, scope, name = spec.split("-", 2)
    step = long_step(scope, name, mode == "fb", args)
    x = tf.random.normal((args.long_batch, length, args.long_width))
    _report_memory(lambda: block(step(x)), args.second_call)


def dense_scores_bytes(scope, name, length, backward, args):
    """Bytes of the float32 `(B, N, L, L)` score tensors the dense full
    candidate holds at once (every layer's weights kept for the backward
    pass, and two more while it runs; two in a forward pass); 0 for the
    others, whose attention is chunked."""
    if name != "full-dense":
        return 0
    layers = 1 if scope == "layer" else len(LONG_PATTERN)
    held = layers + 2 if backward else 2
    return held * args.long_batch * args.long_heads * length**2 * 4


def score_share(scope, name, length, args):
    """The score entries one head computes per layer, over `L^2` (averaged
    over a stack's layers): dense full `L^2`; chunked full causal the
    blocks on and below the diagonal (the op's plan); local its own and
    the previous block (`BlockLocal1D(b, b)`, `~2 b L`); memory-compressed
    its memory `1 + ceil(L / f)` long, dense below the chunked path's
    threshold, else the key blocks `CompressedCausalMask(f).key_range`
    leaves each query block (`~L^2 / (2 f)`): still quadratic in `L`."""
    if scope == "stack" and name not in LONG_PLAIN:
        kinds = ["local" if c == "L" else "memory-compressed" for c in name]
        return sum(score_share("layer", k, length, args) for k in kinds) / len(kinds)
    if name == "full-dense":
        return 1.0
    if name == "memory-compressed":
        return compressed_score_share(length, args)
    if name == "local":
        size, blocks = args.long_block, -(-length // args.long_block)
        return (2 * blocks - 1) * min(size, length) ** 2 / length**2
    plan = plan_blocks(
        args.long_batch,
        length,
        length,
        args.long_heads,
        args.long_width // args.long_heads,
        runtime="tensorflow-xla",
        device="cpu",
    )
    blocks = -(-length // plan.query_block)
    return blocks * (blocks + 1) / 2 * min(plan.query_block, length) ** 2 / length**2


def compressed_score_share(length, args):
    """`score_share` of the causal memory-compressed layer: the entries of
    the plan `MemoryCompressedAttention`'s default path follows."""
    factor, heads = args.long_factor, args.long_heads
    memory = 1 + -(-length // factor)
    shape = (args.long_batch, length, heads, args.long_width // heads)
    modifier = CompressedCausalMask(factor)
    path = plan_attention(
        "auto",
        query_shape=shape,
        key_shape=(shape[0], memory, *shape[2:]),
        mask_modifier=modifier,
    ).impl
    if path != "chunked":
        return memory / length
    plan = plan_blocks(
        shape[0],
        length,
        memory,
        heads,
        shape[3],
        runtime="tensorflow-xla",
        device="cpu",
    )
    qb, kb, entries = plan.query_block, plan.key_block, 0
    for start in range(0, length, qb):
        stop = min(start + qb, length)
        keys = min(-(-modifier.key_range(start, stop)[1] // kb) * kb, memory)
        entries += (stop - start) * keys
    return entries / length**2


def long_documents_section(args):
    b, d, n = args.long_batch, args.long_width, args.long_heads
    print(
        f"\n### 12. Long documents (issue 43, Liu et al. 2018): local and "
        f"memory-compressed attention vs full causal attention, float32 under "
        f"XLA, B={b}, d_model {d}, {n} heads, key_dim {d // n}, local blocks "
        f"{args.long_block}, compression factor {args.long_factor}\n"
    )
    print(
        "Candidates, all causal: `full-dense` / `full-chunked` "
        '(`attention_impl="dense"` / `"chunked"`), `local` (chunked, '
        f"`mask_modifier=BlockLocal1D({args.long_block}, {args.long_block})`: "
        "a query sees its block and the one before), `memory-compressed` "
        "(`MemoryCompressedAttention`, its default `attention_impl`); stacks "
        f"of {len(LONG_PATTERN)} pre-LN layers (intermediate {4 * d}): "
        "`TransformerDecoder` (decoder-only) full or local, and "
        "`MemoryCompressedDecoder` `LMLML` (L local, M memory-compressed) and "
        "`MMMMM`. `ms`: median of interleaved rounds; `/ fastest full`: round by "
        "round over the faster exact full-causal candidate of the same row "
        "group (dense or chunked); `x L/2`: the median over the one at half "
        "the length (O(L^2): 4x, O(L): 2x). Memory: a fresh process per point "
        "(as in section 5), `XLA` the compiled step's own account, `peak` the "
        "process' peak RSS (TensorFlow's runtime included, ~0.9 GiB); "
        "`/ dense` over `full-dense`'s. `scores / L^2`: the score entries one "
        "head computes per layer (a stack's mean).\n"
    )
    print(
        "Memory compression alone only divides the L^2 cost by the factor: "
        f"causal `memory-compressed` computes ~`L^2 / (2 x {args.long_factor})` "
        "scores per head (its causal rule as `CompressedCausalMask`, whose "
        "key range lets the chunked path skip the slots a query block cannot "
        f"read yet), ~1/{args.long_factor} of causal chunked's ~`L^2/2`, and "
        "its time still grows 4x when L doubles; so does every M layer of "
        "LMLML and MMMMM. Only the local layers' cost grows as L.\n"
    )
    rows = {}
    for backward, lengths in (
        (True, args.long_lengths),
        (False, args.long_forward_lengths),
    ):
        for scope in ("layer", "stack"):
            mode = "forward+backward" if backward else "forward"
            rows[f"{scope}-{mode}"] = long_table(scope, backward, lengths, args)
    rows["targets"] = long_targets(rows["stack-forward+backward"], args.long_lengths)
    return rows


def long_table(scope, backward, lengths, args):
    """One of section 12's tables: candidates of `scope` at `lengths`."""
    label = "One layer" if scope == "layer" else f"{len(LONG_PATTERN)}-layer stack"
    print(f"\n{label}, {'forward+backward' if backward else 'forward only'}:\n")
    names = long_names(scope)
    print(
        "| L | candidate | scores / L^2 | ms | / fastest full | x L/2 | XLA MiB "
        "| / dense | peak GiB | / dense |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows, medians = [], {name: {} for name in names}
    for length in lengths:
        rows += long_rows(scope, names, length, backward, args, medians)
    return rows


def long_rows(scope, names, length, backward, args, medians):
    """One length of `long_table`: each candidate's memory in a fresh child
    process (first, while this process holds nothing large), then the
    candidates timed in interleaved rounds. A dense candidate whose score
    tensors alone would pass `--memory-cap-gib` is skipped; one that would
    pass `--long-timing-cap-gib` is measured in its child but not timed
    (this process holds every timed candidate at once)."""
    x = tf.random.normal((args.long_batch, length, args.long_width))
    skipped, untimed = {}, {}
    for name in names:
        need = dense_scores_bytes(scope, name, length, backward, args) / GIB
        for cap, flag, verdict, into in (
            (args.memory_cap_gib, "--memory-cap-gib", "skipped", skipped),
            (args.long_timing_cap_gib, "--long-timing-cap-gib", "not timed", untimed),
        ):
            if need > cap and name not in skipped:
                into[name] = (
                    f"{verdict}: its dense scores need ~{need:.0f} GiB > {flag} {cap:g}"
                )
    memory = {
        name: long_memory(scope, name, length, backward, args)
        for name in names
        if name not in skipped
    }
    fns = {}
    for name in names:
        if name not in skipped and name not in untimed:
            step = long_step(scope, name, backward, args)
            fns[name] = lambda step=step: block(step(x))
    times = interleaved(fns, args.rounds)
    full = [name for name in LONG_FULL if name in times]  # chunked always runs
    anchor = min(full, key=lambda name: np.median(times[name]))
    rows = []
    for name in names:
        row = dict(length=length, name=name, anchor=anchor)
        row["share"] = score_share(scope, name, length, args)
        if name in skipped or name in untimed:
            row["status"] = skipped.get(name) or untimed[name]
            row["memory"] = memory.get(name)
            cells = f"{row['status']} | - | - | " if name in untimed else row["status"]
            if name in untimed:
                cells += " | ".join(memory_cells(row, memory)) + " |"
            print(f"| {length} | {name} | {row['share']:.3f} | {cells}", flush=True)
        else:
            medians[name][length] = float(np.median(times[name]))
            row["growth"] = growth(medians[name], 2)[length]
            print(long_row(row, times, memory), flush=True)
        rows.append(row)
    return rows


# Under `--smoke`, the candidates whose memory is measured: the dense anchor
# of the "/ dense" columns and the T-DMCA layer and stack of issue 43's
# targets. The other children run the same code, and each costs a
# TensorFlow start and a compilation (the smoke test's time is CI's).
LONG_SMOKE_MEMORY = ("full-dense", "memory-compressed", LONG_PATTERN)


def long_memory(scope, name, length, backward, args):
    """The memory of one of section 12's points, in a fresh child process.
    Under `--smoke` only the forward+backward points of `LONG_SMOKE_MEMORY`
    start one."""
    if args.smoke and not (backward and name in LONG_SMOKE_MEMORY):
        return {"status": "memory not measured under --smoke"}
    mode = "fb" if backward else "fwd"
    return run_child(f"long-{mode}-{scope}-{name}", length, args, xla_report=True)


def long_row(row, times, memory):
    """A measured row of `long_rows` (filled into `row`) as a table line."""
    name, anchor = row["name"], row["anchor"]
    t = times[name]
    row["ms"] = float(np.median(t)) * 1e3
    row["time_ratio"] = float(np.median(np.asarray(t) / times[anchor]))
    row["memory"] = memory[name]
    cells = [f"{np.median(t) * 1e3:.1f}", f"{ratio(t, times[anchor])} ({anchor})"]
    cells.append(times_four(row["growth"]))
    cells += memory_cells(row, memory)
    return (
        f"| {row['length']} | {name} | {row['share']:.3f} | " + " | ".join(cells) + " |"
    )


def memory_cells(row, memory):
    """The four memory cells of a row (XLA MiB, / dense, peak GiB, / dense);
    the ratios also go into `row`."""
    result, dense = memory[row["name"]], memory.get("full-dense", {})
    if result["status"] != "ok":
        return [result["status"], "", "", ""]
    cells = []
    for key, scale, digits in (("xla_bytes", 2**20, 1), ("peak", GIB, 2)):
        share = result[key] / dense[key] if dense.get("status") == "ok" else None
        row[f"{key}_ratio"] = share
        cells += [
            f"{result[key] / scale:.{digits}f}",
            "-" if share is None else f"{share:.2f}",
        ]
    return cells


def target_verdict(value, target):
    """`0.31x: met (target <= 0.40x)` or `0.47x: missed by 0.07x (...)`."""
    if value is None:
        return "not measured"
    verdict = "met" if value <= target else f"missed by {value - target:.2f}x"
    return f"{value:.2f}x: {verdict} (target <= {target:.2f}x)"


def long_targets(rows, lengths):
    """Issue 43's targets for the LMLML stack's forward+backward at L=8192
    (at the longest length measured when 8192 is not): time <= 0.4x the
    fastest exact full-causal stack's, memory <= 1/3 of the dense one's."""
    length = 8192 if 8192 in lengths else max(lengths)
    where = "" if length == 8192 else f" (8192 not measured: at L={length})"
    row = next(
        (r for r in rows if r["length"] == length and r["name"] == "LMLML"), None
    )
    if row is None or "time_ratio" not in row:
        print(f"\nTargets of issue 43 at L=8192{where}: not measured (no LMLML row).")
        return None
    parts = [
        f"time over the fastest exact full causal stack's ({row['anchor']}) "
        + target_verdict(row["time_ratio"], 0.4)
    ]
    for key, label in (("xla_bytes", "XLA's account"), ("peak", "peak RSS")):
        verdict = target_verdict(row.get(f"{key}_ratio"), 1 / 3)
        parts.append(f"memory over full-dense's by {label} {verdict}")
    print(f"\nTargets of issue 43 at L=8192{where}, LMLML: " + "; ".join(parts) + ".")
    return dict(
        length=length,
        **{k: row.get(k) for k in ("time_ratio", "xla_bytes_ratio", "peak_ratio")},
    )


# -- main --------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=["graph", "xla"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument(
        "--memory-lengths",
        type=int,
        nargs="+",
        default=[2048, 4096, 8192, 16384, 32768, 65536],
    )
    parser.add_argument(
        "--memory-candidates",
        nargs="+",
        choices=("ours", "keras"),
        default=["ours", "keras"],
    )
    parser.add_argument("--memory-cap-gib", type=float, default=16.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per point, s")
    parser.add_argument(
        "--encoder-shape", type=int, nargs=4, default=[8, 256, 512, 2048]
    )
    parser.add_argument("--gen-dim", type=int, default=256)
    parser.add_argument("--gen-layers", type=int, default=4)
    parser.add_argument("--gen-vocab", type=int, default=8000)
    parser.add_argument("--gen-steps", type=int, default=128)
    parser.add_argument("--gen-batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--window-length", type=int, default=32768)
    parser.add_argument("--window-heads", type=int, default=1)
    parser.add_argument("--window-chunk", type=int, default=512)
    parser.add_argument(
        "--window-memory-lengths",
        type=int,
        nargs="+",
        default=[8192, 16384, 32768, 65536],
    )
    parser.add_argument(
        "--window-memory-candidates",
        nargs="+",
        choices=("op-window", "op-causal"),
        default=["op-window", "op-causal"],
    )
    parser.add_argument("--modifier-length", type=int, default=4096)
    parser.add_argument("--modifier-heads", type=int, default=8)
    parser.add_argument(
        "--modifier-chunk",
        type=int,
        default=None,
        help="block size of section 6 (default: the op's own under XLA, 256)",
    )
    parser.add_argument("--gqa-dim", type=int, default=512)
    parser.add_argument("--gqa-heads", type=int, default=8)
    parser.add_argument("--gqa-kv-heads", type=int, default=2)
    parser.add_argument("--gqa-layers", type=int, default=4)
    parser.add_argument("--gqa-batch", type=int, default=16)
    parser.add_argument("--gqa-max-length", type=int, default=2048)
    parser.add_argument("--gqa-steps", type=int, default=32)
    parser.add_argument("--mode-lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument(
        "--long-timing-cap-gib",
        type=float,
        default=16.0,
        help="section 12: a dense candidate whose score tensors pass this is "
        "measured for memory (in its own process) but not timed",
    )
    parser.add_argument("--long-length", type=int, default=65536)
    parser.add_argument(
        "--second-call",
        action="store_true",
        help="child processes time a second call however long the first took",
    )
    parser.add_argument(
        "--long-chunk",
        type=int,
        default=None,
        help="block size of section 10 (default: the op's own on a CPU under XLA, "
        "2048 from L=32768 on and 256 below)",
    )
    parser.add_argument(
        "--memory-modes", nargs="+", choices=MEMORY_MODES, default=list(MEMORY_MODES)
    )
    parser.add_argument("--lstmn-lengths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--lstmn-batch", type=int, default=8)
    parser.add_argument("--lstmn-units", type=int, default=128)
    parser.add_argument(
        "--long-lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192]
    )
    parser.add_argument(
        "--long-forward-lengths", type=int, nargs="+", default=[16384, 32768]
    )
    parser.add_argument("--long-batch", type=int, default=1)
    parser.add_argument("--long-width", type=int, default=256)
    parser.add_argument("--long-heads", type=int, default=4)
    parser.add_argument("--long-block", type=int, default=256)
    parser.add_argument("--long-factor", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round")
    parser.add_argument("--memory-point", nargs=2, metavar=("IMPL", "L"))
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.batch, args.heads, args.key_dim = 1, 2, 2, 8
        args.lengths, args.matmul_size, args.memory_lengths = [16], 64, [32]
        args.encoder_shape = [2, 8, 16, 32]
        args.gen_dim, args.gen_layers, args.gen_vocab = 16, 1, 50
        args.gen_steps, args.gen_batches = 4, [2]
        # Section 8: two of the five modes, compiled and a graph traced for
        # an unknown length (the others go through the same child harness,
        # and each child costs CI a TensorFlow start and a compilation).
        args.modes, args.memory_modes = ["xla"], ["xla", "graph-unknown"]
        args.window, args.window_length, args.window_heads = 8, 64, 1
        args.window_chunk, args.window_memory_lengths = 16, [64]
        args.modifier_length, args.modifier_heads, args.modifier_chunk = 32, 2, 16
        args.gqa_dim, args.gqa_heads, args.gqa_kv_heads = 16, 4, 2
        args.gqa_layers, args.gqa_batch = 1, 2
        args.gqa_max_length, args.gqa_steps = 8, 4
        args.mode_lengths, args.long_length = [32], 64
        args.lstmn_lengths, args.lstmn_batch, args.lstmn_units = [8, 32], 2, 8
        args.long_lengths, args.long_forward_lengths = [32], [64]
        args.long_width, args.long_heads, args.long_block = 16, 2, 8
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.memory_point:
        impl, length = args.memory_point
        memory_point(impl, int(length), args)
        return {}
    header(args)
    sections = {
        "layer": layer_section,
        "memory": memory_section,
        "encoder": encoder_section,
        "generation": generation_section,
        "window": window_section,
        "modifier": modifier_section,
        "gqa": gqa_section,
        "modes": modes_section,
        "bf16": bf16_section,
        "long": long_section,
        "lstmn": lstmn_section,
        "long_documents": long_documents_section,
    }
    results = {}
    for name in args.sections:
        results[name] = sections[name](args)
    return results


if __name__ == "__main__":
    main()
