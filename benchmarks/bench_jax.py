"""keras-attention against Keras and keras-hub on the JAX backend (CPU).

`bench.py` measures the targets on TensorFlow; this measures the
comparisons where JAX's XLA on a CPU chose differently (benchmarks/RESULTS.md,
2026-12-02, "JAX"), with the same method (one process, interleaved rounds,
ratios round by round; `bench.interleaved`, `spread`, `ratio`):

- `layer`: `MultiHeadSelfAttention` vs `keras.layers.MultiHeadAttention`,
  forward+backward (gradients of the input and all weights) under
  `jax.jit` through `stateless_call`, B=8, 8 heads, key_dim 64, at
  `--lengths`.
- `encoder`: one SGD train step of `TransformerEncoderBlock` vs
  `keras_hub.layers.TransformerEncoder` as `bench.py`'s section 3 ((8, 256,
  512), intermediate 2048, 8 heads, no dropout).
- `generation`: greedy generation with a KV cache, our `TransformerDecoder`
  vs a stack of `keras_hub.layers.TransformerDecoder` (`bench.py`'s
  `greedy_generators`, as in its section 4: 128 tokens, d_model 256, 4
  heads, 4 layers, vocab 8000, one `fori_loop`, here under `jax.jit`) at
  `--gen-batches`.
- `lstmn` (issue 42): `ka.layers.LSTMN` vs `keras.layers.LSTM` of the
  same width, forward+backward under `jax.jit` as `layer`, B=8, 128 units,
  at `--lstmn-lengths` (64, 256, 1024), with how each time grows from T/4
  to T (`bench.py`'s section 11 on TensorFlow, which also measures memory).

    make bench-jax
    KERAS_BACKEND=jax PYTHONPATH=. python benchmarks/bench_jax.py --smoke
"""

import argparse
import os
import platform
import sys
import time

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from bench import RECURRENT  # noqa: E402
from bench import generation_times  # noqa: E402
from bench import greedy_generators  # noqa: E402
from bench import growth  # noqa: E402
from bench import interleaved  # noqa: E402
from bench import ratio  # noqa: E402
from bench import recurrent_layer  # noqa: E402
from bench import spread  # noqa: E402
from bench import times_four  # noqa: E402
from keras import ops  # noqa: E402

import keras_attention as ka  # noqa: E402


def gradient_step(layer, arguments):
    """`jax.jit` of the gradients of `sum(layer(*arguments(x)))` with
    respect to the layer's trainable values and `x` (its non-trainable
    values, such as an RNN cell's seed, passed as they are)."""

    def loss(trainable, fixed, x):
        output, _ = layer.stateless_call(trainable, fixed, *arguments(x))
        return ops.sum(output)

    grad = jax.jit(jax.grad(loss, argnums=(0, 2)))
    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]
    return lambda x: jax.block_until_ready(grad(trainable, fixed, x))


def layer_section(args):
    b, h, dk = args.batch, args.heads, args.key_dim
    d = h * dk
    print(
        f"\n### 1. MultiHeadSelfAttention vs keras.layers.MultiHeadAttention, "
        f"forward+backward under jax.jit (B={b}, {h} heads, key_dim {dk})\n"
    )
    print("| L | ours s | Keras s | ours/Keras |")
    print("|---|---|---|---|")
    rows = []
    for length in args.lengths:
        x = jax.random.normal(jax.random.PRNGKey(0), (b, length, d))
        ours = ka.layers.MultiHeadSelfAttention(h, dk)
        theirs = keras.layers.MultiHeadAttention(h, dk)
        ours(x)
        theirs(x, x)
        steps = {
            "ours": gradient_step(ours, lambda x: (x,)),
            "keras": gradient_step(theirs, lambda x: (x, x)),
        }
        times = interleaved(
            {name: lambda step=step, x=x: step(x) for name, step in steps.items()},
            args.rounds,
        )
        o, k = times["ours"], times["keras"]
        rows.append(dict(length=length, ratio=float(np.median(np.divide(o, k)))))
        print(f"| {length} | {spread(o, 4)} | {spread(k, 4)} | {ratio(o, k)} |")
    return rows


def encoder_section(args):
    import keras_hub

    shape, inter = (args.batch, args.encoder_length, args.heads * args.key_dim), 2048
    print(
        f"\n### 2. Encoder train step under jax.jit: TransformerEncoderBlock vs "
        f"keras_hub.layers.TransformerEncoder, {shape}, intermediate {inter}, "
        f"{args.heads} heads, no dropout\n"
    )
    print("| ours s | keras-hub s | ours/keras-hub |")
    print("|---|---|---|")
    x = jax.random.normal(jax.random.PRNGKey(0), shape)
    ours = ka.layers.TransformerEncoderBlock(
        num_heads=args.heads, intermediate_dim=inter, dropout=0.0
    )
    theirs = keras_hub.layers.TransformerEncoder(inter, args.heads, dropout=0.0)
    steps = {}
    for name, layer in (("ours", ours), ("keras-hub", theirs)):
        layer(x)
        steps[name] = sgd_step(layer, x)
    times = interleaved(steps, args.rounds)
    o, k = times["ours"], times["keras-hub"]
    print(f"| {spread(o, 4)} | {spread(k, 4)} | {ratio(o, k)} |")
    return [dict(ratio=float(np.median(np.divide(o, k))))]


