"""README.md and README.zh-CN.md stay in sync."""

import pathlib
import re

import keras_attention as ka

ROOT = pathlib.Path(__file__).resolve().parents[1]
READMES = {"en": ROOT / "README.md", "zh": ROOT / "README.zh-CN.md"}


LAYER_HEADINGS = ("## Layers", "## 层")


def layer_names(text):
    """Class names in the first column of the table under the layer heading."""
    names = set()
    section = text
    for heading in LAYER_HEADINGS:
        if heading + "\n" in text:
            section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z]\w*)", first_cell))
    return names


def first_commands(text):
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return [
        line.split("#")[0].strip() for line in block.splitlines() if line[:1].strip()
    ]


def test_layer_name_parsing():
    table = "| layer | x |\n|---|---|\n| `A(b)`, `Cd` | `Ignored` |\n"
    assert layer_names(table) == {"A", "Cd"}
    other = "## Examples\n| `Other` | x |\n"
    assert layer_names("## Layers\n" + table + "\n" + other) == {"A", "Cd"}


def test_both_readmes_list_every_public_layer():
    expected = set(ka.layers.__all__)
    for language, path in READMES.items():
        assert layer_names(path.read_text()) == expected, language


def test_both_readmes_start_with_make_demo_and_make_test():
    for language, path in READMES.items():
        assert first_commands(path.read_text())[:2] == ["make demo", "make test"], (
            language
        )


def test_readmes_link_to_each_other():
    assert "(README.zh-CN.md)" in READMES["en"].read_text()
    assert "(README.md)" in READMES["zh"].read_text()


INSTALL_HEADINGS = {
    "en": "## Install it in your own project",
    "zh": "## 在你自己的项目中安装",
}


def install_section(language):
    text = READMES[language].read_text()
    heading = INSTALL_HEADINGS[language]
    assert heading + "\n" in text, language
    return text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]


def pyproject_extras():
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+) = \[", section, re.M))


def test_both_readmes_show_the_same_install_commands_and_every_extra():
    commands = {}
    for language in READMES:
        section = install_section(language)
        commands[language] = [c for c in first_commands(section) if c]
        extras = {
            re.match(r"\| `([\w-]+)` \|", line).group(1)
            for line in section.splitlines()
            if re.match(r"\| `[\w-]+` \|", line)
        }
        assert extras == pyproject_extras(), language
    assert commands["en"] == commands["zh"]
    assert any(line.startswith("pip install -e ") for line in commands["en"])
