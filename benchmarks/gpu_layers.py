"""The `layers` section of `benchmarks/gpu_check.py` (see its docstring).

A bfloat16 matmul timed as the ceiling, then, per `(dtype, shape)`, the
three candidates (`ours`, `keras`, `op`) compiled, run once and timed in
interleaved rounds: one table row per candidate.
"""

import gc
import sys
import time
import traceback

from benchmarks.gpu_common import CANDIDATES
from benchmarks.gpu_common import count_text
from benchmarks.gpu_common import median
from benchmarks.gpu_common import plan_names
from benchmarks.gpu_common import short_error
from benchmarks.gpu_common import spread

# About 3 minutes on an H200 with compilation (an estimate: no GPU has been
# lent yet): L = 1k-32k, 8-16 heads, key_dim 64 and 128.
DEFAULT_SHAPES = {
    "bfloat16": [
        (8, 1024, 16, 64),
        (8, 2048, 16, 128),
        (4, 4096, 16, 64),
        (2, 8192, 8, 128),
        (1, 16384, 16, 64),
        (1, 32768, 8, 128),
    ],
    "float16": [(4, 4096, 16, 64), (1, 16384, 8, 128)],
    "float32": [(8, 1024, 16, 64), (1, 4096, 8, 128), (1, 16384, 8, 64)],
}
SMOKE_SHAPES = [(1, 128, 2, 16)]
POLICIES = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
REPEAT_S = 0.02  # a timed sample of the layers section lasts at least this
HEADER = (
    "| dtype | B | L | N | H | candidate | ms | TFLOP/s | % of matmul "
    "| / keras | fmha | plan | dx vs keras | XLA temp GiB | compile s |"
)
RULE = "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"


# -- measuring ------------------------------------------------------------------


def fmha_calls(hlo_text):
    """Lines of a compiled program naming cuDNN's fused attention."""
    return sum(
        1
        for line in hlo_text.splitlines()
        if "cudnn" in line.lower() and "fmha" in line.lower()
    )


def relative_error(x, reference):
    """`max |x - reference| / max |reference|`, on the device."""
    import jax.numpy as jnp

    try:
        x = jnp.asarray(x, "float32")
        reference = jnp.asarray(reference, "float32")
        scale = jnp.maximum(jnp.max(jnp.abs(reference)), 1e-30)
        return float(jnp.max(jnp.abs(x - reference)) / scale)
    except Exception:  # out of memory, say: the row stands without it
        traceback.print_exc(file=sys.stderr)
        return None


def layer_shapes(args):
    """`[(dtype, (B, L, N, H)), ...]` in the order they run."""
    out = []
    for dtype in args.dtypes:
        shapes = args.shapes or (SMOKE_SHAPES if args.smoke else DEFAULT_SHAPES[dtype])
        out += [(dtype, tuple(shape)) for shape in shapes]
    return out


def interleaved(calls, rounds, max_s, clock, min_rounds=2):
    """Rounds A B C A B C ... of compiled zero-argument callables; a
    callable leaves the rounds once it has `min_rounds` times adding up to
    `max_s` (or, past the budget, `min_rounds` times). A callable that
    raises is dropped and its error returned."""
    import jax

    times = {name: [] for name in calls}
    errors = {}
    active = list(calls)
    for _ in range(rounds):
        for name in list(active):
            try:
                t0 = time.perf_counter()
                jax.block_until_ready(calls[name]())
                times[name].append(time.perf_counter() - t0)
            except Exception as exc:  # out of memory at run time, say
                traceback.print_exc(file=sys.stderr)
                errors[name] = short_error(exc)
                active.remove(name)
                continue
            enough = sum(times[name]) >= max_s or clock.over()
            if len(times[name]) >= min_rounds and enough:
                active.remove(name)
        if not active:
            break
    return times, errors


