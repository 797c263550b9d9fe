"""Title: Self-Attention GAN (SAGAN) on handwritten digits.

Description: a small SAGAN (Zhang et al., 2018) whose generator and
discriminator both use `keras_attention.layers.SelfAttention2D` at the 16x16
feature level, with spectral normalization everywhere, the hinge loss and two
time-scale learning rates (TTUR). `model.fit` drives a custom `train_step`.

Data: `--dataset digits` (the default, embedded: scikit-learn's 8x8 digits,
upsampled) or `--dataset mnist` (the 10,000 images of the MNIST test split,
read from `--data-dir` or downloaded from a public mirror of the original
files and checked against their SHA-256).

Outputs under `--output-dir`: a sample grid per epoch from a fixed latent
batch, a picture of where chosen query pixels attend (`attention.png`)
and the same as a page where any pixel can be clicked
(`attention_view.html`, offline), the generator as a
SavedModel (reloaded and checked), training logs, and a quality report
(`quality.json`): a small CNN classifier trained on real digits scores
`--eval-draws` independent draws of 10,000 generated images (mean
top-class confidence, class histogram, classes present), and in its
128-d feature space against the real images gives the Frechet distance
and the improved precision and recall (Kynkaanniemi et al., 2019; k-NN
radii, `--pr-k 3`; `examples/common/quality.py`), each as the mean over
the draws and its standard deviation over them (the noise of the
measure for one generator), with one half of the real set against the
other as the floor.

Run: `python examples/vision/sagan.py --epochs 30 --output-dir outputs/sagan`.

Ablation: `--compare-ablation --seeds 1 2 3` trains the same GAN with and
without `SelfAttention2D`, one run per block and seed in
`<output-dir>/<block>_seed<N>` (a finished run is read back; an
interrupted one resumes from its `BackupAndRestore` backup), scores all
with one classifier (kept in `<output-dir>`), and writes the side-by-side
table to `results.md` and `results.json`: every run (mean ± std over the
draws), each block's mean ± std over the seeds, the Frechet distance's
spread over draws and over seeds, and the attention maps of the attention
runs. Without attention (`--block conv`), both networks have a
`ResidualConvBlock` in its place, `x + gamma * W_2 relu(W_1 x)` with a
3x3 convolution to `C/8` channels and a 1x1 one back, which has exactly
the attention block's trainable weights (`1.25 C^2 + 1`): at `--width 32`
the generator has 378,594 trainable weights and the discriminator 167,906
with either block. The MNIST comparison (hours on 2 CPU cores):
`python examples/vision/sagan.py --dataset mnist --data-dir
../shared/data/mnist --epochs 12 --compare-ablation --seeds 1 2 3
--output-dir outputs/sagan_ablation`.

Distributed training (`--strategy {default,mirrored,multiworker}`, as in
`examples/nlp/translate_dates.py`; helpers in
`examples/common/distribute.py`): `--batch-size` is per replica, so
`--strategy mirrored --batch-size 32` on two replicas (GPUs, or logical
CPU devices) takes the steps of `--batch-size 64` on one: the batch
normalizations are synchronized, the latent vectors come with the data
(`make_dataset`), each epoch's image order is drawn up front, and each
replica's loss counts for its share of the batch. Multi-worker:
`python examples/common/local_workers.py --workers 2 -- python
examples/vision/sagan.py --strategy multiworker --batch-size 32`; only the
chief keeps its outputs.

Measured (2026-12-06, 21:51-23:48 UTC, one pinned core of a 2-core AMD
EPYC VM; keras_attention 0.2.0 at commit b36c02f, whose training code is
today's, TensorFlow 2.21.0, Keras 3.15.1), the ablation command above:
`python examples/vision/sagan.py --dataset mnist --data-dir
../shared/data/mnist --epochs 12 --compare-ablation --seeds 1 2 3
--output-dir outputs/sagan_ablation` (1,872 steps of 64 per run, 996-1,076
s of training each). Frechet distance (FD) in the classifier's 128-d
feature space (98.3% held-out accuracy on real digits), mean ± std over 3
draws of 10,000 images; real vs real 7.06:

    block       seed 1         seed 2         seed 3         mean ± std over seeds
    attention   17.40 ± 0.17   41.57 ± 0.55   19.18 ± 0.35   26.05 ± 13.47
    conv        14.26 ± 0.27   18.48 ± 0.12   11.56 ± 0.07   14.77 ± 3.49

Precision / recall (k = 3; real vs real 0.875 / 0.750): attention 0.516 ±
0.024 / 0.659 ± 0.082, conv 0.495 ± 0.009 / 0.771 ± 0.048; confidence
0.843 / 0.853; all 10 classes in every run. At this budget the
self-attention does not help: the same GAN with the residual convolution
in its place has the lower Frechet distance in every seed and the higher
recall, the attention model a slightly higher precision, and attention
seed 2 diverged from the others (FD 41.6, recall 0.56). The noise of one
generator's FD over draws (0.15-0.36) is far below the spread over seeds
(3.5 and 13.5), so single runs do not compare: seeds do. The generator's
learned `gamma` ended at 0.050, -0.066 and 0.055 (the discriminator's at
-0.24, -0.25, 0.25). `results.md` holds the table;
`attention_seed<N>/attention_view.html` the attention maps of each run.

At 30 epochs (the same command with `--epochs 30 --output-dir
outputs/sagan_ablation_30`; 4,680 steps of 64 per run; the code of
0f74baf, the same training code; one pinned core each, 2026-12-07, resumed
from backups across three sessions, two runs at a time at the end, so the
training seconds, 2,344-5,127, do not compare):

    block       seed 1         seed 2         seed 3         mean ± std over seeds
    attention   11.55 ± 0.09   15.49 ± 0.21   11.16 ± 0.45   12.73 ± 2.40
    conv         8.47 ± 0.37   19.52 ± 0.28   12.83 ± 0.23   13.61 ± 5.56

Precision / recall: attention 0.520 ± 0.028 / 0.753 ± 0.018, conv 0.509 ±
0.046 / 0.760 ± 0.066; confidence 0.864 / 0.865; all 10 classes in every
run; generator `gamma` 0.061, -0.081, 0.063. With 2.5x the training the
order is no longer one-sided: attention is better for seeds 2 and 3 (by
4.0 and 1.7), the convolution for seed 1 (by 3.1); the mean difference
(-0.9) is far inside the spread over seeds (2.4 and 5.6), so three seeds
cannot separate the two at this budget either. What changed is the
attention model's own spread: from 12 to 30 epochs its mean fell from
26.1 to 12.7 and no seed diverged (seed 2: 41.6 to 15.5), while the
convolution's mean moved from 14.8 to 13.6 (its seed 2 got worse, 18.5 to
19.5). The paired differences (attention minus convolution, per seed:
+3.1, -4.0, -1.7) have a standard deviation of 3.6, so the mean
difference has a standard error of 2.1; telling a difference of 1 FD
from noise (two standard errors) would take about 50 paired seeds, some
75 core-hours at 30 epochs: on 2 CPU cores no affordable budget makes the
comparison meaningful, which is the answer this example gives.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

# The repository root, for the helpers shared by the examples.
sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

import keras_attention as ka  # noqa: E402
from examples.common import distribute  # noqa: E402
from examples.common import runs  # noqa: E402
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.files import sha256  # noqa: E402
from examples.common.quality import frechet_distance  # noqa: E402
from examples.common.quality import mean_std  # noqa: E402
from examples.common.quality import precision_recall  # noqa: E402

# The original MNIST test files and their SHA-256 (also in the repository's
# shared data README). Mirrors of yann.lecun.com, which is often unreachable.
MNIST_FILES = {
    "t10k-images-idx3-ubyte.gz": (
        "167310007f03058885c7e95e6c0b19c20de5c7fd3031f4cbdadc9014a523d80b"
    ),
    "t10k-labels-idx1-ubyte.gz": (
        "fc607395669ec21321ea83e4b82c0544b7e8e63ff5b34337c06bc0a17cc0da3c"
    ),
}
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
IMAGE_SIZE = 32


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------


def mnist_file(name, data_dir=None):
    """Path of one MNIST file: from `data_dir`, else downloaded and cached."""
    expected = MNIST_FILES[name]
    if data_dir is not None:
        path = os.path.join(data_dir, name)
        if not os.path.exists(path):
            raise ValueError(f"`--data-dir` has no {name}. Received: {data_dir}")
        if sha256(path) != expected:
            raise ValueError(
                f"Checksum mismatch for {path}: expected SHA-256 {expected}, "
                f"got {sha256(path)}"
            )
        return path
    last_error = None
    for mirror in MNIST_MIRRORS:
        try:
            # keras.utils.get_file caches the file and verifies its hash.
            return keras.utils.get_file(
                name, mirror + name, file_hash=expected, cache_subdir="datasets/mnist"
            )
        except Exception as error:  # try the next mirror
            last_error = error
    raise RuntimeError(f"Could not download {name}: {last_error}")


def read_idx(path):
    """Array from an IDX file (the MNIST format), gzip or plain."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        zero, dtype_code, ndim = struct.unpack(">HBB", f.read(4))
        if zero != 0 or dtype_code != 0x08:
            raise ValueError(f"{path} is not an IDX file of unsigned bytes")
        shape = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)


