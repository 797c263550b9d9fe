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
batch, a picture of where chosen query pixels attend, the generator as a
SavedModel (reloaded and checked), training logs, and a quality report: a
small CNN classifier trained on real digits scores 10,000 generated images
(mean top-class confidence, class histogram) and a Frechet distance in its
feature space against real images, with real-vs-real as the floor.

Run: `python examples/vision/sagan.py --epochs 30 --output-dir outputs/sagan`.

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

Measured (2026-11-29, 2 shared CPU cores, TensorFlow 2.21, Keras 3.15;
before the noise moved into the data and the convolutions before batch
normalization lost their bias, so a rerun gives other numbers, not
re-measured):
`--dataset mnist --data-dir ../shared/data/mnist --epochs 12` (1,872 steps
of 64) trained in 2,592 s wall under heavy load from other jobs (15 min of
CPU time). On 10,000 generated images the evaluation classifier (98.4%
accuracy on held-out real digits) gives a mean top-class confidence of 0.845,
all 10 classes present (5.7% to 14.8% each), and a Frechet distance of 14.3
in its 128-d feature space against real images, where real-vs-real (two
halves of the real set) scores 6.9. The learned `gamma` reached 0.048 in the
generator and 0.179 in the discriminator.
"""

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
from examples.common.cli import example_parser  # noqa: E402
from examples.common.cli import status  # noqa: E402
from examples.common.files import sha256  # noqa: E402

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


def build_generator(latent_dim, width, synchronized=False):
    """z -> 4x4 -> 8x8 -> 16x16 (self-attention) -> 32x32 image in [-1, 1].

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
    x = ka.layers.SelfAttention2D(use_spectral_norm=True, name="g_attention")(x)
    x = layers.UpSampling2D()(x)
    x = sn(layers.Conv2D(width, 3, padding="same", use_bias=False))(x)
    x = layers.BatchNormalization(synchronized=synchronized, name="g_bn2")(x)
    x = layers.ReLU()(x)
    image = layers.Conv2D(1, 3, padding="same", activation="tanh", name="image")(x)
    return keras.Model(z, image, name="generator")


def build_discriminator(width):
    """32x32 image -> 16x16 (self-attention) -> 8x8 -> 4x4 -> real/fake score."""
    image = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 1), name="image")
    x = sn(layers.Conv2D(width, 4, strides=2, padding="same"))(image)  # 16x16
    x = layers.LeakyReLU(0.1, name="d_act0")(x)
    x = ka.layers.SelfAttention2D(use_spectral_norm=True, name="d_attention")(x)
    for channels in (2 * width, 4 * width):  # 8x8, 4x4
        x = sn(layers.Conv2D(channels, 4, strides=2, padding="same"))(x)
        x = layers.LeakyReLU(0.1)(x)
    x = layers.Flatten()(x)
    score = sn(layers.Dense(1))(x)
    return keras.Model(image, score, name="discriminator")


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
            # How much each network has come to rely on self-attention.
            "gamma_g": self.generator.get_layer("g_attention").gamma.value,
            "gamma_d": self.discriminator.get_layer("d_attention").gamma.value,
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


# ----------------------------------------------------------------------------
# Quality
# ----------------------------------------------------------------------------


def train_classifier(images, labels, epochs, seed):
    """A small CNN on real digits; its penultimate layer is the feature space."""
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
    return classifier, keras.Model(inputs, [outputs, features]), accuracy


