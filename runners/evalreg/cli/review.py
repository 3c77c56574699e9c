"""What changed and who approved it: ``evalreg drift`` (live models against the store),
``evalreg diff`` and ``evalreg comment`` (a pull request's diff and its sticky comment) and
``evalreg audit`` (a revision's audit record)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evalreg.cli.common import Commands, emit, given_path, registry_root, repaired
from evalreg.compare.statuses import REPRODUCTION_STATUSES
from evalreg.errors import EvalregError


def add_parsers(sub: Commands) -> None:
    """Add ``drift``, ``diff``, ``comment`` and ``audit``."""
    p = sub.add_parser("drift", help="re-ask live models a seeded sample of recorded requests")
    p.add_argument(
        "--sample",
        type=int,
        default=50,
        metavar="N",
        help="requests re-asked per cell (default 50; each one is paid for)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="sample seed (default 0)")
    p.add_argument(
        "--cell", action="append", metavar="ID", help="only this cell, TASK/CANDIDATE (repeatable)"
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        metavar="X",
        help="a cell drifts when more than this share of its levels differ (default 0.1)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--record",
        action="store_true",
        help="append each cell's result to reports/drift.jsonl (the report's drift section)",
    )
    p.set_defaults(handler=cmd_drift)

    p = sub.add_parser("diff", help="what changed between two revisions' results, per slice")
    p.add_argument("base", metavar="BASE", help="base revision (its merge-base with HEAD is used)")
    p.add_argument("head", metavar="HEAD", nargs="?", help="head revision (default: working tree)")
    p.add_argument(
        "--format",
        choices=("terminal", "md", "json", "comment"),
        help="terminal (the default on a terminal: tables that fit it), md (the default "
        "otherwise: the pull-request comment's Markdown), json (what `evalreg comment --diff` "
        "reads), or comment: the exact body `evalreg comment` would post",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--check",
        metavar="FILE",
        help="the output of `evalreg check --json` for HEAD, stated in the diff with its findings",
    )
    p.add_argument(
        "--reproduction",
        choices=REPRODUCTION_STATUSES,
        default="not_attempted",
        help="whether `evalreg reproduce` reproduced HEAD's results (default not_attempted: "
        "the numbers are shown as the pull request's own claims)",
    )
    p.add_argument(
        "--reproduction-reason",
        default="",
        metavar="TEXT",
        help="why, in a few words (e.g. 'a fork cannot read the DVC remote')",
    )
    p.set_defaults(handler=cmd_diff)

    p = sub.add_parser("comment", help="post the diff as one sticky pull-request comment")
    p.add_argument(
        "--diff",
        required=True,
        metavar="FILE",
        help="a JSON diff (evalreg diff --format json); the Markdown is rendered from it here",
    )
    p.add_argument(
        "--pr",
        type=int,
        metavar="N",
        help="pull request number (0: find it from --head-sha); default: from the event payload",
    )
    p.add_argument(
        "--head-sha",
        metavar="SHA",
        help="the commit the diff was made for; the "
        "comment is only posted while it is still the PR's head",
    )
    p.add_argument("--repository", metavar="OWNER/NAME", help="default: GITHUB_REPOSITORY")
    p.add_argument(
        "--bot-login",
        default="github-actions[bot]",
        metavar="LOGIN",
        help="the account that owns the sticky comment (default github-actions[bot])",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact comment body instead of posting it (no token, no network)",
    )
    p.set_defaults(handler=cmd_comment)

    p = sub.add_parser("audit", help="the audit record of a revision, from git history")
    p.add_argument("rev", metavar="REV", nargs="?", default="HEAD", help="default: HEAD")
    p.add_argument(
        "--html", metavar="DIR", help="also write a static site an auditor opens offline"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the Markdown to FILE")
    p.add_argument("--no-verify", action="store_true", help="skip the reproduce verdict")
    p.add_argument(
        "--github-token-env",
        default="GITHUB_TOKEN",
        metavar="NAME",
        help="environment variable holding a token to read PR reviews "
        "(default GITHUB_TOKEN; unset: approvals not checked)",
    )
    p.add_argument(
        "--repository", metavar="OWNER/NAME", help="GitHub repository (default: GITHUB_REPOSITORY)"
    )
    p.set_defaults(handler=cmd_audit)


def cmd_drift(args: argparse.Namespace) -> int:
    from evalreg.compare.drift import drift, drift_json
    from evalreg.report.drift import render_drift
    from evalreg.text.escape import json_text

    root = registry_root(args)
    report = drift(
        root, sample=args.sample, seed=args.seed, cells=args.cell, threshold=args.threshold
    )
    text = json_text(drift_json(report)) + "\n" if args.json else render_drift(report)
    emit(text, str(given_path(args, args.output)) if args.output else None)
    if args.record:
        from evalreg.compare.drift_log import append_log

        append_log(root, report)
    return report.exit_code


def cmd_diff(args: argparse.Namespace) -> int:
    from evalreg.compare.diff import diff
    from evalreg.compare.diff_document import diff_document
    from evalreg.gitops.trusted import read_json_object
    from evalreg.report.diff_markdown import comment_body, diff_markdown
    from evalreg.text.escape import json_text

    checked = (
        read_json_object(
            given_path(args, args.check),
            flag="--check",
            name=str(given_path(args, args.check)),
            what="the output of `evalreg check --json`",
        )
        if args.check
        else None
    )
    # BASE may predate the registry (the pull request that adds it); what it became may not.
    root = registry_root(args, args.head)
    data = diff(
        repaired(root),
        args.base,
        args.head,
        check=checked,
        reproduction=(args.reproduction, args.reproduction_reason),
    )
    output = str(given_path(args, args.output)) if args.output else None
    form = args.format or ("terminal" if output is None and sys.stdout.isatty() else "md")
    # Validated before it is written, and rendered from the JSON the comment job reads.
    text = json_text(data)
    document = diff_document(text)
    if form == "terminal":
        from evalreg.report.terminal import print_diff

        print_diff(document)
        return 0
    if form == "json":
        text += "\n"
    elif form == "comment":
        text = comment_body(document)
    else:
        text = diff_markdown(document)
    emit(text, output)
    return 0


def cmd_comment(args: argparse.Namespace) -> int:

    from evalreg.gitops.github import (
        GitHubClient,
        api_url_from_environment,
        context_from_environment,
        token_from_environment,
    )
    from evalreg.gitops.trusted import check_head_sha, comment_target, read_diff
    from evalreg.report.diff_markdown import COMMENT_MARKER, comment_body
    from evalreg.report.terminal import console, shown

    data = read_diff(given_path(args, args.diff), str(given_path(args, args.diff)))
    head_sha = check_head_sha(args.head_sha)
    body = comment_body(data)
    if args.dry_run:
        # The body as it would be posted, made here: no token, no request.
        emit(body)
        return 0
    ctx = context_from_environment(
        os.environ, pr=args.pr, repository=args.repository, head=head_sha
    )
    client = GitHubClient(
        token_from_environment(os.environ),
        ctx.repository,
        api_url=api_url_from_environment(os.environ),
    )
    with client:
        target = comment_target(client, ctx.number, ctx.head_sha)
        if target.number is None or not target.post:
            console().print(target.describe())
            return 0
        number = target.number
        result = client.upsert_comment(
            number, body, marker=COMMENT_MARKER, bot_login=args.bot_login
        )
    console().print(
        f"{result.action} comment on #{number}" + (f": {shown(result.url)}" if result.url else "")
    )
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from evalreg.audit.record import build_audit, reviews_from_environment
    from evalreg.report.audit import audit_markdown, write_html

    root = registry_root(args, args.rev)
    reviews = reviews_from_environment(
        os.environ, token_env=args.github_token_env, repository=args.repository
    )
    with reviews if reviews is not None else nullcontext():
        record = build_audit(root, args.rev, github=reviews, verify=not args.no_verify)
    output = str(given_path(args, args.output)) if args.output else None
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    emit(audit_markdown(record), output)
    if args.html:
        from evalreg.report.writer import decisions_at

        try:
            decisions = decisions_at(root, record.rev)
        except EvalregError as exc:  # the record is written all the same, saying why
            write_html(record, given_path(args, args.html), str(exc))
        else:
            write_html(record, given_path(args, args.html), decisions)
    return record.exit_code