def load_digits_dataset(name, data_dir=None, limit=None):
    """Images in [-1, 1] of shape (N, 32, 32, 1) and their labels."""
    if name == "mnist":
        images = read_idx(mnist_file("t10k-images-idx3-ubyte.gz", data_dir))
        labels = read_idx(mnist_file("t10k-labels-idx1-ubyte.gz", data_dir))
        images = np.pad(images, ((0, 0), (2, 2), (2, 2))).astype("float32") / 255.0
    elif name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        small = digits.images.astype("float32")[..., None] / 16.0  # (N, 8, 8, 1)
        images = np.array(
            keras.ops.image.resize(small, (IMAGE_SIZE, IMAGE_SIZE), "bilinear")
        )[..., 0]
        labels = digits.target
    else:
        raise ValueError(
            f"`--dataset` must be 'digits' or 'mnist'. Received: dataset={name!r}"
        )
    images = np.clip(images, 0.0, 1.0) * 2.0 - 1.0
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images[..., None].astype("float32"), labels.astype("int32")


def make_dataset(images, batch_size, latent_dim, seed, epochs, first_epoch=0):
    """`{"real", "z_d", "z_g"}` batches of epochs `first_epoch..epochs-1`.

    Each epoch takes the images in a fresh order drawn up front from
    `seed` (full batches only), and each step brings the latent vectors of
    its discriminator (`z_d`) and generator (`z_g`) updates, stateless
    draws keyed by `(seed, step)`. The data holds no random state, so
    every strategy and worker sees the same global batches and noise,
    whatever iterators Keras opens (under a strategy `fit` opens an extra
    one to build the model), and a resumed run continues the sequence. Fit
    it with `steps_per_epoch=len(images) // batch_size`.
    """
    steps = len(images) // batch_size
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(len(images))[: steps * batch_size] for _ in range(epochs)]
    order = np.concatenate(orders[first_epoch:] or [np.zeros(0, "int64")])
    rows = tf.data.Dataset.from_tensor_slices(order).batch(
        batch_size, drop_remainder=True
    )
    first = first_epoch * steps
    step_ids = tf.data.Dataset.range(first, first + len(order) // batch_size)
    images = tf.constant(images)

    def gather(rows, step):
        def normal(index):  # the index-th latent batch of the run
            key = tf.stack([tf.constant(seed, tf.int64), index])
            return tf.random.stateless_normal((batch_size, latent_dim), seed=key)

        real = tf.gather(images, rows)
        return {"real": real, "z_d": normal(2 * step), "z_g": normal(2 * step + 1)}

    dataset = tf.data.Dataset.zip(rows, step_ids).map(gather)
    return dataset.prefetch(tf.data.AUTOTUNE)


# ----------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------


def sn(layer):
    return layers.SpectralNormalization(layer)


BLOCKS = ("attention", "conv")  # the 16x16 block: SelfAttention2D or its ablation


@keras.saving.register_keras_serializable(package="sagan")
class ResidualConvBlock(layers.Layer):
    """`y = x + gamma * W_2 relu(W_1 x)`: the ablation's stand-in for
    `SelfAttention2D`, local where attention is global, with as many weights.

    `W_1` is a 3x3 convolution from `C` to `C / 8` channels, `W_2` a 1x1
    convolution back to `C`, both spectral-normalized and without bias, and
    `gamma` starts at 0 as in the attention block. Its trainable weights,
    `9 C^2 / 8 + C^2 / 8 + 1 = 1.25 C^2 + 1`, are those of
    `SelfAttention2D(channels_reduction=8, value_channels_reduction=2)`
    (query and key `C^2 / 8` each, value and output `C^2 / 2` each, and
    `gamma`) whenever 8 divides `C`. (The spectral normalizations' power
    iteration vectors, not trained, differ: `C / 8 + C` against `1.75 C`.)
    """

    def __init__(self, reduction=8, **kwargs):
        super().__init__(**kwargs)
        self.reduction = reduction

    def build(self, input_shape):
        channels = input_shape[-1]
        hidden = max(channels // self.reduction, 1)
        self.local_conv = layers.SpectralNormalization(
            layers.Conv2D(hidden, 3, padding="same", use_bias=False,
                          dtype=self.dtype_policy, name="local"),
            dtype=self.dtype_policy, name="local_sn",
        )  # fmt: skip
        self.output_conv = layers.SpectralNormalization(
            layers.Conv2D(channels, 1, use_bias=False, dtype=self.dtype_policy,
                          name="output"),
            dtype=self.dtype_policy, name="output_sn",
        )  # fmt: skip
        self.local_conv.build(input_shape)
        self.output_conv.build(tuple(input_shape[:-1]) + (hidden,))
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="zeros")
        self.built = True

    def call(self, inputs, training=None):
        hidden = keras.ops.relu(self.local_conv(inputs, training=training))
        output = self.output_conv(hidden, training=training)  # (B, H, W, C)
        return inputs + keras.ops.cast(self.gamma, output.dtype) * output

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "reduction": self.reduction}


