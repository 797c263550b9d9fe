"""Attention throughput under JAX (bfloat16): dense vs chunked vs Keras.

The benchmark half of `benchmarks/gpu_check.sh` (issue 6, "GPU"): for
machines that have JAX but not TensorFlow. Runs on whatever device JAX
gives (GPU, or CPU with `--smoke`), with `KERAS_BACKEND=jax`.

For each length L (default 4096 and 16384; `--smoke`: 256 and 512), with
B=1, 8 heads, key_dim 64, inputs `(B, L, N, H)` in `--dtype` (bfloat16):

- `dense`: `keras_attention.ops.dot_product_attention` (the `(B, N, L, L)`
  weights in float32, the matmuls in the input dtype);
- `chunked-<C>`: `keras_attention.ops.chunked_attention` with query and key
  blocks of C (`--chunk-sizes`; 512 is the library's default), exact, O(L)
  memory, its blocks computed in float32;
- `keras`: `keras.ops.dot_product_attention` (on a GPU with bf16 inputs
  Keras may dispatch to cuDNN's fused attention): the anchor.

each forward (`fwd`) and forward+backward (`fwd+bwd`: gradients of
`sum(out * g)` w.r.t. Q, K, V for a fixed random `g`), compiled once with
`jax.jit` (`.lower().compile()`: the compile time and XLA's temporary
buffer size are reported), then `--rounds` rounds interleaved across the
candidates, each call ended by `block_until_ready`; the median and min-max
are reported. FLOPs are counted as `4 B N L^2 H` forward (Q K^T and P V) and
3x that for forward+backward (recomputation not counted), halved with
`--causal`. Achieved TFLOP/s are compared with a square bfloat16 matmul
(`--matmul-size`, 8192) timed in the same run. Each row also gives the
largest difference to the dense result (outputs, or the three gradients),
relative to the dense result's largest magnitude.

A markdown report goes to stdout and to `--output` (default
`$OUT/gpu_check.md` when `OUT` is set), rewritten after every row so that a
run cut short keeps what it measured, with a JSON copy beside it. A
candidate that fails (out of memory, say) is reported as failed and the run
goes on; once `--budget-s` seconds have passed the remaining rows are
skipped. Exit status 1 when a row failed or was skipped.

    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/gpu_check.py
    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/gpu_check.py --smoke
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PASSES = ("fwd", "fwd+bwd")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=None)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument(
        "--impls",
        nargs="+",
        default=["dense", "chunked", "keras"],
        choices=["dense", "chunked", "keras"],
    )
    parser.add_argument("--chunk-sizes", type=int, nargs="+", default=None)
    parser.add_argument("--passes", nargs="+", default=list(PASSES), choices=PASSES)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--matmul-size", type=int, default=None)
    parser.add_argument(
        "--budget-s",
        type=float,
        default=100.0,
        help="skip the rows not started after this many seconds",
    )
    parser.add_argument("--output", default=None, help="markdown report path")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, 2 rounds (CPU, tests)"
    )
    args = parser.parse_args(argv)
    small = args.smoke
    if args.lengths is None:
        args.lengths = [256, 512] if small else [4096, 16384]
    if args.chunk_sizes is None:
        args.chunk_sizes = [128] if small else [512, 2048]
    if args.rounds is None:
        args.rounds = 2 if small else 10
    if args.matmul_size is None:
        args.matmul_size = 256 if small else 8192
    if args.output is None and os.environ.get("OUT"):
        args.output = os.path.join(os.environ["OUT"], "gpu_check.md")
    for name in ("batch", "heads", "key_dim", "rounds", "matmul_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    if min(args.lengths + args.chunk_sizes) < 1:
        parser.error("--lengths and --chunk-sizes must be positive integers")
    return args


def spread(values, scale=1e3, digits=3):
    """`median (min-max)` of seconds, in milliseconds by default."""
    values = sorted(values)
    median = values[len(values) // 2]
    if len(values) % 2 == 0:
        median = (values[len(values) // 2 - 1] + median) / 2
    return median, (
        f"{median * scale:.{digits}g} "
        f"({values[0] * scale:.{digits}g}-{values[-1] * scale:.{digits}g})"
    )


def short_error(exc):
    """The first line of an exception, trimmed for a table cell."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    text = text.replace("|", "/")
    return text[:140] + ("..." if len(text) > 140 else "")


