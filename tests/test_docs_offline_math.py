"""The documentation site shows its formulas with no network (issue 13).

The site is built into a temporary directory (not `--strict`: the guide's
figures, drawn by `make docs`, may be missing), then:

* every built page is read as HTML: each formula that `pymdownx.arithmatex`
  marked holds a ``<math>`` element (docs/hooks/mathml.py typesets them at
  build time) and no page's text keeps raw LaTeX (``\\(``, ``\\[``, ``$$``,
  ``\\frac``...);
* every guide page is opened from ``file://`` in headless Chromium with the
  network switched off (DevTools offline emulation, and no host name
  resolves): the formulas are typeset and laid out, the site's math font has
  loaded, and the page's visible text (``innerText``) has no raw LaTeX.

The browser is driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``), with the standard library only. It is Debian's
`chromium` (``apt-get install chromium``), or the binary that the `CHROMIUM`
environment variable names; without one the browser test skips (it fails
instead where ``KERAS_ATTENTION_REQUIRE_BROWSER`` is set, as in .ci/run), and
without the `docs` extra both tests skip. `make docs-test` runs this file.
"""

import fcntl
import html.parser
import importlib.util
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE_PAGES = sorted(p.stem for p in (ROOT / "docs" / "guide").glob("*.md"))
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "math_core", "fontTools")
MATH_FONT = "keras-attention Math"  # docs/hooks/mathml.py's FONT_FAMILY

# What raw LaTeX looks like in a page's text: arithmatex's delimiters, the
# Markdown ones, or a control word such as \frac (code blocks are not text).
RAW_LATEX = re.compile(r"\\[()\[\]]|\$\$|\\[A-Za-z]{2,}")

BUILD_SCRIPT = """
import sys
from mkdocs.commands.build import build
from mkdocs.config import load_config

build(load_config(sys.argv[1], site_dir=sys.argv[2], strict=False))
"""


def _missing_docs_modules():
    return [m for m in DOCS_MODULES if importlib.util.find_spec(m) is None]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = _missing_docs_modules()
    if missing:
        pytest.skip(
            f"the docs extra is not installed (no {', '.join(missing)}): "
            "pip install -e '.[docs]'"
        )
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", BUILD_SCRIPT, str(ROOT / "mkdocs.yml"), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The hook's own warnings (a formula it could not typeset, no font).
    hook_warnings = [
        line
        for line in proc.stderr.splitlines()
        if "WARNING" in line
        and re.search(r"typeset|delimiters|math font", line, re.IGNORECASE)
    ]
    assert not hook_warnings, "\n".join(hook_warnings)
    return out


