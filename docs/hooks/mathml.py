"""MkDocs hook: typeset the site's maths at build time, as MathML (issue 13).

`pymdownx.arithmatex` (generic mode) wraps every formula of the pages and of
the docstrings as ``<span class="arithmatex">\\(...\\)</span>`` or
``<div class="arithmatex">\\[...\\]</div>``. This hook replaces the LaTeX in
each wrapper with MathML Core from `math-core`, which current browsers
(Chromium 109+, Firefox, Safari) render natively: the built site needs no
script, no CDN and no network to show its formulas. (No ``<annotation>`` of
the LaTeX source: the search index would read it as page text.)

A formula that math-core cannot convert (an unknown command, a typo) is left
as LaTeX and logged as a warning, so `mkdocs build --strict` (`make docs`)
fails on it instead of publishing raw LaTeX.

Browsers stretch brackets, radicals and big operators only with a font that
has an OpenType MATH table, which many machines lack. After the build the hook
writes ``stylesheets/math-font.css`` (listed in `extra_css`): STIX Two Math
(SIL Open Font License 1.1), cut down to the characters the site's formulas
use and inlined as a data URL, so it loads from ``file://`` pages too. The
font comes from the `ziamath` package; `fonttools` subsets it. All three
packages are in the `docs` extra.
"""

from __future__ import annotations

import base64
import html
import io
import logging
import os
import re
from importlib import resources

log = logging.getLogger("mkdocs.hooks.mathml")

# arithmatex HTML-escapes the formula, so the wrapper's text holds no "<".
_WRAPPED = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.DOTALL
)
_DELIMITERS = {"span": ("\\(", "\\)"), "div": ("\\[", "\\]")}
_ANNOTATION = re.compile(r"<annotation\b.*?</annotation>", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")

FONT_CSS = "stylesheets/math-font.css"
FONT_FAMILY = "keras-attention Math"  # a modified (subset) font gets a new name
_FONT_PACKAGE = "ziamath"
_FONT_FILE = "fonts/STIXTwoMath-Regular.ttf"

_converter = None
_chars: set[str] = set()  # every character the built formulas draw


def _get_converter():
    global _converter
    if _converter is None:
        import math_core

        _converter = math_core.LatexToMathML(fancy_error=False)
    return _converter


def to_mathml(tex: str, *, display: bool) -> str:
    """One formula (without its delimiters) as a ``<math>`` element."""
    return _get_converter().convert_with_local_state(tex, displaystyle=display)


def _italic(ch: str) -> str | None:
    """The mathematical italic letter a browser draws for ``<mi>ch</mi>``."""
    o = ord(ch)
    if ch == "h":
        return "\u210e"  # the one italic letter outside the math block
    if "A" <= ch <= "Z":
        return chr(0x1D434 + o - ord("A"))
    if "a" <= ch <= "z":
        return chr(0x1D44E + o - ord("a"))
    if 0x391 <= o <= 0x3A9:
        return chr(0x1D6E2 + o - 0x391)
    if 0x3B1 <= o <= 0x3C9:
        return chr(0x1D6FC + o - 0x3B1)
    return {
        "\u2207": "\U0001d6fb",
        "\u2202": "\U0001d715",
        "\u03f5": "\U0001d716",
        "\u03d1": "\U0001d717",
        "\u03f0": "\U0001d718",
        "\u03d5": "\U0001d719",
        "\u03f1": "\U0001d71a",
        "\u03d6": "\U0001d71b",
    }.get(ch)


def _collect_chars(mathml: str) -> None:
    text = html.unescape(_TAG.sub("", _ANNOTATION.sub("", mathml)))
    for ch in text:
        _chars.add(ch)
        italic = _italic(ch)
        if italic:
            _chars.add(italic)


def _replace(match: re.Match, where: str) -> str:
    tag = match.group("tag")
    opening, closing = _DELIMITERS[tag]
    text = html.unescape(match.group("tex")).strip()
    if not (text.startswith(opening) and text.endswith(closing)):
        log.warning(
            "%s: a formula without %s...%s delimiters is left as is: %s",
            where,
            opening,
            closing,
            text,
        )
        return match.group(0)
    tex = text[len(opening) : -len(closing)]
    try:
        mathml = to_mathml(tex, display=tag == "div")
    except Exception as err:  # math_core.LatexError
        log.warning("%s: cannot typeset %r: %s", where, tex.strip(), err)
        return match.group(0)
    _collect_chars(mathml)
    return f'<{tag} class="arithmatex">{mathml}</{tag}>'


def math_font_woff(chars) -> bytes:
    """STIX Two Math cut down to ``chars`` (and the MATH table's variants of
    them, for stretching), renamed, as WOFF."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    source = resources.files(_FONT_PACKAGE) / _FONT_FILE
    font = TTFont(io.BytesIO(source.read_bytes()), recalcTimestamp=False)
    options = subset.Options()
    options.layout_features = ["*"]  # ssty (script sizes), flac, dtls, ...
    options.name_IDs = ["*"]  # keeps the copyright and licence records
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    # ASCII, and the radical sign that <msqrt> draws without it being text.
    always = set(range(0x20, 0x7F)) | {0x221A}
    subsetter.populate(unicodes={ord(c) for c in chars} | always)
    subsetter.subset(font)
    names = font["name"]
    for record in list(names.names):
        if record.nameID in (1, 3, 4, 16, 17, 18, 21, 22):
            names.removeNames(nameID=record.nameID)
    names.setName(FONT_FAMILY, 1, 3, 1, 0x409)
    names.setName("Regular", 2, 3, 1, 0x409)
    names.setName(FONT_FAMILY, 3, 3, 1, 0x409)
    names.setName(FONT_FAMILY, 4, 3, 1, 0x409)
    names.setName(FONT_FAMILY.replace(" ", "-"), 6, 3, 1, 0x409)
    font.flavor = "woff"
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def on_config(config):
    _get_converter()  # fail early when math-core is missing
    return config


def on_pre_build(config):
    _chars.clear()


def on_page_content(html_text, page, **kwargs):
    where = page.file.src_uri
    return _WRAPPED.sub(lambda m: _replace(m, where), html_text)


def on_post_build(config):
    try:
        woff = math_font_woff(_chars)
    except Exception as err:  # no ziamath / fonttools, or the font moved
        log.warning(
            "no math font for the site (%s: %s); formulas fall back on the "
            "reader's fonts",
            type(err).__name__,
            err,
        )
        woff = None
    css = [
        "/* Generated by docs/hooks/mathml.py at build time: do not edit. */\n",
    ]
    if woff is not None:
        data = base64.b64encode(woff).decode("ascii")
        css.append(
            "/* A subset of STIX Two Math 2.x, renamed as the SIL Open Font\n"
            "   License 1.1 asks of modified fonts: Copyright 2001-2020 The\n"
            "   STIX Fonts Project Authors (github.com/stipub/stixfonts),\n"
            "   licensed under the SIL OFL 1.1 (openfontlicense.org). */\n"
            "@font-face {\n"
            f'  font-family: "{FONT_FAMILY}";\n'
            f'  src: url("data:font/woff;base64,{data}") format("woff");\n'
            "  font-display: block;\n"
            "}\n"
        )
    path = os.path.join(config["site_dir"], FONT_CSS)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(css))
