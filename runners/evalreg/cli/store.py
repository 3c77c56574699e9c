"""``evalreg store``: the response store's upkeep (``compact``, ``purge``)."""

from __future__ import annotations

import argparse

from evalreg.cli.common import Commands, note, registry_root, writing


def add_parsers(sub: Commands) -> None:
    """Add ``store`` and its commands."""
    store = sub.add_parser("store", help="the response store")
    store_sub = store.add_subparsers(dest="store_command", metavar="COMMAND")
    p = store_sub.add_parser("compact", help="merge all store segments into one")
    p.add_argument("--no-push", action="store_true", help="do not push to the DVC remote")
    p.set_defaults(handler=cmd_store_compact)
    p = store_sub.add_parser(
        "purge",
        help="remove every stored record rendered from one item (its responses and the judge "
        "verdicts on them), and log the purge",
    )
    p.add_argument("item", metavar="ITEM", help="the item id")
    p.add_argument(
        "--reason", required=True, help="why (logged for auditors: no personal data here)"
    )
    p.add_argument(
        "--evalset",
        metavar="PATH",
        help="the eval set holding the item (repository path), when its id is in several",
    )
    p.add_argument(
        "--date", metavar="YYYY-MM-DD", help="when the purge was requested, recorded as given"
    )
    p.add_argument(
        "--no-push", action="store_true", help="do not push the new segment to the DVC remote"
    )
    p.set_defaults(handler=cmd_store_purge)


def cmd_store_compact(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_compaction
    from evalreg.runner.interrupts import deferred
    from evalreg.store.compaction import compact

    root = registry_root(args)
    with writing(root):
        done = compact(root, push=not args.no_push, guard=deferred)
    print_compaction(done)
    return 0


def cmd_store_purge(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_purge
    from evalreg.store.purge import purge_item

    root = registry_root(args)
    with writing(root):
        try:
            record = purge_item(
                root,
                args.item,
                reason=args.reason,
                evalset=args.evalset,
                at=args.date,
                push=not args.no_push,
            )
        except KeyboardInterrupt:
            # An erasure asked for is never dropped: its journal stays.
            note("the purge is journalled: the next evalreg command finishes it")
            raise
    print_purge(record)
    return 0
