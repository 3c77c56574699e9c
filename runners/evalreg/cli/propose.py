"""``evalreg propose``: what the providers' model lists say about the registry's pins, and
a branch proposing each newer snapshot."""

from __future__ import annotations

import argparse
import sys

from evalreg.cli.common import Commands, emit, given_path, note, registry_root


def add_parsers(sub: Commands) -> None:
    """Add ``propose``."""
    p = sub.add_parser(
        "propose",
        help="ask the providers' model lists for newer snapshots of the pinned models (each "
        "proposed on a branch of its own) and for pinned models no longer listed",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="report what the lists say, and make no branch",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(handler=cmd_propose)


def cmd_propose(args: argparse.Namespace) -> int:
    from evalreg.errors import RegistryError, UsageError
    from evalreg.propose.branches import propose
    from evalreg.propose.listing import source
    from evalreg.propose.render import render_json, render_text
    from evalreg.propose.survey import survey
    from evalreg.redaction import url_without_credentials
    from evalreg.registry.diagnostics import Severity
    from evalreg.registry.loader import inspect_registry
    from evalreg.registry.tree import GitTree

    root = registry_root(args)
    # Branches are made on the last commit, so the registry is read as committed.
    try:
        tree = GitTree(root, "HEAD")
    except UsageError:
        raise UsageError(f"{root}: propose needs a git repository with a commit") from None
    base = tree.rev
    registry, findings = inspect_registry(tree, allow_missing_data=True)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise RegistryError(errors)
    reports = survey(registry, root)
    proposals = []
    if not args.dry_run:
        for r in reports:
            if r.finding is None or r.finding.newer is None:
                continue
            where = source(registry.pins[r.pin])
            assert not isinstance(where, str)
            listed_by = url_without_credentials(where.url)
            proposals.append(propose(root, registry, base, r.pin, r.finding.newer, listed_by))
    if args.json:
        from evalreg.text.escape import json_text

        data = render_json(reports)
        data["proposals"] = [
            {
                "pin": p.pin,
                "new_pin": p.new_pin,
                "model": p.new_model,
                "branch": p.branch,
                "commit": p.commit,
                "files": list(p.files),
                "selections": list(p.selections),
                "outcome": p.outcome,
            }
            for p in proposals
        ]
        text = json_text(data) + "\n"
    else:
        text = render_text(reports)
        for p in proposals:
            text += (
                f"\n{p.branch}: {p.outcome} ({p.commit[:12]}): pin {p.new_pin} ({p.new_model}), "
                f"a candidate in {', '.join(p.selections) or 'no selection'}"
            )
        if proposals:
            text += "\n"
    emit(text, str(given_path(args, args.output)) if args.output else None)
    if proposals and not args.json:
        sys.stdout.flush()  # the findings first, then what to do with them
        note(
            "each branch is ready for a pull request: push it, and CI runs the new cells "
            "(or run them: `evalreg run`)"
        )
    return 0
