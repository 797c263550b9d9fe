"""
Title: Neural machine translation on Multi30k with a small Transformer
Description: German <-> English translation of image descriptions with
`keras_attention.models.Transformer` (Vaswani et al., 2017), trained with
`model.fit(jit_compile=True)` on the 29,000 Multi30k training pairs and
scored with sacrebleu BLEU and chrF on the 1,014 validation pairs.

The model (defaults): 3 encoder + 3 decoder post-LN blocks, d_model 256,
8 heads, feed-forward 512, sinusoidal positions, dropout 0.1, decoder
input embedding tied to the output projection (Press & Wolf, 2017), one
SentencePiece unigram vocabulary of 6000 pieces per language. Why this
size: it is the 3+3-layer configuration of the published Multi30k anchor
(pytorch-seq2seq: hidden 256, 8 heads, feed-forward 512), small enough
that an epoch takes minutes on 2 CPU cores; the paper's base model
(6+6, d_model 512, feed-forward 2048) overfits 29k sentence pairs.
Training follows the paper: label smoothing 0.1, Adam(0.9, 0.98, 1e-9)
and its learning rate `d^-0.5 * min(step^-0.5, step * warmup^-1.5)`
(scaled by `--lr-scale`), with batches of about 4000 target tokens.

Everything but the model (data with checksums, subwords, bucketed
batches, resumable training, `--strategy {default,mirrored,multiworker}`,
greedy and beam search, BLEU, heat-maps, SavedModel export) is shared with
`nmt_rnn_attention.py` through `nmt_common.py`.

Run:
    python examples/nlp/nmt_transformer.py --source de --target en \\
        --data-dir ../shared/data/multi30k --output-dir outputs/nmt_transformer_de_en
    # later, with the trained model:
    python examples/nlp/nmt_transformer.py --output-dir outputs/nmt_transformer_de_en \\
        --evaluate my.de my.en
    echo "Ein Hund rennt über eine Wiese." | \\
        python examples/nlp/nmt_transformer.py --output-dir ... --translate
    # two local workers, 2000 tokens each (4000 per step, as above):
    python examples/common/local_workers.py --workers 2 -- \\
        python examples/nlp/nmt_transformer.py --strategy multiworker \\
        --batch-tokens 2000 --data-dir ../shared/data/multi30k

Measured 2026-12-07 on the code of 14fe2eb (TensorFlow 2.21.0, Keras
3.15.1; 7.03 M weights; 145 steps of about 4000 target tokens per epoch;
sacrebleu 13a on the 1,014 raw validation references), 10 epochs, the
first command above with `--epochs 10` (output `outputs/nmt_transformer_de_en_r2`)
pinned to one core of a 2-core AMD VM whose other core trained the RNN
translator; en -> de the same with `--source en --target de` (output
`outputs/nmt_transformer_en_de_r2`), 2026-12-07 on the code of 4c14076
(the same translator code), one core while the other ran other jobs:

    direction  epochs  training  greedy BLEU (lc) / chrF   beam 5 BLEU (lc) / chrF
    de -> en   10      71 min    39.82 (40.07) / 59.65    40.79 (41.02) / 60.38
    en -> de   10      70 min    36.50 (36.64) / 59.97    37.53 (37.67) / 61.01

(de -> en: epochs took 383-573 s, the first with tracing; validation loss
2.560 after epoch 10; decoding the 1,014 sentences took 31 s greedy and
73 s with 5 beams, XLA compilation included. en -> de: 343-683 s per
epoch, validation loss 2.636, decoding 28 s and 84 s.) Before the per-epoch batch order that the script draws up
front from `--seed` (4f58817), 2026-11-30 on 2 shared cores, the same
commands gave, de -> en, 39.25 (39.50) / 59.31 and 40.89 (41.16) / 60.53
(88 min, validation loss 2.54), and en -> de
36.19 (36.31) / 60.02 and 37.26 (37.40) / 60.68 (39 min, validation
loss 2.65). 0.1.0, whose self-attention started with W_Q = W_K = W_V,
gave 37.85 / 38.59 de -> en and 34.99 / 36.65 en -> de in that older
order.

On a GPU the same script scales up by flags: `--batch-tokens 25000
--hidden-dim 512 --num-layers 6 --intermediate-dim 2048` is the paper's
base model (with more `--epochs` and `--warmup-steps 4000 --lr-scale 1`
to match); an epoch of the default model is a few seconds there, so
`--epochs 30` and checkpoint averaging are the obvious next steps.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # nmt_common

import keras  # noqa: E402
import nmt_common  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common.cli import add_transformer_size  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402


@keras.saving.register_keras_serializable(package="nmt")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's learning rate (Vaswani et al., 2017, eq. 3).

    `scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`:
    linear warm-up, then decay with the inverse square root of the step.
    Neither Keras nor keras-hub ships it (Keras' `CosineDecay` warms up
    but decays differently).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        super().__init__()
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        factor = keras.ops.minimum(keras.ops.rsqrt(step), step * warmup**-1.5)
        return self.scale * self.d_model**-0.5 * factor

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }


ARCHITECTURE = (
    "hidden_dim", "num_heads", "intermediate_dim", "num_layers", "dropout",
    "vocabulary_size", "max_length", "source", "target",
)  # fmt: skip


def build(args, source_vocab, target_vocab, steps_per_epoch):
    """The Transformer, its optimizer, and its search for `Translator`."""
    model = ka.models.Transformer(
        source_vocab,
        target_vocab,
        hidden_dim=args.hidden_dim,
        num_heads=args.num_heads,
        intermediate_dim=args.intermediate_dim,
        num_encoder_layers=args.num_layers,
        num_decoder_layers=args.num_layers,
        dropout=args.dropout,
        tie_weights=True,
        padding_id=nmt_common.PAD_ID,
        seed=args.seed,
        dtype=args.dtype_policy,
        name="transformer",
    )
    model.build()
    optimizer = keras.optimizers.Adam(
        InverseSqrtSchedule(args.hidden_dim, args.warmup_steps, args.lr_scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
    )

    def search(source_ids, num_beams, max_length):
        return model.generate(
            source_ids,
            max_length=max_length,
            start_id=nmt_common.BOS_ID,
            end_id=nmt_common.EOS_ID,
            num_beams=num_beams,
            length_penalty_alpha=args.length_penalty,
            return_attention_scores=True,
            jit_compile=False,  # Translator.translate_ids compiles it.
        )

    return model, optimizer, search


def parse_args(argv=None):
    parser = example_parser(
        "Train, evaluate and export a Transformer translator on Multi30k."
    )
    nmt_common.add_common_arguments(
        parser,
        dict(output_dir="outputs/nmt_transformer", epochs=10, batch_tokens=4000),
    )
    add = parser.add_argument
    add_transformer_size(
        parser, hidden_dim=256, num_heads=8, intermediate_dim=512, num_layers=3,
        dropout=0.1,
        help={"hidden_dim": "d_model", "num_layers": "encoder and decoder blocks (each)"},
    )  # fmt: skip
    add("--warmup-steps", type=int, default=400, help="learning-rate warm-up steps")
    add("--lr-scale", type=float, default=0.4,
        help="factor on the paper's learning rate (peak: scale / sqrt(d_model * "
             "warmup))")  # fmt: skip
    add("--dtype-policy", choices=("float32", "mixed_bfloat16"), default="float32",
        help="Keras dtype policy of the model: mixed_bfloat16 computes in "
             "bfloat16 with float32 weights and softmax statistics; on a CPU "
             "it implies --no-jit-compile unless --jit-compile is given")  # fmt: skip
    args = parser.parse_args(argv)
    if args.dtype_policy == "mixed_bfloat16" and args.jit_compile is None:
        # XLA's CPU backend converts bfloat16 matmuls to float32 around
        # every dot (benchmarks/RESULTS.md, 2026-12-01: no speed-up), while
        # TensorFlow's graph mode runs oneDNN's bfloat16 kernels.
        args.jit_compile = bool(tf.config.list_physical_devices("GPU"))
    return nmt_common.finish_arguments(
        args,
        dict(hidden_dim=32, num_heads=2, intermediate_dim=64, num_layers=1,
             warmup_steps=20),
        argv,
    )  # fmt: skip


def main(argv=None):
    return nmt_common.run(parse_args(argv), build, ARCHITECTURE)


if __name__ == "__main__":
    main()
