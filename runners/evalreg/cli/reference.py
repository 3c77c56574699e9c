"""The command line's reference page, ``docs/reference/cli.md``, generated from the parser::

    python -m evalreg.cli.reference > docs/reference/cli.md

The page is built from the parser's actions, not from ``format_help()``: argparse's own
help text changes between Python versions (3.13 names an option's metavar once after its
short and long forms, 3.14 colours it and wraps to the terminal), and the page must be the
same bytes on every version CI runs. It is MyST Markdown: one ``#`` title, a ``##`` section
for each command and a ``###`` one for each command of a command group (``evalreg store
compact`` under ``evalreg store``); a heading's anchor is the slug of its text
(``cli.md#evalreg-store-compact``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from evalreg.cli import build_parser

COMMAND = "python -m evalreg.cli.reference > docs/reference/cli.md"
"""How the page is written; the test that finds it stale says so."""

USAGE_WIDTH = 80
"""A usage line is wrapped here, whatever the terminal generating the page."""


class Command(NamedTuple):
    """A command: its words (``("evalreg", "store", "compact")``), its one-line help, the
    other names it answers to and its parser."""

    words: tuple[str, ...]
    help: str | None
    aliases: tuple[str, ...]
    parser: argparse.ArgumentParser

    @property
    def name(self) -> str:
        return " ".join(self.words)


class Parsed(NamedTuple):
    """What a parser takes, as its help would list it."""

    arguments: list[argparse.Action]
    """In the order they were added; help actions and hidden ones left out."""
    help: argparse.Action | None
    """Its ``-h``, ``--help``, if it has one."""
    exclusive: list[tuple[bool, list[argparse.Action]]]
    """Each mutually exclusive group: whether one is required, and its arguments."""
    commands: list[Command]
    """Its subcommands, in the order they were added (none for a plain command)."""


def _parsed(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Parsed:
    """The one place argparse's internals are read. Its public API has no way to list a
    parser's arguments: ``_actions``, ``_mutually_exclusive_groups`` and a subparsers
    action's ``_choices_actions`` (the help each ``add_parser(help=...)`` gave) are the
    attributes argparse's own formatter, and documentation generators, walk."""
    arguments: list[argparse.Action] = []
    help_action = None
    commands: list[Command] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            help_action = action
            continue
        if action.help == argparse.SUPPRESS:
            continue
        arguments.append(action)
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            seen: dict[int, int] = {}  # parser id → its index in commands (aliases share one)
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    command = commands[seen[id(sub)]]
                    commands[seen[id(sub)]] = command._replace(aliases=(*command.aliases, name))
                elif helps.get(name) != argparse.SUPPRESS:
                    seen[id(sub)] = len(commands)
                    commands.append(Command((*words, name), helps.get(name), (), sub))
    exclusive = [
        (group.required, [a for a in group._group_actions if a in arguments])
        for group in parser._mutually_exclusive_groups
    ]
    return Parsed(arguments, help_action, [g for g in exclusive if g[1]], commands)


