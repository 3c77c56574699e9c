"""The command line's reference page: generated from the parser, committed, current, and
valid Markdown that names every command and option the parser has."""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from evalreg.cli import build_parser
from evalreg.cli.reference import COMMAND, cli_reference, code, inline, paragraph

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"


def walk(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ("evalreg",)
) -> dict[str, argparse.ArgumentParser]:
    """Every command of ``parser`` by its full name, read off argparse without the module
    under test (aliases resolve to the parser they name, so each is listed once)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                out[" ".join((*words, name))] = sub
                out.update(walk(sub, (*words, name)))
    return out


def shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
    ]


def sections(text: str) -> dict[str, str]:
    """Each ``##`` or ``###`` section's text (up to the next heading) by its heading."""
    parts = re.split(r"^(#{2,3}) (.+)$", text, flags=re.M)
    return {parts[i + 1]: parts[i + 2] for i in range(1, len(parts) - 1, 3)}


def test_the_committed_page_is_current():
    assert PAGE.is_file(), f"{PAGE.relative_to(ROOT)} is missing: run `{COMMAND}`"
    assert PAGE.read_text(encoding="utf-8") == cli_reference(), (
        f"{PAGE.relative_to(ROOT)} is stale: run `{COMMAND}`"
    )


def test_the_module_writes_the_page_as_its_command_says():
    done = subprocess.run(
        [sys.executable, "-m", "evalreg.cli.reference"],
        capture_output=True,
        check=True,
        env={"COLUMNS": "40", "PYTHONIOENCODING": "utf-8", "PATH": ""},
    )
    assert done.stdout.decode("utf-8") == cli_reference()


def test_the_page_is_the_same_bytes_every_time(monkeypatch: pytest.MonkeyPatch):
    first = cli_reference()
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert cli_reference() == first
    assert first.endswith("\n") and not first.endswith("\n\n")
    assert not [line for line in first.splitlines() if line != line.rstrip()]
    assert "\t" not in first


def test_every_command_option_and_argument_is_on_the_page():
    parser = build_parser()
    text = cli_reference(parser)
    by_heading = sections(text)
    commands = walk(parser)
    assert {"evalreg check", "evalreg evalset add", "evalreg store purge"} <= set(commands)
    assert "evalreg import openai-evals" in commands
    for name, sub in commands.items():
        assert name in by_heading, f"no section for {name}"
        section = by_heading[name]
        assert f"```text\n{name}" in section, f"no usage line for {name}"
        for action in shown(sub):
            if isinstance(action, argparse._HelpAction):
                continue
            if action.option_strings:
                for option in action.option_strings:
                    assert f"`{option}" in section, f"{name}: {option}"
                usage = section.split("```")[1]  # names an option by its first string
                assert f"{action.option_strings[0]}" in usage, f"{name} usage: {action}"
            else:
                metavar = action.metavar or action.dest
                assert f"`{metavar}`" in section, f"{name}: {metavar}"
            if action.help:
                first_word = action.help.split()[0]
                assert first_word in section, f"{name}: {action.help}"
    # The program's own options, and the headings in the order `evalreg --help` lists them.
    for action in shown(parser):
        for option in action.option_strings:
            assert f"`{option}" in by_heading["Global options"], option
    headings = [h for h in by_heading if h.startswith("evalreg ")]
    assert headings == list(commands)


def test_a_new_option_changes_the_page_and_is_named_on_it():
    before = cli_reference(build_parser())
    parser = build_parser()
    compact = walk(parser)["evalreg store compact"]
    compact.add_argument(
        "--frobnicate-widgets",
        metavar="WIDGET",
        default="sprocket",
        help="a made-up option | with a pipe and <angle> brackets",
    )
    after = cli_reference(parser)
    assert after != before
    section = sections(after)["evalreg store compact"]
    assert "[--frobnicate-widgets WIDGET]" in section  # the usage line
    assert (
        "| `--frobnicate-widgets WIDGET` | a made-up option \\| with a pipe and \\<angle> "
        "brackets (default: `sprocket`) |"
    ) in section
    assert "--frobnicate-widgets" not in sections(after)["evalreg check"]


def test_a_renamed_flag_changes_the_page():
    parser = build_parser()
    check = walk(parser)["evalreg check"]
    strict = next(a for a in check._actions if "--strict" in a.option_strings)
    strict.option_strings = ["--stricter"]
    text = cli_reference(parser)
    section = sections(text)["evalreg check"]
    assert "`--stricter`" in section and "`--strict`" not in section


def test_the_page_is_markdown_with_nested_unique_headings():
    text = cli_reference()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    headings = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            headings.append((int(token.tag[1]), tokens[i + 1].content))
    assert headings[0] == (1, "Command line")
    assert tokens[0].type == "heading_open"  # the title comes first
    assert [level for level, _ in headings].count(1) == 1
    for (above, _), (level, title) in itertools.pairwise(headings):
        assert level <= above + 1, f"{title} skips a level"
    seconds = [title for level, title in headings if level == 2]
    assert len(seconds) == len(set(seconds))
    titles = [title for _, title in headings]
    assert len(titles) == len(set(titles))
    # Help text is shown as written: no raw HTML (an <angle> placeholder), and tables.
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    assert not [
        child
        for t in tokens
        if t.type == "inline"
        for child in t.children or []
        if child.type in ("html_inline", "em_open", "strong_open", "link_open")
    ]
    assert sum(t.type == "table_open" for t in tokens) >= len(walk(build_parser()))
    for level, title in headings[1:]:
        if title.startswith("evalreg "):
            assert level == len(title.split()), title  # `## evalreg store`, `### … compact`


@pytest.mark.parametrize(
    ("help_text", "markdown"),
    [
        ("snake_case stays, _edges_ do not", "snake_case stays, \\_edges\\_ do not"),
        ("a <commit> | b *c* [d]", "a \\<commit> \\| b \\*c\\* \\[d\\]"),
        ("run `a | b` and `c_d`", "run `a \\| b` and `c_d`"),
        ("a stray ` tick and $5 &amp;", "a stray \\` tick and \\$5 \\&amp;"),
        ("several\n   lines", "several lines"),
    ],
)
def test_help_text_is_escaped_outside_code_spans(help_text: str, markdown: str):
    assert inline(help_text) == markdown


def test_code_spans_hold_backticks_and_pipes():
    assert code("a|b") == "`a\\|b`"
    assert code("`x`") == "`` `x` ``"


def test_a_commands_help_is_a_sentence_that_starts_no_block():
    assert paragraph("validate the registry") == "Validate the registry."
    assert paragraph("manage eval sets (tracked by DVC)") == "Manage eval sets (tracked by DVC)."
    assert paragraph("- not a list") == "\\- not a list."
    assert paragraph("1. not a list either") == "1\\. not a list either."
