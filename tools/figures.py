"""List the quoted figures with their date, code version and command.

Two sources:

- `results.json` files written by the examples (`examples.common.runs.
  provenance`: `date`, `git_commit`, `git_dirty`, `script`, `command` and
  the library versions), found under the paths given (default
  `outputs/`);
- the measured paragraphs of the example headers, the READMEs and the
  docs: a paragraph that says "measured" and carries a date
  (`YYYY-MM-DD`), or that starts a sentence with "Measured" (then listed
  as undated).

A paragraph's commit is the one that last wrote its first line (`git
blame`): the figure was measured on that code or older; its command is the
first one quoted in the paragraph. Each figure is checked against the
example it came from: a paragraph in
an example's header against that file, one in the README or the docs
against the first `examples/...py` path in its paragraph or, failing
that, earlier in its section; a `results.json` against its `script`. A
figure is STALE when that file's code changed after it: a commit that
changes what the file runs (its syntax tree without docstrings, so not a
comment, the layout or the figure's own paragraph) is dated after the
paragraph's date, or comes after the commit that `results.json` recorded.
A paragraph that names the code it was measured on ("on the code of
1fbdb53", "code 89e128f") is checked from that commit instead of its date
(from the oldest, when it names several).
The library the examples run on (`keras_attention/`) changes under every
figure; its later code changes are counted in a column of their own
(`library`: how many commits changed the code of a `keras_attention/`
Python file after the figure, and the newest) without making the figure
STALE: a person reads them to judge whether a figure moved.
Any code change of the example counts, a refactor too: the list makes staleness
visible, a person judges it. A person's judgement is kept in
`tools/figures_reviewed.txt`: a line `COMMIT FILE WHY` says that COMMIT
changed FILE's code without changing what its commands compute (a
refactor, a new flag off by default, other outputs); a figure whose
later code changes are all listed there is `reviewed` (with the commits),
not STALE. Only a reading of the diff belongs there: a change that may
move a figure, even by rounding, does not.

    python tools/figures.py                    # outputs/, README*, docs/, examples/
    python tools/figures.py outputs/sagan_ablation --metrics
    python tools/figures.py --check            # exit 1 when a figure is stale
"""

import argparse
import ast
import functools
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = "keras_attention"
DOCS = ("README.md", "README.zh-CN.md", "docs", "examples")
DATE = re.compile(r"\b(20\d\d-[01]\d-[0-3]\d)\b")
MEASURED = re.compile(r"\bmeasured\b", re.IGNORECASE)
SENTENCE_MEASURED = re.compile(r"(?:^|[.:;(]\s+|^\s*)Measured\b", re.MULTILINE)
EXAMPLE_PATH = re.compile(r"\b(examples/[\w/]+\.py)\b")
NAMED_CODE = re.compile(r"\bcode (?:of )?([0-9a-f]{7,40})\b")
COMMAND = re.compile(r"`((?:python |--)[^`]+)`|^\s*(python .+?)\s*\\?$", re.MULTILINE)