def commands(parser: argparse.ArgumentParser) -> list[Command]:
    """Every command under ``parser``, depth first, each before its own commands, in the
    order ``--help`` lists them."""
    out: list[Command] = []

    def visit(sub: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        for command in _parsed(sub, words).commands:
            out.append(command)
            visit(command.parser, command.words)

    visit(parser, (parser.prog,))
    return out


# ---------------------------------------------------------------------------------------
# Usage lines and argument names, as argparse writes them


def _metavars(action: argparse.Action, count: int) -> tuple[str, ...]:
    if action.metavar is not None:
        metavar = action.metavar
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.option_strings:
        metavar = action.dest.upper()
    else:
        metavar = action.dest
    return tuple(metavar) if isinstance(metavar, tuple) else (metavar,) * count


def _args(action: argparse.Action) -> str:
    """The values an argument takes: ``N``, ``[REV]``, ``[use_case ...]``, ``COMMAND ...``."""
    nargs = action.nargs
    if nargs is None:
        return _metavars(action, 1)[0]
    if nargs == argparse.OPTIONAL:
        return "[{}]".format(*_metavars(action, 1))
    if nargs == argparse.ZERO_OR_MORE:
        metavar = _metavars(action, 1)
        return "[{} [{} ...]]".format(*metavar) if len(metavar) == 2 else f"[{metavar[0]} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return "{} [{} ...]".format(*_metavars(action, 2))
    if nargs == argparse.REMAINDER:
        return "..."
    if nargs == argparse.PARSER:
        return "{} ...".format(*_metavars(action, 1))
    if nargs == argparse.SUPPRESS:
        return ""
    assert isinstance(nargs, int)
    return " ".join(_metavars(action, nargs))


def _invocations(action: argparse.Action) -> list[str]:
    """How an argument is written: ``REV``, or each option string with its values."""
    if not action.option_strings:
        return [" ".join(_metavars(action, 1))]
    if action.nargs == 0:
        return list(action.option_strings)
    return [f"{option} {_args(action)}" for option in action.option_strings]


def _usage_part(action: argparse.Action, grouped: bool) -> str:
    if not action.option_strings:
        part = _args(action)
        if grouped and part.startswith("[") and part.endswith("]"):
            part = part[1:-1]
        return part
    if action.nargs == 0:
        part = action.format_usage()  # --flag, or --flag | --no-flag for a boolean option
    else:
        part = f"{action.option_strings[0]} {_args(action)}"
    return part if action.required or grouped else f"[{part}]"


def _usage_parts(arguments: list[argparse.Action], parsed: Parsed) -> list[str]:
    """Each argument's part of the usage line, a mutually exclusive group's as one."""
    group_of = {id(a): group for group in parsed.exclusive for a in group[1]}
    parts: list[str] = []
    done: set[int] = set()
    for action in arguments:
        if id(action) in done:
            continue
        group = group_of.get(id(action))
        if group is None:
            parts.append(_usage_part(action, grouped=False))
            continue
        required, members = group
        done.update(id(a) for a in members)
        inner = " | ".join(_usage_part(a, grouped=True) for a in members)
        if not required:
            parts.append(f"[{inner}]")
        else:
            parts.append(f"({inner})" if len(members) > 1 else inner)
    return parts


def usage(prog: str, parsed: Parsed, *, with_help: bool = False) -> str:
    """The usage line: options, then positional arguments, wrapped at ``USAGE_WIDTH`` with
    options after the program's name and positional arguments on a line of their own.
    ``-h`` is left out unless ``with_help``: every command takes it."""
    options = [a for a in parsed.arguments if a.option_strings]
    if with_help and parsed.help is not None:
        options.insert(0, parsed.help)
    positionals = [a for a in parsed.arguments if not a.option_strings]
    option_parts = _usage_parts(options, parsed)
    positional_parts = _usage_parts(positionals, parsed)
    line = " ".join([prog, *option_parts, *positional_parts])
    if len(line) <= USAGE_WIDTH:
        return line
    indent = " " * (len(prog) + 1)
    lines = _wrap([prog, *option_parts], indent, first="")
    if positional_parts:
        lines += _wrap(positional_parts, indent, first=indent)
    return "\n".join(lines)


def _wrap(parts: list[str], indent: str, first: str) -> list[str]:
    """``parts`` in lines of at most ``USAGE_WIDTH`` (unless one part is longer), the first
    line starting with ``first``, the others with ``indent``."""
    lines: list[str] = []
    line = first
    for part in parts:
        if line.strip() and len(line) + 1 + len(part) > USAGE_WIDTH:
            lines.append(line)
            line = indent
        line += part if not line.strip() else " " + part
    if line.strip():
        lines.append(line)
    return lines


# ---------------------------------------------------------------------------------------
# Markdown


_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
_ENTITY = re.compile(r"&(?=#?\w+;)")
_BLOCK_START = re.compile(r"^(\d*)([#>+=.)-])")


def _escape_plain(text: str) -> str:
    """Text outside code spans, so that it reads as written: no emphasis, HTML, links,
    maths or character references."""
    out = []
    for i, char in enumerate(text):
        if char == "_":
            before = text[i - 1] if i else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            if before.isalnum() and after.isalnum():
                out.append(char)  # snake_case: an underscore inside a word emphasises nothing
                continue
        if char in "\\`*_<[]|$":
            out.append("\\")
        out.append(char)
    return _ENTITY.sub(r"\\&", "".join(out))


def inline(text: str) -> str:
    """Help text as Markdown: whitespace collapsed as argparse does, code spans the help
    writes deliberately kept, everything else escaped (``|`` too, for table cells)."""
    text = " ".join(text.split())
    out = []
    last = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape_plain(text[last : match.start()]))
        out.append(match.group(0).replace("|", "\\|"))
        last = match.end()
    out.append(_escape_plain(text[last:]))
    return "".join(out)


def code(text: str) -> str:
    """``text`` as a code span, safe in a table cell."""
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}".replace("|", "\\|")


def paragraph(text: str) -> str:
    """A one-line help as a sentence: capitalised, ending in a full stop."""
    text = " ".join(text.split())
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    if text and text[-1] not in ".!?:":
        text += "."
    # Not a heading, quote, list or setext underline, whatever the help starts with.
    return _BLOCK_START.sub(r"\1\\\2", inline(text), count=1)


def _table(header: tuple[str, str], rows: Iterable[tuple[str, str]]) -> list[str]:
    rows = list(rows)
    if not rows:
        return []
    lines = [f"| {header[0]} | {header[1]} |", "| --- | --- |"]
    lines += ["|" + "|".join(f" {cell} " if cell else " " for cell in row) + "|" for row in rows]
    return [*lines, ""]