def matmul_ceiling(args, report):
    import jax
    import jax.numpy as jnp

    m = args.matmul_size
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    a = jax.random.normal(keys[0], (m, m), "bfloat16")
    c = jax.random.normal(keys[1], (m, m), "bfloat16")
    matmul = jax.jit(jnp.matmul).lower(a, c).compile()
    jax.block_until_ready(matmul(a, c))
    times = []
    for _ in range(max(args.rounds, 5)):
        t0 = time.perf_counter()
        jax.block_until_ready(matmul(a, c))
        times.append(time.perf_counter() - t0)
    mm_median, mm_text = spread(times)
    ceiling = 2 * m**3 / mm_median
    report.meta["matmul"] = dict(
        size=m, dtype="bfloat16", seconds=times, tflops_median=ceiling / 1e12
    )
    report.add(
        f"bfloat16 matmul {m}x{m}x{m} (jax.jit): {mm_text} ms, "
        f"**{ceiling / 1e12:.4g} TFLOP/s** (median; best "
        f"{2 * m**3 / min(times) / 1e12:.4g}): the ceiling below."
    )
    report.add()
    return ceiling


# -- the candidates ---------------------------------------------------------------


def paired_layers(n, h, dtype):
    """`(ours, keras')`, built, ours with Keras' weights: the same function,
    so that their input gradients can be compared."""
    import jax.numpy as jnp
    import keras

    import keras_attention as ka

    policy = POLICIES.get(dtype, dtype)
    theirs = keras.layers.MultiHeadAttention(n, h, dtype=policy)
    ours = ka.layers.MultiHeadSelfAttention(n, h, dtype=policy)
    tiny = jnp.zeros((1, 8, n * h), dtype)
    theirs(tiny, tiny)
    ours(tiny)
    ours.copy_multi_head_attention_weights(theirs)
    return ours, theirs


def layer_candidate(layer, two_inputs, shape, dtype, causal, keys, flops):
    """The gradients of `sum(layer(x) * g)` w.r.t. the weights and `x`."""
    import jax
    import jax.numpy as jnp

    b, length, n, h = shape
    x = jax.random.normal(keys[0], (b, length, n * h), dtype)
    g = jax.random.normal(keys[1], (b, length, n * h), "float32")
    trainable = [v.value for v in layer.trainable_variables]
    frozen = [v.value for v in layer.non_trainable_variables]

    def loss(trainable, x, g):
        inputs = (x, x) if two_inputs else (x,)
        output, _ = layer.stateless_call(
            trainable, frozen, *inputs, use_causal_mask=causal
        )
        return jnp.sum(output.astype("float32") * g)

    return jax.grad(loss, argnums=(0, 1)), (trainable, x, g), flops


def op_candidate(shape, dtype, causal, keys, flops):
    """The gradients of `sum(dot_product_attention(q, k, v) * g)`."""
    import jax
    import jax.numpy as jnp
    import keras

    q, k, v = (jax.random.normal(r, shape, dtype) for r in keys[2:5])
    g = jax.random.normal(keys[5], shape, "float32")

    def loss(q, k, v, g):
        out = keras.ops.dot_product_attention(q, k, v, is_causal=causal)
        return jnp.sum(out.astype("float32") * g)

    return jax.grad(loss, argnums=(0, 1, 2)), (q, k, v, g), flops


def build_candidates(args, dtype, shape):
    """name -> a zero-argument maker of `(function, inputs, flops)`:
    `function(*inputs)` gives the gradients of `sum(out * g)`; `flops` of
    forward+backward."""
    import jax

    b, length, n, h = shape
    d = n * h
    causal = args.causal
    keys = jax.random.split(jax.random.PRNGKey(length * 131 + n * 7 + h), 6)
    attention_flops = 4 * b * n * length**2 * h / (2 if causal else 1)
    layer_flops = 3 * (attention_flops + 8 * b * length * d * d)
    ours, theirs = paired_layers(n, h, dtype)
    common = (shape, dtype, causal, keys)
    makers = {
        "ours": lambda: layer_candidate(ours, False, *common, layer_flops),
        "keras": lambda: layer_candidate(theirs, True, *common, layer_flops),
        "op": lambda: op_candidate(*common, 3 * attention_flops),
    }
    return {name: makers[name] for name in CANDIDATES if name in args.candidates}


def program_facts(exe):
    """`(XLA temp GiB, cuDNN fused-attention calls)` of a compiled program,
    None where the backend does not tell."""
    temp = fmha = None
    try:
        temp = exe.memory_analysis().temp_size_in_bytes / 2**30
    except Exception:  # not every backend reports it
        pass
    try:
        fmha = fmha_calls(exe.as_text())
    except Exception:
        pass
    return temp, fmha