def sgd_step(layer, x):
    """`jax.jit` of one SGD step (learning rate 0.01) on the mean squared
    output, as `bench.py`'s section 3 (a zero-argument callable)."""

    def loss(trainable, x):
        output, _ = layer.stateless_call(trainable, [], x)
        return ops.mean(ops.square(output))

    @jax.jit
    def step(trainable, x):
        grads = jax.grad(loss)(trainable, x)
        return [v - 0.01 * g for v, g in zip(trainable, grads, strict=True)]

    trainable = [v.value for v in layer.trainable_variables]
    return lambda: jax.block_until_ready(step(trainable, x))


def generation_section(args):
    d, layers, vocab, steps, heads = 256, 4, 8000, args.gen_steps, 4
    print(
        f"\n### 3. Greedy generation with a KV cache under jax.jit: {steps} "
        f"tokens, d_model {d}, {heads} heads, {layers} layers, vocab {vocab}\n"
    )
    print("| batch | ours s | keras-hub s | speed-up |")
    print("|---|---|---|---|")
    generators = greedy_generators(d, layers, heads, vocab, steps)
    rows = []
    for batch in args.gen_batches:
        times = generation_times(generators, batch, jax.jit, args.rounds)
        o, k = times["ours"], times["keras-hub"]
        speedup = np.divide(k, o)
        rows.append(dict(batch=batch, speedup=float(np.median(speedup))))
        print(f"| {batch} | {spread(o)} | {spread(k)} | {spread(speedup, 2)} |")
    return rows


def lstmn_section(args):
    b, u = args.lstmn_batch, args.lstmn_units
    print(
        f"\n### 4. LSTMN vs keras.layers.LSTM (issue 42), forward+backward under "
        f"jax.jit (gradients of the input and all weights), B={b}, {u} units, "
        f"{u} input features\n"
    )
    print("| T | LSTMN s | LSTM s | LSTMN/LSTM | LSTMN x T/4 | LSTM x T/4 |")
    print("|---|---|---|---|---|---|")
    rows, medians = [], {name: {} for name in RECURRENT}
    for length in args.lstmn_lengths:
        x = jax.random.normal(jax.random.PRNGKey(0), (b, length, u))
        steps = {}
        for name in RECURRENT:
            layer = recurrent_layer(name, u)
            layer(x[:, :4])
            steps[name] = gradient_step(layer, lambda x: (x,))
        times = interleaved(
            {name: lambda step=step, x=x: step(x) for name, step in steps.items()},
            args.rounds,
        )
        o, k = times["lstmn"], times["lstm"]
        for name in RECURRENT:
            medians[name][length] = float(np.median(times[name]))
        grow = {name: growth(medians[name])[length] for name in RECURRENT}
        rows.append(
            dict(length=length, ratio=float(np.median(np.divide(o, k))), growth=grow)
        )
        print(
            f"| {length} | {spread(o, 4)} | {spread(k, 4)} | {ratio(o, k)} "
            f"| {times_four(grow['lstmn'])} | {times_four(grow['lstm'])} |",
            flush=True,
        )
    return rows


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections", nargs="+", choices=("layer", "encoder", "generation", "lstmn"),
        default=["layer", "encoder", "generation", "lstmn"],
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--encoder-length", type=int, default=256)
    parser.add_argument("--gen-steps", type=int, default=128)
    parser.add_argument("--gen-batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--lstmn-lengths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--lstmn-batch", type=int, default=8)
    parser.add_argument("--lstmn-units", type=int, default=128)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.batch, args.lengths, args.encoder_length = 1, 2, [16], 16
        args.gen_steps, args.gen_batches = 8, [2]
        args.lstmn_lengths, args.lstmn_batch, args.lstmn_units = [8, 32], 2, 8
    return args


def main(argv=None):
    args = parse_args(argv)
    print(
        f"keras-attention JAX benchmarks: keras {keras.__version__}, JAX "
        f"{jax.__version__} ({jax.default_backend()}), Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, rounds {args.rounds}"
        f"{', SMOKE sizes' if args.smoke else ''}"
    )
    sections = {
        "layer": layer_section,
        "encoder": encoder_section,
        "generation": generation_section,
        "lstmn": lstmn_section,
    }
    return {name: sections[name](args) for name in args.sections}


if __name__ == "__main__":
    main()