def mixing_block(block, prefix):
    """The gated 16x16 block named `{prefix}_attention` or `{prefix}_conv_block`."""
    if block == "attention":
        return ka.layers.SelfAttention2D(
            use_spectral_norm=True, name=f"{prefix}_attention"
        )
    if block == "conv":
        return ResidualConvBlock(name=f"{prefix}_conv_block")
    raise ValueError(f"`block` must be one of {BLOCKS}. Received: block={block!r}")


def gated_block(model):
    """The model's gamma-gated 16x16 block (self-attention or its ablation)."""
    (block,) = [
        layer
        for layer in model.layers
        if isinstance(layer, (ka.layers.SelfAttention2D, ResidualConvBlock))
    ]
    return block


def build_generator(latent_dim, width, synchronized=False, block="attention"):
    """z -> 4x4 -> 8x8 -> 16x16 (self-attention) -> 32x32 image in [-1, 1].

    `block="conv"`: the ablation, a `ResidualConvBlock` with as many
    weights in place of the self-attention.

    `synchronized=True` (for several replicas): the batch normalizations
    use the moments of the global batch, as one device does. Not on one
    replica: Keras' synchronized moments then all-reduce over the default
    replica context, and the generator's gradients came out ~1e-3
    (relative) off those of the plain moments, which two synchronized
    replicas reproduce to ~1e-8 (measured, Keras 3.15, TF 2.21). The
    convolutions before them have no bias: the normalization removes it,
    so its gradient would be round-off only, which Adam turns into steps
    that differ from strategy to strategy.
    """
    z = keras.Input((latent_dim,), name="z")
    x = sn(layers.Dense(4 * 4 * 4 * width))(z)
    x = layers.Reshape((4, 4, 4 * width))(x)
    for i, channels in enumerate((4 * width, 2 * width)):  # 8x8, then 16x16
        x = layers.UpSampling2D()(x)
        x = sn(layers.Conv2D(channels, 3, padding="same", use_bias=False))(x)
        x = layers.BatchNormalization(synchronized=synchronized, name=f"g_bn{i}")(x)
        x = layers.ReLU(name=f"g_act{i}")(x)
    x = mixing_block(block, "g")(x)
    x = layers.UpSampling2D()(x)
    x = sn(layers.Conv2D(width, 3, padding="same", use_bias=False))(x)
    x = layers.BatchNormalization(synchronized=synchronized, name="g_bn2")(x)
    x = layers.ReLU()(x)
    image = layers.Conv2D(1, 3, padding="same", activation="tanh", name="image")(x)
    return keras.Model(z, image, name="generator")


def build_discriminator(width, block="attention"):
    """32x32 image -> 16x16 (self-attention) -> 8x8 -> 4x4 -> real/fake score."""
    image = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 1), name="image")
    x = sn(layers.Conv2D(width, 4, strides=2, padding="same"))(image)  # 16x16
    x = layers.LeakyReLU(0.1, name="d_act0")(x)
    x = mixing_block(block, "d")(x)
    for channels in (2 * width, 4 * width):  # 8x8, 4x4
        x = sn(layers.Conv2D(channels, 4, strides=2, padding="same"))(x)
        x = layers.LeakyReLU(0.1)(x)
    x = layers.Flatten()(x)
    score = sn(layers.Dense(1))(x)
    return keras.Model(image, score, name="discriminator")


def parameter_counts(latent_dim, width, block):
    """Trainable and all weights of the generator and the discriminator."""
    counts = {}
    for name, model in (
        ("generator", build_generator(latent_dim, width, block=block)),
        ("discriminator", build_discriminator(width, block=block)),
    ):
        trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        counts[name] = {"trainable": trainable, "all": model.count_params()}
        block_layer = gated_block(model)
        counts[name]["block_trainable"] = sum(
            int(np.prod(w.shape)) for w in block_layer.trainable_weights
        )
    return counts


