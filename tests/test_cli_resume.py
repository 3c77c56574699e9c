"""The command an interrupted ``evalreg run`` tells the user to resume with: read off the
run parser, so an option added later is repeated without a list to keep up to date."""

from __future__ import annotations

import argparse
import shlex

import pytest

from evalreg.cli import build_parser
from evalreg.cli.run import resume_command

SAMPLE = {"--shard": "2/4", "--max-concurrency": "8", "--max-cost": "2.5", "--batch-poll": "30"}
"""A value other than the default for options that take one (any other: ``3``)."""


def _run_options() -> list[argparse.Action]:
    """Every option of ``evalreg run`` as the program parses it (argparse lists them only
    through its private ``_actions``), wherever in the parser it was added."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    run = commands.choices["run"]
    return [a for a in run._actions if a.option_strings and a.dest != "help"]


def _words(action: argparse.Action) -> list[str]:
    """``evalreg run`` arguments that set ``action`` to a value other than its default: an
    option that collects its values (``--task``) is given twice."""
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return [flag]
    words = [flag, SAMPLE.get(flag, "3")]
    collects = isinstance(getattr(build_parser().parse_args(["run", *words]), action.dest), list)
    return [*words, flag, "4"] if collects else words


def _resumed(*argv: str) -> tuple[argparse.Namespace, argparse.Namespace]:
    """The namespace of ``evalreg ARGV`` and of the command it says to resume with."""
    args = build_parser().parse_args(argv)
    words = shlex.split(resume_command(args))
    assert words[0] == "evalreg"
    return args, build_parser().parse_args(words[1:])


def _options(args: argparse.Namespace) -> dict[str, object]:
    return {k: v for k, v in vars(args).items() if k != "handler"}


@pytest.mark.parametrize("action", _run_options(), ids=lambda a: a.option_strings[-1])
def test_every_run_option_given_is_in_the_resume_command(action: argparse.Action) -> None:
    """A flag given to the interrupted run reaches the command that resumes it (an option
    that must not, for a reason, would be left out by name, with the reason)."""
    words = _words(action)
    args, resumed = _resumed("run", *words)
    assert getattr(args, action.dest) != action.default
    assert _options(resumed) == _options(args)
    assert " ".join(words) in resume_command(args)


def test_the_resume_command_repeats_everything_given_in_the_parser_order() -> None:
    argv = [
        *("-C", "my registry", "run", "--batch", "--no-wait", "--batch-poll", "60"),
        *("--task", "labels", "--task", "it's", "--limit", "5", "--allow-pending"),
    ]
    args, resumed = _resumed(*argv)
    assert _options(resumed) == _options(args)
    assert resume_command(args) == (
        "evalreg -C 'my registry' run --task labels --task 'it'\"'\"'s' --limit 5 "
        "--allow-pending --batch --no-wait --batch-poll 60.0"
    )


def test_a_plain_run_resumes_as_a_plain_run() -> None:
    assert resume_command(build_parser().parse_args(["run"])) == "evalreg run"
