"""`AttentionView`: one view as a self-contained HTML document.

The document holds everything it needs: the CSS and JavaScript of
`static/` inlined, the data as a JSON payload in a
`<script type="application/json">` element. It loads nothing, so it works
from a file opened offline, in Jupyter (`_repr_html_`, inside an iframe)
and in any browser.
"""

import html
import json
import pathlib

STATIC = pathlib.Path(__file__).parent / "static"
_COMMON_SCRIPTS = ("common.js",)


def _static(name):
    return (STATIC / name).read_text(encoding="utf-8")


def _json_for_html(payload):
    """JSON that cannot close its `<script>` element."""
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class AttentionView:
    """A view of attention weights: an HTML document and a static figure.

    Made by `head_view`, `model_view`, `alignment_view` and `image_view`.
    `html` is the whole document (every script and style inline, no
    network); `save(path)` writes it; in Jupyter the view shows itself
    (`_repr_html_`); `figure()` draws the same data with matplotlib and
    `save_png(path)` writes that figure, for papers and for places with no
    browser.

    Attributes:
        kind: `"head"`, `"model"`, `"alignment"` or `"image"`.
        payload: the data the page reads (a dict, JSON-ready).
        rule: the rule that chose the weights drawn, as the view states it.
    """

    def __init__(self, kind, payload, scripts, figure, title, height=600):
        self.kind = kind
        self.payload = dict(payload, kind=kind, title=title)
        self.rule = payload.get("rule", "")
        self.title = title
        self._scripts = tuple(scripts)
        self._figure = figure
        self._height = height

    @property
    def html(self):
        """The whole document, as a string."""
        scripts = "\n".join(_static(name) for name in _COMMON_SCRIPTS + self._scripts)
        title = html.escape(self.title)
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{title}</title>\n<style>{_static('view.css')}</style>\n"
            "</head><body>\n"
            f"<div id='ka-root' class='ka-view' data-kind='{self.kind}' "
            "data-ready='false'></div>\n"
            "<script type='application/json' id='ka-data'>"
            f"{_json_for_html(self.payload)}</script>\n"
            f"<script>\n{scripts}\n</script>\n</body></html>\n"
        )

    def save(self, path):
        """Write the document to `path` (a `.html` file); returns the path."""
        path = pathlib.Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self):
        """Jupyter: the document inside an iframe (`srcdoc`), so that its
        scripts and element ids stay apart from the notebook's."""
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
            f"style='width:100%;height:{self._height}px;border:0' "
            "sandbox='allow-scripts'></iframe>"
        )

    def figure(self):
        """The view as a matplotlib `Figure` (no GUI backend needed)."""
        return self._figure()

    def save_png(self, path, dpi=150):
        """Write `figure()` to `path` as a PNG; returns the path."""
        path = pathlib.Path(path)
        self.figure().savefig(path, dpi=dpi, format="png", bbox_inches="tight")
        return path

    def __repr__(self):
        return f"AttentionView(kind={self.kind!r}, title={self.title!r})"
