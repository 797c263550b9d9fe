"""What the training examples read back from their own run logs."""

import csv
import datetime
import json
import os
import shlex
import subprocess
import sys

from examples.common.cli import status


def last_epoch_rows(log_path):
    """The CSV log's last row of each epoch, in epoch order: a run resumed
    from `BackupAndRestore` logs an epoch again, and the last one counts."""
    with open(log_path) as f:
        rows = {int(r["epoch"]): r for r in csv.DictReader(f)}
    return [rows[epoch] for epoch in sorted(rows)]


def learning_curve(rows, x_name, x_per_epoch, columns):
    """`{x_name: [...], column: [...], ...}` from `last_epoch_rows`: the x
    value of an epoch is `x_per_epoch` times the epochs done (sequences or
    iterations seen); each column as floats."""
    curve = {x_name: [x_per_epoch * (int(r["epoch"]) + 1) for r in rows]}
    curve.update({c: [float(r[c]) for r in rows] for c in columns})
    return curve


def write_json(path, record, indent=1):
    """`record` written to `path` as JSON (a run's record or results)."""
    with open(path, "w") as f:
        json.dump(record, f, indent=indent)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _git(*arguments):
    """Output of a git command in the repository, or None without git."""
    try:
        done = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True,
                              text=True, timeout=30, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _code_state():
    """`(commit, dirty)` of the repository now (None, None without git)."""
    changes = _git("status", "--porcelain", "--untracked-files=no")
    return _git("rev-parse", "HEAD"), None if changes is None else bool(changes)


# The code a run ran is the code when it started: a commit made while a
# long run trains (the figures written into a header) is not its code.
_STARTED = _now()
_START_COMMIT, _START_DIRTY = _code_state()


def provenance(script=None, argv=None):
    """Where a result came from, for `results.json` (`tools/figures.py`
    lists them): the date (UTC) the record was written and the run
    `started`, the git commit and whether the work tree had uncommitted
    changes when the run started (`git_commit_at_end` too when HEAD has
    moved since), the library versions, and the command line (`script`,
    default `sys.argv[0]`, relative to the repository, and `argv`, default
    `sys.argv[1:]`)."""
    import keras

    import keras_attention

    script = os.path.abspath(sys.argv[0] if script is None else script)
    argv = sys.argv[1:] if argv is None else list(argv)
    relative = os.path.relpath(script, ROOT)
    record = {
        "date": _now(),
        "started": _STARTED,
        "git_commit": _START_COMMIT,
        "git_dirty": _START_DIRTY,
        "keras_attention_version": keras_attention.__version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "script": relative,
        "command": shlex.join(["python", relative, *map(str, argv)]),
    }
    if "tensorflow" in sys.modules:
        record["tensorflow_version"] = sys.modules["tensorflow"].__version__
    end_commit = _git("rev-parse", "HEAD")
    if end_commit != _START_COMMIT:
        record["git_commit_at_end"] = end_commit
    return record


def markdown_row(cells):
    """One row of a markdown table: `| a | b |`."""
    return "| " + " | ".join(cells) + " |"


def markdown_header(columns):
    """A markdown table's first two lines: the `columns`, the rule below."""
    return [markdown_row(columns), "|" + "---|" * len(columns)]


def write_results(output_dir, results, args, table, source=None):
    """`results.json` (the results, the arguments and their `provenance`;
    `source`: the record, default `provenance()`) and `results.md`
    (`table`, markdown lines, also printed) in `output_dir`."""
    write_json(
        os.path.join(output_dir, "results.json"),
        dict(
            results=results,
            args=vars(args),
            provenance=provenance() if source is None else source,
        ),
        indent=2,
    )
    with open(os.path.join(output_dir, "results.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))


def finish_run(model, config, weights_path, log_path):
    """After `fit`: the weights saved, and `(record, rows)`: the fields
    every run's record has (its `config`, the parameter count, the seconds
    of every call's epochs: a resumed run counts all its parts) and the
    log's `last_epoch_rows`."""
    model.save_weights(weights_path)
    rows = last_epoch_rows(log_path)  # a run may resume
    record = {
        "config": config,
        "parameters": model.count_params(),
        "train_seconds": sum(float(r["seconds"]) for r in rows),
    }
    return record, rows


def load_finished_run(model, config, record_path, weights_path, label):
    """The record of a run trained before (its weights and optimizer state
    loaded into `model`), or `None` when there is none yet; a ValueError
    when the saved run had another `config`."""
    if not (os.path.exists(record_path) and os.path.exists(weights_path)):
        return None
    with open(record_path) as f:
        record = json.load(f)
    if record["config"] != config:
        changed = sorted(k for k in config if record["config"].get(k) != config[k])
        raise ValueError(
            f"`{os.path.dirname(record_path)}` holds a model trained with other "
            f"settings ({changed}); use another `--output-dir`. Received: "
            f"{ {k: config[k] for k in changed} }, saved: "
            f"{ {k: record['config'].get(k) for k in changed} }"
        )
    model.optimizer.build(model.trainable_variables)  # the file holds its state
    model.load_weights(weights_path)
    status(f"[{label}] trained before: loaded {weights_path}")
    return record
