"""Commands that change registry files by rule: ``evalreg schema`` (the JSON Schemas and
their reference), ``evalreg resolve`` (after a git merge) and ``evalreg select`` (a use
case's declared candidate)."""

from __future__ import annotations

import argparse

from evalreg.cli.common import Commands, registry_root, writing


def add_parsers(sub: Commands) -> None:
    """Add ``schema``, ``resolve`` and ``select``."""
    p = sub.add_parser(
        "schema",
        help="write the JSON Schemas of the registry's files and their reference "
        "into registry/schemas/",
    )
    p.set_defaults(handler=cmd_schema)

    p = sub.add_parser(
        "resolve",
        help="after a git merge: regenerate results and reports offline, and stage them",
    )
    p.add_argument("--no-push", action="store_true", help="do not push to the DVC remote")
    p.set_defaults(handler=cmd_resolve)
    p = sub.add_parser("select", help="change a use case's declared candidate")
    p.add_argument("use_case", metavar="USE_CASE", help="the selection id")
    p.add_argument("candidate", metavar="CANDIDATE", help="the candidate to declare")
    p.add_argument("--reason", required=True, help="why: becomes the rationale")
    p.add_argument(
        "--approver",
        help="who approves a choice the policy does not recommend (records a waiver with --reason)",
    )
    p.set_defaults(handler=cmd_select)


def cmd_schema(args: argparse.Namespace) -> int:
    from evalreg.report import reference
    from evalreg.report.terminal import console

    root = registry_root(args)
    with writing(root):
        written = reference.write(root)
    console().print(
        ("Wrote " + ", ".join(written)) if written else f"{reference.SCHEMA_DIR}/ is up to date"
    )
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from evalreg.gitops.merging import resolve
    from evalreg.report.terminal import print_resolution

    root = registry_root(args)
    with writing(root):
        done = resolve(root, push=not args.no_push)
    print_resolution(done)
    return done.exit_code


def cmd_select(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_selected
    from evalreg.selection.edit import select_candidate

    root = registry_root(args)
    with writing(root):
        changed = select_candidate(
            root, args.use_case, args.candidate, reason=args.reason, approver=args.approver
        )
    print_selected(changed)
    return 0