class Report:
    """Markdown lines printed as they come and rewritten to `path`."""

    def __init__(self, path):
        self.path = path
        self.lines = []
        self.rows = []
        self.meta = {}

    def add(self, line=""):
        print(line, flush=True)
        self.lines.append(line)
        self.save()

    def save(self):
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.splitext(self.path)[0] + ".json", "w") as f:
            json.dump({"meta": self.meta, "rows": self.rows}, f, indent=1)


def main(argv=None):
    args = parse_args(argv)
    start_time = time.perf_counter()
    try:
        import jax
        import jax.numpy as jnp
        import keras
        import numpy as np
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
    import keras_attention as ka

    device = jax.devices()[0]
    report = Report(args.output)
    b, n, h, dtype = args.batch, args.heads, args.key_dim, args.dtype
    report.meta = dict(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        device=f"{device.device_kind} ({device.platform}, {jax.device_count()} "
        "device(s))",
        jax=jax.__version__,
        keras=keras.__version__,
        python=platform.python_version(),
        host=f"{os.cpu_count()} CPUs, {platform.machine()}",
        args=vars(args),
    )
    report.add(
        f"## keras-attention GPU check: attention in {dtype} under JAX"
        + (" (SMOKE sizes)" if args.smoke else "")
    )
    report.add()
    report.add(
        f"{report.meta['date']}; device: {report.meta['device']}; "
        f"jax {jax.__version__}, keras {keras.__version__} (backend jax), "
        f"Python {report.meta['python']}, {report.meta['host']}."
    )
    report.add()

    def timed(fns, rounds):
        """Interleaved rounds A B A B ... of already compiled callables."""
        times = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                times[name].append(time.perf_counter() - t0)
        return times

    # -- the matmul ceiling -------------------------------------------------
    m = args.matmul_size
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    a = jax.random.normal(keys[0], (m, m), dtype)
    c = jax.random.normal(keys[1], (m, m), dtype)
    matmul = jax.jit(jnp.matmul).lower(a, c).compile()
    jax.block_until_ready(matmul(a, c))
    mm_times = timed({"mm": lambda: matmul(a, c)}, max(args.rounds, 5))["mm"]
    mm_median, mm_text = spread(mm_times)
    ceiling = 2 * m**3 / mm_median
    report.meta["matmul"] = dict(size=m, seconds=mm_times, tflops_median=ceiling / 1e12)
    report.add(
        f"{dtype} matmul {m}x{m}x{m} (jax.jit): {mm_text} ms, "
        f"**{ceiling / 1e12:.4g} TFLOP/s** (median; best "
        f"{2 * m**3 / min(mm_times) / 1e12:.4g}): the ceiling below."
    )
    report.add()
    report.add(
        f"B={b}, {n} heads, key_dim {h}, {'causal' if args.causal else 'no mask'}; "
        f"FLOPs 4 B N L^2 H forward, 3x forward+backward"
        f"{', halved (causal)' if args.causal else ''}; median (min-max) of "
        f"{args.rounds} interleaved rounds after compiling; rel. err = max |x - "
        "dense| / max |dense| over the output (fwd) or dQ, dK, dV (fwd+bwd)."
    )
    report.add()
    report.add(
        "| L | impl | pass | ms | TFLOP/s | % of matmul | XLA temp GiB "
        "| compile s | rel. err vs dense |"
    )
    report.add("|---|---|---|---|---|---|---|---|---|")

    def candidates():
        """name -> attention(q, k, v) -> (B, L, N, H)."""
        out = {}
        if "dense" in args.impls:

            def dense(q, k, v):
                mask = None
                if args.causal:
                    length = q.shape[1]
                    mask = ka.ops.causal_mask(length, length)
                return ka.ops.dot_product_attention(q, k, v, mask=mask)[0]

            out["dense"] = dense
        if "chunked" in args.impls:
            for size in args.chunk_sizes:

                def chunked(q, k, v, size=size):
                    return ka.ops.chunked_attention(
                        q,
                        k,
                        v,
                        causal=args.causal,
                        query_chunk_size=size,
                        key_chunk_size=size,
                    )

                out[f"chunked-{size}"] = chunked
        if "keras" in args.impls:

            def keras_attention(q, k, v):
                return keras.ops.dot_product_attention(q, k, v, is_causal=args.causal)

            out["keras"] = keras_attention
        return out

    def program(attend, kind):
        """`(q, k, v, g) ->` the output, or the gradients of `sum(out * g)`."""
        if kind == "fwd":
            return lambda q, k, v, g: attend(q, k, v)

        def loss(q, k, v, g):
            return jnp.sum(attend(q, k, v).astype("float32") * g)

        return jax.grad(loss, argnums=(0, 1, 2))

    def rel_error(result, reference):
        if reference is None:
            return "n/a"
        worst = 0.0
        for x, y in zip(
            jax.tree_util.tree_leaves(result),
            jax.tree_util.tree_leaves(reference),
            strict=True,
        ):
            x = np.asarray(x, "float32")
            y = np.asarray(y, "float32")
            scale = max(float(np.abs(y).max()), 1e-30)
            worst = max(worst, float(np.abs(x - y).max()) / scale)
        return f"{worst:.1e}"

    failures = skipped = 0
    for length in args.lengths:
        rng = jax.random.split(jax.random.PRNGKey(length), 4)
        shape = (b, length, n, h)
        q, k, v = (jax.random.normal(r, shape, dtype) for r in rng[:3])
        upstream = jax.random.normal(rng[3], shape, "float32")
        inputs = (q, k, v, upstream)
        flops = 4 * b * n * length**2 * h / (2 if args.causal else 1)
        for kind in args.passes:
            work = flops * (1 if kind == "fwd" else 3)
            compiled, info, reference = {}, {}, None
            for name, attend in candidates().items():
                elapsed = time.perf_counter() - start_time
                if elapsed > args.budget_s:
                    info[name] = dict(error=f"skipped: time budget ({elapsed:.0f} s)")
                    continue
                try:
                    t0 = time.perf_counter()
                    fn = jax.jit(program(attend, kind))
                    exe = fn.lower(*inputs).compile()
                    result = jax.block_until_ready(exe(*inputs))  # warm-up
                    compile_s = time.perf_counter() - t0
                    temp = None
                    try:
                        memory = exe.memory_analysis()
                        temp = memory.temp_size_in_bytes / 2**30
                    except Exception:  # not every backend reports it
                        pass
                    if name == "dense":
                        reference = result
                    info[name] = dict(
                        compile_s=compile_s,
                        temp_gib=temp,
                        rel_err="0 (reference)"
                        if name == "dense"
                        else rel_error(result, reference),
                    )
                    del result
                    compiled[name] = lambda exe=exe, args=inputs: exe(*args)
                except Exception as exc:  # out of memory, an unsupported op...
                    info[name] = dict(error=short_error(exc))
                    traceback.print_exc(file=sys.stderr)
            times = timed(compiled, args.rounds) if compiled else {}
            for name, row in info.items():
                row.update(length=length, impl=name, kind=kind)
                if "error" in row:
                    if row["error"].startswith("skipped"):
                        skipped += 1
                    else:
                        failures += 1
                    report.rows.append(row)
                    report.add(f"| {length} | {name} | {kind} | {row['error']} |")
                    continue
                median, text = spread(times[name])
                row.update(seconds=times[name], tflops=work / median / 1e12)
                report.rows.append(row)
                temp = "?" if row["temp_gib"] is None else f"{row['temp_gib']:.3g}"
                report.add(
                    f"| {length} | {name} | {kind} | {text} | {row['tflops']:.4g} "
                    f"| {100 * work / median / ceiling:.1f}% | {temp} "
                    f"| {row['compile_s']:.1f} | {row['rel_err']} |"
                )
            del compiled, reference
    report.add()
    total = time.perf_counter() - start_time
    report.meta["seconds"] = total
    report.add(
        f"Total {total:.0f} s; {failures} candidate(s) failed, {skipped} "
        "skipped (time budget)."
    )
    return 1 if failures or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
