"""Run Keras' and keras-hub's own layer tests against our classes.

A measurement, not part of the suite: the anchors' test files are taken from
their public repositories at the installed versions, patched so that only
the class under test is swapped for ours, and run with pytest in a scratch
directory outside this repository (their code is never committed here).

    python tools/anchor_tests.py                       # download the files
    python tools/anchor_tests.py --keras-repo DIR --keras-hub-repo DIR
    python tools/anchor_tests.py --only keras_mha -- -x -k masking

`--keras-repo` / `--keras-hub-repo` name local git clones (the files are
read with `git show REF:PATH`); otherwise they come from
raw.githubusercontent.com. The refs default to the installed versions'
tags (`v3.15.1`, `v0.32.0`); `--keras-hub-ref master` when a release has no
tag yet. keras-hub's test base class imports `grain` (`pip install grain`). Prints one line per test and the totals, and writes them as JSON
with `--json FILE`.
"""

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.request
import xml.etree.ElementTree as ElementTree

ROOT = pathlib.Path(__file__).resolve().parents[1]

KERAS_DIR = "keras/src/layers/attention"
HUB_DIR = "keras_hub/src/layers/modeling"


def _swap_attribute(pattern, replacement):
    """A patch that replaces `layers.X` (attribute access) with ours."""

    def patch(text):
        text = re.sub(pattern, replacement, text)
        return "import keras_attention as _ka\n" + text

    return patch


def _swap_import(module, name, ours):
    """A patch that imports our class under the anchor's name."""

    def patch(text):
        import_line = re.compile(
            rf"from {re.escape(module)} import (\(\s*{name},?\s*\)|{name}\b)"
        )
        if not import_line.search(text):
            raise SystemExit(f"import of {name} not found in the anchor file")
        return import_line.sub(
            f"from keras_attention.layers import {ours} as {name}", text
        )

    return patch


# name -> (anchor, path in its repository, patch)
ANCHOR_FILES = {
    "keras_mha": (
        "keras",
        f"{KERAS_DIR}/multi_head_attention_test.py",
        _swap_attribute(
            r"\blayers\.MultiHeadAttention\b", "_ka.layers.MultiHeadAttention"
        ),
    ),
    "hub_transformer_encoder": (
        "keras-hub",
        f"{HUB_DIR}/transformer_encoder_test.py",
        _swap_import(
            "keras_hub.src.layers.modeling.transformer_encoder",
            "TransformerEncoder",
            "TransformerEncoderBlock",
        ),
    ),
    "hub_transformer_decoder": (
        "keras-hub",
        f"{HUB_DIR}/transformer_decoder_test.py",
        _swap_import(
            "keras_hub.src.layers.modeling.transformer_decoder",
            "TransformerDecoder",
            "TransformerDecoderBlock",
        ),
    ),
    "hub_sine_position_encoding": (
        "keras-hub",
        f"{HUB_DIR}/sine_position_encoding_test.py",
        _swap_import(
            "keras_hub.src.layers.modeling.sine_position_encoding",
            "SinePositionEncoding",
            "SinusoidalPositionEncoding",
        ),
    ),
    "hub_position_embedding": (
        "keras-hub",
        f"{HUB_DIR}/position_embedding_test.py",
        _swap_import(
            "keras_hub.src.layers.modeling.position_embedding",
            "PositionEmbedding",
            "PositionEmbedding",
        ),
    ),
    "hub_cached_multi_head_attention": (
        "keras-hub",
        f"{HUB_DIR}/cached_multi_head_attention_test.py",
        _swap_import(
            "keras_hub.src.layers.modeling.cached_multi_head_attention",
            "CachedMultiHeadAttention",
            "MultiHeadAttention",
        ),
    ),
}

REPOSITORIES = {"keras": "keras-team/keras", "keras-hub": "keras-team/keras-hub"}


def _installed_tag(package):
    import importlib.metadata

    return "v" + importlib.metadata.version(package)


def read_anchor(anchor, path, ref, repo_dir):
    if repo_dir:
        return subprocess.run(
            ["git", "-C", repo_dir, "show", f"{ref}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    url = f"https://raw.githubusercontent.com/{REPOSITORIES[anchor]}/{ref}/{path}"
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read().decode()


def write_patched_files(names, refs, repo_dirs, scratch):
    for name in names:
        anchor, path, patch = ANCHOR_FILES[name]
        text = read_anchor(anchor, path, refs[anchor], repo_dirs[anchor])
        (scratch / f"test_{name}.py").write_text(patch(text))


def run_pytest(scratch, backend, extra_args):
    report = scratch / "report.xml"
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-o", "addopts=", "--rootdir", str(scratch)]
    command += [f"--junitxml={report}", str(scratch)] + list(extra_args)
    subprocess.run(command, cwd=scratch, env=env)
    return report


def read_report(report):
    results = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.get("name") == "test_session":
            continue  # tf.test.TestCase's own method, skipped by pytest
        status = "passed"
        message = ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
                message = (child.get("message") or "").splitlines()[0][:200]
            elif child.tag == "skipped":
                status = "skipped"
                message = (child.get("message") or "")[:200]
        test_file = case.get("classname", "").split(".")[0].removeprefix("test_")
        results.append(
            {
                "file": test_file,
                "test": case.get("name"),
                "status": status,
                "message": message,
            }
        )
    return results


def summarize(results):
    lines = []
    files = sorted({r["file"] for r in results})
    for test_file in files:
        rows = [r for r in results if r["file"] == test_file]
        passed = sum(r["status"] == "passed" for r in rows)
        lines.append(f"{test_file}: {passed} of {len(rows)} passed")
        for row in rows:
            if row["status"] != "passed":
                lines.append(f"  {row['status']:7} {row['test']}: {row['message']}")
    total = sum(r["status"] == "passed" for r in results)
    run = sum(r["status"] != "skipped" for r in results)
    lines.append(
        f"TOTAL: {total} of {run} passed ({len(results) - run} skipped on this backend)"
    )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keras-repo", help="a local clone of keras-team/keras")
    parser.add_argument("--keras-hub-repo", help="a local clone of keras-hub")
    parser.add_argument("--keras-ref", default=None, help="default: installed tag")
    parser.add_argument("--keras-hub-ref", default=None, help="default: installed tag")
    parser.add_argument("--backend", default="tensorflow")
    parser.add_argument("--only", nargs="*", choices=sorted(ANCHOR_FILES))
    parser.add_argument("--json", help="write the per-test results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()
    refs = {
        "keras": args.keras_ref or _installed_tag("keras"),
        "keras-hub": args.keras_hub_ref or _installed_tag("keras-hub"),
    }
    repo_dirs = {"keras": args.keras_repo, "keras-hub": args.keras_hub_repo}
    names = args.only or sorted(ANCHOR_FILES)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="anchor_tests_"))
    write_patched_files(names, refs, repo_dirs, scratch)
    results = read_report(run_pytest(scratch, args.backend, args.pytest_args))
    print(f"anchors: keras {refs['keras']}, keras-hub {refs['keras-hub']}")
    print(summarize(results))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    if args.keep:
        print(f"scratch directory: {scratch}")
    else:
        for path in sorted(scratch.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        scratch.rmdir()


if __name__ == "__main__":
    main()