def repeated_call(exe, inputs):
    """`(zero-argument callable, repeats)`: one timed sample."""
    import jax

    t0 = time.perf_counter()
    jax.block_until_ready(exe(*inputs))
    # Calls shorter than REPEAT_S run back to back `repeats` times per
    # sample (one stream: waiting for the last waits for all), so that
    # dispatch and the wait weigh little on short calls.
    repeats = max(1, min(50, int(REPEAT_S / max(time.perf_counter() - t0, 1e-6))))

    def call():
        for _ in range(repeats - 1):
            exe(*inputs)
        return exe(*inputs)

    return call, repeats


def compile_candidate(make):
    """`(zero-argument callable, info)`: compiled, run once."""
    import jax

    import keras_attention as ka

    function, inputs, flops = make()
    t0 = time.perf_counter()
    with ka.ops.recording_attention_plans() as plans:
        lowered = jax.jit(function).lower(*inputs)
    exe = lowered.compile()
    compile_s = time.perf_counter() - t0
    temp, fmha = program_facts(exe)
    result = jax.block_until_ready(exe(*inputs))  # the first call, not timed
    # The input gradient of the layers (for the comparison with Keras').
    dx = result[1] if isinstance(result[0], list) else None
    del result
    call, repeats = repeated_call(exe, inputs)
    names = list(dict.fromkeys(plan_names(plans)))  # unique, in order
    info = dict(compile_s=compile_s, temp_gib=temp, fmha_calls=fmha, flops=flops)
    info.update(plans=names, repeats=repeats, dx=dx)
    return call, info


def compile_candidates(makers, clock):
    """`(name -> callable, name -> info)`; a candidate that cannot compile
    (or is past the budget) has only an `error` in its info."""
    compiled, info = {}, {}
    for name, make in makers.items():
        if clock.over():
            info[name] = dict(error=clock.skip_reason())
            continue
        try:
            compiled[name], info[name] = compile_candidate(make)
        except Exception as exc:  # out of memory, an unsupported op...
            traceback.print_exc(file=sys.stderr)
            info[name] = dict(error=short_error(exc))
    return compiled, info


# -- the rows -------------------------------------------------------------------


def legend(args):
    causal = args.causal
    return (
        "Gradients of `sum(out * g)` w.r.t. the input and every weight "
        "(`op`: q, k, v) under `jax.jit`; "
        f"{'causal' if causal else 'no mask'}; `ours` = "
        "`ka.layers.MultiHeadSelfAttention(N, H)` (auto) on x `(B, L, N*H)`, "
        "`keras` = `keras.layers.MultiHeadAttention(N, H)` on (x, x), `op` = "
        "`keras.ops.dot_product_attention` on q, k, v `(B, L, N, H)`. bfloat16: "
        "Keras' mixed_bfloat16 policy for the layers. FLOPs: attention 4 B N "
        f"L^2 H{' / 2 (causal)' if causal else ''} forward, layers + 8 B L D^2 "
        "(projections), x3 for forward+backward. ms: per call, median (min-max) "
        f"of at most {args.rounds} interleaved rounds (calls under "
        f"{REPEAT_S * 1e3:g} ms repeated back to back within a round; a "
        "candidate stops after "
        f"{args.max_candidate_s:g} s and 2 rounds); / keras: median of the "
        "per-round time ratios to `keras` (target for ours: <= 1.05 where both "
        "run cuDNN); fmha: cuDNN fused-attention calls in the compiled program; "
        "plan: what `ours`' attention took (recording_attention_plans); dx vs "
        "keras: max |dx - dx_keras| / max |dx_keras| of the input gradient "
        "(ours has Keras' weights)."
    )


def add_timing(row, samples, keras_times, ceiling):
    """Per-call seconds, TFLOP/s and the ratio to `keras` into `row`."""
    seconds = [t / row["repeats"] for t in samples]
    mid = spread(seconds)[0]
    tflops = row["flops"] / mid / 1e12
    ratio = None
    if keras_times:
        pairs = list(zip(seconds, keras_times, strict=False))
        ratio = median([a / c for a, c in pairs])
    row.update(
        seconds=seconds, median_s=mid, tflops=tflops,
        pct_of_matmul=100 * tflops * 1e12 / ceiling,
        ratio_to_keras=ratio, fused=bool(row["fmha_calls"]),
    )  # fmt: skip


