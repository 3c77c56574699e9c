"""The registry as a whole: ``evalreg check`` validates one, ``evalreg init`` creates one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evalreg.cli.common import Commands, emit, note, registry_root, repaired


def add_parsers(sub: Commands) -> None:
    """Add ``check`` and ``init``."""
    p = sub.add_parser("check", help="validate the registry and summarise it")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--strict", action="store_true", help="warnings fail the check (exit 1)")
    p.add_argument(
        "--remote",
        action="store_true",
        help="also fail when an object the results or eval sets point at is not on the "
        "default DVC remote (needs read access to it)",
    )
    p.add_argument(
        "--base",
        metavar="REV",
        help="a pull request's base: fail when the default DVC remote moved since the "
        "merge-base together with results, selections, criteria, pins or eval sets; with "
        "--remote, also when the new remote lacks an object REV's pointers name",
    )
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("init", help="scaffold a new registry repository")
    p.add_argument("path", metavar="DIR", help="directory to create (must be empty or absent)")
    p.add_argument(
        "--remote",
        metavar="URL",
        help="DVC remote for eval data and responses (s3://, gs://, azure://, a path); "
        "default: a folder inside the repository",
    )
    p.add_argument(
        "--evalreg-spec",
        metavar="SPEC",
        help="the pip requirement CI installs evalreg from: evalreg==X.Y.Z on an index you "
        "control, git+https://host/org/evalreg@<commit>, or a wheel URL "
        "(default: the evalreg running now: the git commit it was installed from, else "
        "evalreg== its version); a --remote in s3://, gs:// or azure:// adds its extra",
    )
    snippets = p.add_mutually_exclusive_group()
    snippets.add_argument(
        "--no-snippets",
        dest="snippets",
        action="store_false",
        default=None,
        help="keep item text and model output out of pull-request comments (a public "
        "repository with private eval data); asked when run in a terminal",
    )
    snippets.add_argument(
        "--snippets",
        dest="snippets",
        action="store_true",
        default=None,
        help="quote item text and model output in pull-request comments",
    )
    p.set_defaults(handler=cmd_init)


def cmd_check(args: argparse.Namespace) -> int:
    from evalreg.check import check
    from evalreg.report.terminal import print_check

    result = check(
        repaired(registry_root(args), quiet_if_live=True), remote=args.remote, base=args.base
    )
    for text in result.notes():
        note(text)
    if args.json:
        emit(json.dumps(result.as_dict(strict=args.strict), indent=2) + "\n")
    else:
        print_check(result, strict=args.strict)
    return result.exit_code(strict=args.strict)


def cmd_init(args: argparse.Namespace) -> int:
    from evalreg.report.terminal import print_init
    from evalreg.scaffold import init_registry

    snippets = args.snippets
    if snippets is None and sys.stdin.isatty():
        # Whether the repository will be public is not known here: ask.
        answer = input(
            "Will this repository be public while its eval data stays private? Then pull-"
            "request comments should show no item text or model output. [y/N] "
        )
        snippets = answer.strip().lower() not in ("y", "yes")
    created = init_registry(
        Path(args.path),
        remote=args.remote,
        evalreg_spec=args.evalreg_spec,
        snippets=snippets is not False,
    )
    print_init(created, args.path, snippets=snippets is not False)
    return created.exit_code
