"""The per-item explorer: one use case's samples as one self-contained, offline HTML file.

The page is its data (JSON in a ``<script type="application/json">``, with ``<``, ``>``,
``&`` and the two JavaScript line separators escaped, so no text can close the element),
one inline script and one inline style, both pinned by hash in the page's Content Security
Policy: nothing else may load or run, and nothing is fetched. The script builds every
element from the data with ``textContent``, so model output and item text stay inert.
Same data, same bytes: there is no time or path in the page.
"""

from __future__ import annotations

import base64
import hashlib
import html
from importlib.resources import files
from pathlib import Path
from typing import Any

from evalreg.canonical import canonical_bytes
from evalreg.redaction import current

EXPLORER_DIR = "reports/explorer"

_ASSETS = files("evalreg.report")
_SCRIPT = _ASSETS.joinpath("explorer.js").read_text(encoding="utf-8")
_STYLE = _ASSETS.joinpath("explorer.css").read_text(encoding="utf-8")
_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def explorer_name(use_case: str) -> str:
    return f"{use_case}.html"


def script_json(data: Any) -> str:
    """``data`` as canonical JSON that is inert inside a ``<script>`` element: none of
    ``<``, ``>``, ``&``, U+2028, U+2029 left as they are."""
    return canonical_bytes(data).decode().translate(_JSON_ESCAPES)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


CSP = (
    "default-src 'none'; "
    f"script-src '{_sha256(_SCRIPT)}'; "
    f"style-src '{_sha256(_STYLE)}'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)
"""Only the page's own script and style, by hash; no fetches, images, frames or forms."""


def explorer_html(data: dict[str, Any]) -> str:
    """The explorer page of ``data`` (``selection.samples.use_case_samples``'s output)."""
    title = f"{data['title']} ({data['use_case']}): per-item explorer"
    meta = [
        f"task {data['task']}",
        f"eval set {data['evalset']['path']} (md5 {data['evalset']['md5'][:12]}, "
        f"{data['evalset']['items']:,} items)",
        f"results of the {data['label']}",
        f"an item passes at level {data['pass_level']}",
    ]
    notices = []
    if not data["texts"]:
        notices.append(
            "Item text, requests and outputs are left out: the registry's privacy.snippets "
            "is off (`evalreg view --with-text` includes them, for a file kept private)."
        )
    elif data["redacted"]:
        notices.append("Redacted by the task: " + ", ".join(data["redacted"]) + ".")
    notice_html = "".join(f'<p class="notice">{html.escape(n)}</p>' for n in notices)
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n"
        '<header class="top">'
        f'<h1>{html.escape(data["title"])} <span class="muted">'
        f"{html.escape(data['use_case'])}</span></h1>"
        f'<div class="meta">{html.escape(" · ".join(meta))}</div>'
        f'<div class="meta" id="pending"></div>{notice_html}'
        "</header>\n"
        f"{_FILTERS}\n"
        "<main>\n"
        '<div class="matrix"><div id="matrix-head" role="row"></div>'
        '<div id="rows" role="grid"><div id="spacer"><div id="layer"></div></div>'
        '<p id="empty" hidden>No item matches these filters.</p></div></div>\n'
        '<div id="detail"><p class="muted">Select an item.</p></div>\n'
        "</main>\n"
        '<noscript><p class="notice">The explorer needs JavaScript (its own inline '
        "script, nothing from the network).</p></noscript>\n"
        f'<script type="application/json" id="explorer-data">{script_json(data)}</script>\n'
        f"<script>{_SCRIPT}</script>\n"
        "</body>\n</html>\n"
    )


_FILTERS = (
    '<div class="filters" id="filters">'
    '<label>slice <select id="f-slice"></select></label>'
    '<label>candidate <select id="f-cand"></select></label>'
    '<label>level <select id="f-level"></select></label>'
    '<label>criterion <select id="f-crit"></select>'
    '<select id="f-verdict"></select></label>'
    '<label>errors <select id="f-error"></select></label>'
    '<label>flips <select id="f-flip-a"></select> vs <select id="f-flip-b"></select>'
    '<select id="f-flip-dir"></select></label>'
    '<label id="rev-filter"><span id="rev-label"></span> <select id="f-rev"></select></label>'
    '<label>search <input id="f-search" type="search" size="18" '
    'placeholder="id, input or output"></label>'
    '<button type="button" id="reset">reset</button>'
    '<button type="button" id="download">download CSV</button>'
    '<span class="count" id="count"></span>'
    '<span class="help">click a row for the item · j / k: next / previous</span>'
    "</div>"
)


def write_explorer(directory: Path, data: dict[str, Any]) -> Path:
    """Write ``data``'s explorer into ``directory`` (secrets redacted, as every written
    report is); return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / explorer_name(str(data["use_case"]))
    page = current().data(explorer_html(data).encode())
    if not path.exists() or path.read_bytes() != page:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(page)
        tmp.replace(path)
    return path
