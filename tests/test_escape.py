"""Escaping of untrusted text, checked by parsing what it writes the way a renderer would."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from evalreg.text.escape import (
    COMMENT_LIMIT,
    ZWSP,
    block,
    cell,
    cut_to_fit,
    fits,
    inline,
    strip_controls,
)

COMMONMARK = MarkdownIt("commonmark").enable(["table", "strikethrough"])

# Hostile text and what a reader should see of it, zero-width spaces aside.
HOSTILE: list[tuple[str, str]] = [
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),
    ("<img src=x onerror=alert(1)>", "<img src=x onerror=alert(1)>"),
    ("<a href='https://evil.test'>y</a>", "<a href='https://evil.test'>y</a>"),
    ("![x](https://evil.test/p.png)", "![x](https://evil.test/p.png)"),
    ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),
    ("[ref]: https://evil.test", "[ref]: https://evil.test"),
    ("[^1] and [x][ref]", "[^1] and [x][ref]"),
    ("<https://evil.test>", "<https://evil.test>"),
    ("<!-- evalreg:sticky -->", "<!-- evalreg:sticky -->"),
    ("<details open><summary>x</summary>", "<details open><summary>x</summary>"),
    ("</details>", "</details>"),
    ("@octocat please review", "@octocat please review"),
    ("org/repo#12 and #34", "org/repo#12 and #34"),
    ("see GH-56 and owner/repo@abc1234", "see GH-56 and owner/repo@abc1234"),
    ("https://example.com/x", "https://example.com/x"),
    ("ftp://evil.test javascript:alert(1)", "ftp://evil.test javascript:alert(1)"),
    ("www.evil.test", "www.evil.test"),
    ("user@example.com", "user@example.com"),
    ("mailto:a@evil.test xmpp:a@evil.test", "mailto:a@evil.test xmpp:a@evil.test"),
    ("| a | b |", "| a | b |"),
    ("a \\| b", "a \\| b"),
    ("```\nfenced\n```", "``` ⏎ fenced ⏎ ```"),
    ("~~~", "~~~"),
    ("`code` ``double``", "`code` ``double``"),
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x1b]8;;https://evil.test\x07link\x1b]8;;\x07", "link"),
    ("\x1b]0;title\x1b\\\x1b(Bplain\x1b7", "plain"),
    ("# heading", "# heading"),
    ("1. item", "1. item"),
    ("1) item", "1) item"),
    ("- [ ] task", "- [ ] task"),
    ("+ plus", "+ plus"),
    ("* star", "* star"),
    ("> quote", "> quote"),
    ("---", "---"),
    ("===", "==="),
    ("    indented code", "indented code"),
    ("**bold** _it_", "**bold** _it_"),
    ("~~strike~~ ~one~", "~~strike~~ ~one~"),
    ("$x^2$ costs $5", "$x^2$ costs $5"),
    ("a\r\nb", "a ⏎ b"),
    ("line one\n\nline two\n", "line one ⏎ ⏎ line two"),
    ("tab\there  and   there", "tab here and there"),
    ("&lt;b&gt;", "&lt;b&gt;"),
    ("&amp; &#60; &#x3C;", "&amp; &#60; &#x3C;"),
    ("\\<b\\> \\*", "\\<b\\> \\*"),
    ("back\\slash\\", "back\\slash\\"),
    ("\\", "\\"),
    (":+1: :tada:", ":+1: :tada:"),
    ("\u202e RTL override", "RTL override"),
    ("\u2066isolate\u2069 \u200emark", "isolate mark"),
    ("\x00nul\x07bell\x08bs\x7fdel\x85nel\x9b", "nulbellbsdelnel"),
]
TEXTS = [text for text, _ in HOSTILE]

# What GitHub turns into a ping, a cross-reference or a link in plain text.
GITHUB_PATTERNS = {
    "mention": r"@[A-Za-z0-9]",
    "issue reference": r"#\d",
    "GH reference": r"(?i)\bGH-\d",
    "URL autolink": r"(?i)\b(?:https?|ftp)://",
    "www autolink": r"(?i)\bwww\.",
    "e-mail autolink": r"[\w.+-]@",
    "scheme autolink": r"(?i)\b(?:mailto|xmpp):",
}


def _gfm_like() -> MarkdownIt:
    pytest.importorskip("linkify_it")
    parser = MarkdownIt("gfm-like")
    assert parser.linkify is not None
    # GitHub links scheme URLs, www. and e-mail addresses but never a bare domain.
    parser.linkify.set({"fuzzy_link": False})
    return parser


@pytest.fixture(params=["commonmark", "gfm-like with linkify"], scope="module")
def md(request: pytest.FixtureRequest) -> MarkdownIt:
    return COMMONMARK if request.param == "commonmark" else _gfm_like()


def _all(tokens: list[Token]) -> list[Token]:
    return [t for token in tokens for t in [token, *_all(token.children or [])]]


def _text(markdown: str, parser: MarkdownIt = COMMONMARK) -> str:
    """The text of the one paragraph that ``markdown`` should be."""
    tokens = parser.parse(markdown)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    children = tokens[1].children or []
    assert [child.type for child in children] == ["text"]
    return children[0].content


def _table_rows(tokens: list[Token]) -> list[list[str]]:
    rows: list[list[str]] = []
    for index, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            children = tokens[index + 1].children or []
            assert {child.type for child in children} <= {"text"}
            rows[-1].append("".join(child.content for child in children))
    return rows


def _assert_balanced(markdown: str, note: str) -> None:
    """The note ends ``markdown`` as a paragraph of its own, and every ``<details>`` closes."""
    tokens = COMMONMARK.parse(markdown)
    assert [t.type for t in tokens[-3:]] == ["paragraph_open", "inline", "paragraph_close"]
    assert tokens[-2].content == note
    html = "".join(t.content for t in _all(tokens) if t.type in ("html_block", "html_inline"))
    assert len(re.findall(r"<details", html)) == len(re.findall(r"</details>", html))


# ---------------------------------------------------------------- inline and cell


def test_inline_makes_one_paragraph_of_plain_text(md: MarkdownIt) -> None:
    for text in TEXTS:
        tokens = md.parse(inline(text))
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], text
        assert [child.type for child in tokens[1].children or []] == ["text"], text


def test_inline_shows_the_visible_text(md: MarkdownIt) -> None:
    for text, visible in HOSTILE:
        assert _text(inline(text), md).replace(ZWSP, "") == visible, text


def test_inline_stays_text_at_the_start_of_a_line() -> None:
    for text, visible in HOSTILE:
        tokens = COMMONMARK.parse(f"Before.\n{inline(text)}")
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], text
        children = tokens[1].children or []
        assert [child.type for child in children] == ["text", "softbreak", "text"], text
        assert children[2].content.replace(ZWSP, "") == visible, text


def test_inline_writes_no_raw_html_and_no_comment_opener() -> None:
    for text in TEXTS:
        assert "<" not in inline(text), text


def test_github_finds_no_mention_reference_or_autolink() -> None:
    for text in TEXTS:
        shown = _text(inline(text))
        for name, pattern in GITHUB_PATTERNS.items():
            assert not re.search(pattern, shown), f"{name} in {text!r}"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("@octocat please review", f"{ZWSP}@{ZWSP}octocat please review"),
        ("org/repo#12 and #34", f"org/repo#{ZWSP}12 and #{ZWSP}34"),
        ("fixes GH-56", f"fixes GH{ZWSP}-56"),
        ("https://example.com/x", f"https{ZWSP}://example.com/x"),
        ("www.evil.test", f"www{ZWSP}.evil.test"),
        ("mailto:a", f"mailto{ZWSP}:a"),
        ("#hashtag and C#", "#hashtag and C#"),
    ],
)
def test_mentions_references_and_urls_carry_a_zero_width_space(text: str, shown: str) -> None:
    assert _text(inline(text)) == shown


def test_sticky_marker_cannot_be_faked() -> None:
    assert "<!-- evalreg:sticky -->" not in inline("<!-- evalreg:sticky -->")


def test_escape_sequences_are_gone() -> None:
    assert "\x1b" not in inline("\x1b[31mred\x1b[0m \x1b]8;;https://evil.test\x07link\x1b]8;;\x07")


def test_a_very_long_line_is_cut_to_the_limit() -> None:
    assert _text(inline("x" * 100_000)) == "x" * 199 + "…"
    assert _text(cell("x" * 100_000)) == "x" * 79 + "…"
    assert _text(inline("x" * 100_000, limit=1)) == "…"


def test_the_cut_drops_trailing_space_before_the_ellipsis() -> None:
    assert inline("one two three", limit=5) == "one…"


def test_the_cut_counts_what_a_reader_sees_and_never_splits_an_escape() -> None:
    assert inline("*" * 1000, limit=10) == "\\*" * 9 + "…"
    assert inline("<" * 1000, limit=4) == "&lt;" * 3 + "…"
    assert inline("@" * 1000, limit=3) == f"{ZWSP}@{ZWSP}" * 2 + "…"


def test_every_cut_is_a_prefix_of_the_visible_text() -> None:
    for text, visible in HOSTILE:
        for limit in range(1, len(visible) + 2):
            expected = visible if len(visible) <= limit else visible[: limit - 1].rstrip() + "…"
            out = inline(text, limit=limit)
            assert (_text(out).replace(ZWSP, "") if out else "") == expected, (text, limit)


def test_empty_text_is_empty() -> None:
    assert inline("") == ""
    assert inline(" \n\t\x1b[0m ") == ""


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        inline("x", limit=0)


def test_escaped_cells_keep_the_table_shape(md: MarkdownIt) -> None:
    rows = [f"| {cell(text)} | {cell(text)} |" for text in TEXTS]
    tokens = md.parse("\n".join(["| text | more |", "| --- | --- |", *rows]))
    assert not [t.type for t in _all(tokens) if t.type in ("link_open", "image", "html_inline")]
    seen = _table_rows(tokens)
    assert seen[0] == ["text", "more"]
    for (_, visible), row in zip(HOSTILE, seen[1:], strict=True):
        assert [value.replace(ZWSP, "") for value in row] == [visible, visible]


def test_escaped_cells_keep_the_table_shape_without_padding() -> None:
    rows = [f"|{cell(text)}|{cell(text)}|" for text in TEXTS]
    tokens = COMMONMARK.parse("\n".join(["|a|b|", "|-|-|", *rows]))
    assert [len(row) for row in _table_rows(tokens)] == [2] * (len(rows) + 1)


def test_emoji_shortcodes_are_left_alone() -> None:
    assert _text(inline(":+1: :tada:")) == ":+1: :tada:"


# ---------------------------------------------------------------- strip_controls


def test_strip_controls_keeps_newlines_and_tabs() -> None:
    assert strip_controls("a\tb\nc") == "a\tb\nc"


def test_strip_controls_removes_escape_sequences() -> None:
    text = "\x1b[1;31mred\x1b[0m \x1b]8;;https://evil.test\x07link\x1b]8;;\x1b\\ \x9b2Jc1"
    assert strip_controls(text) == "red link c1"


def test_strip_controls_keeps_the_text_of_an_unterminated_hyperlink() -> None:
    assert strip_controls("\x1b]8;;https://evil.test") == "8;;https://evil.test"


def test_strip_controls_turns_carriage_returns_into_newlines() -> None:
    assert strip_controls("a\r\nb\rc") == "a\nb\nc"


def test_strip_controls_removes_other_controls_and_bidi_overrides() -> None:
    assert strip_controls("\x00a\x07\x08\x7f\x85\u202eb\u2066\u2069\u200f") == "ab"


@pytest.mark.parametrize(
    "sequence",
    [
        "\x1b[2J",  # CSI
        "\x1b]0;title\x07",  # OSC 0, BEL-terminated
        "\x1b]0;title\x1b\\",  # OSC 0, ST-terminated
        "\x1b]8;;https://evil.test\x07",  # OSC 8 hyperlink
        "\x1b]8;;https://evil.test\x1b\\",
        "\x9b2J",  # the 8-bit CSI
        "\x9d0;title\x9c",  # the 8-bit OSC and ST
        "\x85",  # another C1 control
        "\u202d",  # a bidi override
        "\u2067",  # a bidi isolate
        "\x08",  # backspace
    ],
)
def test_strip_controls_removes_every_kind_of_terminal_control(sequence: str) -> None:
    assert strip_controls(f"a{sequence}b") == "ab"


def test_strip_controls_replaces_a_lone_surrogate() -> None:
    assert strip_controls("a\ud800b") == "a\ufffdb"


# ---------------------------------------------------------------- block


def test_block_holds_the_text_verbatim_in_one_fence(md: MarkdownIt) -> None:
    for text in TEXTS:
        tokens = md.parse(block(text))
        assert [(t.type, t.info) for t in tokens] == [("fence", "")], text
        expected = strip_controls(text).rstrip("\n")
        assert tokens[0].content == (expected + "\n" if expected else ""), text


def test_a_backtick_heavy_text_stays_inside_its_fence() -> None:
    text = "```\n````\n`````` x ``\n~~~\n   ```````\nend"
    out = block(text)
    assert out.startswith("````````\n")
    tokens = COMMONMARK.parse(out + "\n\nafter")
    assert [t.type for t in tokens[:1]] == ["fence"]
    assert tokens[0].content == text + "\n"
    assert tokens[-2].content == "after"


def test_a_line_of_backticks_longer_than_the_limit_stays_inside_its_fence() -> None:
    tokens = COMMONMARK.parse(block("`" * 100_000))
    assert [t.type for t in tokens] == ["fence"]
    assert tokens[0].content == "`" * 2000 + "…\n"


def test_block_counts_the_lines_it_leaves_out() -> None:
    lines = block("\n".join(f"line {i}" for i in range(50))).split("\n")
    assert lines[1:-1] == [f"line {i}" for i in range(20)] + ["… (30 more lines)"]
    assert block("a\nb", limit_lines=1) == "```\na\n… (1 more line)\n```"


def test_block_cuts_a_long_line() -> None:
    assert block("y" * 100_000) == f"```\n{'y' * 2000}…\n```"
    three = "\n".join(["a" * 1500] * 3)
    assert block(three) == f"```\n{'a' * 1500}\n{'a' * 499}…\n… (1 more line)\n```"


def test_block_strips_escape_sequences() -> None:
    assert block("\x1b[31mred\x1b[0m\r\nnext\n\n") == "```\nred\nnext\n```"


def test_block_of_empty_text_is_an_empty_fence() -> None:
    assert block("") == "```\n```"


def test_block_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limits"):
        block("x", limit_lines=0)


# ---------------------------------------------------------------- fits and cut_to_fit


def test_fits_counts_characters() -> None:
    assert fits("é" * COMMENT_LIMIT)
    assert not fits("x" * (COMMENT_LIMIT + 1))
    assert fits("abc", limit=3)
    assert not fits("abc", limit=2)


def test_markdown_that_fits_is_unchanged() -> None:
    text = "```\nunclosed"
    assert cut_to_fit(text, limit=len(text)) == text


def test_the_cut_keeps_whole_lines_and_ends_with_the_note() -> None:
    text = "\n".join(f"line {i:03}" for i in range(100))
    out = cut_to_fit(text, limit=100, note="(cut)")
    assert out == "\n".join(f"line {i:03}" for i in range(10)) + "\n\n(cut)\n"


def test_the_cut_closes_an_open_fence() -> None:
    text = "# Flipped\n\n" + block("\n".join(f"out {i}" for i in range(500)), limit_lines=500)
    out = cut_to_fit(text, limit=300, note="(cut)")
    assert len(out) <= 300
    assert out.endswith("out 39\n```\n\n(cut)\n")
    _assert_balanced(out, "(cut)")


def test_the_cut_closes_open_details_and_the_fence_inside_them() -> None:
    details = "<details>\n<summary>Items</summary>\n\n{}\n\n</details>"
    text = details.format(details.format(block("\n".join(["`` x"] * 200), limit_lines=200)))
    out = cut_to_fit(text, limit=200, note="(cut)")
    assert len(out) <= 200
    assert out.endswith("`` x\n```\n\n</details>\n\n</details>\n\n(cut)\n")
    _assert_balanced(out, "(cut)")


def test_the_cut_closes_a_fence_inside_a_list_item_and_a_quote() -> None:
    code = "\n".join(f"  code {i}" for i in range(100))
    out = cut_to_fit(f"- item\n\n  ~~~~\n{code}\n  ~~~~\n", limit=120, note="(cut)")
    assert out.endswith("  code 9\n  ~~~~\n\n(cut)\n")
    _assert_balanced(out, "(cut)")
    quoted = "\n".join(f"> quoted {i}" for i in range(100))
    out = cut_to_fit(f"> ```\n{quoted}\n> ```\n", limit=120, note="(cut)")
    assert out.endswith("> quoted 8\n> ```\n\n(cut)\n")
    _assert_balanced(out, "(cut)")


def test_every_cut_fits_and_leaves_nothing_open() -> None:
    section = "\n".join(
        [
            "## Cell",
            "",
            "| item | output |",
            "| --- | --- |",
            f"| {cell('a|b')} | {cell('<!-- x -->')} |",
            "",
            "<details><summary>Flipped</summary>",
            "",
            block("line\n```\n" * 5, limit_lines=100),
            "",
            "- item",
            "",
            "  ~~~",
            "  code",
            "  ~~~",
            "",
            "</details>",
            "",
        ]
    )
    text = section * 4
    for limit in range(2, len(text), 7):
        out = cut_to_fit(text, limit=limit)
        assert len(out) <= limit
        _assert_balanced(out, "…")


def test_a_long_report_is_cut_to_the_comment_limit() -> None:
    flipped = "\n\n".join(block(f"response {i}\n" * 30) for i in range(1000))
    text = f"# Diff\n\n<details>\n<summary>1000 flipped</summary>\n\n{flipped}\n\n</details>\n"
    out = cut_to_fit(text, note="… cut to fit")
    assert len(out) <= COMMENT_LIMIT
    assert len(out) > COMMENT_LIMIT - 1000
    _assert_balanced(out, "… cut to fit")


def test_a_first_line_longer_than_the_limit_leaves_only_the_note() -> None:
    assert cut_to_fit("x" * 100 + "\nshort", limit=50) == "…\n"


def test_a_note_that_cannot_fit_is_an_error() -> None:
    with pytest.raises(ValueError, match="no room for the note"):
        cut_to_fit("x" * 10, limit=5, note="too long a note")
