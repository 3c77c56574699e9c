"""``evalreg propose``: what the providers' model lists say about the registry's pins."""

from __future__ import annotations

import argparse

from evalreg.cli.common import Commands, emit, given_path, registry_root


def add_parsers(sub: Commands) -> None:
    """Add ``propose``."""
    p = sub.add_parser(
        "propose",
        help="ask the providers' model lists for newer snapshots of the pinned models, and "
        "for pinned models no longer listed",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(handler=cmd_propose)


def cmd_propose(args: argparse.Namespace) -> int:
    from evalreg.propose.render import render_json, render_text
    from evalreg.propose.survey import survey
    from evalreg.registry.loader import load_registry
    from evalreg.text.escape import json_text

    root = registry_root(args)
    reports = survey(load_registry(root), root)
    text = json_text(render_json(reports)) + "\n" if args.json else render_text(reports)
    emit(text, str(given_path(args, args.output)) if args.output else None)
    return 0