def ratio_cell(row, keras_info, targets):
    """The `/ keras` cell; for `ours` where both layers ran cuDNN, whether
    it met the target (into `row` and `targets`)."""
    ratio = row["ratio_to_keras"]
    text = "n/a" if ratio is None else f"{ratio:.3f}"
    if row["candidate"] == "ours" and ratio is not None:
        keras_fused = bool(keras_info.get("fmha_calls"))
        if row["fused"] and keras_fused:
            met = ratio <= 1.05
            row["target_met"] = met
            targets.append(met)
            text += " (ok)" if met else " (MISSED: > 1.05)"
    return text


def row_line(cells, row, ratio_text):
    name = row["candidate"]
    fmha = (
        "?"
        if row["fmha_calls"] is None
        else (f"yes ({row['fmha_calls']})" if row["fused"] else "no")
    )
    temp = "?" if row["temp_gib"] is None else f"{row['temp_gib']:.3g}"
    plan = count_text(row["plans"]) if name == "ours" else "-"
    dx_err = row.get("dx_rel_err")
    dx_err = "-" if dx_err is None else f"{dx_err:.1e}"
    return (
        f"{cells}| {name} | {spread(row['seconds'])[1]} | {row['tflops']:.4g} "
        f"| {row['pct_of_matmul']:.1f}% | {ratio_text} | {fmha} | {plan} "
        f"| {dx_err} | {temp} | {row['compile_s']:.1f} |"
    )


def add_candidate_rows(report, base, cells, info, times, ceiling):
    """One row per candidate of a shape; `[met]` where `ours` has a target."""
    keras_times = keras_dx = None
    if "error" not in info.get("keras", {"error": "not asked for"}):
        keras_times = [t / info["keras"]["repeats"] for t in times["keras"]]
        keras_dx = info["keras"]["dx"]
    targets = []
    for name, row in info.items():
        row = dict(base, candidate=name, **row)
        dx = row.pop("dx", None)
        usable = dx is not None and keras_dx is not None and "error" not in row
        if usable and name != "keras":
            row["dx_rel_err"] = relative_error(dx, keras_dx)
        if "error" in row:
            report.row(row, f"{cells}| {name} | {row['error']} |")
            continue
        add_timing(row, times[name], keras_times, ceiling)
        ratio_text = ratio_cell(row, info.get("keras", {}), targets)
        report.row(row, row_line(cells, row, ratio_text))
        if name == "ours" and any("cudnn" in p for p in row["plans"]):
            if not row["fused"]:
                report.add(
                    f"{cells}| (note) | the plan says cuDNN but the compiled "
                    "program has no cuDNN fused attention |"
                )
    return targets


def add_shape_rows(args, report, clock, dtype, shape, ceiling):
    """The rows of one `(dtype, shape)`; `[met]` where `ours` has a target."""
    b, length, n, h = shape
    cells = f"| {dtype} | {b} | {length} | {n} | {h} "
    base = dict(
        section="layers", dtype=dtype, batch=b, length=length, heads=n,
        key_dim=h, causal=args.causal,
    )  # fmt: skip
    try:
        makers = build_candidates(args, dtype, shape)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        for name in args.candidates:
            row = dict(base, candidate=name, error=short_error(exc))
            report.row(row, f"{cells}| {name} | {row['error']} |")
        return []
    compiled, info = compile_candidates(makers, clock)
    times, errors = (
        interleaved(compiled, args.rounds, args.max_candidate_s, clock)
        if compiled
        else ({}, {})
    )
    for name, error in errors.items():
        info[name] = dict(info[name], error=error)
    targets = add_candidate_rows(report, base, cells, info, times, ceiling)
    del compiled, makers, info  # this shape's buffers, before the next shape
    gc.collect()
    return targets


def layers_section(args, report, clock):
    report.add("### 1. Attention layers, forward+backward")
    report.add()
    ceiling = matmul_ceiling(args, report)
    report.add(legend(args))
    report.add()
    report.add(HEADER)
    report.add(RULE)
    targets = []
    for dtype, shape in layer_shapes(args):
        targets += add_shape_rows(args, report, clock, dtype, shape, ceiling)
    report.add()
    if targets:
        report.add(
            f"Target ours/keras <= 1.05 where both run cuDNN: met on "
            f"{sum(targets)} of {len(targets)} shape(s)."
        )
    else:
        report.add(
            "Target ours/keras <= 1.05: no shape where both layers ran cuDNN's "
            "fused attention (none on a CPU)."
        )
    report.meta["layers_target"] = dict(met=sum(targets), shapes=len(targets))
    report.add()
