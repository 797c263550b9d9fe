"""`benchmarks/RESULTS.md` opens with its standing: one table of the current
figures, each linked to the journal entry it comes from, with a command that
runs."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
LINK = re.compile(r"\[([^\]]+)\]\(#([^)]+)\)")
COMMAND = re.compile(
    r"^`PYTHONPATH=\. \.venv/bin/python (benchmarks/\w+\.py) --sections ([\w ]+?)"
    r"(?: --[\w-]+(?: [\w.]+)*)*`$"
)


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces
    to hyphens (underscores and hyphens stay)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(text):
    return {
        _slug(line.lstrip("#")): line.lstrip("#").strip()
        for line in text.splitlines()
        if line.startswith("#")
    }


def _standing_rows(text):
    assert text.startswith("# Benchmark results\n\n## Standing\n"), (
        "RESULTS.md must open with its `## Standing` section"
    )
    section = text.split("\n## ", 2)[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header, *rows = rows
    assert header == "| what | now | target | met? | from | command |"
    return [
        [cell.strip() for cell in row.strip("|").split(" | ")]
        for row in rows
        if not row.startswith("|---")
    ]


def _sections(script):
    """The `--sections` choices of a benchmark script, read from its source."""
    tree = ast.parse((ROOT / script).read_text())
    constants = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "--sections"
        ):
            (choices,) = [k.value for k in node.keywords if k.arg == "choices"]
            if isinstance(choices, ast.Name):
                choices = constants[choices.id]
            return set(ast.literal_eval(choices))
    raise AssertionError(f"{script} has no --sections argument")


def test_every_standing_row_links_to_a_journal_entry_and_has_a_command():
    text = RESULTS.read_text()
    headings = _headings(text)
    rows = _standing_rows(text)
    assert len(rows) >= 10
    for what, now, target, met, source, command in rows:
        assert what and now and target and met, what
        (link,) = LINK.findall(source)
        label, anchor = link
        assert anchor in headings, f"{what}: no heading has the anchor #{anchor}"
        date = label.split(" (")[0]  # "2026-12-02, 14:00-15:30"
        assert headings[anchor].startswith(date), (what, label, headings[anchor])
        if command in ("`make bench`", "`make bench-jax`", "the command above"):
            continue
        match = COMMAND.match(command)
        assert match, f"{what}: not a benchmark command: {command}"
        script, sections = match.groups()
        unknown = set(sections.split()) - _sections(script)
        assert not unknown, f"{what}: {script} has no section {unknown}"
