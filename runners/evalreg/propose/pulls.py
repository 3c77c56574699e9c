"""``evalreg propose --open-pr``: each proposal's branch pushed, and its pull request opened
or brought up to date; an open proposal for an older snapshot of the same pin is closed,
with a comment naming the one that supersedes it.

A proposal's pull request is found by its branch. Its body starts with ``marker(pin)``,
which is how an older proposal for the same pin is recognised, whatever its branch is called.
Model ids come from the providers, so they are shown as inline text (``escape.inline``),
never as Markdown.

A person's work is never overwritten, and a person's "no" is not asked again:

* a proposal whose local branch was kept (``Proposal.kept``) is not pushed;
* nor is one whose remote branch ends with a person's commit (a reviewer's fix pushed to
  the proposal): the branch on the remote is read first, and only a tip of ``propose``'s own
  is replaced, with ``--force-with-lease`` on that very commit, so a commit pushed meanwhile
  fails the push instead of being lost;
* nor is one whose pull request was closed without being merged (declined): no new one is
  opened for its branch.

Each of these is reported (``PullOutcome.action`` and ``reason``); its pull request, open or
closed, is left as it is.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.gitops.github import GitHubClient
from evalreg.propose.branches import PREFIX, Proposal, made_by_propose
from evalreg.text.escape import inline

SUPERSEDED = "<!-- evalreg:propose-superseded -->"


def marker(pin: str) -> str:
    """The first line of every proposal's body for ``pin``."""
    return f"<!-- evalreg:propose pin={pin} -->"


KEPT_REMOTE = "a person's commit is on the remote branch"
MOVED = (
    "the remote branch moved while propose ran (a commit was pushed to it): nothing was "
    "overwritten, and its pull request was left as it is"
)


@dataclass(frozen=True)
class PullOutcome:
    proposal: Proposal
    number: int
    """The pull request's number; for ``kept`` and ``declined``, the existing one's (the
    open one, or the declined one), 0 when there is none."""
    url: str
    """The pull request's page ("" when ``number`` is 0)."""
    action: str
    """``opened``, ``updated`` or ``unchanged``; or, with nothing pushed and no pull request
    touched: ``kept`` (the branch holds a person's commit, locally or on the remote, or is
    checked out), ``declined`` (its pull request was closed without being merged) or
    ``failed`` (the remote branch moved while propose ran)."""
    closed: tuple[int, ...] = ()
    """Older proposals for the same pin, closed as superseded by this one."""
    reason: str | None = None
    """Why nothing was pushed: set for ``kept``, ``declined`` and ``failed``."""


def title(p: Proposal) -> str:
    if p.kind == "retired":
        return f"Mark {p.pin} retired: {p.model} is no longer listed"
    return f"Propose {p.new_model} for {p.pin}"


def retired_marker(pin: str) -> str:
    return f"<!-- evalreg:propose retired pin={pin} -->"


def body(p: Proposal, listed_by: str, also_newer: tuple[str, ...] = ()) -> str:
    """What was found, where, what the branch adds, and what to run."""
    if p.kind == "retired":
        users = ", ".join(inline(s) for s in p.selections) or "none"
        return (
            f"{retired_marker(p.pin)}\n## A pinned model is no longer listed\n\n"
            f"{inline(listed_by)} no longer lists {inline(p.model)}, which the pin "
            f"{inline(p.pin)} names: its cells can no longer be bought, and a run that asks "
            "for them will fail.\n\n"
            "This pull request marks the pin `retired`; `evalreg check` then warns about every "
            f"selection that still has it as a candidate ({users}). Its results stay the "
            "evidence they were.\n\nOpened by `evalreg propose`; nothing was bought.\n"
        )
    lines = [
        marker(p.pin),
        "## A newer snapshot of a pinned model",
        "",
        f"{inline(listed_by)} lists {inline(p.new_model)}, a newer snapshot of "
        f"{inline(p.model)}, which the pin {inline(p.pin)} names.",
        "",
        "This pull request adds:",
        f"- the pin {inline(p.new_pin)}, a copy of {inline(p.pin)} with the new model;",
    ]
    if p.selections:
        names = ", ".join(inline(s) for s in p.selections)
        lines.append(f"- a candidate for it in each selection that lists the old pin: {names}.")
    else:
        lines.append("- no candidate: no selection lists the old pin.")
    lines += [
        "",
        "**Before merging:**",
        "- confirm the copied prices against the provider's price sheet, then delete the "
        "pin's `price.review` line (`evalreg check` warns until then);",
        "- run the new cells: this repository's pull-request job runs them, or run "
        "`evalreg run` on this branch and push the results.",
    ]
    if also_newer:
        older = ", ".join(inline(m) for m in also_newer)
        lines += ["", f"Also listed, older than {inline(p.new_model)} and not proposed: {older}."]
    lines += ["", "Opened by `evalreg propose`; nothing was bought."]
    return "\n".join(lines) + "\n"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def remote_tip(root: Path, remote: str, branch: str) -> str | None:
    """The commit ``branch`` holds on ``remote`` (None: the remote has no such branch),
    fetched when this repository lacks it (a fresh clone), and no ref left behind."""
    ref = f"refs/heads/{branch}"
    listed = _git(root, "ls-remote", "--exit-code", remote, ref)
    if listed.returncode == 2:
        return None
    if listed.returncode != 0:
        raise UsageError(f"git ls-remote {remote} {branch} failed: {listed.stderr.strip()}")
    found = (line.partition("\t") for line in listed.stdout.splitlines())
    tips = [sha for sha, _, name in found if name == ref]
    if not tips:
        return None
    if _git(root, "cat-file", "-e", f"{tips[0]}^{{commit}}").returncode == 0:
        return tips[0]
    # Fetched into a ref of its own (no remote-tracking branch is moved: ``--refmap=``),
    # read, and removed: what was fetched is what is judged, and leased on.
    scratch = f"refs/evalreg/propose-remote/{branch}"
    fetched = _git(root, "fetch", "--quiet", "--no-tags", "--refmap=", remote, f"+{ref}:{scratch}")
    try:
        if fetched.returncode != 0:
            raise UsageError(f"git fetch {remote} {branch} failed: {fetched.stderr.strip()}")
        tip = _git(root, "rev-parse", "--verify", "--quiet", f"{scratch}^{{commit}}")
        if tip.returncode != 0:
            raise UsageError(f"git fetch {remote} {branch} fetched no commit")
        return tip.stdout.strip()
    finally:
        _git(root, "update-ref", "-d", scratch)


