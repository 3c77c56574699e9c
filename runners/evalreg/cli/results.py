"""What the registry's results say now: ``evalreg status`` (fresh, stale, pending cells) and
``evalreg show`` (one item across candidates)."""

from __future__ import annotations

import argparse
import json

from evalreg.cli.common import Commands, emit, registry_root, repaired


def add_parsers(sub: Commands) -> None:
    """Add ``status`` and ``show``."""
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
