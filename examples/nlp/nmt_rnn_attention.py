"""
Title: Neural machine translation on Multi30k with RNN + attention
Description: German <-> English translation of image descriptions with the
model of Bahdanau et al. (2015): a bidirectional GRU encoder and a GRU
decoder with additive attention (`--attention luong` for Luong et al.'s
multiplicative attention instead), trained with `model.fit(jit_compile=True)`
on the 29,000 Multi30k training pairs and scored with sacrebleu BLEU and
chrF on the 1,014 validation pairs.

The model (defaults): source and target embeddings of 256, a BiGRU
encoder of 256 units per direction, a GRU decoder of 512 units whose
initial state is `tanh(W h_1_backward)` (as in the paper), Bahdanau
attention with 256 units, and a deep output `tanh(W [s_t; c_t; E y_{t-1}])`
of 256 before the softmax (the paper's maxout read-out, without the
maxout). The configuration follows the published Multi30k anchor
(pytorch-seq2seq: embeddings 256, encoder 512, decoder 512), halved in the
encoder so that an epoch takes minutes on 2 CPU cores. Adam with learning
rate 1e-3 (halved when the validation loss stops improving), gradient
clipping at 1, dropout 0.3 on embeddings and the read-out, label smoothing
0.1, one SentencePiece vocabulary of 6000 pieces per language.

Everything but the model (data with checksums, subwords, bucketed
batches, resumable training, `--strategy {default,mirrored,multiworker}`,
greedy and beam search, BLEU, heat-maps, SavedModel export) is shared with
`nmt_transformer.py` through `nmt_common.py`. Under a strategy the clipping
acts on the all-reduced gradient (`distribute.clip_after_all_reduce`), as
on one device; dropout masks are drawn per replica.

Run:
    python examples/nlp/nmt_rnn_attention.py --source de --target en \\
        --data-dir ../shared/data/multi30k --output-dir outputs/nmt_rnn_de_en
    # mirrored over two GPUs (or two logical CPU devices), 1250 tokens each:
    python examples/nlp/nmt_rnn_attention.py --strategy mirrored \\
        --batch-tokens 1250 --data-dir ../shared/data/multi30k

Measured 2026-12-07 on the code of 14fe2eb (TensorFlow 2.21.0, Keras
3.15.1; 8.09 M weights; 234 steps of about 2500 target tokens per epoch;
sacrebleu 13a on the 1,014 raw validation references), 10 epochs, de ->
en, pinned to one core of a 2-core AMD VM whose other core trained the
Transformer:

    python examples/nlp/nmt_rnn_attention.py --source de --target en \
        --data-dir ../shared/data/multi30k --output-dir outputs/nmt_rnn_de_en_r2 \
        --epochs 10

    greedy BLEU 29.66 (lowercased 29.83), chrF 49.71
    beam 5 BLEU 32.18 (lowercased 32.37), chrF 50.95

(validation loss 3.025; 66 min of training, epochs 325-613 s, the first
two slowed by test runs on the same core; decoding the 1,014 sentences
took 15 s greedy and 31 s with 5 beams.) The same flags on the code of
e18aee8, 2026-12-06 (the `gru` row of the LSTMN comparison below, the
same batch order), gave 29.59 / 32.31 and validation loss 3.024. Before
the per-epoch batch order that the script draws up front from `--seed`
(4f58817), the same command gave 31.85 / 33.80 and validation loss 2.94
(2026-11-30): the order of the batches alone moves BLEU by
about 2 here, so compare runs of one order. 0.1.0, whose W and U started
equal, gave 30.83 and 33.49 in that older order.

On a GPU the same script scales up by flags (`--units 1024 --embedding-dim
620` is the paper's size); the decoder is a compiled scan (no cuDNN kernel).

LSTMN decoders (`--decoder`, Cheng, Dong and Lapata 2016, §3.3): the GRU
model above is `--decoder gru` (the default, unchanged). `lstmn-shallow`
and `lstmn-deep` replace the BiGRU by a bidirectional LSTMN encoder (two
`ka.layers.LSTMN` of `units // 2`, forwards and backwards, whose hidden
and memory tapes and last states are concatenated: `units` wide) and the
GRU decoder by an `LSTMN(units)` decoder that starts from the encoder's
last state `[h; c]` (no bridge):
- `lstmn-shallow`: `ka.layers.LSTMNShallowFusionDecoder`, the LSTMN
  decoder with inter-attention over the encoder outputs (`--attention`:
  Bahdanau, as the baseline, or Luong, `--local-p` too); read-out
  `tanh(W [h_t; c_t; E y_{t-1}])` as the GRU's.
- `lstmn-deep`: `ka.layers.LSTMNDeepFusionDecoder`, whose recurrence reads
  the encoder's hidden and memory tapes (the encoder's `return_cells`) and
  writes what it reads into its memory cell; its additive attention is
  its own (`--attention`/`--local-p` are refused); read-out
  `tanh(W [h_t; E y_{t-1}])`.
Sizes: the GRU model's flags (embeddings 256, `--units` 512, 256 per
encoder direction) and every attention of the LSTMNs (intra and inter)
`units // 2` = 256 wide, as the baseline's Bahdanau attention, so that
one flag set compares the three. With 6000 pieces per language the
weights are 8,094,576 (gru), 8,551,536 (lstmn-shallow, +5.6%) and
8,879,728 (lstmn-deep, +9.7%): an LSTMN direction has an LSTM's four
gates and its intra-attention (722 K weights against a GRU direction's
395 K); deep fusion's inter-attention and gate `r_t` take 722 K where
shallow fusion's Bahdanau attention takes 262 K.
Narrower LSTMNs would break the like-for-like widths (the deep decoder
needs a memory tape as wide as its cells), so the counts are reported
instead (`model.summary()` and `results.md` print them).

Compare the three at the same epochs and flags in one run, each trained
in turn into `--output-dir/DECODER`; `results.md` and `results.json` in
`--output-dir` tabulate validation BLEU and chrF (greedy and beam),
validation loss, weights and training time. Rerun the same command after a crash: a finished decoder
is not trained again, an interrupted one resumes (`BackupAndRestore`):
    python examples/nlp/nmt_rnn_attention.py --source de --target en \\
        --data-dir ../shared/data/multi30k --output-dir outputs/nmt_decoders \\
        --compare-decoders gru lstmn-shallow lstmn-deep
One decoder alone: `--decoder lstmn-deep` (`--evaluate` and `--translate`
read the decoder from the saved flags).

Estimated time per epoch on 2 CPU cores, an estimate, not a measurement
on Multi30k: training steps on one synthetic batch of 104 x 24 tokens
(about a Multi30k batch; default sizes, XLA, one CPU core shared with
other runs) took 5.9 s (gru), 6.8 s (lstmn-shallow, x1.15) and 7.0 s
(lstmn-deep, x1.19). Scaled by the GRU's measured 10 epochs (69 min
above): about 7 min an epoch for gru, 8 for lstmn-shallow and 8.5 for
lstmn-deep, so about 4 hours for the 10-epoch comparison with its
evaluations (longer sentences cost the LSTMNs more: their attention over
the tapes grows with the square of the length).

Measured (LSTMN decoders), Multi30k de-en validation (1,014 sentences),
10 epochs each at the default flags, sacrebleu 13a cased, with the
compare command above under `taskset -c 0` (one core, the other busy),
finished 2026-12-06 (started 2026-12-03, interrupted by machine restarts
and resumed from its backups), TensorFlow 2.21 and Keras 3.15 as above, on
the code of e18aee8. The script changed since only in how it builds the same
layers (fdc9892: both translators' embeddings, dropout, deep output and
read-out from one pair of functions, created in the same order) and in
how it is invoked and writes its table (fdc9892), and `nmt_common.py` only
in its arguments (cdbf03e) and in writing interactive views after the
evaluation (bce8b54), not in what this command computes:

    decoder        weights    val loss  greedy BLEU / chrF  beam 5 BLEU / chrF
    gru            8,094,576  3.024     29.59 / 49.83       32.31 / 51.19
    lstmn-shallow  8,551,536  3.115     27.18 / 47.01       28.93 / 47.62
    lstmn-deep     8,879,728  3.855      8.61 / 25.79        9.32 / 26.35

Seconds per epoch (uninterrupted calls): gru 483, lstmn-shallow 357,
lstmn-deep 495. The GRU baseline leads at 10 epochs. Shallow fusion is
2.4 BLEU behind it greedily (3.4 with beams). Deep fusion is far behind:
its validation loss (4.26, 4.12, 3.99, 3.86 over epochs 7-10) is still
falling fast, roughly where shallow fusion was three epochs earlier. That
fits a decoder that must learn to read the encoder through its own
gated memory tape. All three curves still fall at epoch 10, so this is a
comparison at a fixed budget, not of converged models. The paper's
setting (WMT En-Fr, larger models, days of GPU training) is not
reproduced here.
"""

