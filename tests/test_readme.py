"""The README stays a short front page whose links all lead somewhere, and whose test
command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MOST_LINES = 250


def _links(text: str) -> list[str]:
    found: list[str] = []
    for token in MarkdownIt().parse(text):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrs["href"]))
    return found


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MOST_LINES, f"README.md has {len(lines)} lines: move detail to docs/"


def test_every_local_link_of_the_readme_leads_to_a_file() -> None:
    links = [link for link in _links(README.read_text()) if "://" not in link]
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert missing == []


def test_the_readme_links_every_page_of_the_site() -> None:
    linked = {link.split("#")[0] for link in _links(README.read_text())}
    pages = {
        str(page.relative_to(ROOT))
        for page in (ROOT / "docs").rglob("*.md")
        if "_build" not in page.parts
    }
    assert pages - linked == set()


def test_the_readmes_test_command_is_the_one_ci_runs() -> None:
    blocks = re.findall(r"Run the tests:\n\n```sh\n(.+?)\n```", README.read_text())
    assert len(blocks) == 1
    assert blocks[0] in (ROOT / ".ci" / "run").read_text()
