"""Escaping for untrusted text (model output, item text, PR-authored YAML) in our Markdown."""

from __future__ import annotations

import functools
import html
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "COMMENT_LIMIT",
    "RETURN_SYMBOL",
    "ZWSP",
    "block",
    "cell",
    "cut_to_fit",
    "fits",
    "html_inline",
    "inline",
    "json_line",
    "json_text",
    "link",
    "prose",
    "strip_controls",
]

#: GitHub refuses comment bodies longer than this many characters.
COMMENT_LIMIT = 65_536

#: What ``inline`` shows in place of each line break.
RETURN_SYMBOL = "⏎"

#: The zero-width space that breaks mentions, references and autolinks in ``inline``.
ZWSP = "\u200b"

# Terminal escape sequences: CSI (colours, cursor movement); the string commands OSC, DCS,
# SOS, PM and APC (hyperlinks, window titles) through their terminator; any other escape.
# A string command's body stops at the first control character, so an unterminated one
# loses only its introducer and the scan stays linear.
_ANSI = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
# C0 and C1 controls but tab and newline, DEL, and the Unicode bidirectional controls,
# which can make a reader see text in another order than the one it has (Trojan Source).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A lone surrogate (JSON can carry one) would make writing the report as UTF-8 fail.
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_JSON_UNSAFE = re.compile(f"{_CONTROLS.pattern}|{_LONE_SURROGATE.pattern}")