import argparse
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # nmt_common

import keras  # noqa: E402
import nmt_common  # noqa: E402
from keras import ops  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from keras_attention.decoding import beam_search  # noqa: E402
from keras_attention.decoding import greedy_search  # noqa: E402

ARCHITECTURE = (
    "attention", "local_p", "embedding_dim", "units", "dropout", "vocabulary_size",
    "max_length", "source", "target", "decoder",
)  # fmt: skip
DECODERS = ("gru", "lstmn-shallow", "lstmn-deep")


def inter_attention(args):
    """The decoder's attention over the encoder: Bahdanau's (`units // 2`
    wide) or Luong's `general` score, with Luong et al.'s local-p window
    when `--local-p` is given."""
    local = {}
    if args.local_p is not None:  # Luong et al.'s local-p, same score
        local = dict(window=args.local_p, alignment="predictive")
    if args.attention == "bahdanau":
        return ka.layers.BahdanauAttention(args.units // 2, **local)
    return ka.layers.LuongAttention("general", **local)


def input_layers(args, source_vocab, target_vocab):
    """The layers both translators start with: the source and target
    embeddings and the dropout, in a namespace `output_layers` completes."""
    return types.SimpleNamespace(
        source_embedding=keras.layers.Embedding(
            source_vocab, args.embedding_dim, name="source_embedding"
        ),
        target_embedding=keras.layers.Embedding(
            target_vocab, args.embedding_dim, name="target_embedding"
        ),
        dropout=keras.layers.Dropout(args.dropout, seed=args.seed),
    )


def output_layers(layers, args, target_vocab):
    """`layers` with the deep output (`embedding_dim` wide, tanh) and the
    readout to the target vocabulary, which both translators end with."""
    layers.deep_output = keras.layers.Dense(
        args.embedding_dim, activation="tanh", name="deep_output"
    )
    layers.readout = keras.layers.Dense(target_vocab, name="readout")
    return layers


def make_layers(args, source_vocab, target_vocab):
    """The translator's layers: embeddings, the bidirectional GRU encoder
    and its bridge to the decoder's state, the attention RNN decoder and
    the deep output."""
    layers = input_layers(args, source_vocab, target_vocab)
    layers.encoder = keras.layers.Bidirectional(
        keras.layers.GRU(args.units // 2, return_sequences=True, return_state=True),
        name="encoder",
    )
    layers.bridge = keras.layers.Dense(args.units, activation="tanh", name="bridge")
    attention = inter_attention(args)  # made first, as it always was
    cell = ka.layers.AttentionRNNCell(
        keras.layers.GRUCell(args.units), attention, style=args.attention
    )
    layers.decoder = ka.layers.AttentionRNNDecoder(cell, name="decoder")
    return output_layers(layers, args, target_vocab)


def make_lstmn_layers(args, source_vocab, target_vocab):
    """The LSTMN translator's layers (Cheng, Dong and Lapata 2016, §3.3):
    embeddings, a bidirectional LSTMN encoder (two `LSTMN`s, as the BiGRU:
    `units // 2` per direction, so that its tapes and last state are
    `units` wide), the LSTMN fusion decoder and the deep output. Every
    attention (the intra-attention of each LSTMN, the inter-attention) is
    `units // 2` wide, as the GRU model's Bahdanau attention."""
    width = args.units // 2
    layers = input_layers(args, source_vocab, target_vocab)
    layers.encoder = [
        ka.layers.LSTMN(width, return_sequences=True, return_state=True,
                        go_backwards=backwards, name=f"encoder_{name}")
        for name, backwards in (("forward", False), ("backward", True))
    ]  # fmt: skip
    lstmn = ka.layers.LSTMN(args.units, attention_units=width)
    if args.decoder == "lstmn-shallow":
        layers.decoder = ka.layers.LSTMNShallowFusionDecoder(
            lstmn, inter_attention(args), name="decoder"
        )
    else:
        layers.decoder = ka.layers.LSTMNDeepFusionDecoder(
            lstmn, inter_attention_units=width, name="decoder"
        )
    return output_layers(layers, args, target_vocab)


def make_encode(args, layers):
    """`encode(source_ids, training) -> (memories, mask, initial)`: what the
    decoder attends to (`memories`, a tuple: the encoder outputs; for deep
    fusion its hidden and memory tapes), the source mask and the decoder's
    initial state."""
    if args.decoder == "gru":

        def encode(source_ids, training=None):
            mask = ops.not_equal(source_ids, nmt_common.PAD_ID)
            x = layers.dropout(layers.source_embedding(source_ids), training=training)
            memory, _, backward = layers.encoder(x, mask=mask, training=training)
            # backward: h_1 of the paper
            return (memory,), mask, layers.bridge(backward)

        return encode

    def encode(source_ids, training=None):
        mask = ops.not_equal(source_ids, nmt_common.PAD_ID)
        x = layers.dropout(layers.source_embedding(source_ids), training=training)
        tapes = []
        for direction in layers.encoder:
            hidden, h, c, cells = direction(
                x, mask=mask, training=training, return_cells=True
            )
            if direction.go_backwards:  # back to the source order
                hidden, cells = ops.flip(hidden, axis=1), ops.flip(cells, axis=1)
            tapes.append((hidden, cells, h, c))
        hidden, cells, h, c = (
            ops.concatenate(parts, axis=-1) for parts in zip(*tapes, strict=True)
        )
        # The decoder starts from the encoder's last state (both directions).
        memories = (hidden, cells) if args.decoder == "lstmn-deep" else (hidden,)
        return memories, mask, [h, c]

    return encode


def build(args, source_vocab, target_vocab, steps_per_epoch):
    """The RNN translator, its optimizer, and its search for `Translator`.

    Returns `(model, optimizer, search)`: the training model
    `{"encoder_tokens", "decoder_tokens"} -> logits` (teacher forcing) and
    `search(source_ids, num_beams, max_length) -> (ids, attention)` with
    the same layers, greedy or beam search; `attention` is
    `(B, 1, 1, T, S)`: one layer, one head.
    """
    encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
    decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
    if args.decoder == "gru":
        layers = make_layers(args, source_vocab, target_vocab)
    else:
        layers = make_lstmn_layers(args, source_vocab, target_vocab)
    encode = make_encode(args, layers)

    def logits(output, embedded, training=None):
        hidden = layers.deep_output(ops.concatenate([output, embedded], axis=-1))
        return layers.readout(layers.dropout(hidden, training=training))

    memories, mask, initial = encode(encoder_tokens)
    embedded = layers.dropout(layers.target_embedding(decoder_tokens))
    outputs = layers.decoder(
        embedded, *memories, memory_mask=mask, initial_state=initial
    )
    name = args.attention if args.decoder == "gru" else args.decoder
    model = keras.Model(
        {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
        logits(outputs, embedded),
        name=f"rnn_{name}".replace("-", "_"),
    )
    search = make_search(layers, encode, logits, args.length_penalty)
    # Keras clips each replica's gradient before the all-reduce; this Adam
    # clips the summed one, so every strategy takes the single-device step.
    adam = nmt_common.distribute.clip_after_all_reduce(keras.optimizers.Adam)
    return model, adam(args.learning_rate, clipnorm=1.0), search


def make_search(layers, encode, logits, length_penalty):
    """`search(source_ids, num_beams, max_length) -> (ids, attention)`:
    greedy or beam search with the trained layers, one step of the decoder
    at a time."""
    decoder = layers.decoder

    def search(source_ids, num_beams, max_length):
        memories, mask, initial = encode(source_ids)
        cache = decoder.prepare_memory(*memories, memory_mask=mask)
        batch = ops.shape(source_ids)[0]
        if isinstance(decoder, ka.layers.AttentionRNNDecoder):
            state = decoder.get_initial_state(batch, initial)
        else:  # an LSTMN's tapes, with room for the search's steps
            state = decoder.get_initial_state(batch, max_length, initial)
        # Beam search runs B * num_beams rows: the memory follows.
        cache = keras.tree.map_structure(
            lambda x: ops.repeat(x, num_beams, axis=0), cache
        )

        def step_fn(tokens, state, index):
            embedded = layers.target_embedding(tokens)
            output, state, alignment = decoder.step(embedded, state, cache)
            return logits(output, embedded), state, alignment

        start = ops.full(ops.shape(source_ids)[:1], nmt_common.BOS_ID, "int32")
        if num_beams == 1:
            ids, alignments = greedy_search(
                step_fn, start, state, max_length, end_token=nmt_common.EOS_ID
            )
        else:
            ids, alignments, _ = beam_search(
                step_fn,
                start,
                state,
                max_length,
                end_token=nmt_common.EOS_ID,
                num_beams=num_beams,
                length_penalty_alpha=length_penalty,
            )
        return ids, alignments[:, None, None]  # (B, 1, 1, T, S)

    return search


def parse_args(argv=None):
    parser = example_parser(
        "Train, evaluate and export a BiGRU + attention translator on Multi30k."
    )
    nmt_common.add_common_arguments(
        parser, dict(output_dir="outputs/nmt_rnn", epochs=10, batch_tokens=2500)
    )
    add = parser.add_argument
    add("--decoder", choices=DECODERS, default="gru",
        help="gru: BiGRU encoder, GRU decoder with --attention; lstmn-shallow / "
             "lstmn-deep: BiLSTMN encoder, LSTMN decoder with shallow fusion "
             "(--attention over the encoder outputs) or deep fusion (its own "
             "additive attention over the encoder's hidden and memory tapes)")  # fmt: skip
    add("--compare-decoders", nargs="+", choices=DECODERS, metavar="DECODER",
        help="train each decoder in turn (same flags, data and epochs) into "
             "--output-dir/DECODER, then tabulate them in --output-dir/results.md "
             "and results.json; rerun to resume (finished decoders are not "
             "trained again)")  # fmt: skip
    add("--attention", choices=["bahdanau", "luong"], default="bahdanau",
        help="attention of the decoder (and its wiring, after the two papers); "
             "of lstmn-shallow too, not of lstmn-deep")  # fmt: skip
    add("--local-p", type=int, default=None, metavar="D",
        help="local attention with predictive alignment (Luong et al. 2015) "
             "over 2D+1 source words instead of global attention (the paper: D=10)")  # fmt: skip
    add("--embedding-dim", type=int, default=256, help="embedding width")
    add("--units", type=int, default=512,
        help="decoder units (the encoder has half per direction)")  # fmt: skip
    add("--dropout", type=float, default=0.3, help="dropout rate")
    add("--learning-rate", type=float, default=1e-3,
        help="Adam learning rate, halved whenever the validation loss did not "
             "improve for an epoch")  # fmt: skip
    args = parser.parse_args(argv)
    args.reduce_lr_on_plateau = True
    decoders = args.compare_decoders or [args.decoder]
    if "lstmn-deep" in decoders and (args.attention != "bahdanau" or args.local_p):
        raise ValueError(
            "`--attention` and `--local-p` do not apply to `--decoder lstmn-deep`: "
            "deep fusion has its own additive attention inside the recurrence. "
            f"Received: attention={args.attention!r}, local_p={args.local_p!r}"
        )
    if args.compare_decoders and (args.evaluate or args.translate):
        raise ValueError(
            "`--compare-decoders` trains; `--evaluate` and `--translate` use one "
            "trained model: pass its directory, --output-dir DIR/DECODER."
        )
    return nmt_common.finish_arguments(args, dict(embedding_dim=16, units=32), argv)


def compare(args):
    """`--compare-decoders`: `nmt_common.run` for each decoder in turn, into
    `--output-dir/DECODER`, then the table. A decoder whose directory holds
    a finished run (`results.json` of a training run) is not trained again;
    an interrupted one resumes from its `BackupAndRestore` backup."""
    results = {}
    for decoder in args.compare_decoders:
        run_args = argparse.Namespace(**vars(args))
        run_args.decoder, run_args.compare_decoders = decoder, None
        run_args.output_dir = os.path.join(args.output_dir, decoder)
        finished = load_finished(run_args)
        if finished is None:
            keras.backend.clear_session()  # the last decoder's graphs
            finished = nmt_common.run(run_args, build, ARCHITECTURE)
        results[decoder] = finished
    table = summarize(results, args)
    runs.write_results(args.output_dir, results, args, table)
    return results


def load_finished(args):
    """The results of a finished training run in `args.output_dir`, or None;
    a ValueError if it was trained with other flags."""
    path = os.path.join(args.output_dir, "results.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        results = json.load(f)
    with open(os.path.join(args.output_dir, nmt_common.ARCHITECTURE_FILE)) as f:
        saved = json.load(f)
    wanted = {k: getattr(args, k) for k in ARCHITECTURE}
    wanted["epochs"] = args.epochs
    saved["epochs"] = last_epoch(results)
    changed = sorted(k for k in wanted if saved.get(k) != wanted[k])
    if changed:
        raise ValueError(
            f"`{args.output_dir}` holds a model trained with other settings "
            f"({changed}); use another `--output-dir`. Received: "
            f"{ {k: wanted[k] for k in changed} }, saved: "
            f"{ {k: saved.get(k) for k in changed} }"
        )
    status(f"[{args.decoder}] trained before: results from {path}")
    return results


def last_epoch(results):
    """The epochs a finished run trained (a resumed run's results list only
    the epochs after resuming, ending with the last)."""
    return max(results.get("epochs_run", []), default=0)


def summarize(results, args):
    """The lines of `results.md`: one row per decoder."""
    beam = f"beam{args.beams}" if args.beams > 1 else None
    header = ["decoder", "weights", "epochs", "val loss", "greedy BLEU",
              "greedy chrF"]  # fmt: skip
    if beam:
        header += [f"beam {args.beams} BLEU", f"beam {args.beams} chrF"]
    header += ["training s", "s/epoch"]
    lines = [
        f"Multi30k {args.source}-{args.target}, validation ({args.epochs} epochs; "
        "sacrebleu 13a, cased)",
        "",
        *runs.markdown_header(header),
    ]
    for decoder, result in results.items():
        history = result.get("history", {})
        val_loss = history.get("val_loss", [float("nan")])[-1]
        row = [decoder, f"{result['parameters']:,}", str(last_epoch(result)),
               f"{val_loss:.3f}", f"{result['greedy']['bleu']:.2f}",
               f"{result['greedy']['chrf']:.2f}"]  # fmt: skip
        if beam:
            row += [f"{result[beam]['bleu']:.2f}", f"{result[beam]['chrf']:.2f}"]
        epochs_run = len(result.get("epochs_run", [])) or 1
        seconds = result.get("train_seconds", float("nan"))
        row += [f"{seconds:.0f}", f"{seconds / epochs_run:.0f}"]
        lines.append(runs.markdown_row(row))
    lines += [
        "",
        "training s: the seconds of the last call's epochs (a resumed run "
        "counts only the epochs it ran after resuming); s/epoch: per epoch of "
        "that call.",
    ]
    return lines


def main(argv=None):
    args = parse_args(argv)
    if args.compare_decoders:
        return compare(args)
    return nmt_common.run(args, build, ARCHITECTURE)


if __name__ == "__main__":
    main()