def frechet_distance(a, b):
    """||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)) (Heusel et al.).

    Tr((S_a S_b)^(1/2)) is computed as the sum of the square roots of the
    eigenvalues of the symmetric S_a^(1/2) S_b S_a^(1/2), which stays real and
    stable when a covariance is singular (few samples, many features).
    """
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    values, vectors = np.linalg.eigh(cov_a)
    root_a = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
    middle = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    trace_root = np.sqrt(np.clip(middle, 0, None)).sum()
    return float(
        ((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_root
    )


def evaluate(generator, scorer, real_images, num_samples, latent_dim, seed):
    z = np.random.default_rng(seed).normal(size=(num_samples, latent_dim))
    fake = np.array(generator.predict(z.astype("float32"), batch_size=256, verbose=0))
    probs, fake_features = scorer.predict(fake, batch_size=256, verbose=0)
    _, real_features = scorer.predict(real_images, batch_size=256, verbose=0)
    half = len(real_features) // 2
    counts = np.bincount(probs.argmax(-1), minlength=10)
    return {
        "samples": int(num_samples),
        "mean_top_class_confidence": float(probs.max(-1).mean()),
        "class_histogram": (counts / counts.sum()).round(4).tolist(),
        "classes_present": int((counts > 0).sum()),
        "frechet_distance": frechet_distance(fake_features, real_features),
        "frechet_distance_real_vs_real": frechet_distance(
            real_features[:half], real_features[half:]
        ),
    }


# ----------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------


def parse_args(argv):
    parser = example_parser(__doc__.split("\n\n")[1])
    parser.add_argument("--dataset", choices=("digits", "mnist"), default="digits")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder with the MNIST t10k IDX files (default: download them)",
    )
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="batch size per replica (global batch: this x the "
                        "number of replicas of --strategy)")  # fmt: skip
    parser.add_argument("--latent-dim", type=int, default=64)
    parser.add_argument("--width", type=int, default=32, help="base channel width")
    parser.add_argument("--g-lr", type=float, default=1e-4, help="generator LR")
    parser.add_argument("--d-lr", type=float, default=4e-4, help="discriminator LR")
    parser.add_argument(
        "--limit", type=int, default=None, help="use only this many real images"
    )
    parser.add_argument(
        "--eval-samples", type=int, default=10000, help="generated images scored"
    )
    parser.add_argument("--classifier-epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    distribute.add_strategy_flags(parser)
    distribute.add_jit_compile_flag(parser)
    parser.add_argument("--output-dir", default="outputs/sagan")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, 1 epoch: a quick check"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.limit, args.eval_samples = 1, 256, 256
        args.classifier_epochs, args.width = 1, 8
    for name in ("epochs", "batch_size", "latent_dim", "width", "eval_samples"):
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


def train(args, strategy, images, output_dir):
    """Build the GAN in `strategy`'s scope and fit it; writes its weights and
    `history.json` (e.g. for `examples/common/compare_runs.py`).

    Returns `(generator, discriminator, training seconds)`.
    """
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
    fixed_z = fixed_latents(args)
    with strategy.scope():  # variables are created mirrored on every replica
        synchronized = strategy.num_replicas_in_sync > 1
        generator = build_generator(args.latent_dim, args.width, synchronized)
        discriminator = build_discriminator(args.width)
        gan = SAGAN(generator, discriminator, args.latent_dim)
        gan.compile(
            g_optimizer=keras.optimizers.Adam(args.g_lr, beta_1=0.0, beta_2=0.9),
            d_optimizer=keras.optimizers.Adam(args.d_lr, beta_1=0.0, beta_2=0.9),
            jit_compile=distribute.jit_compile_for(args, strategy),
        )
        gan(fixed_z[:1])  # build, so BackupAndRestore can restore
        # The optimizers' variables too (and mirrored): left to the first
        # `apply`, they would be created inside the distributed step, which
        # fails under MirroredStrategy, and a backup could not be restored.
        gan.g_optimizer.build(generator.trainable_variables)
        gan.d_optimizer.build(discriminator.trainable_variables)
    callbacks = [
        SampleGrid(fixed_z, output_dir),
        keras.callbacks.CSVLogger(os.path.join(output_dir, "log.csv")),
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
    train_seconds = time.time() - start
    status(f"GAN training took {train_seconds:.0f} s")
    gan.save_weights(os.path.join(output_dir, "model.weights.h5"))
    with open(os.path.join(output_dir, "history.json"), "w") as f:
        json.dump({k: [float(x) for x in v] for k, v in history.history.items()}, f)
    return generator, discriminator, train_seconds


def main(argv=None):
    args = parse_args(argv)
    # First, before any other TensorFlow op: `mirrored` on a CPU splits it
    # into logical devices, `multiworker` connects to the other workers.
    strategy = distribute.make_strategy(args)
    status(f"Strategy: {distribute.describe(strategy)}")
    # Only the chief's outputs are kept (other workers write to a temp dir).
    output_dir = distribute.output_dir_for(args.output_dir, strategy)
    os.makedirs(output_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    images, labels = load_digits_dataset(args.dataset, args.data_dir, args.limit)
    status(f"{len(images)} real {args.dataset} images of shape {images.shape[1:]}")
    generator, discriminator, train_seconds = train(args, strategy, images, output_dir)

    fixed_z = fixed_latents(args)
    save_attention_picture(
        generator,
        fixed_z[:3],
        os.path.join(output_dir, "attention.png"),
    )

    status("Training the evaluation classifier on real digits...")
    _, scorer, accuracy = train_classifier(
        images, labels, args.classifier_epochs, args.seed
    )
    report = evaluate(
        generator, scorer, images, args.eval_samples, args.latent_dim, args.seed + 1
    )
    report.update(
        dataset=args.dataset,
        epochs=args.epochs,
        train_seconds=round(train_seconds, 1),
        classifier_accuracy=float(accuracy),
        gamma_generator=float(generator.get_layer("g_attention").gamma.numpy()),
        gamma_discriminator=float(discriminator.get_layer("d_attention").gamma.numpy()),
    )
    print(json.dumps(report, indent=2))
    with open(os.path.join(output_dir, "quality.json"), "w") as f:
        json.dump(report, f, indent=2)

    export_dir = os.path.join(output_dir, "generator_savedmodel")
    generator.export(export_dir, verbose=False)
    reloaded = tf.saved_model.load(export_dir)
    z = fixed_z[:4]
    difference = np.abs(
        np.array(reloaded.serve(z)) - np.array(generator(z, training=False))
    ).max()
    status(f"SavedModel at {export_dir}; max difference after reload: {difference:.2e}")
    if difference > 1e-5:
        raise RuntimeError("The reloaded SavedModel does not match the generator.")
    distribute.cleanup_output_dir(output_dir, strategy)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
