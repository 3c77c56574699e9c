"""Documents written into the repository: ``evalreg report`` (the governance report) and
``evalreg view`` (the offline per-item explorer)."""

from __future__ import annotations

import argparse

from evalreg.cli.common import Commands, given_path, registry_root, repaired, writing


def add_parsers(sub: Commands) -> None:
    """Add ``report`` and ``view``."""
    p = sub.add_parser("report", help="write the governance report into reports/")
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser(
        "view", help="write an offline HTML explorer of each use case's items and outputs"
    )
    p.add_argument("use_case", nargs="*", help="use cases to explore (default: every one)")
    p.add_argument("--rev", help="read the results of this revision (default: the working tree)")
    p.add_argument(
        "--base", help="a second revision: filter the items whose outcome changed since it"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="write <use case>.html here (default: reports/explorer)",
    )
    p.add_argument(
        "--with-text",
        action="store_true",
        help="include item text and outputs even when privacy.snippets is off "
        "(then keep the file private)",
    )
    p.set_defaults(handler=cmd_view)


def cmd_report(args: argparse.Namespace) -> int:
    from evalreg.registry.loader import load_registry
    from evalreg.report.terminal import console
    from evalreg.report.writer import write_report

    root = registry_root(args)
    with writing(root):
        written = write_report(root, load_registry(root))
    console().print("Wrote " + ", ".join(written))
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from evalreg.report.explorer import EXPLORER_DIR, write_explorer
    from evalreg.report.terminal import console
    from evalreg.selection.samples import samples_at

    root = repaired(registry_root(args, args.rev))
    directory = given_path(args, args.output) if args.output else root / EXPLORER_DIR
    texts = True if args.with_text else None
    written = [
        write_explorer(directory, data)
        for data in samples_at(root, args.use_case, rev=args.rev, base=args.base, texts=texts)
    ]
    console().print("Wrote " + ", ".join(str(p) for p in written))
    return 0