class SAGAN(keras.Model):
    """Generator + discriminator trained with the hinge loss by `fit()`.

    The training step is TensorFlow-specific (`tf.GradientTape`), as is the
    rest of this example (SavedModel export). Each batch of `make_dataset`
    brings its latent vectors: drawn in the model, a `SeedGenerator` would
    draw other numbers under each strategy (or the same on every replica).
    """

    def __init__(self, generator, discriminator, latent_dim, **kwargs):
        super().__init__(**kwargs)
        self.generator = generator
        self.discriminator = discriminator
        self.latent_dim = latent_dim
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")

    def compile(self, g_optimizer, d_optimizer, **kwargs):
        # No model-level optimizer: Keras' default would be an unused RMSprop,
        # built (and saved with the weights) under a strategy only.
        super().compile(optimizer=None, **kwargs)
        self.g_optimizer = g_optimizer
        self.d_optimizer = d_optimizer

    @property
    def metrics(self):
        return [self.d_loss_tracker, self.g_loss_tracker]

    def call(self, z, training=False):
        return self.generator(z, training=training)

    def train_step(self, data):
        real, z_d, z_g = data["real"], data["z_d"], data["z_g"]
        # Under a strategy each replica sees its part of the batch and the
        # optimizers sum the replicas' gradients: a replica's share of the
        # batch mean is its own mean over the number of replicas. (Keras'
        # own `train_step` scales the compiled loss so; this one is custom.)
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        # Discriminator: hinge loss max(0, 1 - D(x)) + max(0, 1 + D(G(z))).
        with tf.GradientTape() as tape:
            fake = self.generator(z_d, training=True)
            d_real = self.discriminator(real, training=True)
            d_fake = self.discriminator(fake, training=True)
            d_loss = tf.reduce_mean(tf.nn.relu(1.0 - d_real)) + tf.reduce_mean(
                tf.nn.relu(1.0 + d_fake)
            )
            share = d_loss / replicas
        weights = self.discriminator.trainable_weights
        self.d_optimizer.apply(tape.gradient(share, weights), weights)
        # Generator: -D(G(z)).
        with tf.GradientTape() as tape:
            fake = self.generator(z_g, training=True)
            g_loss = -tf.reduce_mean(self.discriminator(fake, training=True))
            share = g_loss / replicas
        weights = self.generator.trainable_weights
        self.g_optimizer.apply(tape.gradient(share, weights), weights)
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {
            "d_loss": self.d_loss_tracker.result(),
            "g_loss": self.g_loss_tracker.result(),
            # How much each network has come to rely on its 16x16 block.
            "gamma_g": gated_block(self.generator).gamma.value,
            "gamma_d": gated_block(self.discriminator).gamma.value,
        }


# ----------------------------------------------------------------------------
# Pictures
# ----------------------------------------------------------------------------