def git(*arguments, root=ROOT):
    """Output of a git command in `root`, or None when it fails."""
    try:
        done = subprocess.run(["git", *arguments], cwd=root, capture_output=True,
                              text=True, timeout=60, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def paragraphs(text):
    """`(line number, paragraph)` of `text`, paragraphs split at blank lines."""
    found, lines, start = [], [], None
    for number, line in enumerate(text.splitlines() + [""], start=1):
        if line.strip():
            if start is None:
                start = number
            lines.append(line)
        elif lines:
            found.append((start, "\n".join(lines)))
            lines, start = [], None
    return found


def header_text(path):
    """`(first line, text)` of what to scan: a Python file's module
    docstring (not its comments), a markdown file whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return 1, text
    module = ast.parse(text)
    docstring = ast.get_docstring(module, clean=False)
    if docstring is None:
        return 1, ""
    return module.body[0].lineno, docstring


def measured_paragraphs(path):
    """The figures quoted in one file: `{"line", "date", "text", "section"}`
    per measured paragraph (`date` None when undated); `section` holds the
    paragraphs since the last markdown heading, to find the example."""
    first, text = header_text(path)
    found, section = [], []
    for line, paragraph in paragraphs(text):
        if paragraph.startswith("#") and path.suffix == ".md":
            section = []
        section.append(paragraph)
        date = DATE.search(paragraph)
        if date and MEASURED.search(paragraph):
            date = date.group(1)
        elif SENTENCE_MEASURED.search(paragraph):
            date = None
        else:
            continue
        found.append({"line": first + line - 1, "date": date, "text": paragraph,
                      "section": "\n\n".join(section)})  # fmt: skip
    return found


def example_of(path, entry, root=ROOT):
    """The example file a paragraph's figures came from, or None."""
    relative = path.resolve().relative_to(root).as_posix()
    if relative.startswith("examples/") and path.suffix == ".py":
        return relative
    for text in (entry["text"], entry["section"]):
        paths = [p for p in EXAMPLE_PATH.findall(text) if (root / p).exists()]
        if paths:
            return paths[0]
    return None


def commands(text):
    """The commands quoted in a text: `` `python ...` ``, flags `` `--a x
    --b y` `` (two at least: one is a mention), indented `python ...` lines."""
    found = []
    text = re.sub(r"\\[ \t]*\n\s*", " ", text)  # continued lines
    for match in COMMAND.finditer(text):
        command = " ".join((match.group(1) or match.group(2)).split(" # ")[0].split())
        if command.startswith("python") or command.count("--") >= 2:
            found.append(command)
    return found


def command_of(entry):
    """A measured paragraph's command: its first, else the first one quoted
    before it in its section (`above: ...`, e.g. a header's "Run:"), or None."""
    own = commands(entry["text"])
    if own:
        return own[0]
    before = commands(entry["section"][: -len(entry["text"])])
    return f"above: {before[0]}" if before else None


def quoting_commit(relative, line, root=ROOT):
    """The commit that last wrote line `line` of a file (`git blame`): the
    figure was measured on the code of that commit or an earlier one."""
    blame = git("blame", "--porcelain", "-L", f"{line},{line}", "--", relative,
                root=root)  # fmt: skip
    return blame.split()[0][:8] if blame else None


def code(text):
    """What Python source runs: its syntax tree without docstrings
    (`ast.dump`: comments and layout are not in it), or None when it does
    not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, documented) and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _is_docstring(statement):
    return isinstance(statement, ast.Expr) and isinstance(
        getattr(statement, "value", None), ast.Constant
    ) and isinstance(statement.value.value, str)  # fmt: skip


def changes_code(commit, relative, root=ROOT):
    """Whether `commit` changed what a file runs: any change of a file that
    is not Python, or that the commit added; for Python, a change of
    `code` (not of docstrings, comments or layout alone)."""
    after = git("show", f"{commit}:{relative}", root=root)
    before = git("show", f"{commit}^:{relative}", root=root)
    if not relative.endswith(".py") or after is None or before is None:
        return True
    return code(before) != code(after) or code(after) is None


def code_changes(relative, commits, root=ROOT):
    """The commits among `commits` that change `relative`'s code."""
    return [c for c in commits if changes_code(c, relative, root)]


def changes_after(relative, date, root=ROOT):
    """`[(commit, date)]` of the commits dated after `date` that touch a
    file, newest first (None: the file has no commit)."""
    listed = git("log", "--format=%H %cs", "--", relative, root=root)
    if not listed:
        return None
    return [tuple(line.split()) for line in listed.splitlines() if line[41:] > date]


def reviewed_commits(root=ROOT):
    """`{(commit, file)}` of `tools/figures_reviewed.txt` in `root`: the code
    changes a person judged to leave the file's figures as they were."""
    path = pathlib.Path(root) / "tools" / "figures_reviewed.txt"
    if not path.is_file():
        return set()
    reviewed = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split(None, 2)
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 3 or len(fields[0]) < 7:
            raise ValueError(
                f"{path}:{number}: a line is `COMMIT FILE WHY` with a commit of 7 "
                f"or more hex digits and a reason; received {line!r}"
            )
        reviewed.add((fields[0], fields[1]))
    return reviewed


def unreviewed(changed, relative, root=ROOT):
    """The commits of `changed` that `tools/figures_reviewed.txt` does not
    list for `relative`."""
    reviewed = reviewed_commits(root)
    return [
        commit for commit in changed
        if not any(commit.startswith(c) and f == relative for c, f in reviewed)
    ]  # fmt: skip


def _reviewed(changed):
    hashes = " ".join(commit[:8] for commit in changed)
    return f"reviewed ({len(changed)} later code changes judged not to change it: {hashes})"


def commits_after(commit, relative, root=ROOT):
    """`[(commit, date)]` of the commits after `commit` that touch
    `relative`, newest first (None: unknown commit)."""
    listed = git("log", "--format=%H %cs", f"{commit}..HEAD", "--", relative, root=root)
    if listed is None:
        return None
    return [tuple(line.split()) for line in listed.splitlines()]


def changes_after_named(relative, text, root=ROOT):
    """`[(commit, date)]` of the commits after the oldest commit that `text`
    names as its code ("on the code of 1fbdb53") that touch `relative`; None
    when it names none that this repository knows."""
    named = [commits_after(c, relative, root) for c in NAMED_CODE.findall(text)]
    named = [later for later in named if later is not None]
    if not named:
        return None
    return max(named, key=len)  # the oldest named commit has the most after it


def paragraph_state(date, example, root=ROOT, text=""):
    """Whether a paragraph's figures (measured on `date`, on the code that
    `text` names, if any) still hold."""
    if example is None:
        return "no example" if date else "undated"
    later = changes_after_named(example, text, root)
    if later is None and date is None:
        return "undated"
    if later is None:
        later = changes_after(example, date, root)
    if later is None:
        return "example not committed"
    dates = dict(later)
    changed = code_changes(example, [commit for commit, _ in later], root)
    stale = unreviewed(changed, example, root)
    if stale:
        return f"STALE: {example} changed {dates[stale[0]]} ({stale[0][:8]})"
    return _reviewed(changed) if changed else _ok(len(later))


def _ok(unchanged):
    """`ok`, saying how many later commits left the code as it was."""
    if not unchanged:
        return "ok"
    return f"ok ({unchanged} later commits change only docstrings, comments, layout)"


@functools.cache
def changes_library_code(commit, root=ROOT):
    """Whether `commit` changed the code (`changes_code`) of a Python file
    of the library."""
    files = git("show", "--name-only", "--format=", commit, "--", LIBRARY, root=root)
    python = [f for f in (files or "").split() if f.endswith(".py")]
    return any(changes_code(commit, f, root) for f in python)


def library_state(later, root=ROOT):
    """The `library` cell of a figure: how many of the commits `later`
    (`[(commit, date)]` after it that touch `keras_attention/`, newest
    first) change the library's code, and the newest; "-" when none, "?"
    when unknown."""
    if later is None:
        return "?"
    changed = [(c, date) for c, date in later if changes_library_code(c, root)]
    if not changed:
        return "-"
    (commit, date), count = changed[0], len(changed)
    return f"{count} (newest {commit[:8]}, {date})"


def paragraph_library(date, text, root=ROOT):
    """The `library` cell of a measured paragraph (see `paragraph_state`)."""
    later = changes_after_named(LIBRARY, text, root)
    if later is None and date is not None:
        later = changes_after(LIBRARY, date, root) or []
    return library_state(later, root)


def paragraph_figures(paths, root=ROOT):
    """A row per measured paragraph under `paths` (files or folders in
    the repository `root`)."""
    root, rows = pathlib.Path(root).resolve(), []
    for path in iter_files(paths, (".md", ".py")):
        relative = path.resolve().relative_to(root).as_posix()
        for entry in measured_paragraphs(path):
            example = example_of(path, entry, root)
            rows.append({
                "source": f"{relative}:{entry['line']}", "date": entry["date"],
                "commit": quoting_commit(relative, entry["line"], root),
                "example": example, "command": command_of(entry),
                "figure": entry["text"].splitlines()[0].strip(),
                "state": paragraph_state(entry["date"], example, root, entry["text"]),
                "library": paragraph_library(entry["date"], entry["text"], root),
            })  # fmt: skip
    return rows


def scalars(record, prefix=""):
    """`{dotted key: number}` of the numbers in a nested record (lists left
    out: learning curves, histograms, per-draw values)."""
    found = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(scalars(value, name + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found[name] = value
    return found


def results_state(provenance, root=ROOT):
    """Whether the figures of a `results.json` still hold for its script."""
    commit, script = provenance.get("git_commit"), provenance.get("script")
    if not commit or not script:
        return "no provenance"
    later = commits_after(commit, script, root)
    if later is None:
        return f"commit {commit[:8]} not in this repository"
    dates = dict(later)
    changed = code_changes(script, list(dates), root)
    stale = unreviewed(changed, script, root)
    if stale:
        return (f"STALE: {script} changed {dates[stale[0]]} ({stale[0][:8]}, "
                f"{len(stale)} commits)")  # fmt: skip
    state = _reviewed(changed) if changed else _ok(len(later))
    return state + ", uncommitted changes" if provenance.get("git_dirty") else state


def results_library(provenance, root=ROOT):
    """The `library` cell of a `results.json` (see `library_state`)."""
    commit = provenance.get("git_commit")
    return library_state(commits_after(commit, LIBRARY, root) if commit else None, root)


def results_figures(paths, root=ROOT):
    """A row per `results.json` under `paths` (files or folders)."""
    root, rows = pathlib.Path(root).resolve(), []
    for path in iter_files(paths, (".json",)):
        if path.name != "results.json":
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        provenance = record.get("provenance") or {}
        metrics = scalars(record.get("results", record))
        rows.append({
            "source": str(path), "date": (provenance.get("date") or "")[:10] or None,
            "commit": (provenance.get("git_commit") or "")[:8] or None,
            "example": provenance.get("script"), "command": provenance.get("command"),
            "figure": f"{len(metrics)} numbers", "metrics": metrics,
            "state": results_state(provenance, root),
            "library": results_library(provenance, root),
        })  # fmt: skip
    return rows


def iter_files(paths, suffixes):
    """The files with one of `suffixes` among `paths` and under its folders."""
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in suffixes)
        elif path.is_file() and path.suffix in suffixes:
            yield path


def table(rows, metrics=False):
    """Markdown lines: one row per figure (and its numbers with `metrics`)."""
    lines = ["| source | date | commit | command | figure | state | library |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        cells = [row["source"], row["date"] or "-", row["commit"] or "-",
                 f"`{row['command']}`" if row["command"] else "-",
                 row["figure"].replace("|", "\\|"), row["state"],
                 row["library"]]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
        if metrics:
            lines += [f"|  |  |  |  | {k} = {v:.6g} |  |  |"
                      for k, v in row.get("metrics", {}).items()]  # fmt: skip
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("results", nargs="*", default=["outputs"],
                        help="results.json files, or folders to search")  # fmt: skip
    parser.add_argument("--docs", nargs="*", default=None,
                        help="files and folders whose measured paragraphs to list "
                        f"(default: {' '.join(DOCS)} in --root)")  # fmt: skip
    parser.add_argument("--root", default=str(ROOT),
                        help="the git repository of the examples")  # fmt: skip
    parser.add_argument("--metrics", action="store_true",
                        help="list every number of each results.json")  # fmt: skip
    parser.add_argument("--check", action="store_true",
                        help="exit with 1 when a figure is stale")  # fmt: skip
    args = parser.parse_args(argv)
    docs = args.docs
    if docs is None:
        docs = [str(pathlib.Path(args.root) / p) for p in DOCS]
    rows = results_figures(args.results, args.root) + paragraph_figures(docs, args.root)
    print("\n".join(table(rows, args.metrics)))
    stale = [row for row in rows if row["state"].startswith("STALE")]
    print(f"\n{len(rows)} figures, {len(stale)} stale", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
