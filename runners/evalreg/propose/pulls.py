"""``evalreg propose --open-pr``: each proposal's branch pushed, and its pull request opened
or brought up to date; an open proposal for an older snapshot of the same pin is closed,
with a comment naming the one that supersedes it.

A proposal's pull request is found by its branch. Its body starts with ``marker(pin)``,
which is how an older proposal for the same pin is recognised, whatever its branch is called.
Model ids come from the providers, so they are shown as inline text (``escape.inline``),
never as Markdown.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.gitops.github import GitHubClient
from evalreg.propose.branches import PREFIX, Proposal
from evalreg.text.escape import inline

SUPERSEDED = "<!-- evalreg:propose-superseded -->"


def marker(pin: str) -> str:
    """The first line of every proposal's body for ``pin``."""
    return f"<!-- evalreg:propose pin={pin} -->"


@dataclass(frozen=True)
class PullOutcome:
    proposal: Proposal
    number: int
    url: str
    action: str
    """``opened``, ``updated`` or ``unchanged``."""
    closed: tuple[int, ...] = ()
    """Older proposals for the same pin, closed as superseded by this one."""


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


def push(root: Path, remote: str, branch: str) -> None:
    """Push ``branch`` to ``remote``, replacing what it held (a proposal branch is
    evalreg's own, rebuilt on each base)."""
    done = subprocess.run(
        ["git", "push", "--quiet", remote, f"+refs/heads/{branch}:refs/heads/{branch}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise UsageError(f"git push {remote} {branch} failed: {done.stderr.strip()}")


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
    pull request into ``base``, and close older proposals for the same pin."""
    # The repository's open pull requests, listed once: each proposal's own (by its
    # branch) and the older proposals it supersedes are found among them.
    listed = client.open_pulls()
    outcomes = []
    for p, listed_by, also_newer in proposals:
        push(root, remote, p.branch)
        text, name = body(p, listed_by, also_newer), title(p)
        mine = [pr for pr in listed if _head_ref(pr) == p.branch]
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
