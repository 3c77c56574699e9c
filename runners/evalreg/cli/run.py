"""Buying and grading: ``evalreg run``, and ``evalreg reproduce`` that grades a revision's
evidence again offline."""

from __future__ import annotations

import argparse
import math
import sys

from evalreg.cli.common import Commands, note, registry_root, repaired, writing
from evalreg.errors import UsageError
from evalreg.text.numbers import plural


def add_parsers(sub: Commands) -> None:
    """Add ``run`` and ``reproduce``."""
    p = sub.add_parser("run", help="run the stale cells: buy missing responses, grade, write")
    add_run_options(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("reproduce", help="recompute a revision's results offline and compare")
    p.add_argument("rev", metavar="REV", nargs="?", help="a commit, branch or tag")
    p.add_argument(
        "--range",
        metavar="BASE..HEAD",
        help="every first-parent commit after BASE up to HEAD that recorded results, oldest "
        "first; a cell with the same evidence as at a revision already checked keeps its "
        "verdict (named) instead of being graded again",
    )
    p.set_defaults(handler=cmd_reproduce)


def add_run_options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """Add ``evalreg run``'s options to ``p`` and return them, in order: the command that
    resumes an interrupted run is read off them (``resume_command``)."""
    pending = p.add_mutually_exclusive_group()
    how_many = p.add_mutually_exclusive_group()
    return [
        p.add_argument(
            "--offline",
            action="store_true",
            help="never call a model: a missing response is an error naming the item",
        ),
        p.add_argument("--task", action="append", metavar="ID", help="only this task (repeatable)"),
        p.add_argument(
            "--candidate", action="append", metavar="ID", help="only this candidate (repeatable)"
        ),
        p.add_argument(
            "--max-concurrency",
            type=_at_least_one,
            default=64,
            metavar="N",
            help="requests in flight across all pins (default 64)",
        ),
        p.add_argument(
            "--limit",
            type=_at_least_one,
            metavar="N",
            help="only the first N items of each cell (a smoke test; writes no results)",
        ),
        p.add_argument(
            "--max-cost",
            type=_amount,
            metavar="USD",
            help="stop buying before the estimated spend would exceed USD",
        ),
        p.add_argument(
            "--dry-run",
            action="store_true",
            help="show what would run, why, and its estimated cost",
        ),
        p.add_argument(
            "--shard",
            metavar="I/N",
            help="buy only shard I of N of the missing responses (a CI matrix job)",
        ),
        p.add_argument(
            "--force",
            action="store_true",
            help="re-grade fresh cells too (stored responses are never re-bought)",
        ),
        p.add_argument(
            "--no-push",
            action="store_true",
            help="do not push new responses and records to the DVC remote",
        ),
        p.add_argument(
            "--holdout",
            action="store_true",
            help="run the sealed hold-out cells (when deciding, not while tuning)",
        ),
        pending.add_argument(
            "--strict",
            action="store_true",
            help="a cell left pending (its key unset, or never run under --offline) fails the "
            "run (exit 1); without it, only an online run fails for a cell whose key or "
            "credentials are unset, naming them",
        ),
        pending.add_argument(
            "--allow-pending",
            action="store_true",
            help="a cell whose key or credentials are unset here stays pending without failing "
            "the run (exit 0), unless --task/--candidate name it: for a job that buys what its "
            "keys allow",
        ),
        p.add_argument(
            "--batch",
            action="store_true",
            help="buy missing responses through the batch APIs of OpenAI, Anthropic and the "
            "Gemini API (about half the price, within 24 hours); other providers, and Vertex "
            "AI pins, are bought live",
        ),
        p.add_argument(
            "--no-wait",
            action="store_true",
            help="with --batch: submit the batches and exit; a later `run --batch` collects them",
        ),
        p.add_argument(
            "--batch-poll",
            type=_positive_seconds,
            default=15.0,
            metavar="S",
            help="seconds before the first poll of a batch (doubling up to 5 minutes; default 15)",
        ),
        how_many.add_argument(
            "--until-decided",
            action="store_true",
            help="buy each use case's items in rounds, in one seeded order, and stop once its "
            "decision is settled (at most a 5%% chance, or its policy's `sequential.alpha`, "
            "that a full run would decide otherwise)",
        ),
        how_many.add_argument(
            "--all-items",
            action="store_true",
            help="buy every item, also for use cases whose policy says to stop once decided, "
            "and complete the cells a sequential run stopped early",
        ),
    ]


def cmd_run(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import (
        RunProgress,
        plain,
        print_round,
        print_run,
        print_sequential,
    )
    from evalreg.runner.command import run_command
    from evalreg.runner.planning import RunOptions
    from evalreg.runner.run import RunInterrupted

    root = registry_root(args)
    options = RunOptions(
        offline=args.offline,
        tasks=tuple(args.task or ()),
        candidates=tuple(args.candidate or ()),
        max_concurrency=args.max_concurrency,
        limit=args.limit,
        max_cost_usd=args.max_cost,
        dry_run=args.dry_run,
        shard=_shard(args.shard),
        force=args.force,
        push=not args.no_push,
        holdout=args.holdout,
        strict=args.strict,
        allow_pending=args.allow_pending,
        batch=args.batch,
        wait=not args.no_wait,
        batch_poll_s=args.batch_poll,
        until_decided=args.until_decided,
        all_items=args.all_items,
    )
    if args.no_wait and not args.batch:
        raise UsageError("--no-wait goes with --batch: a live run has nothing to wait for")
    if options.dry_run:
        verdict = run_command(repaired(root), options)
    else:
        with writing(root) as lock:
            try:
                verdict = run_command(
                    root, options, lock=lock, display=RunProgress, on_round=print_round
                )
            except RunInterrupted as exc:
                note(
                    f"interrupted: {plural(exc.stored, 'response')} bought by this run "
                    "are kept in the store; the next evalreg command tracks them. Resume with "
                    f"`{resume_command(args)}`: it buys only what is missing"
                )
                raise
    if verdict.sequential is None or verdict.result.plans:
        print_run(verdict.result, dry_run=options.dry_run)
    if verdict.sequential is not None:
        print_sequential(verdict.sequential)
    for refusal in verdict.refusals:
        sys.stderr.write(plain(f"evalreg: error: {refusal}") + "\n")
    if verdict.refusals and not (options.strict or options.allow_pending):
        note(
            "set what is named to buy these cells; to run only the others, name them with "
            "--task/--candidate, or leave these pending with --allow-pending"
        )
    return verdict.exit_code


def resume_command(args: argparse.Namespace) -> str:
    """The ``evalreg run`` command line that continues an interrupted run: each option of
    ``evalreg run`` whose value is not its default, in the order its help lists them, read
    off the parser so that an option added later is repeated too. A value is written as
    ``str`` writes it, which the option's type reads back as the same value. Nothing is
    left out: ``--dry-run`` is never set here (a dry run buys nothing, so it is never
    interrupted with something to resume), and the others chose what the run buys and how."""
    import shlex

    words = ["evalreg"]
    if args.directory is not None:
        words += ["-C", args.directory]
    words.append("run")
    for action in add_run_options(argparse.ArgumentParser(add_help=False)):
        value = getattr(args, action.dest)
        if value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:  # a switch
            words.append(flag)
        else:  # once a value; repeated for each of an appended option's values
            for one in value if isinstance(value, list) else [value]:
                words += [flag, str(one)]
    return shlex.join(words)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_range_reproduction, print_reproduction
    from evalreg.runner.reproduce import range_bounds, reproduce, reproduce_range

    if (args.rev is None) == (args.range is None):
        raise UsageError("give a revision (REV) or a range (--range BASE..HEAD), not both")
    if args.range is not None:
        # BASE may predate the registry; HEAD, the revision verified last, may not.
        root = repaired(registry_root(args, range_bounds(args.range)[1]))
        done = reproduce_range(root, args.range)
        print_range_reproduction(done)
        return 0 if done.identical else 1
    outcome = reproduce(repaired(registry_root(args, args.rev)), args.rev)
    print_reproduction(outcome)
    return 0 if outcome.identical else 1


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number from 1 (``--limit -1`` would drop the last item)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number from 1")
    return value


def _amount(text: str) -> float:
    """An argparse type: a finite amount from 0 (a NaN budget compares false with every
    cost)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: expected an amount from 0, like 2.50")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: expected seconds above 0, like 15")
    return value


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None

    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text}: expected i/n, like 2/4") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: i must be between 1 and n")
    return index, count