_LINE_BREAK = re.compile(r"[\n\u2028\u2029]")
_SPACES = re.compile(r"[ \t]+")
# Where GitHub would turn plain text into a mention, an issue or pull-request reference
# (``#1``, ``owner/repo#1``, ``GH-1``) or an autolink (``https://``, ``www.``, e-mail
# addresses, ``mailto:``, ``xmpp:``); a zero-width space breaks each pattern. ``@`` gets
# one on both sides: after it against mentions, before it against e-mail autolinkers.
_AUTOLINKS = re.compile(
    r"@|#(?=\d)|(?i:\bgh)(?=-\d)|(?i:\bwww)(?=\.)|(?i:\b(?:mailto|xmpp))(?=:)|(?=://)"
)
# Character references for \ & < >, which keeps them inert even in raw HTML and keeps a
# cell from ending in a backslash that would escape the table's next pipe; backslashes for
# the rest of the ASCII punctuation that Markdown, GFM or GitHub (math: $) give meaning.
_MARKDOWN = str.maketrans(
    {"\\": "&#92;", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
    | {char: "\\" + char for char in "`*_{}[]()#+-.!|~$="}
)


@functools.cache
def _block_parser() -> MarkdownIt:
    """CommonMark with tables (built on first use: importing markdown-it costs start-up)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


# An absolute http(s) URL of characters a URL may hold unencoded; what Markdown would read
# inside a link destination (parentheses, brackets, backslashes) is percent-encoded first.
_URL = re.compile(
    r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9._~:/?#@!$&'*+,;=%-]*)?$"
)
_URL_SPECIAL = str.maketrans({"(": "%28", ")": "%29", "[": "%5B", "]": "%5D"})


_DETAILS_TAG = re.compile(r"<(/?)details(?=[\s>/])", re.IGNORECASE)
_DETAILS_CLOSE = "</details>"


def strip_controls(text: str) -> str:
    """``text`` fit for a terminal: no ANSI escape sequences and no control characters.

    Newlines and tabs stay; ``\\r\\n`` and a lone ``\\r`` become ``\\n`` (a lone carriage
    return would let later text overwrite earlier text on screen). Bidirectional controls
    (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) go too, and a lone surrogate
    becomes U+FFFD.
    """
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _LONE_SURROGATE.sub("\ufffd", _CONTROLS.sub("", text))


def json_text(data: Any) -> str:
    """``data`` as indented JSON with sorted keys and non-ASCII text kept, in which every
    control character, bidirectional control and lone surrogate is a ``\\u`` escape.

    JSON escapes only C0 controls itself; a C1 control such as the 8-bit CSI (U+009B) or
    a bidi override would reach a terminal showing the file raw. Escaped, the data read
    back is the same and there is nothing for a terminal to act on.
    """
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    return _JSON_UNSAFE.sub(_unicode_escape, text)


def json_line(data: Any) -> str:
    """``data`` as one line of compact JSON, its keys in their order, escaped as
    ``json_text`` escapes it: a JSON Lines record."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return _JSON_UNSAFE.sub(_unicode_escape, text)


def _unicode_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def inline(text: str, *, limit: int = 200) -> str:
    """``text`` as Markdown that renders on GitHub as the literal text, on one line.

    Safe inside a paragraph, a list item, link text or a GFM table cell, and at the start
    of a line; not inside raw HTML or an attribute. What a reader sees is the text after
    ``strip_controls``, trimmed, with each line break shown as `` ⏎ `` and each run of
    spaces and tabs as one space; invisible zero-width spaces (U+200B) sit around every
    ``@`` and inside ``#1``, ``GH-1``, ``www.``, ``://``, ``mailto:`` and ``xmpp:``, so
    nothing pings anyone, cross-references an issue or becomes a link. Text longer than
    ``limit`` visible characters is cut to ``limit`` of them, the last being ``…``; the cut
    is made before escaping, so it never splits an escape.
    """
    return _AUTOLINKS.sub(_break_autolink, _visible(text, limit)).translate(_MARKDOWN)


# What text the team writes in the registry needs escaped: what makes HTML, links, images,
# code, emphasis, table cells or math; ``#``, ``-``, ``+``, ``=`` and ``1.`` only where a
# line starts (see ``prose``).
_PROSE = str.maketrans(
    {"\\": "&#92;", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
    | {char: "\\" + char for char in "`*_[]|~$"}
)
_BLOCK_START = re.compile(r"^(?:([#+=-])|(\d+)([.)]))")


def prose(text: str, *, limit: int = 200) -> str:
    """``inline`` for prose the team wrote in the registry (descriptions, rationales, waiver
    reasons): the same text on one line, as inert (no HTML, link, image, mention, reference
    or autolink), escaped only where Markdown would read it, so the page's source reads as
    written: ``(49.6 % against 31.3 %)`` stays as it is, where ``inline`` writes
    ``\\(49\\.6 % against 31\\.3 %\\)``."""
    shown = _AUTOLINKS.sub(_break_autolink, _visible(text, limit)).translate(_PROSE)
    return _BLOCK_START.sub(
        lambda m: f"\\{m.group(1)}" if m.group(1) else f"{m.group(2)}\\{m.group(3)}", shown
    )


def html_inline(text: str, *, limit: int = 200) -> str:
    """``inline`` for text inside raw HTML, such as a ``<summary>``: there Markdown is not
    parsed, so a backslash escape would show as a backslash; character references are
    what keeps it literal. The same visible text, the same breaks against mentions,
    references and autolinks."""
    return html.escape(_AUTOLINKS.sub(_break_autolink, _visible(text, limit)), quote=True)


def link(url: str, *, limit: int = 60) -> str:
    """``url`` as a Markdown link when it is an absolute ``http`` or ``https`` URL; anything
    else (``javascript:``, ``data:``, a relative path, text with spaces) as ``inline`` text,
    which no renderer turns into a link. The link text is the URL without its scheme, cut
    to ``limit``."""
    target = url.strip().translate(_URL_SPECIAL)
    if not _URL.match(target):
        return inline(url, limit=limit)
    shown = url.strip().split("://", 1)[1]
    return f"[{inline(shown, limit=limit)}]({target})"


def cell(text: str, *, limit: int = 80) -> str:
    """``inline`` for a GFM table cell, where space is shorter: pipes cannot split the cell."""
    return inline(text, limit=limit)


def block(text: str, *, limit_lines: int = 20, limit_chars: int = 2000) -> str:
    """``text`` after ``strip_controls`` as a fenced code block, which shows it verbatim.

    The fence is a run of backticks longer than any in the text, so no line can close it;
    it has no info string. At most ``limit_lines`` lines and about ``limit_chars``
    characters (newlines included) are shown: a line cut short ends with ``…``, and a last
    ``… (N more lines)`` line inside the block counts the lines left out. Trailing line
    breaks are dropped. The result has no trailing newline; put it on lines of its own.
    """
    if limit_lines < 1 or limit_chars < 1:
        raise ValueError(f"limits must be at least 1, got {limit_lines!r} and {limit_chars!r}")
    body = strip_controls(text).rstrip("\n")
    lines = body.split("\n") if body else []
    shown: list[str] = []
    room = limit_chars
    for line in lines[:limit_lines]:
        if len(line) > room:
            if room > 0:
                shown.append(line[:room] + "…")
            break
        shown.append(line)
        room -= len(line) + 1
    hidden = len(lines) - len(shown)
    if hidden:
        shown.append(f"… ({hidden} more line{'' if hidden == 1 else 's'})")
    content = "\n".join(shown)
    longest = max((len(run) for run in re.findall("`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{content}\n{fence}" if shown else f"{fence}\n{fence}"


def fits(markdown: str, limit: int = COMMENT_LIMIT) -> bool:
    """Whether ``markdown`` is at most ``limit`` characters long."""
    return len(markdown) <= limit


def cut_to_fit(markdown: str, limit: int = COMMENT_LIMIT, note: str = "…") -> str:
    """``markdown`` unchanged if it fits in ``limit`` characters, else cut to fit with ``note``.

    The cut falls at a line boundary, keeping as many whole lines as fit together with what
    closes the blocks they leave open: a code fence open at the cut gets its closing fence
    (inside the same list item or block quote), then each open ``<details>`` gets
    ``</details>``, then ``note`` follows as a paragraph of its own and a final newline. A
    first line longer than the limit leaves only the note. Line endings become ``\\n``.
    Raises ``ValueError`` when even ``note`` does not fit.
    """
    if fits(markdown, limit):
        return markdown
    tail = len(note) + 1
    if tail > limit:
        raise ValueError(f"a limit of {limit:,} characters leaves no room for the note")
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # lengths[k] is the length of the first k lines joined; later lines can never be kept.
    lengths = [0]
    for k, line in enumerate(lines):
        length = lengths[-1] + len(line) + (1 if k else 0)
        if length + 2 + tail > limit:
            break
        lengths.append(length)
    kept = len(lengths) - 1
    closers, depths = _open_blocks(lines[:kept])

    def size(k: int) -> int:
        head = lengths[k] + (len(closers[k]) + 1 if closers[k] else 0)
        return head + (2 if head else 0) + depths[k] * (len(_DETAILS_CLOSE) + 2) + tail

    k = next(k for k in range(kept, -1, -1) if size(k) <= limit)
    head = "\n".join([*lines[:k], closers[k]] if closers[k] else lines[:k])
    sections = [head] if head else []
    return "\n\n".join([*sections, *[_DETAILS_CLOSE] * depths[k], note]) + "\n"


def _visible(text: str, limit: int) -> str:
    """What ``inline`` and ``html_inline`` show of ``text``, before escaping."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit!r}")
    visible = _SPACES.sub(" ", _LINE_BREAK.sub(f" {RETURN_SYMBOL} ", strip_controls(text).strip()))
    return visible if len(visible) <= limit else visible[: limit - 1].rstrip() + "…"


def _break_autolink(match: re.Match[str]) -> str:
    found = match.group()
    return f"{ZWSP}@{ZWSP}" if found == "@" else found + ZWSP


def _open_blocks(lines: list[str]) -> tuple[list[str], list[int]]:
    """For each cut ``k`` (keeping ``lines[:k]``), the fence that closes the code block left
    open there ("" if none) and how many ``<details>`` are left open."""
    closers = [""] * (len(lines) + 1)
    events: list[tuple[int, int]] = []
    # A final newline makes every line of a fence's content end with one, to count them by.
    for token in _block_parser().parse("\n".join(lines) + "\n"):
        if token.type == "fence" and token.map:
            start, end = token.map
            # A terminated fence's content is two lines shorter than its span; an unterminated
            # one that runs to the end of the source is open at every later cut too.
            unterminated = token.content.count("\n") != end - start - 2
            last = len(lines) if unterminated and end >= len(lines) else end - 1
            opening = lines[start]
            closer = re.sub(r"[^\s>]", " ", opening[: opening.index(token.markup)]) + token.markup
            for k in range(start + 1, min(last, len(lines)) + 1):
                closers[k] = closer
        elif token.type == "html_block" and token.map:
            events += _details_events(token.content, token.map[0])
        elif token.type == "inline" and token.map and token.children:
            line = token.map[0]
            for child in token.children:
                if child.type in ("softbreak", "hardbreak"):
                    line += 1
                elif child.type == "html_inline":
                    events += _details_events(child.content, line)
    events.sort(key=lambda event: event[0])
    depths = [0] * (len(lines) + 1)
    depth, index = 0, 0
    for k in range(1, len(lines) + 1):
        while index < len(events) and events[index][0] < k:
            depth = max(0, depth + events[index][1])
            index += 1
        depths[k] = depth
    return closers, depths


def _details_events(html: str, first_line: int) -> list[tuple[int, int]]:
    """``(line, 1)`` for each ``<details>`` that ``html`` opens, ``(line, -1)`` for each it
    closes, ``html`` starting on ``first_line``."""
    return [
        (first_line + html.count("\n", 0, tag.start()), -1 if tag.group(1) else 1)
        for tag in _DETAILS_TAG.finditer(html)
    ]