def save_grid(images, path, columns=8):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = int(np.ceil(len(images) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(columns, rows))
    for ax, image in zip(np.ravel(axes), images, strict=False):
        ax.imshow(image[..., 0], cmap="gray", vmin=-1, vmax=1)
    for ax in np.ravel(axes):
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


class SampleGrid(keras.callbacks.Callback):
    """Saves generated digits from a fixed latent batch after every epoch."""

    def __init__(self, z, output_dir):
        super().__init__()
        self.z = z
        self.output_dir = output_dir

    def on_epoch_end(self, epoch, logs=None):
        images = np.array(self.model.generator(self.z, training=False))
        save_grid(images, os.path.join(self.output_dir, f"samples_{epoch + 1:03d}.png"))


class EpochSeconds(keras.callbacks.Callback):
    """Adds each epoch's seconds to its logs (before `CSVLogger` in the
    list), so a run resumed from its backup can sum all its parts."""

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["seconds"] = time.perf_counter() - self._start


def save_attention_picture(generator, z, path):
    """Where do chosen 16x16 query pixels of the generator's attention look?"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attention = generator.get_layer("g_attention")
    features = keras.Model(generator.input, attention.input)(z)
    _, beta = attention(features, return_attention_scores=True)  # (B, N, N')
    images = np.array(generator(z, training=False))
    side = features.shape[1]
    key_side = int(round(np.sqrt(beta.shape[-1])))
    queries = [(4, 4), (8, 8), (11, 6)]  # (row, col) on the 16x16 grid
    fig, axes = plt.subplots(len(z), len(queries) + 1, figsize=(8, 2 * len(z)))
    scale = IMAGE_SIZE / side
    for i in range(len(z)):
        axes[i, 0].imshow(images[i, ..., 0], cmap="gray")
        axes[i, 0].set_title("sample")
        for j, (r, c) in enumerate(queries):
            ax = axes[i, j + 1]
            weights = np.array(beta[i, r * side + c]).reshape(key_side, key_side)
            ax.imshow(images[i, ..., 0], cmap="gray", alpha=0.5)
            ax.imshow(
                weights,
                cmap="inferno",
                alpha=0.6,
                extent=(-0.5, IMAGE_SIZE - 0.5, IMAGE_SIZE - 0.5, -0.5),
            )
            ax.plot((c + 0.5) * scale - 0.5, (r + 0.5) * scale - 0.5, "c+", ms=12)
            ax.set_title(f"query ({r},{c})")
    for ax in np.ravel(axes):
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def save_attention_view(generator, z, path):
    """The same attention as an interactive page (`image_view`,
    self-contained, opens offline): click a pixel of the generated image
    to see where its 16x16 position attends. For the first latent of `z`;
    the weights come from `collect_attention` (one call, inference mode)."""
    from keras_attention.visualization import collect_attention
    from keras_attention.visualization import image_view

    attention = collect_attention(generator, z[:1])
    image = (np.array(generator(z[:1], training=False))[0] + 1) / 2  # tanh -> [0, 1]
    view = image_view(attention, image, title="SAGAN generator: click a pixel")
    return view.save(path)


def save_attention_pictures(generator, z, output_dir):
    """`attention.png` (three samples, three chosen query pixels each) and
    `attention_view.html` (the first sample, any pixel)."""
    save_attention_picture(generator, z[:3], os.path.join(output_dir, "attention.png"))
    save_attention_view(generator, z, os.path.join(output_dir, "attention_view.html"))


# ----------------------------------------------------------------------------
# Quality
# ----------------------------------------------------------------------------


def build_classifier(seed):
    """`(classifier, scorer)`: a small CNN for real digits, compiled, and the
    same layers giving `[class probabilities, penultimate features]`; the
    features are the space of the quality measures."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 1))
    x = layers.Conv2D(32, 3, activation="relu", padding="same")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    features = layers.Dense(128, activation="relu", name="features")(x)
    outputs = layers.Dense(10, activation="softmax")(features)
    classifier = keras.Model(inputs, outputs)
    classifier.compile(
        optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return classifier, keras.Model(inputs, [outputs, features])


def train_classifier(images, labels, epochs, seed):
    """`(classifier, scorer, held-out accuracy)` of `build_classifier`
    trained on the first 80% of the real digits."""
    classifier, scorer = build_classifier(seed)
    split = int(0.8 * len(images))
    classifier.fit(
        images[:split],
        labels[:split],
        validation_data=(images[split:], labels[split:]),
        epochs=epochs,
        batch_size=128,
        verbose=2,
    )
    accuracy = classifier.evaluate(images[split:], labels[split:], verbose=0)[1]
    return classifier, scorer, float(accuracy)


def load_or_train_classifier(images, labels, epochs, seed, directory):
    """`(scorer, accuracy)` of `train_classifier`, trained once per
    `directory` (`classifier.weights.h5` and `classifier.json`) so every run
    of a comparison, resumed or not, is scored by the same classifier."""
    weights_path = os.path.join(directory, "classifier.weights.h5")
    record_path = os.path.join(directory, "classifier.json")
    config = {"images": len(images), "epochs": epochs, "seed": seed}
    if os.path.exists(weights_path) and os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
        if record["config"] == config:
            classifier, scorer = build_classifier(seed)
            # The file holds the optimizer's state too: build it first.
            classifier.optimizer.build(classifier.trainable_variables)
            classifier.load_weights(weights_path)
            status(f"Evaluation classifier: loaded {weights_path}")
            return scorer, record["accuracy"]
    status("Training the evaluation classifier on real digits...")
    classifier, scorer, accuracy = train_classifier(images, labels, epochs, seed)
    classifier.save_weights(weights_path)
    runs.write_json(record_path, {"config": config, "accuracy": accuracy})
    return scorer, accuracy


def real_reference(scorer, real_images, k):
    """The real images' features, and the floors of the measures: the
    Frechet distance, precision and recall of one half of the real set
    against the other (a perfect generator of half as many samples)."""
    _, features = scorer.predict(real_images, batch_size=256, verbose=0)
    half = len(features) // 2
    floor = precision_recall(features[:half], features[half:], k)
    return {
        "features": features,
        "frechet_distance_real_vs_real": frechet_distance(
            features[:half], features[half:]
        ),
        "precision_real_vs_real": floor["precision"],
        "recall_real_vs_real": floor["recall"],
    }


def score_draw(generator, scorer, real_features, num_samples, latent_dim, seed, k):
    """The measures of one draw of `num_samples` generated images."""
    z = np.random.default_rng(seed).normal(size=(num_samples, latent_dim))
    fake = np.array(generator.predict(z.astype("float32"), batch_size=256, verbose=0))
    probs, fake_features = scorer.predict(fake, batch_size=256, verbose=0)
    counts = np.bincount(probs.argmax(-1), minlength=10)
    shares = counts / counts.sum()
    return {
        "frechet_distance": frechet_distance(fake_features, real_features),
        **precision_recall(real_features, fake_features, k),
        "mean_top_class_confidence": float(probs.max(-1).mean()),
        "classes_present": int((counts > 0).sum()),
        "smallest_class_share": float(shares.min()),
        "class_histogram": shares.round(4).tolist(),
    }


DRAW_MEASURES = (
    "frechet_distance", "precision", "recall", "mean_top_class_confidence",
    "smallest_class_share",
)  # fmt: skip


def evaluate(generator, scorer, real, num_samples, latent_dim, seed, draws=1, k=3):
    """The measures over `draws` independent draws of `num_samples` images
    (`real` from `real_reference`): each measure's mean over the draws and
    its spread (`{name}_std_over_draws`), the fewest classes present in a
    draw, the mean class histogram, every draw, and the real-vs-real floors."""
    scores = [
        score_draw(generator, scorer, real["features"], num_samples, latent_dim,
                   (seed, draw), k)
        for draw in range(draws)
    ]  # fmt: skip
    report = {"samples": int(num_samples), "draws": scores, "k": k}
    for name in DRAW_MEASURES:
        spread = mean_std([score[name] for score in scores])
        report[name], report[f"{name}_std_over_draws"] = spread["mean"], spread["std"]
    report["classes_present"] = min(score["classes_present"] for score in scores)
    histogram = np.mean([score["class_histogram"] for score in scores], axis=0)
    report["class_histogram"] = histogram.round(4).tolist()
    report.update({name: value for name, value in real.items() if name != "features"})
    return report


# ----------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------


def parse_args(argv):
    parser = example_parser(__doc__.split("\n\n")[1])
    add = parser.add_argument
    add("--dataset", choices=("digits", "mnist"), default="digits")
    add("--data-dir", default=None,
        help="folder with the MNIST t10k IDX files (default: download them)")  # fmt: skip
    add("--epochs", type=int, default=30)
    add("--batch-size", type=int, default=64,
        help="batch size per replica (global batch: this x the number of "
        "replicas of --strategy)")  # fmt: skip
    add("--latent-dim", type=int, default=64)
    add("--width", type=int, default=32, help="base channel width")
    add("--g-lr", type=float, default=1e-4, help="generator LR")
    add("--d-lr", type=float, default=4e-4, help="discriminator LR")
    add("--limit", type=int, default=None, help="use only this many real images")
    add("--block", choices=BLOCKS, default="attention",
        help="the 16x16 block of both networks: self-attention, or the "
        "ablation's residual convolution with as many weights")  # fmt: skip
    add("--compare-ablation", action="store_true",
        help="train both blocks, each with every --seeds, in "
        "<output-dir>/<block>_seed<N> (finished runs are kept, interrupted ones "
        "resume), and write the side-by-side results.md and results.json")  # fmt: skip
    add("--seeds", type=int, nargs="+", default=None,
        help="the GAN seeds of a comparison (default: --seed)")  # fmt: skip
    add("--eval-samples", type=int, default=10000,
        help="generated images scored per draw")  # fmt: skip
    add("--eval-draws", type=int, default=3,
        help="independent draws of --eval-samples images scored per model (the "
        "spread of the measures over draws)")  # fmt: skip
    add("--pr-k", type=int, default=3,
        help="k of the k-NN radii of precision and recall")  # fmt: skip
    add("--classifier-epochs", type=int, default=5)
    add("--seed", type=int, default=0,
        help="the GAN's seed, and the evaluation classifier's")  # fmt: skip
    distribute.add_strategy_flags(parser)
    distribute.add_jit_compile_flag(parser)
    add("--output-dir", default="outputs/sagan")
    add("--smoke", action="store_true", help="tiny sizes, 1 epoch: a quick check")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.limit, args.eval_samples = 1, 256, 256
        args.classifier_epochs, args.width = 1, 8
    for name in ("epochs", "batch_size", "latent_dim", "width", "eval_samples",
                 "eval_draws", "pr_k"):  # fmt: skip
        if getattr(args, name) <= 0:
            raise ValueError(
                f"`--{name.replace('_', '-')}` must be positive. "
                f"Received: {getattr(args, name)}"
            )
    return args


def fixed_latents(args):
    """The 32 latent vectors of the sample grids and the attention picture."""
    rng = np.random.default_rng(args.seed)
    return rng.normal(size=(32, args.latent_dim)).astype("float32")


TRAINING_FLAGS = (
    "dataset", "limit", "epochs", "batch_size", "latent_dim", "width", "g_lr",
    "d_lr", "seed", "block",
)  # fmt: skip


def build_gan(args, strategy):
    """The GAN of `args`, compiled and built, optimizers included, in
    `strategy`'s scope (variables are created mirrored on every replica)."""
    with strategy.scope():
        synchronized = strategy.num_replicas_in_sync > 1
        generator = build_generator(
            args.latent_dim, args.width, synchronized, args.block
        )
        discriminator = build_discriminator(args.width, args.block)
        gan = SAGAN(generator, discriminator, args.latent_dim)
        gan.compile(
            g_optimizer=keras.optimizers.Adam(args.g_lr, beta_1=0.0, beta_2=0.9),
            d_optimizer=keras.optimizers.Adam(args.d_lr, beta_1=0.0, beta_2=0.9),
            jit_compile=distribute.jit_compile_for(args, strategy),
        )
        gan(fixed_latents(args)[:1])  # build, so BackupAndRestore can restore
        # The optimizers' variables too (and mirrored): left to the first
        # `apply`, they would be created inside the distributed step, which
        # fails under MirroredStrategy, and a backup could not be restored.
        gan.g_optimizer.build(generator.trainable_variables)
        gan.d_optimizer.build(discriminator.trainable_variables)
    return gan


def load_trained(gan, args):
    """The training seconds of the run in `args.output_dir` if it finished
    training with the same flags (its weights loaded into `gan`), else
    None. (Under multi-worker training the workers must share the disk.)"""
    record_path = os.path.join(args.output_dir, "train.json")
    weights_path = os.path.join(args.output_dir, "model.weights.h5")
    if not (os.path.exists(record_path) and os.path.exists(weights_path)):
        return None
    with open(record_path) as f:
        record = json.load(f)
    if record["config"] != {name: getattr(args, name) for name in TRAINING_FLAGS}:
        raise ValueError(
            f"`{args.output_dir}` holds a GAN trained with other settings: "
            f"{record['config']}; use another `--output-dir`."
        )
    gan.load_weights(weights_path)
    status(f"[{args.block} seed {args.seed}] trained before: loaded {weights_path}")
    return record["train_seconds"]


def train(args, strategy, images, output_dir, reuse=False):
    """Build the GAN in `strategy`'s scope and fit it; writes its weights,
    `history.json` (e.g. for `examples/common/compare_runs.py`) and
    `train.json`. `reuse=True`: a run that finished training is loaded.

    Returns `(generator, discriminator, training seconds)`.
    """
    gan = build_gan(args, strategy)
    seconds = load_trained(gan, args) if reuse else None
    if seconds is not None:
        return gan.generator, gan.discriminator, seconds
    # BackupAndRestore resumes each worker from its own lasting directory,
    # and the data from the epoch it resumes at.
    backup_dir = distribute.backup_dir_for(
        os.path.join(args.output_dir, "backup"), strategy
    )
    first_epoch = min(distribute.resumed_epoch(backup_dir), args.epochs - 1)
    batch_size = distribute.global_batch_size(args.batch_size, strategy)
    dataset = make_dataset(
        images, batch_size, args.latent_dim, args.seed, args.epochs, first_epoch
    )
    log_path = os.path.join(output_dir, "log.csv")
    callbacks = [
        SampleGrid(fixed_latents(args), output_dir),
        EpochSeconds(),
        keras.callbacks.CSVLogger(log_path, append=True),  # a resumed run adds
        # A killed run restarts from the last finished epoch.
        keras.callbacks.BackupAndRestore(backup_dir),
    ]
    status(f"Global batch {batch_size}, {len(images) // batch_size} steps per epoch")
    start = time.time()
    history = gan.fit(
        distribute.shard_by_data(dataset),
        epochs=args.epochs,
        steps_per_epoch=len(images) // batch_size,  # one iterator, all epochs
        callbacks=callbacks,
        verbose=2,
        shuffle=False,  # make_dataset shuffles
    )
    status(f"GAN training took {time.time() - start:.0f} s")
    # Every epoch's time, also those before an interruption.
    seconds = sum(float(row["seconds"]) for row in runs.last_epoch_rows(log_path))
    gan.save_weights(os.path.join(output_dir, "model.weights.h5"))
    with open(os.path.join(output_dir, "history.json"), "w") as f:
        json.dump({k: [float(x) for x in v] for k, v in history.history.items()}, f)
    config = {name: getattr(args, name) for name in TRAINING_FLAGS}
    runs.write_json(os.path.join(output_dir, "train.json"),
                    {"config": config, "train_seconds": seconds})  # fmt: skip
    return gan.generator, gan.discriminator, seconds


def run_summary(args, generator, discriminator, train_seconds):
    """The fields of a run's report that are not measures of its images."""
    return {
        "dataset": args.dataset,
        "epochs": args.epochs,
        "block": args.block,
        "seed": args.seed,
        "config": {name: getattr(args, name) for name in TRAINING_FLAGS},
        "train_seconds": round(train_seconds, 1),
        "gamma_generator": float(gated_block(generator).gamma.numpy()),
        "gamma_discriminator": float(gated_block(discriminator).gamma.numpy()),
    }


def export_and_check(generator, output_dir, z):
    """The generator as a SavedModel, reloaded and checked against `z`."""
    export_dir = os.path.join(output_dir, "generator_savedmodel")
    generator.export(export_dir, verbose=False)
    reloaded = tf.saved_model.load(export_dir)
    difference = np.abs(
        np.array(reloaded.serve(z)) - np.array(generator(z, training=False))
    ).max()
    status(f"SavedModel at {export_dir}; max difference after reload: {difference:.2e}")
    if difference > 1e-5:
        raise RuntimeError("The reloaded SavedModel does not match the generator.")


def single_run(args, strategy, images, labels, argv):
    """One GAN of `--block` and `--seed` in `--output-dir`: trained, its
    attention pictured, scored (`quality.json`) and exported."""
    # Only the chief's outputs are kept (other workers write to a temp dir).
    output_dir = distribute.output_dir_for(args.output_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)
    generator, discriminator, train_seconds = train(args, strategy, images, output_dir)
    fixed_z = fixed_latents(args)
    if args.block == "attention":
        save_attention_pictures(generator, fixed_z, output_dir)
    status("Training the evaluation classifier on real digits...")
    _, scorer, accuracy = train_classifier(
        images, labels, args.classifier_epochs, args.seed
    )
    real = real_reference(scorer, images, args.pr_k)
    report = evaluate(generator, scorer, real, args.eval_samples, args.latent_dim,
                      args.seed + 1, args.eval_draws, args.pr_k)  # fmt: skip
    report.update(
        run_summary(args, generator, discriminator, train_seconds),
        classifier_accuracy=accuracy,
        provenance=runs.provenance(__file__, argv),
    )
    print(json.dumps(report, indent=2))
    runs.write_json(os.path.join(output_dir, "quality.json"), report, indent=2)
    export_and_check(generator, output_dir, fixed_z[:4])
    distribute.cleanup_output_dir(output_dir, strategy)
    return report


def evaluation_config(args):
    """The flags that shape a comparison's scores (the classifier's too)."""
    return {"eval_samples": args.eval_samples, "eval_draws": args.eval_draws,
            "pr_k": args.pr_k, "classifier_epochs": args.classifier_epochs,
            "classifier_seed": args.seed, "limit": args.limit}  # fmt: skip


def finished_report(run_args, evaluation):
    """The report in `quality.json` of a run trained with the flags of
    `run_args` and scored as `evaluation` says, or None: then the run is
    trained, or loaded and scored again (`train` refuses a trained GAN
    whose training flags have changed)."""
    path = os.path.join(run_args.output_dir, "quality.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    config = {name: getattr(run_args, name) for name in TRAINING_FLAGS}
    if report.get("evaluation") != evaluation or report.get("config") != config:
        return None
    status(f"[{run_args.block} seed {run_args.seed}] finished before: {path}")
    return report


def run_one(args, strategy, images, scoring, block, seed, argv):
    """One run of a comparison in `<output-dir>/<block>_seed<seed>`:
    its report, read back when `quality.json` is there (a finished run),
    else trained (resuming from its backup, or loaded when it finished
    training), pictured and scored with `scoring = (scorer, real_reference)`."""
    run_dir = os.path.join(args.output_dir, f"{block}_seed{seed}")
    run_args = argparse.Namespace(
        **{**vars(args), "block": block, "seed": seed, "output_dir": run_dir}
    )
    evaluation = evaluation_config(args)
    report = finished_report(run_args, evaluation)
    if report is not None:
        return report
    keras.utils.set_random_seed(seed)
    output_dir = distribute.output_dir_for(run_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)
    generator, discriminator, seconds = train(
        run_args, strategy, images, output_dir, reuse=True
    )
    if block == "attention":
        save_attention_pictures(generator, fixed_latents(run_args), output_dir)
    scorer, real = scoring
    report = evaluate(generator, scorer, real, args.eval_samples, args.latent_dim,
                      seed + 1, args.eval_draws, args.pr_k)  # fmt: skip
    report.update(
        run_summary(run_args, generator, discriminator, seconds),
        evaluation=evaluation,
        provenance=runs.provenance(__file__, argv),
    )
    runs.write_json(os.path.join(output_dir, "quality.json"), report, indent=2)
    distribute.cleanup_output_dir(output_dir, strategy)
    return report


SUMMARY_MEASURES = DRAW_MEASURES + (
    "classes_present", "frechet_distance_std_over_draws", "gamma_generator",
    "gamma_discriminator", "train_seconds",
)  # fmt: skip


def summarize(records):
    """`(summary, noise)` of `{block: {seed: report}}`: per block, each
    measure's `mean_std` over the seeds (of each run's mean over draws);
    and the Frechet distance's noise: its spread over draws of the same
    generator (the mean over runs of their standard deviation over draws)
    and over generator seeds (the standard deviation of the runs' means)."""
    summary, noise = {}, {}
    for block, by_seed in records.items():
        reports = list(by_seed.values())
        summary[block] = {
            name: mean_std([report[name] for report in reports])
            for name in SUMMARY_MEASURES
        }
        noise[block] = {
            "frechet_distance_std_over_draws": summary[block][
                "frechet_distance_std_over_draws"
            ]["mean"],
            "frechet_distance_std_over_seeds": summary[block]["frechet_distance"][
                "std"
            ],
        }
    return summary, noise


# (measure, column, format) of the table's columns.
TABLE_COLUMNS = (
    ("frechet_distance", "FD", "{:.2f}"),
    ("precision", "precision", "{:.3f}"),
    ("recall", "recall", "{:.3f}"),
    ("mean_top_class_confidence", "confidence", "{:.3f}"),
    ("classes_present", "classes", "{:.3g}"),
    ("smallest_class_share", "smallest class", "{:.3f}"),
    ("gamma_generator", "gamma G", "{:.3f}"),
    ("gamma_discriminator", "gamma D", "{:.3f}"),
    ("train_seconds", "train s", "{:.0f}"),
)


def _cell(value, spread, pattern):
    text = pattern.format(value)
    return text if spread is None else f"{text} ± {pattern.format(spread)}"


def _weights_line(parameters):
    """The weights of each network with each block, e.g. `generator
    378,594 / 378,594` for `attention / conv`."""

    def counts(kind):
        return ", ".join(
            f"{network} " + " / ".join(f"{by[network][kind]:,}" for by in parameters.values())
            for network in ("generator", "discriminator")
        )  # fmt: skip

    return (
        f"Trainable weights ({' / '.join(parameters)}): {counts('trainable')}; "
        f"in the 16x16 block: {counts('block_trainable')}. All weights, with the "
        "spectral normalizations' vectors and the batch-norm statistics: "
        f"{counts('all')}."
    )


def comparison_table(results):
    """Markdown lines of a comparison (`compare`'s results): a row per run
    (each measure's mean ± its spread over the draws), a row per block (mean
    ± standard deviation over the seeds), the noise of the Frechet distance
    and the attention pictures."""
    real = results["real_vs_real"]
    lines = [
        f"# SAGAN and its ablation: {results['dataset']}, {results['epochs']} "
        f"epochs, seeds {', '.join(map(str, results['seeds']))}",
        "",
        _weights_line(results["parameters"]),
        "",
        f"Measures over {results['eval_draws']} draws of {results['eval_samples']:,} "
        "generated images in the 128-d feature space of a classifier with "
        f"{100 * results['classifier_accuracy']:.1f}% held-out accuracy on real "
        f"digits; precision and recall with k={results['k']}. Real vs real (two "
        f"halves): FD {real['frechet_distance_real_vs_real']:.2f}, precision "
        f"{real['precision_real_vs_real']:.3f}, recall "
        f"{real['recall_real_vs_real']:.3f}.",
        "",
        *runs.markdown_header(["block", "seed", *(c for _, c, _ in TABLE_COLUMNS)]),
    ]
    for block, by_seed in results["runs"].items():
        for seed, report in by_seed.items():
            cells = [_cell(report[m], report.get(f"{m}_std_over_draws"), f)
                     for m, _, f in TABLE_COLUMNS]  # fmt: skip
            lines.append(f"| {block} | {seed} | " + " | ".join(cells) + " |")
        summary = results["summary"][block]
        cells = [_cell(summary[m]["mean"], summary[m]["std"], f)
                 for m, _, f in TABLE_COLUMNS]  # fmt: skip
        lines.append(f"| **{block}** | mean ± std | " + " | ".join(cells) + " |")
    lines += ["", "Noise of the Frechet distance: " + "; ".join(
        f"{block}: {n['frechet_distance_std_over_draws']:.2f} over draws of one "
        f"generator (mean std), {n['frechet_distance_std_over_seeds']:.2f} over "
        "seeds (std of the runs' means)"
        for block, n in results["noise"].items())]  # fmt: skip
    pictures = [f"`{block}_seed{seed}/attention.png` (`attention_view.html`)"
                for block, by_seed in results["runs"].items() if block == "attention"
                for seed in by_seed]  # fmt: skip
    if pictures:
        lines += ["", "Attention maps: " + ", ".join(pictures) + "."]
    return lines


def compare(args, strategy, images, labels, argv):
    """Train and score every block (`--compare-ablation`: both) with every
    seed, one run at a time, and write the side-by-side table."""
    blocks = BLOCKS if args.compare_ablation else (args.block,)
    seeds = args.seeds or [args.seed]
    output_dir = distribute.output_dir_for(args.output_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)
    counts = {block: parameter_counts(args.latent_dim, args.width, block)
              for block in blocks}  # fmt: skip
    for block, count in counts.items():
        status(f"{block}: trainable weights: generator "
               f"{count['generator']['trainable']:,}, discriminator "
               f"{count['discriminator']['trainable']:,}")  # fmt: skip
    scorer, accuracy = load_or_train_classifier(
        images, labels, args.classifier_epochs, args.seed, output_dir
    )
    real = real_reference(scorer, images, args.pr_k)
    records = {block: {} for block in blocks}
    for seed in seeds:  # both blocks of a seed first: paired results early
        for block in blocks:
            records[block][str(seed)] = run_one(
                args, strategy, images, (scorer, real), block, seed, argv
            )
    summary, noise = summarize(records)
    results = {
        "dataset": args.dataset, "epochs": args.epochs, "seeds": seeds,
        "eval_samples": args.eval_samples, "eval_draws": args.eval_draws,
        "k": args.pr_k, "parameters": counts, "classifier_accuracy": accuracy,
        "real_vs_real": {k: v for k, v in real.items() if k != "features"},
        "runs": records, "summary": summary, "noise": noise,
    }  # fmt: skip
    runs.write_results(output_dir, results, args, comparison_table(results),
                       source=runs.provenance(__file__, argv))  # fmt: skip
    distribute.cleanup_output_dir(output_dir, strategy)
    return results


def main(argv=None):
    args = parse_args(argv)
    # First, before any other TensorFlow op: `mirrored` on a CPU splits it
    # into logical devices, `multiworker` connects to the other workers.
    strategy = distribute.make_strategy(args)
    status(f"Strategy: {distribute.describe(strategy)}")
    keras.utils.set_random_seed(args.seed)
    images, labels = load_digits_dataset(args.dataset, args.data_dir, args.limit)
    status(f"{len(images)} real {args.dataset} images of shape {images.shape[1:]}")
    if args.compare_ablation or args.seeds:
        return compare(args, strategy, images, labels, argv)
    return single_run(args, strategy, images, labels, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
