"""`keras_attention.distribution`: layouts for `keras.distribution`.

In-process (any backend, no extra devices: a `DeviceMesh` of device names is
enough to look layouts up), the map's keys are checked against the real
variable paths of the package's layers and models. The training check runs
`layout_map_training.py` in a fresh JAX process with eight virtual CPU
devices: three steps of a `models.Transformer` under `DataParallel` (8
devices) and `ModelParallel` (mesh 2 batch x 4 model, our map) must give the
one-device losses and weights, and the weights must really be split as the
map says.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_attention as ka

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = pathlib.Path(__file__).with_name("layout_map_training.py")
ATOL = 1e-5  # measured differences are ~2e-7
TIMEOUT = 300  # seconds; the script takes ~20 s on two busy CPU cores


def _mesh(shape=(2, 4), axis_names=("batch", "model")):
    devices = [f"cpu:{i}" for i in range(int(np.prod(shape)))]
    return keras.distribution.DeviceMesh(shape, axis_names, devices=devices)


def _transformer(**kwargs):
    """Distinct sizes, so each axis can be told by its length: D=24, N=8,
    H=3, F=40, vocabularies 48 and 56."""
    config = dict(
        encoder_vocabulary_size=48,
        decoder_vocabulary_size=56,
        hidden_dim=24,
        num_heads=8,
        intermediate_dim=40,
        num_encoder_layers=2,
        num_decoder_layers=1,
    )
    model = ka.models.Transformer(**{**config, **kwargs})
    model.build()
    return model


def _sharded_axes(model, layouts):
    """`{path: {mesh axis: length of the variable axis split over it}}`."""
    table = {}
    for variable in model.variables:
        layout = layouts[variable.path]
        if layout is not None:
            table[variable.path] = {
                axis: variable.shape[i]
                for i, axis in enumerate(layout.axes)
                if axis is not None
            }
    return table


# -- the map on real variable paths -----------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"tie_weights": True},
        {"normalize_first": True},
        {"position_encoding": "rope", "hidden_dim": 32},
    ],
    ids=["default", "tied", "pre_ln", "rope"],
)
def test_transformer_every_matrix_is_sharded(kwargs):
    model = _transformer(**kwargs)
    replicated = ka.distribution.check_layout_map(
        model, ka.distribution.layout_map(_mesh())
    )
    # What is left are vectors no longer than D: layer norms, output
    # biases (and the seed generators' states).
    assert replicated, "the layer norms should be replicated"
    for variable in replicated:
        assert len(variable.shape) <= 1, variable.path
        assert variable.shape[0] <= model.hidden_dim, variable.path


def test_transformer_heads_feedforward_and_vocabulary_go_over_the_model_axis():
    model = _transformer()
    table = _sharded_axes(model, ka.distribution.layout_map(_mesh()))
    heads, fused, width, feedforward = 8, 3 * 24, 24, 40
    for path, axes in table.items():
        # The model axis splits heads, the fused [Q|K|V] columns, the
        # feed-forward width or a vocabulary; the data axis only ever the
        # width D of a kernel.
        assert axes["model"] in (heads, fused, feedforward, 48, 56), (path, axes)
        assert axes.get("batch", width) == width, (path, axes)
    kinds = {
        "cross_attention/query/kernel": {"batch": width, "model": heads},
        "cross_attention/value/bias": {"model": heads},
        "self_attention/qkv/kernel": {"batch": width, "model": fused},
        "self_attention/attention_output/kernel": {"model": heads, "batch": width},
        "feedforward_intermediate_dense/kernel": {
            "batch": width,
            "model": feedforward,
        },
        "feedforward_intermediate_dense/bias": {"model": feedforward},
        "feedforward_output_dense/kernel": {"model": feedforward, "batch": width},
        "decoder_embedding/embeddings": {"model": 56, "batch": width},
        "output_projection/kernel": {"batch": width, "model": 56},
    }
    for suffix, expected in kinds.items():
        matches = [axes for path, axes in table.items() if path.endswith(suffix)]
        assert matches and all(axes == expected for axes in matches), suffix


def test_without_data_axis_weights_are_split_over_the_model_axis_only():
    model = _transformer()
    layouts = ka.distribution.layout_map(_mesh(), data_parallel_dim_name=None)
    table = _sharded_axes(model, layouts)
    assert table and all(set(axes) == {"model"} for axes in table.values())


@pytest.mark.parametrize(
    "position_encoding, pattern",
    [
        ("learned", r"transformer/(en|de)coder_positions/embeddings"),
        ("relative", r".*/self_attention/relative_position_bias(_\d+)?/table"),
    ],
)
def test_position_tables_stay_replicated(position_encoding, pattern):
    model = _transformer(position_encoding=position_encoding)
    replicated = ka.distribution.check_layout_map(
        model, ka.distribution.layout_map(_mesh())
    )
    matrices = [v.path for v in replicated if len(v.shape) > 1]
    # One table per side (learned), or per self-attention layer (relative).
    assert len(matrices) == (2 if position_encoding == "learned" else 3), matrices
    assert all(re.fullmatch(pattern, path) for path in matrices), matrices


def _functional(layer, width=24, call=None):
    tokens = keras.Input((6, width))
    outputs = call(layer, tokens) if call else layer(tokens)
    return keras.Model(tokens, outputs)


@pytest.mark.parametrize(
    "make",
    [
        lambda: _functional(
            ka.layers.MultiHeadAttention(8, 3, use_gate=True),
            call=lambda layer, x: layer(x, x),
        ),
        lambda: _functional(
            keras.layers.MultiHeadAttention(8, 3), call=lambda layer, x: layer(x, x)
        ),
        lambda: _functional(ka.layers.MultiHeadSelfAttention(8, 3)),
        lambda: _functional(
            ka.layers.TransformerEncoderBlock(num_heads=8, intermediate_dim=40)
        ),
        lambda: _functional(
            ka.layers.TransformerDecoderBlock(num_heads=8, intermediate_dim=40),
            call=lambda layer, x: layer(x, x),
        ),
        lambda: _functional(ka.layers.UniversalTransformerEncoder(8, 40)),
    ],
    ids=[
        "mha_gated",
        "keras_mha",
        "self_attention",
        "encoder_block",
        "decoder_block",
        "universal",
    ],
)
def test_layers_every_kernel_is_sharded(make):
    model = make()
    replicated = ka.distribution.check_layout_map(
        model, ka.distribution.layout_map(_mesh())
    )
    kernels = [v.path for v in replicated if len(v.shape) > 1]
    # The Universal Transformer's halting unit is a (D, 1) kernel.
    assert all(path.endswith("halting_unit/kernel") for path in kernels), kernels
    assert len(replicated) < len(model.variables)


def test_similar_names_do_not_match():
    layouts = ka.distribution.layout_map(_mesh())
    for path in (
        "monkey/kernel",
        "model/turnkey/kernel",
        "encoder/block_0/self_attention/attention_output/bias",
        "encoder/block_0/feedforward_output_dense/bias",
        "embedding/embeddings",
        "encoder_positions/embeddings",
        "query/kernel/extra",
    ):
        assert layouts[path] is None, path
    assert layouts["key/kernel"].axes == ("batch", "model", None)


# -- argument errors --------------------------------------------------------


def test_layout_map_argument_errors():
    mesh = _mesh()
    with pytest.raises(TypeError, match=r"`device_mesh` must be .*Received: .*tuple"):
        ka.distribution.layout_map((2, 4))
    with pytest.raises(
        ValueError, match=r"`model_parallel_dim_name` .*Received: .*='heads'"
    ):
        ka.distribution.layout_map(mesh, model_parallel_dim_name="heads")
    with pytest.raises(ValueError, match=r"`data_parallel_dim_name` .*='data'"):
        ka.distribution.layout_map(mesh, data_parallel_dim_name="data")
    with pytest.raises(ValueError, match=r"`model_parallel_dim_name` .*=None"):
        ka.distribution.layout_map(mesh, model_parallel_dim_name=None)
    with pytest.raises(ValueError, match="must be different mesh axes"):
        ka.distribution.layout_map(
            mesh, model_parallel_dim_name="model", data_parallel_dim_name="model"
        )
    custom = ka.distribution.layout_map(
        _mesh(axis_names=("data", "tensor")),
        model_parallel_dim_name="tensor",
        data_parallel_dim_name="data",
    )
    assert custom["a/qkv/kernel"].axes == ("data", "tensor")


def test_check_layout_map_errors():
    layouts = ka.distribution.layout_map(_mesh())
    odd = _transformer(decoder_vocabulary_size=30)
    with pytest.raises(
        ValueError,
        match=r"decoder_embedding/embeddings'.*size 30 .*'model' of size 4.*"
        r"Received: shape=\(30, 24\)",
    ):
        ka.distribution.check_layout_map(odd, layouts)
    with pytest.raises(ValueError, match=r"`model` must be built.*built=False"):
        ka.distribution.check_layout_map(
            ka.layers.TransformerEncoderBlock(num_heads=8, intermediate_dim=40), layouts
        )
    with pytest.raises(TypeError, match=r"`model` must be .*Received: .*list"):
        ka.distribution.check_layout_map([], layouts)
    with pytest.raises(TypeError, match=r"`layout_map` must be .*dict"):
        ka.distribution.check_layout_map(_transformer(), {})
    # A hand-written key with more axes than the variable.
    extra = keras.distribution.LayoutMap(_mesh())
    extra[".*layer_norm/gamma"] = ("model", None)
    with pytest.raises(ValueError, match=r"layout has 2 axes, the variable 1"):
        ka.distribution.check_layout_map(_transformer(), extra)


# -- training on eight virtual devices --------------------------------------


def _run_script(out):
    # The child's time is mostly XLA compiling three training steps, which
    # it does in about a third less time without LLVM's optimisation passes
    # (measured 29 s -> 19 s alone).
    # The sharding is decided before code generation, and the three runs
    # compared share the flag (their numbers move by float32 round-off).
    flags = (
        "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
    )
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": flags,
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,  # kills the child when it runs over
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _expected_spec(path):
    """The axes the map should give `path`, written out by hand."""
    rules = {
        ("query/kernel", "key/kernel", "value/kernel"): ["batch", "model", None],
        ("query/bias", "key/bias", "value/bias"): ["model", None],
        ("qkv/kernel",): ["batch", "model"],
        ("qkv/bias",): ["model"],
        ("attention_output/kernel",): ["model", None, "batch"],
        ("feedforward_intermediate_dense/kernel",): ["batch", "model"],
        ("feedforward_intermediate_dense/bias",): ["model"],
        ("feedforward_output_dense/kernel",): ["model", "batch"],
        ("embedding/embeddings",): ["model", "batch"],
        ("output_projection/kernel",): ["batch", "model"],
        ("output_projection/bias",): ["model"],
    }
    for suffixes, spec in rules.items():
        if path.endswith(suffixes):
            return spec
    return None  # replicated


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="needs jax (the `jax` extra, which `make test-jax` installs)",
)
def test_data_and_model_parallel_training_match_one_device(tmp_path):
    # One test, one child process: under pytest-xdist separate tests could
    # each start the 20-second script on another worker.
    _run_script(tmp_path)
    arrays = np.load(tmp_path / "results.npz")
    meta = json.loads((tmp_path / "shardings.json").read_text())
    count = int(arrays["initial"])

    def final(run):
        return [arrays[f"{run}/final/{i:03d}"] for i in range(count)]

    reference = final("one_device")
    moved = max(
        np.max(np.abs(w - arrays[f"initial/{i:03d}"])) for i, w in enumerate(reference)
    )
    assert moved > 100 * ATOL  # the steps did move the weights
    for run in ("data_parallel", "model_parallel"):
        np.testing.assert_allclose(
            arrays[f"{run}/losses"],
            arrays["one_device/losses"],
            atol=ATOL,
            err_msg=f"{run}: losses",
        )
        for i, (got, want) in enumerate(zip(final(run), reference, strict=True)):
            np.testing.assert_allclose(
                got, want, atol=ATOL, err_msg=f"{run}: weight {i}"
            )

    # DataParallel keeps a whole copy of every weight on every device.
    for path, entry in meta["runs"]["data_parallel"].items():
        assert entry["shard_shape"] == entry["shape"], path

    # ModelParallel: each weight (and its momentum) is split as the map says;
    # e.g. a query kernel (D, N, H) = (16, 4, 4) leaves (8, 1, 4), one head,
    # on each device.
    sizes = {**meta["mesh"], None: 1}
    model_parallel = meta["runs"]["model_parallel"]
    heads = meta["config"]["num_heads"] // meta["mesh"]["model"]
    sharded = 0
    for path, entry in model_parallel.items():
        spec = _expected_spec(path) or [None] * len(entry["shape"])
        assert entry["spec"] == spec, path
        assert entry["momentum_spec"] == spec, path
        shard = [
            dim // sizes[axis] for dim, axis in zip(entry["shape"], spec, strict=True)
        ]
        assert entry["shard_shape"] == shard, path
        sharded += any(spec)
    # 2 embeddings, the output projection's kernel and bias, 3 variables per
    # self-attention (qkv kernel and bias, output kernel), 7 in the
    # cross-attention (q, k, v kernels and biases, output kernel), 3 per FFN.
    assert sharded == 2 + 2 + 3 + 3 + 7 + 3 + 3
    query = model_parallel["transformer/decoder/block_0/cross_attention/query/kernel"]
    assert query["shard_shape"][1] == heads == 1
