"""Sphinx configuration of evalreg's documentation site (Markdown pages, read by MyST).

Build it strictly, as CI does: ``nox -s docs`` (every warning an error: a broken link, a
page missing from the table of contents, a reference to a heading that is not there).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runners"))

from evalreg._version import __version__  # noqa: E402

project = "evalreg"
author = "the evalreg authors"
copyright = "the evalreg authors"  # noqa: A001 (Sphinx's name)
release = __version__
version = __version__

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]

# Headings get anchors down to level 3, so a page can link to `guide.md#a-section`; a link
# to a heading or a page that is not there is a warning, hence an error in a strict build.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath", "linkify"]
myst_linkify_fuzzy_links = False

nitpicky = True
suppress_warnings: list[str] = []

html_theme = "furo"
html_title = f"evalreg {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