def _expand(action: argparse.Action, prog: str) -> str:
    """The help of an argument with ``%(default)s``, ``%(prog)s`` and ``%%`` expanded, as
    argparse's formatter does."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = dict(vars(action), prog=prog)
    for name, value in list(params.items()):
        if value is argparse.SUPPRESS:
            del params[name]
        elif hasattr(value, "__name__"):
            params[name] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % params


def _with_prog(text: str, prog: str) -> str:
    """A description or epilog as argparse prints it: ``%(prog)s`` (and ``%%`` with it)."""
    return text % {"prog": prog} if "%(prog)" in text else text


def _meaningful_default(action: argparse.Action) -> bool:
    """Whether to state a default the help does not: a value an option taking one gets."""
    default = action.default
    if action.nargs == 0 or default is None or default is argparse.SUPPRESS:
        return False
    if isinstance(default, str | list | tuple) and not default:
        return False
    return "default" not in (action.help or "").lower()


def describe(action: argparse.Action, prog: str) -> str:
    """An argument's table cell: its help, then what the help leaves unsaid."""
    text = inline(_expand(action, prog))
    notes = []
    if action.choices is not None and action.metavar is not None:
        notes.append("one of " + ", ".join(code(str(c)) for c in action.choices))
    if _meaningful_default(action):
        notes.append(f"default: {code(str(action.default))}")
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else "; ".join(notes)
    return text


def _argument_rows(actions: Sequence[argparse.Action], prog: str) -> list[tuple[str, str]]:
    """A row for each argument: how it is written (a required option says so), its help."""
    rows = []
    for action in actions:
        written = ", ".join(code(i) for i in _invocations(action))
        if action.option_strings and action.required:
            written += " (required)"
        rows.append((written, describe(action, prog)))
    return rows


def _arguments(parsed: Parsed, prog: str) -> list[str]:
    """The tables of a parser's positional arguments, then its options."""
    plain = [a for a in parsed.arguments if not isinstance(a, argparse._SubParsersAction)]
    positionals = [a for a in plain if not a.option_strings]
    options = [a for a in plain if a.option_strings]
    return [
        *_table(("Argument", "Description"), _argument_rows(positionals, prog)),
        *_table(("Option", "Description"), _argument_rows(options, prog)),
    ]


def _command_rows(listed: Iterable[Command]) -> list[tuple[str, str]]:
    return [(code(c.name), inline(c.help or "")) for c in listed]


def _section(command: Command, level: int) -> list[str]:
    parsed = _parsed(command.parser, command.words)
    lines = ["#" * level + " " + command.name, ""]
    if command.help:
        lines += [paragraph(command.help), ""]
    if command.parser.description:
        lines += [paragraph(_with_prog(command.parser.description, command.name)), ""]
    if command.aliases:
        also = ", ".join(code(" ".join([*command.words[:-1], a])) for a in command.aliases)
        lines += [f"Also {also}.", ""]
    lines += ["```text", usage(command.name, parsed), "```", ""]
    lines += _arguments(parsed, command.name)
    lines += _table(("Command", "Description"), _command_rows(parsed.commands))
    if command.parser.epilog:
        lines += [paragraph(_with_prog(command.parser.epilog, command.name)), ""]
    for sub in parsed.commands:
        lines += _section(sub, level + 1)
    return lines


def _global_options_note(prog: str, options: list[argparse.Action], listed: list[Command]) -> str:
    """Where the program's own options go, with an example of one that takes a value."""
    example = next((a for a in options if a.nargs != 0), None)
    where = "before the command"
    if example is not None and listed:
        where += ": " + code(f"{prog} {_invocations(example)[0]} {listed[0].words[-1]}")
    return (
        f"Options of {code(prog)} itself come {where}. Every command also takes `-h`, "
        "`--help`, which prints its help and exits."
    )


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown page of every command, option and argument ``parser`` takes
    (``evalreg``'s by default)."""
    if parser is None:
        parser = build_parser()
    prog = parser.prog
    parsed = _parsed(parser, (prog,))
    lines = [
        "# Command line",
        "",
        "This page is generated from the argument parser by "
        f"`{COMMAND}` and must not be edited by hand: change the parser's help, then run "
        "that command again.",
        "",
    ]
    if parser.description:
        lines += [paragraph(_with_prog(parser.description, prog)), ""]
    lines += ["```text", usage(prog, parsed, with_help=True), "```", ""]
    options = [a for a in parsed.arguments if a.option_strings]
    lines += ["## Global options", "", _global_options_note(prog, options, parsed.commands), ""]
    lines += _table(
        ("Option", "Description"),
        _argument_rows([*([parsed.help] if parsed.help else []), *options], prog),
    )
    lines += ["## Commands", ""]
    lines += _table(("Command", "Description"), _command_rows(commands(parser)))
    for command in parsed.commands:
        lines += _section(command, 2)
    text = "\n".join(line.rstrip() for line in lines)
    return text.rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(cli_reference())