def push(root: Path, remote: str, branch: str, expect: str | None) -> bool:
    """Push ``branch`` to ``remote``, replacing what it held (a proposal branch is
    evalreg's own, rebuilt on each base) only while that is still ``expect`` (None: while
    the remote has no such branch). False: the remote branch moved meanwhile."""
    ref = f"refs/heads/{branch}"
    done = _git(
        root,
        "push",
        "--porcelain",
        f"--force-with-lease={ref}:{expect or ''}",
        remote,
        f"{ref}:{ref}",
    )
    if done.returncode == 0:
        return True
    rejected = [line for line in done.stdout.splitlines() if line.startswith("!\t")]
    if any("(stale info)" in line for line in rejected):
        return False
    said = done.stderr.strip() or done.stdout.strip()
    raise UsageError(f"git push {remote} {branch} failed: {said}")


def _head_ref(pull: dict[str, Any]) -> str:
    head = pull.get("head")
    ref = head.get("ref") if isinstance(head, dict) else None
    return ref if isinstance(ref, str) else ""


def open_pulls(
    root: Path,
    client: GitHubClient,
    remote: str,
    base: str,
    proposals: list[tuple[Proposal, str, tuple[str, ...]]],
) -> list[PullOutcome]:
    """For each (proposal, list URL, older snapshots): push its branch, open or update its
    pull request into ``base``, and close older proposals for the same pin; unless its
    branch holds a person's commit (locally or on the remote) or its pull request was
    declined, when nothing is pushed and no pull request touched."""
    # The repository's open pull requests, listed once: each proposal's own (by its
    # branch) and the older proposals it supersedes are found among them.
    listed = client.open_pulls()
    outcomes = []
    for p, listed_by, also_newer in proposals:
        mine = [pr for pr in listed if _head_ref(pr) == p.branch]
        if p.outcome == "kept":
            outcomes.append(_left(p, mine, "kept", p.kept or "the local branch was kept"))
            continue
        if not mine:
            declined = _declined(client, p.branch)
            if declined is not None:
                why = f"its pull request #{declined['number']} was closed without being merged"
                outcomes.append(_left(p, [declined], "declined", why))
                continue
        tip = remote_tip(root, remote, p.branch)
        if tip is not None and not made_by_propose(root, tip):
            outcomes.append(_left(p, mine, "kept", KEPT_REMOTE))
            continue
        if not push(root, remote, p.branch, tip):
            outcomes.append(_left(p, mine, "failed", MOVED))
            continue
        text, name = body(p, listed_by, also_newer), title(p)
        if mine:
            pr = mine[0]
            if pr.get("body") == text and pr.get("title") == name:
                action = "unchanged"
            else:
                pr = client.update_pull(int(pr["number"]), title=name, body=text)
                action = "updated"
        else:
            pr = client.create_pull(title=name, head=p.branch, base=base, body=text)
            action = "opened"
        number = int(pr["number"])
        closed = []
        for old in [] if p.kind == "retired" else listed:
            ref, old_body = _head_ref(old), old.get("body")
            if ref == p.branch or not ref.startswith(PREFIX):
                continue
            if not (isinstance(old_body, str) and old_body.startswith(marker(p.pin) + "\n")):
                continue
            user = old.get("user")
            login = user.get("login") if isinstance(user, dict) else None
            note = (
                f"Superseded by #{number}: {inline(p.new_model)} is a newer snapshot of "
                f"{inline(p.model)} than this pull request proposes. Closed by `evalreg propose`."
            )
            if isinstance(login, str):
                client.upsert_comment(int(old["number"]), note, marker=SUPERSEDED, bot_login=login)
            client.update_pull(int(old["number"]), state="closed")
            closed.append(int(old["number"]))
        outcomes.append(PullOutcome(p, number, str(pr.get("html_url", "")), action, tuple(closed)))
    return outcomes


def _declined(client: GitHubClient, branch: str) -> dict[str, Any] | None:
    """The latest pull request from ``branch`` closed without being merged (None: none)."""
    closed = [
        pr
        for pr in client.pulls_from(branch, state="closed")
        if _head_ref(pr) == branch
        and pr.get("merged_at") is None
        and isinstance(pr.get("number"), int)
    ]
    return max(closed, key=lambda pr: int(pr["number"]), default=None)


def _left(p: Proposal, pulls: list[dict[str, Any]], action: str, reason: str) -> PullOutcome:
    """A proposal left as it is: nothing pushed, its pull request (the first of ``pulls``,
    if any) untouched."""
    pr = pulls[0] if pulls else {}
    number = int(pr.get("number", 0))
    return PullOutcome(p, number, str(pr.get("html_url", "")), action, (), reason)
