"""Cached vs uncached greedy generation with the Transformer decoder.

Both paths are one XLA-compiled loop over fixed-size buffers and produce the
same tokens (checked):

- cached: `Transformer.generate` (KV cache; step t costs O(t));
- uncached: every step reruns the whole decoder on the fixed-size token
  buffer (causal mask) and reads position t (step t costs O(T_max)).

Timings are the median of `--rounds` runs, interleaved (A B A B), after one
warm-up run that compiles each path.

    PYTHONPATH=. python benchmarks/generation_cache.py
    PYTHONPATH=. python benchmarks/generation_cache.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import keras_attention as ka  # noqa: E402

START, END, PAD = 1, 2, 0


def uncached_generate(model, encoder_tokens, max_length):
    """Greedy search that recomputes the full decoder pass every step."""
    encoder_output, encoder_mask = model.encode(encoder_tokens)
    batch = ops.shape(encoder_tokens)[0]
    buffer = ops.concatenate(
        [
            ops.full((batch, 1), START, dtype="int32"),
            ops.full((batch, max_length - 1), PAD, dtype="int32"),
        ],
        axis=1,
    )  # decoder inputs (B, T_max)
    out = ops.full((batch, max_length), PAD, dtype="int32")

    def body(index, carry):
        buffer, out = carry
        x = model._embed(buffer, model.decoder_embedding, model.decoder_positions)
        h = model.decoder(
            x,
            encoder_output,
            decoder_padding_mask=ops.not_equal(buffer, PAD),
            encoder_padding_mask=encoder_mask,
        )  # (B, T_max, D)
        logits = model.logits(ops.take(h, index, axis=1))  # (B, V)
        is_pad = ops.equal(ops.arange(ops.shape(logits)[-1]), PAD)
        token = ops.cast(ops.argmax(ops.where(is_pad, -1e9, logits), -1), "int32")
        out = ops.slice_update(out, [0, index], token[:, None])
        # The next decoder input; the last step's write is never read.
        nxt = ops.minimum(index + 1, max_length - 1)
        buffer = ops.slice_update(buffer, [0, nxt], token[:, None])
        return buffer, out

    _, out = ops.fori_loop(0, max_length, body, (buffer, out))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--source-length", type=int, default=32)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round")
    args = parser.parse_args()
    if args.smoke:
        args.batch_sizes, args.length, args.source_length = [2], 8, 5
        args.hidden_dim, args.num_layers, args.vocabulary_size = 16, 1, 50
        args.rounds = 1

    keras.utils.set_random_seed(0)
    model = ka.Transformer(
        args.vocabulary_size,
        args.vocabulary_size,
        hidden_dim=args.hidden_dim,
        num_heads=4,
        intermediate_dim=4 * args.hidden_dim,
        num_encoder_layers=1,
        num_decoder_layers=args.num_layers,
        dropout=0.0,
        max_length=args.length,
    )
    model.build()

    # End token never wins, so every path generates all `length` tokens.
    def cached(src):  # generate() compiles its loop with XLA itself
        return model.generate(src, max_length=args.length, end_id=-1)

    uncached = tf.function(
        lambda src: uncached_generate(model, src, args.length), jit_compile=True
    )
    print(
        f"Transformer decoder: {args.num_layers} layers, d_model {args.hidden_dim}, "
        f"vocab {args.vocabulary_size}; {args.length} tokens, greedy, XLA; "
        f"keras {keras.__version__}, TF {tf.__version__}, {os.cpu_count()} CPUs"
    )
    print("| batch | cached s | uncached s | speed-up | cached tok/s | same tokens |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for batch in args.batch_sizes:
        src = tf.constant(
            rng.integers(3, args.vocabulary_size, (batch, args.source_length)),
            tf.int32,
        )
        same = np.array_equal(cached(src).numpy(), uncached(src).numpy())  # warm-up
        times = {"cached": [], "uncached": []}
        for _ in range(args.rounds):
            for name, fn in (("cached", cached), ("uncached", uncached)):
                start = time.perf_counter()
                fn(src).numpy()
                times[name].append(time.perf_counter() - start)
        c, u = np.median(times["cached"]), np.median(times["uncached"])
        print(
            f"| {batch} | {c:.3f} ({min(times['cached']):.3f}-{max(times['cached']):.3f})"
            f" | {u:.3f} ({min(times['uncached']):.3f}-{max(times['uncached']):.3f})"
            f" | {u / c:.1f}x | {batch * args.length / c:.0f} | {same} |"
        )


if __name__ == "__main__":
    main()
