"""``evalreg propose``: what the providers' model lists say about the registry's pins, and
a branch proposing each newer snapshot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evalreg.cli.common import Commands, emit, given_path, note, registry_root
from evalreg.errors import RegistryError, UsageError

if TYPE_CHECKING:
    from evalreg.propose.branches import Proposal
    from evalreg.propose.pulls import PullOutcome
    from evalreg.propose.survey import PinReport


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
    p.add_argument(
        "--open-pr",
        action="store_true",
        help="push each branch and open (or update) its pull request through the GitHub API "
        "(GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL); close older proposals it supersedes",
    )
    p.add_argument(
        "--remote", default="origin", help="the git remote GitHub serves (default origin)"
    )
    p.add_argument(
        "--base", metavar="BRANCH", help="the pull requests' base (default: the current branch)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(handler=cmd_propose)


def cmd_propose(args: argparse.Namespace) -> int:
    from evalreg.propose.branches import propose, retire
    from evalreg.propose.render import render_json, render_text
    from evalreg.propose.survey import survey
    from evalreg.registry.diagnostics import Severity
    from evalreg.registry.loader import inspect_registry
    from evalreg.registry.tree import GitTree

    root = registry_root(args)
    if args.open_pr and args.dry_run:
        raise UsageError("--open-pr pushes branches and --dry-run makes none: give one of them")
    # Before anything is made: a missing one changes nothing.
    github = _github_settings(args, root) if args.open_pr else None
    if args.output and not given_path(args, args.output).parent.is_dir():
        raise UsageError(f"{args.output}: its directory does not exist")
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
    problems: list[str] = []
    if not args.dry_run:
        taken: set[str] = set()
        for r in reports:
            if r.finding is None:
                continue
            if registry.pins[r.pin].provider == "azure_openai":
                continue  # reported only: see propose.listing
            listed_by = r.listed_by or ""
            try:
                if r.finding.retired and registry.pins[r.pin].retired is None:
                    proposals.append(retire(root, registry, base, r.pin, listed_by, taken))
                if r.finding.newer is not None and r.not_proposed is None:
                    proposals.append(
                        propose(root, registry, base, r.pin, r.finding.newer, listed_by, taken)
                    )
            except UsageError as exc:  # a file propose cannot edit: the others go on
                problems.append(f"{r.pin}: no branch: {exc}")
    pulls = []
    if github is not None and proposals:
        pulls = _open_pulls(args, root, github, reports, proposals)
        problems += [
            f"{o.proposal.branch}: not pushed: {o.reason}" for o in pulls if o.action == "failed"
        ]
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
                "kept": p.kept,
                "kind": p.kind,
            }
            for p in proposals
        ]
        data["problems"] = problems
        data["pulls"] = [
            {
                "branch": o.proposal.branch,
                "number": o.number,
                "url": o.url,
                "action": o.action,
                "closed": list(o.closed),
                "reason": o.reason,
            }
            for o in pulls
        ]
        text = json_text(data) + "\n"
    else:
        text = render_text(reports)
        for p in proposals:
            if p.kept is not None:
                text += f"\n{p.branch}: kept as it is: {p.kept}"
                continue
            if p.kind == "retired":
                text += f"\n{p.branch}: {p.outcome} ({p.commit[:12]}): pin {p.pin} marked retired"
                continue
            text += (
                f"\n{p.branch}: {p.outcome} ({p.commit[:12]}): pin {p.new_pin} ({p.new_model}), "
                f"a candidate in {', '.join(p.selections) or 'no selection'}"
            )
        for o in pulls:
            closed = ", ".join(f"#{n}" for n in o.closed)
            head = f"#{o.number} {o.action}" if o.number else o.action
            text += f"\n{head}: {o.proposal.branch}"
            text += f" (closed as superseded: {closed})" if closed else ""
            if o.reason and o.reason != o.proposal.kept:  # a local "kept" is said above
                text += f": not pushed: {o.reason}"
        if proposals:
            text += "\n"
    emit(text, str(given_path(args, args.output)) if args.output else None)
    sys.stdout.flush()  # the findings first, then what to do with them
    for problem in problems:
        note(problem)
    if proposals and not args.json:
        note(
            "each branch is ready for a pull request: push it, and CI runs the new cells "
            "(or run them: `evalreg run`)"
        )
    unread = sorted({r.listed_by or r.pin for r in reports if r.error is not None})
    if unread:
        # An expired key or a provider that does not answer must not leave a scheduled job
        # green while it learns nothing.
        note(f"{len(unread)} model list(s) could not be read: {', '.join(unread)}")
    return 1 if problems or unread else 0


def _open_pulls(
    args: argparse.Namespace,
    root: Path,
    github: tuple[str, str, str],
    reports: list[PinReport],
    proposals: list[Proposal],
) -> list[PullOutcome]:
    from evalreg.gitops.github import GitHubClient, api_url_from_environment
    from evalreg.propose.pulls import open_pulls

    token, repository, base = github
    found = {r.pin: r for r in reports}
    work = []
    for p in proposals:
        report = found[p.pin]
        older = report.finding.also_newer if report.finding else ()
        work.append((p, report.listed_by or "", older))
    with GitHubClient(token, repository, api_url=api_url_from_environment()) as client:
        return open_pulls(root, client, args.remote, base, work)


def _github_settings(args: argparse.Namespace, root: Path) -> tuple[str, str, str]:
    """The token, repository and base branch ``--open-pr`` needs; a missing one is an error
    (exit 2) before anything is made."""
    import os
    import re

    from evalreg.gitops.github import token_from_environment

    token = token_from_environment()
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    if not repository:
        raise UsageError("GITHUB_REPOSITORY is not set: it names the repository (OWNER/NAME)")
    if re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository) is None:
        raise UsageError(f"GITHUB_REPOSITORY is {repository!r}: it must be OWNER/NAME")
    return token, repository, args.base or _current_branch(root)


def _current_branch(root: Path) -> str:
    import subprocess

    done = subprocess.run(
        ["git", "symbolic-ref", "--quiet", "--short", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise UsageError("HEAD is not on a branch: give --base BRANCH for the pull requests")
    return done.stdout.strip()
