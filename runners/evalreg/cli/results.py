"""What the registry's results say now: ``evalreg status`` (fresh, stale, pending cells),
``evalreg show`` (one item across candidates) and ``evalreg export`` (a use case's outputs
as a table)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from evalreg.cli.common import Commands, emit, given_path, note, registry_root, repaired
from evalreg.errors import UsageError


def add_parsers(sub: Commands) -> None:
    """Add ``status``, ``show`` and ``export``."""
    p = sub.add_parser("status", help="show fresh, stale and pending cells and why")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser(
        "show",
        help="one item: its input, each candidate's request, stored output and verdicts",
    )
    p.add_argument("item", metavar="ITEM", help="the item id")
    p.add_argument(
        "--candidate", action="append", metavar="ID", help="only this candidate (repeatable)"
    )
    p.add_argument(
        "--use-case", action="append", metavar="ID", help="only this use case (repeatable)"
    )
    p.add_argument(
        "--task", action="append", metavar="ID", help="only this task's use cases (repeatable)"
    )
    p.add_argument(
        "--rev",
        metavar="REV",
        help="read the registry, eval sets, results and store as of REV (default: the "
        "working tree)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser(
        "export",
        help="write a use case's outputs as a CSV or JSON Lines table: a row per item, "
        "candidate and sample, with its level, verdicts, latency, tokens and cost",
    )
    p.add_argument("use_case", metavar="USE_CASE", help="the use case (a selection's id)")
    p.add_argument(
        "--format",
        choices=("csv", "jsonl"),
        default="csv",
        help="CSV (default) or JSON Lines (an object a row, the verdicts nested)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write FILE, whole once every row is written (default: stdout)",
    )
    p.add_argument(
        "--rev",
        metavar="REV",
        help="read the registry, results and store as of REV (default: the working tree)",
    )
    p.set_defaults(handler=cmd_export)


def cmd_status(args: argparse.Namespace) -> int:
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import print_status, print_waiting_batches
    from evalreg.results.freshness import status
    from evalreg.store.batches import BatchJournal

    root = repaired(registry_root(args))
    statuses = status(load_registry(root))
    batches = BatchJournal.load(root).batches
    if args.json:
        emit(json.dumps([s.as_dict() for s in statuses], indent=2) + "\n")
        print_waiting_batches(batches)
    else:
        print_status(statuses, batches)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_item
    from evalreg.results.item import show_item
    from evalreg.text.escape import json_text

    root = registry_root(args, args.rev)
    if args.rev is None:
        repaired(root)
    views = show_item(
        root,
        args.item,
        rev=args.rev,
        candidates=tuple(args.candidate or ()),
        use_cases=tuple(args.use_case or ()),
        tasks=tuple(args.task or ()),
    )
    if args.json:
        emit(json_text([view.as_dict() for view in views]) + "\n")
    else:
        print_item(views)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from evalreg.report.export_file import chunks, write_file
    from evalreg.results.export import outputs_at

    root = registry_root(args, args.rev)
    output = given_path(args, args.output) if args.output else None
    if output is not None and not output.parent.is_dir():
        raise UsageError(f"-o {args.output}: no such directory {output.parent}")
    if args.rev is None:
        repaired(root)
    table = outputs_at(root, args.use_case, rev=args.rev)
    for st in table.pending:
        note(f"{st.cell.candidate.id}: no rows (pending: never run)")
    for st in table.stale:
        reasons = "; ".join(st.reasons)
        note(f"{st.cell.candidate.id}: stale ({reasons}): its rows are the recorded results")
    text = chunks(table, args.format)
    if output is not None:
        write_file(output, text)
        return 0
    try:
        for chunk in text:
            sys.stdout.write(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped reading (``| head``): what it read is what it asked for.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