class _PageText(html.parser.HTMLParser):
    """The text a reader sees (no code, scripts, styles or annotations), and
    the formulas: arithmatex wrappers and ``<math>`` elements inside them."""

    HIDDEN = {"script", "style", "code", "pre", "annotation", "template"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link"}
    VOID |= {"meta", "source", "track", "wbr", "mspace", "none", "mprescripts"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text = []
        self.formulas = 0
        self.typeset = 0
        self._stack = []  # (tag, is an arithmatex wrapper, its formula typeset)

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        wrapper = "arithmatex" in (dict(attrs).get("class") or "").split()
        self.formulas += wrapper
        if tag == "math":
            for i in range(len(self._stack) - 1, -1, -1):
                name, is_wrapper, done = self._stack[i]
                if is_wrapper:
                    if not done:
                        self._stack[i] = (name, True, True)
                        self.typeset += 1
                    break
        self._stack.append((tag, wrapper, False))

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                return

    def handle_data(self, data):
        if not any(tag in self.HIDDEN for tag, _, _ in self._stack):
            self.text.append(data)


def test_every_page_has_typeset_maths_and_no_raw_latex(site):
    pages = sorted(site.rglob("*.html"))
    assert pages
    problems, formulas = [], 0
    for page in pages:
        parser = _PageText()
        parser.feed(page.read_text(encoding="utf-8"))
        name = page.relative_to(site).as_posix()
        formulas += parser.formulas
        if parser.typeset != parser.formulas:
            problems.append(
                f"{name}: {parser.formulas - parser.typeset} of "
                f"{parser.formulas} formulas are not MathML"
            )
        raw = sorted(set(RAW_LATEX.findall(" ".join(parser.text))))
        if raw:
            problems.append(f"{name}: raw LaTeX in the text: {raw}")
    assert not problems, "\n".join(problems)
    # The guide is written in formulas: a build that lost them all must fail.
    assert formulas > 100
    assert (site / "stylesheets" / "math-font.css").read_text().count("@font-face")


# ---------------------------------------------------------------------------
# Headless Chromium, driven over the DevTools protocol on a pipe.


def _find_chromium():
    for name in (
        os.environ.get("CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ):
        path = name and shutil.which(name)
        if path:
            return path
    return None


class _Chromium:
    """A headless Chromium whose DevTools protocol runs over its fds 3
    (commands in) and 4 (replies out), as ``--remote-debugging-pipe`` asks."""

    def __init__(self, binary, profile, log):
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Copies at 10 or above, so that the child's dup2 to 3 and 4 cannot
        # overwrite one of them before it is copied.
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        args = [
            binary,
            "--headless",
            "--no-sandbox",  # root, in a container
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-quic",
            # No network at all: every host name fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "about:blank",
        ]
        try:
            self.pid = os.posix_spawn(
                binary,
                args,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT, 0o644),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_DUP2, high_r, 3),
                    (os.POSIX_SPAWN_DUP2, high_w, 4),
                ],
                setsid=True,  # its own process group, ended as one
            )
        finally:
            for fd in (to_browser_r, from_browser_w, high_r, high_w):
                os.close(fd)
        self._out = to_browser_w
        self._in = from_browser_r
        self._log = log
        self._buffer = b""
        self._next_id = 0
        self.events = []

    def _receive(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"no answer from Chromium (its log: {self._log})")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError(
                    f"Chromium closed its DevTools pipe (its log: {self._log})"
                )
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=30):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, session, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._receive(deadline))

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        for fd in (self._out, self._in):
            os.close(fd)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                return
            time.sleep(0.05)
        os.killpg(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


# Runs in the page once it has loaded; waits for MathJax where a page has it,
# so that an in-browser renderer is judged fairly too.
PAGE_REPORT = """
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await document.fonts.ready;
  const content = document.querySelector(".md-content") || document.body;
  const wrappers = [...content.querySelectorAll(".arithmatex")];
  const shown = (el) => {
    const box = el && el.getBoundingClientRect();
    return Boolean(box && box.width > 0 && box.height > 0);
  };
  const typeset = wrappers.filter(
    (w) => shown(w.querySelector("math, mjx-container")));
  const mathml = [...content.querySelectorAll("math")];
  return {
    formulas: wrappers.length,
    typeset: typeset.length,
    mathml: mathml.length,
    mathmlLaidOut: mathml.filter(
      (m) => getComputedStyle(m).display.includes("math")).length,
    mathFont: [...document.fonts].some(
      (f) => f.family.replace(/["']/g, "") === MATH_FONT && f.status === "loaded"),
    text: content.innerText,
  };
})()
""".replace("MATH_FONT", json.dumps(MATH_FONT))


# About 8-10 s (the site build, Chromium, twelve pages): `make docs-test`.
@pytest.mark.large
def test_guide_pages_render_their_maths_offline_in_chromium(site, tmp_path):
    binary = _find_chromium()
    if binary is None and os.environ.get("KERAS_ATTENTION_REQUIRE_BROWSER"):
        pytest.fail(
            "KERAS_ATTENTION_REQUIRE_BROWSER is set (as .ci/run sets it) but no "
            "Chromium was found: install Debian's chromium or set CHROMIUM"
        )
    if binary is None:
        pytest.skip(
            "no headless browser: install Debian's chromium "
            "(apt-get install chromium) or set CHROMIUM to a Chromium binary"
        )
    log = tmp_path / "chromium.log"  # Chromium's own messages, for a failure
    browser = _Chromium(binary, tmp_path / "profile", log)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})
        session = browser.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )["sessionId"]
        browser.send("Page.enable", session=session)
        browser.send("Network.enable", session=session)
        browser.send(
            "Network.emulateNetworkConditions",
            {
                "offline": True,
                "latency": 0,
                "downloadThroughput": -1,
                "uploadThroughput": -1,
            },
            session=session,
        )
        problems = []
        for name in GUIDE_PAGES:
            page = site / "guide" / ("" if name == "index" else name) / "index.html"
            browser.events = [
                e for e in browser.events if e.get("method") != "Page.loadEventFired"
            ]
            browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired", session)
            report = browser.send(
                "Runtime.evaluate",
                {
                    "expression": PAGE_REPORT,
                    "awaitPromise": True,
                    "returnByValue": True,
                },
                session=session,
            )["result"]["value"]
            raw = sorted(set(RAW_LATEX.findall(report["text"])))
            if report["formulas"] == 0:
                problems.append(f"{name}: no formula found")
            if report["typeset"] != report["formulas"]:
                problems.append(
                    f"{name}: {report['formulas'] - report['typeset']} of "
                    f"{report['formulas']} formulas not typeset"
                )
            if report["mathmlLaidOut"] != report["mathml"]:
                problems.append(f"{name}: <math> not laid out as MathML")
            if not report["mathFont"]:
                problems.append(f"{name}: the math font {MATH_FONT!r} did not load")
            if raw:
                problems.append(f"{name}: raw LaTeX in the visible text: {raw}")
        online = sorted(
            {
                e["params"]["request"]["url"]
                for e in browser.events
                if e.get("method") == "Network.requestWillBeSent"
                and not e["params"]["request"]["url"].startswith(("file:", "data:"))
            }
        )
        assert not problems, "\n".join(
            problems + [f"(network asked for: {online}; Chromium's log: {log})"]
        )
    finally:
        browser.close()
