"""What the two pointer-network examples share.

`pointer_sort.py` and `pointer_convex_hull.py` train the same
`ka.models.PointerNetwork` the same way (Adam with a cosine schedule,
teacher-forced cross-entropy) and decode their test sets the same way
(greedy, then a small beam, compiled once per width); only the data and the
metrics differ. Keeping that here means a change to the training recipe
reaches both examples. It sits next to them, so a script run as
`python examples/structured/<name>.py` imports it as a sibling, and the
tests, which run from the repository root, as
`examples.structured.pointer_common`.
"""

import argparse
import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

import keras_attention as ka


def argument_parser(doc, n_default, n_help):
    """A parser described by the first paragraph of the script's `doc`,
    with `--n` and the network and training flags."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--n", type=int, default=n_default, help=n_help)
    add_model_arguments(parser)
    return parser


def prepare_run(args, min_n):
    """Check `--n`, make the output folder and seed Keras, as both scripts'
    `main` starts."""
    if args.n < min_n:
        raise ValueError(f"`--n` must be at least {min_n}. Received: n={args.n}")
    os.makedirs(args.output_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)


def add_model_arguments(parser):
    """The network and training flags of both examples, in their help order."""
    parser.add_argument(
        "--units", type=int, default=128, help="embedding and recurrent state width"
    )
    parser.add_argument(
        "--cell", choices=["lstm", "gru"], default="lstm", help="recurrent cell"
    )
    parser.add_argument(
        "--bidirectional", action="store_true", help="bidirectional encoder"
    )
    parser.add_argument(
        "--glimpse", action="store_true", help="glimpse before pointing (Bello 2016)"
    )
    parser.add_argument("--epochs", type=int, default=10, help="training epochs")
    parser.add_argument(
        "--steps-per-epoch", type=int, default=500, help="batches per epoch"
    )
    parser.add_argument("--batch-size", type=int, default=128, help="batch size")
    parser.add_argument(
        "--learning-rate", type=float, default=2e-3, help="initial Adam learning rate"
    )


def add_evaluation_arguments(parser, test_help, output_dir):
    """The test-set, decoding and output flags of both examples."""
    parser.add_argument("--test-size", type=int, default=10_000, help=test_help)
    parser.add_argument(
        "--beam-width", type=int, default=3, help="beam width (0 or 1: greedy only)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--output-dir", default=output_dir, help="where results go")


def compiled_model(args, **kwargs):
    """A `PointerNetwork` from the flags, compiled with the shared recipe:
    Adam (clipped) on a cosine schedule over all training steps, and the
    teacher-forced cross-entropy of every pointer. `kwargs` go to the model
    (e.g. `end_position`)."""
    model = ka.models.PointerNetwork(
        units=args.units,
        cell=args.cell,
        bidirectional=args.bidirectional,
        glimpse=args.glimpse,
        **kwargs,
    )
    total_steps = args.epochs * args.steps_per_epoch
    schedule = keras.optimizers.schedules.CosineDecay(
        args.learning_rate, decay_steps=max(total_steps, 1), alpha=0.05
    )
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="step_accuracy")],
    )
    return model


def fit_timed(model, train, args):
    """Train for the flags' epochs; return the history and the seconds."""
    start = time.time()
    history = model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        shuffle=False,
        verbose=args.verbose,
    )
    train_seconds = time.time() - start
    print(f"Training: {train_seconds:.0f} s", file=sys.stderr, flush=True)
    return history, train_seconds


def decoding_widths(beam_width):
    """Greedy first, then the beam when one wider than 1 is asked for."""
    return [1] + ([beam_width] if beam_width > 1 else [])


def decode_timed(model, x, width, unit_name, label=None):
    """Decode every row of `x` with beam `width` (compiled with XLA once per
    width, decoded in chunks of 1000 under a progress bar); return the
    pointers and the seconds taken."""
    decode = tf.function(
        lambda x: model.decode(x, beam_width=width)[0],
        jit_compile=True,
        autograph=False,
    )
    start = time.time()
    bar = keras.utils.Progbar(len(x), unit_name=unit_name)
    outputs = []
    for offset in range(0, len(x), 1000):
        chunk = x[offset : offset + 1000]
        outputs.append(np.array(decode(tf.constant(chunk))))
        bar.add(len(chunk))
    if label is not None:
        print(f"  ({label})")
    return np.concatenate(outputs), time.time() - start


def write_metrics(metrics, output_dir):
    """`metrics.json` in `output_dir`, and the same JSON on stdout."""
    with open(os.path.join(output_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    print(json.dumps(metrics, indent=2))
    return metrics
