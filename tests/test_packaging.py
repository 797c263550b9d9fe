"""The wheel, as users install it: built offline, installed into a fresh
virtual environment that cannot see this checkout, imported and used there.

The fresh environment reuses the dependencies already installed next to the
running interpreter (TensorFlow, Keras, JAX...) through a `.pth` file that
lists their site-packages. Python adds the directories a `.pth` file names to
`sys.path` without processing the `.pth` files inside them, so the
editable-install hook of this checkout (`__editable__.keras_attention_kit-*.pth`
in .venv) is never run there; the check runs with `python -I` (no PYTHONPATH,
no user site, no current directory on `sys.path`) from an empty directory and
asserts that `keras_attention` is imported from the fresh environment.
"""

import email.parser
import importlib.metadata
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUBPACKAGES = ("ops", "layers", "decoding", "models")

# Runs inside the fresh environment: argv = venv dir, expected version, checkout.
CHECK_SCRIPT = r"""
import importlib
import importlib.metadata
import pathlib
import sys
import tempfile

venv, version, checkout = (pathlib.Path(sys.argv[1]).resolve(), sys.argv[2],
                           pathlib.Path(sys.argv[3]).resolve())
import keras
import numpy as np

import keras_attention as ka

for name in ["keras_attention"] + [f"keras_attention.{s}" for s in sys.argv[4:]]:
    where = pathlib.Path(importlib.import_module(name).__file__).resolve()
    assert where.is_relative_to(venv), (name, str(where))
    assert not where.is_relative_to(checkout), (name, str(where))
assert ka.__version__ == version, ka.__version__
assert importlib.metadata.version("keras-attention-kit") == version

keras.utils.set_random_seed(0)
tokens = keras.Input((None,), dtype="int32")
x = keras.layers.Embedding(50, 8, mask_zero=True)(tokens)
x = ka.layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=8)(x)
x = keras.layers.GlobalAveragePooling1D()(x)
outputs = keras.layers.Dense(2, activation="softmax")(x)
model = keras.Model(tokens, outputs)
model.compile("adam", "sparse_categorical_crossentropy")
rng = np.random.default_rng(0)
x_train = rng.integers(1, 50, size=(64, 6))
x_train[::2, 4:] = 0  # padding
y_train = rng.integers(0, 2, size=64)
losses = model.fit(x_train, y_train, epochs=2, batch_size=16, verbose=0)
assert np.all(np.isfinite(losses.history["loss"])), losses.history

with tempfile.TemporaryDirectory() as tmp:
    path = pathlib.Path(tmp) / "model.keras"
    model.save(path)
    reloaded = keras.models.load_model(path)  # safe_mode=True
np.testing.assert_allclose(
    reloaded.predict(x_train, verbose=0), model.predict(x_train, verbose=0),
    atol=1e-6,
)
view = ka.visualization.head_view(np.full((1, 2, 2), 0.5), ["a", "b"])
assert "DecompressionStream" in view.html  # the packaged scripts, inlined
print("PACKAGING-CHECK-OK", ka.__file__)
"""


def pyproject_version():
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, (
        f"{args} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-4000:]}\n"
        f"--- stderr ---\n{result.stderr[-4000:]}"
    )
    return result


def build_wheel(tmp):
    """`pip wheel` offline, from a copy of the files the wheel is built from
    (the build writes build/ and *.egg-info next to pyproject.toml, and the
    checkout is shared)."""
    setuptools = importlib.metadata.version("setuptools")
    assert int(setuptools.split(".")[0]) >= 77, (
        f"setuptools {setuptools} is installed; building without isolation "
        "needs setuptools>=77 (the `test` extra brings it: "
        "pip install -e '.[test]')"
    )
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "keras_attention",
        source / "keras_attention",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    dist = tmp / "dist"
    # -v shows the build backend's output, so its warnings can be checked.
    result = run(
        [sys.executable, "-m", "pip", "wheel", str(source), "-v", "--no-deps"]
        + ["--no-build-isolation", "--no-index", "-w", str(dist)],
        cwd=tmp,
    )
    (wheel,) = dist.glob("keras_attention_kit-*.whl")
    return wheel, source, result.stdout + result.stderr


def check_wheel_contents(wheel, source, build_log):
    version = pyproject_version()
    assert wheel.name == f"keras_attention_kit-{version}-py3-none-any.whl"
    assert "SetuptoolsDeprecationWarning" not in build_log, build_log[-4000:]

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"keras_attention_kit-{version}.dist-info"
        metadata = email.parser.Parser().parsestr(
            archive.read(f"{info}/METADATA").decode()
        )
        license_text = archive.read(f"{info}/licenses/LICENSE").decode()

    assert metadata["Version"] == version
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text

    for sub in SUBPACKAGES:
        assert f"keras_attention/{sub}/__init__.py" in names, sub
    sources = {
        path.relative_to(source).as_posix()
        for path in (source / "keras_attention").rglob("*.py")
    }
    packaged = {name for name in names if name.endswith(".py")}
    assert sources == packaged, sources ^ packaged
    # The views' scripts and stylesheet, which each page inlines.
    static = {
        path.relative_to(source).as_posix()
        for path in (source / "keras_attention" / "visualization" / "static").iterdir()
    }
    assert static and static <= names, static - names


def make_fresh_venv(tmp, wheel):
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    if not python.exists():  # Windows
        python = venv / "Scripts" / "python.exe"
    # The wheel first, with nothing else on the new environment's path.
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install"]
        + ["--no-deps", "--no-index", "--no-compile", "-q", str(wheel)]
    )
    purelib = run(
        [
            str(python),
            "-I",
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ]
    ).stdout.strip()
    # Then the installed dependencies, after the new site-packages.
    dependencies = dict.fromkeys(site.getsitepackages())
    pathlib.Path(purelib, "_dependencies.pth").write_text(
        "\n".join(dependencies) + "\n"
    )
    return venv, python


# Builds the wheel and installs it in a new virtual environment (~17 s): in
# the large set, which .ci/run runs.
@pytest.mark.large
def test_wheel_installs_and_works_in_a_fresh_environment(tmp_path):
    wheel, source, build_log = build_wheel(tmp_path)
    check_wheel_contents(wheel, source, build_log)

    venv, python = make_fresh_venv(tmp_path, wheel)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = run(
        [str(python), "-I", "-c", CHECK_SCRIPT, str(venv), pyproject_version()]
        + [str(ROOT), *SUBPACKAGES],
        cwd=elsewhere,
        env=env,
    )
    assert "PACKAGING-CHECK-OK" in result.stdout, result.stdout
