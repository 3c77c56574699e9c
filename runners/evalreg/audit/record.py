"""``evalreg audit REV``: who changed each selection and its criteria, when, and on what evidence.

The record is built from git history (first-parent order from the root commit to REV,
dates in UTC): every change to a selection, and to what its decision rests on — its task,
the task's rubric and eval set, the candidates' pins and judge pins. When a GitHub token is
given, it adds the pull request of each commit that names none in its subject, the pull
requests' reviews, and a check of each waiver's approver against them; when asked, the
``reproduce`` verdict. It never reads the clock, so the same repository state, REV and
GitHub answers give the same record.

"Criteria changed after the evidence" means a change to a selection's policy, to its task's
rubric, or to which rubric its task uses, at a first-parent commit later than the first
one holding a result summary of one of its cells — or at that very commit, unless the
commit created the criteria: the results were in the working tree when the criteria were
edited, so such an edit is made knowing them.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar

import git
import httpx
from pydantic import BaseModel

from evalreg._version import __version__
from evalreg.audit.changes import (
    EvalsetVersion,
    count_items,
    count_items_in,
    describe,
    describe_evalset,
)
from evalreg.audit.commits import CommitInfo, Person
from evalreg.audit.fixed import (
    Edit,
    Moment,
    criteria_after_evidence,
    declared_after_evidence,
)
from evalreg.audit.fixed import late as late_edits
from evalreg.audit.introduced import PrSource, pull_request_in
from evalreg.audit.rebuys import Rebuy, RebuyTrail
from evalreg.audit.remotes import RemoteChange, RemoteTrail
from evalreg.canonical import digest
from evalreg.cells import RESULTS_DIR
from evalreg.dvcrepo import cached_file, pointer_md5
from evalreg.errors import EvalregError, RegistryError, UsageError
from evalreg.gitops.github import DEFAULT_API_URL, GitHubClient, api_url_from_environment
from evalreg.registry import schema
from evalreg.registry.loader import REGISTRY_DIR, YAML_SUFFIXES
from evalreg.registry.migrations import upgrade
from evalreg.registry.tree import GitTree, PathEscapes, clean_relpath
from evalreg.registry.validation import validate
from evalreg.registry.yamlio import parse_yaml
from evalreg.runner.reproduce import reproduce
from evalreg.text.numbers import exact, gates_text, objective_text, term_text

SELECTIONS_DIR = f"{REGISTRY_DIR}/selections"

ChangeKind = Literal["selected", "policy", "candidates", "waivers", "task", "removed"]
FileKind = Literal["rubric", "task", "pin", "evalset"]
FlagKind = Literal[
    "criteria_after_evidence",
    "declared_after_evidence",
    "selected_without_evidence",
    "unreadable",
    "waiver_unapproved",
    "evidence_rebought",
]
VerdictStatus = Literal["identical", "different", "nothing", "error"]
WaiverStatus = Literal[
    "approved",
    "no_pull_request",
    "unavailable",
    "no_reviewer",
    "not_approved",
    "changes_requested",
    "earlier_commit",
    "pr_author",
]

_ID = re.compile(schema.ID_PATTERN)
# The order in which one commit's changes to one selection are listed.
_FIELDS: tuple[ChangeKind, ...] = ("selected", "policy", "candidates", "waivers", "task")
_POLICY_PARTS = ("pass_level", "confidence", "gates", "objective", "non_inferiority")


# ---------------------------------------------------------------- the record
@dataclass(frozen=True)
class Change:
    """One field of a selection changed at one first-parent commit.

    ``before`` and ``after`` summarise the old and new values (None: the file did not
    exist); for ``policy`` they hold only the ``parts`` that changed.
    """

    commit: CommitInfo
    kind: ChangeKind
    before: str | None
    after: str | None
    parts: tuple[str, ...] = ()
    merged_authors: tuple[Person, ...] = ()
    """For a merge commit: who authored the merged commits that touched the file."""


@dataclass(frozen=True)
class FileChange:
    """A rubric, task, pin or eval set changed at one first-parent commit."""

    commit: CommitInfo
    kind: FileKind
    id: str
    """The rubric, task or pin id; for an eval set, its path."""
    path: str
    summary: tuple[str, ...]
    selections: tuple[str, ...]
    """The selections whose decision rests on it, before or after the change."""
    created: bool
    criteria: bool
    """Whether it changes what "good" means: a rubric, or the rubric a task uses."""
    merged_authors: tuple[Person, ...] = ()


@dataclass(frozen=True)
class WaiverRecord:
    """A waiver in force at REV and the first-parent commit that brought it in this form."""

    candidate: str
    approver: str
    approver_login: str | None
    reason: str
    date: str
    commit: CommitInfo


@dataclass(frozen=True)
class WaiverCheck:
    """Whether a waiver's approver approved the final head of the waiver's pull request."""

    selection: str
    candidate: str
    approver: str
    pr: int | None
    login: str | None
    """The reviewer login the approver was matched to, if any."""
    rule: str
    """How the approver was matched with a login, or why no match was attempted."""
    status: WaiverStatus
    message: str


@dataclass(frozen=True)
class Flag:
    kind: FlagKind
    message: str
    commits: tuple[str, ...]


@dataclass(frozen=True)
class SelectionAudit:
    """One use case's history up to REV."""

    id: str
    path: str
    use_case: str | None
    declared: str | None
    """The selected candidate at REV; None when the file cannot be read there."""
    candidates: tuple[str, ...]
    changes: tuple[Change, ...]
    evidence: CommitInfo | None
    """The first commit (first-parent order) holding a result summary of one of its cells."""
    flags: tuple[Flag, ...]
    waivers: tuple[WaiverRecord, ...] = ()

    @property
    def last_selected_change(self) -> Change | None:
        """The change that declared the candidate selected at REV."""
        return next((c for c in reversed(self.changes) if c.kind == "selected"), None)


@dataclass(frozen=True)
class Review:
    reviewer: str
    state: str
    """APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED."""
    submitted_at: str
    commit: str | None
    """The head commit the review was given on."""


@dataclass(frozen=True)
class PullInfo:
    number: int
    author: str | None
    head_sha: str | None
    """The pull request's head commit: its final one once merged."""


@dataclass(frozen=True)
class PullRequestReviews:
    number: int
    reviews: tuple[Review, ...]
    error: str | None = None

    @property
    def standing(self) -> tuple[tuple[str, str], ...]:
        """Each reviewer's last decision (or COMMENTED if none), by reviewer login."""
        last: dict[str, str] = {}
        for review in self.reviews:
            if review.state != "COMMENTED" or review.reviewer not in last:
                last[review.reviewer] = review.state
        return tuple(sorted(last.items()))


@dataclass(frozen=True)
class CellVerdict:
    cell: str
    identical: bool
    differences: int


@dataclass(frozen=True)
class ReproduceVerdict:
    status: VerdictStatus
    cells: tuple[CellVerdict, ...] = ()
    recorded_versions: tuple[str, ...] = ()
    running_version: str = __version__
    error: str | None = None


@dataclass(frozen=True)
class AuditRecord:
    """Everything ``evalreg audit`` knows about REV; every field is JSON-ready."""

    rev: str
    commit: CommitInfo
    root: CommitInfo
    history: int
    """How many commits the first-parent line from the root to REV holds."""
    selections: tuple[SelectionAudit, ...]
    approvals: tuple[PullRequestReviews, ...] | None
    """None when no review source was given."""
    reproduction: ReproduceVerdict | None
    """None when the audit was built without verifying."""
    files: tuple[FileChange, ...] = ()
    """Changes to rubrics, tasks, pins and eval sets, in first-parent order."""
    waiver_checks: tuple[WaiverCheck, ...] | None = None
    """None when no review source was given: approvals not checked."""
    lookup_errors: tuple[str, ...] = ()
    """Commit→pull-request lookups that failed."""
    rebuys: tuple[Rebuy, ...] = ()
    """Runs that bought again evidence no DVC remote held, in first-parent order."""
    unchecked: tuple[str, ...] = ()
    """Squash-merged pull requests whose own commits this clone lacks: the order of their
    criteria and results inside them was not checked."""
    remotes: tuple[RemoteChange, ...] = ()
    """Changes of the default DVC remote, in first-parent order."""

    @property
    def exit_code(self) -> int:
        """1 when REV's results were verified and did not reproduce (or could not be)."""
        verdict = self.reproduction
        return 1 if verdict is not None and verdict.status in ("different", "error") else 0


class ReviewSource(Protocol):
    """Where pull requests, their reviews and a commit's pull request come from."""

    def reviews(self, pr: int) -> list[Review]: ...

    def pull(self, pr: int) -> PullInfo: ...

    def pull_of_commit(self, sha: str) -> int | None: ...


# ---------------------------------------------------------------- building it
def build_audit(
    root: Path, rev: str, *, github: ReviewSource | None = None, verify: bool = True
) -> AuditRecord:
    """The audit record of ``rev`` in the repository at ``root``.

    Raises ``UsageError`` when ``root`` is not a git repository or ``rev`` is unknown.
    Review and reproduction failures are recorded in the record, not raised.
    """
    tree = GitTree(root, rev)
    ids = _selection_ids(tree.list_dir(SELECTIONS_DIR))
    with git.Repo(tree.root) as repo:
        history = _History(repo, github)
        commits = list(repo.iter_commits(tree.rev, first_parent=True))[::-1]
        history.positions = {c.hexsha: i for i, c in enumerate(commits, 1)}
        trackers = [_SelectionTrail(ident, history) for ident in ids]
        files = _Files(history, tree.root)
        rebuys = RebuyTrail(history)
        remotes = RemoteTrail(history)
        for position, commit in enumerate(commits, 1):
            for tracker in trackers:
                tracker.step(commit, position)
            files.step(commit, position, {t.ident: t.state for t in trackers})
            rebuys.step(commit, position)
            remotes.step(commit, position)
        unchecked: list[str] = []
        for tracker in trackers:
            _inside_pull_request(tracker, files.changes, history, tree.root, unchecked)
        selections = tuple(
            _rebought(t.result(files.changes), t.state, rebuys.rebuys) for t in trackers
        )
        head, first = history.info(commits[-1], len(commits)), history.info(commits[0], 1)
    approvals = checks = None
    if github is not None:
        numbers = sorted(
            {c.commit.pr for s in selections for c in s.changes if c.commit.pr}
            | {f.commit.pr for f in files.changes if f.commit.pr}
            | {r.commit.pr for r in remotes.changes if r.commit.pr}
        )
        approvals = tuple(_reviews_of(github, n) for n in numbers)
        selections, checks = _check_waivers(github, selections, approvals)
    return AuditRecord(
        rev=tree.rev,
        commit=head,
        root=first,
        history=len(commits),
        selections=selections,
        approvals=approvals,
        reproduction=_verify(tree.root, tree.rev) if verify else None,
        files=tuple(files.changes),
        waiver_checks=checks,
        lookup_errors=tuple(history.errors),
        rebuys=tuple(rebuys.rebuys),
        unchecked=tuple(dict.fromkeys(unchecked)),
        remotes=tuple(remotes.changes),
    )


def _inside_pull_request(
    trail: _SelectionTrail,
    main_files: list[FileChange],
    history: _History,
    root: Path,
    unchecked: list[str],
) -> None:
    """When a selection's first results came with a merged pull request, apply the rule
    of ``audit/fixed.py`` to that pull request's own commits too, and add what it finds to
    ``trail``'s flags: main's first-parent line sees only the merge, where criteria edited
    after the pull request's first results look created with them. A squash merge's commits
    are read from ``refs/pull/N/head``; without it the pull request is named in
    ``unchecked``."""
    evidence = trail.evidence
    if evidence is None:
        return
    commit = history.repo.commit(evidence.sha)
    if len(commit.parents) > 1:
        head: git.Commit = commit.parents[1]
    elif evidence.pr is not None and evidence.pr_source == "squash":
        try:
            head = history.repo.commit(f"refs/pull/{evidence.pr}/head")
        except (git.BadName, ValueError):
            unchecked.append(
                f"pull request #{evidence.pr} (squashed in {evidence.sha[:12]}): its own "
                f"commits are not in this clone (fetch refs/pull/{evidence.pr}/head), so the "
                "order of its criteria and results inside it was not checked"
            )
            return
    else:
        return
    side = list(
        history.repo.iter_commits(f"{commit.parents[0].hexsha}..{head.hexsha}", first_parent=True)
    )[::-1]
    if not side or not side[0].parents:
        return
    inner = _PullRequestHistory(history.repo, evidence)
    inside = _SelectionTrail(trail.ident, inner)
    files = _Files(inner, root)
    for place, c in enumerate([side[0].parents[0], *side]):
        inner.positions[c.hexsha] = place
        inside.step(c, place)
        files.step(c, place, {inside.ident: inside.state})
    where = f" (inside pull request #{evidence.pr}" if evidence.pr else " (inside the branch"
    where += f" merged in {evidence.sha[:12]})"
    found = [
        (evidence.position, replace(f, message=f.message + where))
        for place, f in inside.flags
        if place >= 1 and f.kind == "declared_after_evidence"
    ]
    if inside.evidence is not None and trail._late_criteria(evidence, main_files) is None:
        late = inside._late_criteria(inside.evidence, files.changes)
        if late is not None:
            found.append((evidence.position, replace(late[1], message=late[1].message + where)))
    trail.flags += found


def _rebought(
    audit: SelectionAudit, state: schema.Selection | None, rebuys: list[Rebuy]
) -> SelectionAudit:
    """``audit`` flagged for each re-buy of one of its cells at REV."""
    if state is None or not rebuys:
        return audit
    mine = {f"{state.task}/{c.id}" for c in state.candidates}
    flags = []
    for rebuy in rebuys:
        cells = sorted(mine.intersection(rebuy.cells))
        if not cells:
            continue
        came = sorted({o.introduced.sha for o in rebuy.objects if o.introduced is not None})
        prs = ", ".join(f"#{n}" for n in rebuy.pull_requests)
        source = f"merged by pull request {prs}" if prs else "merged"
        if came:
            source += f" (commit {', '.join(sha[:12] for sha in came)})"
        flags.append(
            Flag(
                "evidence_rebought",
                f"the evidence of {', '.join(cells)}, {source}, was on no DVC remote: bought "
                f"again in {rebuy.commit.sha[:12]} by {_names(rebuy)} "
                f"({rebuy.commit.committed_at}); results recorded before that commit cannot "
                "be reproduced",
                (*came, rebuy.commit.sha),
            )
        )
    return replace(audit, flags=(*audit.flags, *flags)) if flags else audit


def _names(rebuy: Rebuy) -> str:
    people = rebuy.authors or (rebuy.commit.author,)
    return ", ".join(p.name for p in people)


def _selection_ids(names: Iterable[str]) -> list[str]:
    ids = set()
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        if dot and f".{suffix}" in YAML_SUFFIXES and _ID.match(stem):
            ids.add(stem)
    return sorted(ids)


def _check_waivers(
    github: ReviewSource,
    selections: tuple[SelectionAudit, ...],
    approvals: tuple[PullRequestReviews, ...],
) -> tuple[tuple[SelectionAudit, ...], tuple[WaiverCheck, ...]]:
    """Each waiver at REV checked against its pull request; failures become flags."""
    reviews = {p.number: p for p in approvals}
    pulls: dict[int, PullInfo | str] = {}
    checks: list[WaiverCheck] = []
    out = []
    for selection in selections:
        flags = []
        for waiver in selection.waivers:
            pr = waiver.commit.pr
            if pr is not None and pr not in pulls:
                pulls[pr] = _pull_of(github, pr)
            if pr is not None and pr not in reviews:
                reviews[pr] = _reviews_of(github, pr)
            check = check_waiver(
                selection.id,
                waiver,
                pulls[pr] if pr is not None else None,
                reviews[pr] if pr is not None else None,
            )
            checks.append(check)
            if check.status != "approved":
                flags.append(Flag("waiver_unapproved", check.message, (waiver.commit.sha,)))
        out.append(replace(selection, flags=selection.flags + tuple(flags)))
    return tuple(out), tuple(checks)


def check_waiver(
    selection: str,
    waiver: WaiverRecord,
    pull: PullInfo | str | None,
    reviews: PullRequestReviews | None,
) -> WaiverCheck:
    """Whether ``waiver``'s approver approved the final head of the waiver's pull request.

    The approver is ``approver_login`` when the waiver gives one, else the ``approver``
    text (without a leading ``@``) read as a login; logins compare case-insensitively.
    Only the approver's last review that is not a comment counts: it must be an approval
    (not one dismissed) given on the pull request's head commit, and the approver must not
    be its author. Reviews by deleted accounts (GitHub's ``user: null``) name no one.
    ``pull`` is the pull request, or why it could not be read.
    """
    pr = waiver.commit.pr
    if waiver.approver_login:
        wanted, rule = waiver.approver_login, "approver_login"
    else:
        wanted = waiver.approver.strip().removeprefix("@")
        rule = "approver read as a GitHub login (case-insensitive)"
    about = f"waiver for {waiver.candidate} (approver {waiver.approver}"

    def result(status: WaiverStatus, text: str, login: str | None = None) -> WaiverCheck:
        where = f", #{pr}" if pr is not None else ""
        return WaiverCheck(
            selection,
            waiver.candidate,
            waiver.approver,
            pr,
            login,
            rule,
            status,
            f"{about}{where}): {text}",
        )

    if pr is None:
        return result(
            "no_pull_request",
            f"it came in with {waiver.commit.sha[:12]}, which no pull request names, so no "
            "approval can be checked",
        )
    problem = pull if isinstance(pull, str) else reviews.error if reviews is not None else None
    if problem is not None or not isinstance(pull, PullInfo) or reviews is None:
        return result("unavailable", f"the pull request could not be read: {problem}")
    key = wanted.casefold()
    if pull.author is not None and pull.author.casefold() == key:
        return result(
            "pr_author",
            f"{wanted} is the author of #{pr}; an author cannot approve their own change",
            pull.author,
        )
    theirs = [r for r in reviews.reviews if r.reviewer.casefold() == key]
    if not theirs:
        hint = "" if waiver.approver_login else "; name the account with approver_login"
        return result("no_reviewer", f"no review by {wanted} on #{pr} ({rule}){hint}")
    login = theirs[-1].reviewer
    decisions = [r for r in theirs if r.state != "COMMENTED"]
    if not decisions:
        return result("not_approved", f"{login} commented on #{pr} but never approved it", login)
    last = decisions[-1]
    if last.state == "CHANGES_REQUESTED":
        when = (
            "after approving"
            if any(r.state == "APPROVED" for r in decisions)
            else "without approving"
        )
        return result(
            "changes_requested",
            f"{login} requested changes on #{pr} ({last.submitted_at}) {when}",
            login,
        )
    if last.state != "APPROVED":
        # GitHub turns a dismissed review's state into DISMISSED and no longer says what it
        # was: an approval or a request for changes.
        return result(
            "not_approved",
            f"{login}'s last review of #{pr} was dismissed and no approval followed it",
            login,
        )
    head = pull.head_sha
    if head is None or last.commit is None or last.commit.lower() != head.lower():
        # GitHub's commit_id is null once the reviewed commit is gone (force-pushed away).
        given = last.commit[:12] if last.commit else "a commit GitHub no longer has"
        final = head[:12] if head else "unknown"
        return result(
            "earlier_commit",
            f"{login} approved #{pr} on {given}, not on its final head {final}: what was "
            "pushed after the approval was not approved",
            login,
        )
    return result("approved", f"{login} approved #{pr} on its final head {head[:12]}", login)


def _pull_of(source: ReviewSource, number: int) -> PullInfo | str:
    try:
        return source.pull(number)
    except EvalregError as exc:
        return str(exc)


def _reviews_of(source: ReviewSource, number: int) -> PullRequestReviews:
    try:
        reviews = source.reviews(number)
    except EvalregError as exc:
        return PullRequestReviews(number, (), str(exc))
    return PullRequestReviews(number, tuple(sorted(reviews, key=lambda r: r.submitted_at)))


def _verify(root: Path, sha: str) -> ReproduceVerdict:
    try:
        outcome = reproduce(root, sha)
    except EvalregError as exc:
        return ReproduceVerdict("error", error=str(exc))
    cells = tuple(CellVerdict(c.cell, c.identical, len(c.differences)) for c in outcome.cells)
    status: VerdictStatus = (
        "nothing" if not cells else "identical" if outcome.identical else "different"
    )
    return ReproduceVerdict(
        status, cells, tuple(outcome.recorded_versions), outcome.running_version
    )


class _History:
    """Facts about commits, worked out once and shared by every tracker.

    A commit's pull request comes from its subject ("Merge pull request #N from …", or a
    squash merge's "… (#N)"), else, with a GitHub source, from GitHub's commit→pull-request
    lookup (rebase merges name nothing). Only commits the record mentions are looked up.
    """

    def __init__(self, repo: git.Repo, github: ReviewSource | None = None) -> None:
        self.repo = repo
        self.github = github
        self.errors: list[str] = []
        self._infos: dict[str, CommitInfo] = {}
        self._merged: dict[tuple[str, str], tuple[Person, ...]] = {}
        self.positions: dict[str, int] = {}
        """Each placed commit's position (``build_audit``'s first-parent line)."""

    def info(self, commit: git.Commit, position: int) -> CommitInfo:
        if commit.hexsha not in self._infos:
            subject = _subject(commit.message)
            pr, source = self._pull_request(commit.hexsha, subject)
            self._infos[commit.hexsha] = CommitInfo(
                sha=commit.hexsha,
                position=position,
                subject=subject,
                author=Person(str(commit.author.name or ""), str(commit.author.email or "")),
                authored_at=_utc(commit.authored_date),
                committed_at=_utc(commit.committed_date),
                pr=pr,
                merge=len(commit.parents) > 1,
                pr_source=source,
            )
        return self._infos[commit.hexsha]

    def _pull_request(self, sha: str, subject: str) -> tuple[int | None, PrSource | None]:
        if found := pull_request_in(subject):
            return found
        if self.github is None:
            return None, None
        try:
            number = self.github.pull_of_commit(sha)
        except EvalregError as exc:
            self.errors.append(f"{sha[:12]}: {exc}")
            return None, None
        return (number, "api") if number is not None else (None, None)

    def first_added(self, commit: git.Commit, paths: list[str]) -> CommitInfo | None:
        """The earliest commit of ``commit``'s first-parent line (up to it) that added one
        of ``paths``, when it is a commit this history has placed."""
        try:
            out = self.repo.git.log(
                "--first-parent", "--diff-filter=A", "--format=%H", commit.hexsha, "--", *paths
            ).split()
        except git.GitCommandError:
            return None
        placed = [sha for sha in out if sha in self.positions]
        if not placed:
            return None
        sha = placed[-1]
        return self.info(self.repo.commit(sha), self.positions[sha])

    def merged_authors(self, commit: git.Commit, path: str) -> tuple[Person, ...]:
        """Authors of the commits a merge brought in that touched ``path``."""
        if len(commit.parents) < 2:
            return ()
        key = (commit.hexsha, path)
        if key not in self._merged:
            span = f"{commit.parents[0].hexsha}..{commit.hexsha}"
            people = {
                Person(str(c.author.name or ""), str(c.author.email or ""))
                for c in self.repo.iter_commits(span, paths=path)
                if c.hexsha != commit.hexsha
            }
            self._merged[key] = tuple(sorted(people, key=lambda p: (p.name, p.email)))
        return self._merged[key]


class _PullRequestHistory(_History):
    """The commits of one merged pull request, placed in their own order (the base first,
    at 0), each credited to the pull request of the commit that merged them."""

    def __init__(self, repo: git.Repo, merged: CommitInfo) -> None:
        super().__init__(repo)
        self.merged = merged

    def _pull_request(self, sha: str, subject: str) -> tuple[int | None, PrSource | None]:
        return self.merged.pr, self.merged.pr_source


class _SelectionTrail:
    """Follows one selection file along the first-parent line, commit by commit."""

    def __init__(self, ident: str, history: _History) -> None:
        self.ident = ident
        self.history = history
        self.path = ""
        self.blob: str | None = None
        self.state: schema.Selection | None = None
        self.readable = True
        self.changes: list[Change] = []
        self.evidence: CommitInfo | None = None
        # Each flag with the position of the commit that raised it, for ordering.
        self.flags: list[tuple[int, Flag]] = []
        # Blob SHA -> its selection, or why it cannot be read: each version is parsed once.
        self.parsed: dict[str, schema.Selection | str] = {}
        self.waiver_since: dict[schema.Waiver, CommitInfo] = {}

    def step(self, commit: git.Commit, position: int) -> None:
        found = self._find(commit)
        blob = found.hexsha if found is not None else None
        if blob != self.blob:
            self.blob = blob
            self._update(commit, position, found)
        if self.evidence is None and self.state is not None and self.blob is not None:
            task = self.state.task
            if any(_has_summary(commit, task, c.id) for c in self.state.candidates):
                self.evidence = self.history.info(commit, position)

    def _find(self, commit: git.Commit) -> git.Blob | None:
        """The selection file at ``commit``, if present (``.yaml`` before ``.yml``)."""
        for suffix in YAML_SUFFIXES:
            try:
                obj = commit.tree / f"{SELECTIONS_DIR}/{self.ident}{suffix}"
            except KeyError:
                continue
            if isinstance(obj, git.Blob):
                return obj
        return None

    def _update(self, commit: git.Commit, position: int, blob: git.Blob | None) -> None:
        info = self.history.info(commit, position)
        if blob is None:
            if self.state is not None:
                self.changes.append(Change(info, "removed", self.state.selected, None))
            self.state, self.readable = None, True
            return
        self.path = str(blob.path)
        if blob.hexsha not in self.parsed:
            self.parsed[blob.hexsha] = parse_version(
                blob.data_stream.read(), self.path, "selections", schema.Selection
            )
        parsed = self.parsed[blob.hexsha]
        if isinstance(parsed, str):
            # Keep the last readable version: the next readable one is compared with it.
            self.readable = False
            message = f"the selection file cannot be read: {parsed}"
            self.flags.append((position, Flag("unreadable", message, (info.sha,))))
            return
        self.readable = True
        # A waiver dates from the commit that brought it in its current form.
        kept = set(self.state.waivers) if self.state is not None else set()
        self.waiver_since = {
            w: self.waiver_since[w] if w in kept and w in self.waiver_since else info
            for w in parsed.waivers
        }
        if self.state is None:
            self._declared(commit, info, parsed)
        differences = _differences(self.state, parsed)
        merged = self.history.merged_authors(commit, self.path) if differences else ()
        for kind, before, after, parts in differences:
            self.changes.append(Change(info, kind, before, after, parts, merged))
            if kind == "selected" and not _has_summary(commit, parsed.task, parsed.selected):
                message = (
                    f"{parsed.selected} was declared selected in {info.sha[:12]} with no result "
                    f"summary for it at that commit "
                    f"({RESULTS_DIR}/{parsed.task}/{parsed.selected}.json)"
                )
                flag = Flag("selected_without_evidence", message, (info.sha,))
                self.flags.append((position, flag))
        self.state = parsed

    def _declared(self, commit: git.Commit, info: CommitInfo, created: schema.Selection) -> None:
        """Flag a selection created over results its cells already had before ``commit``."""
        if not commit.parents:
            return
        parent = commit.parents[0]
        cells = [
            f"{created.task}/{c.id}"
            for c in created.candidates
            if _has_summary(parent, created.task, c.id)
        ]
        if not cells:
            return
        paths = [f"{RESULTS_DIR}/{cell}.json" for cell in cells]
        first = self.history.first_added(parent, paths)
        evidence = Moment(info.position - 1, parent.hexsha[:12], _utc(parent.committed_date))
        if first is not None:
            evidence = _moment(first)
        message = declared_after_evidence(_moment(info), evidence, cells)
        if message is not None:
            shas = (first.sha, info.sha) if first is not None else (info.sha,)
            self.flags.append((info.position, Flag("declared_after_evidence", message, shas)))

    def result(self, files: list[FileChange]) -> SelectionAudit:
        flags = list(self.flags)
        if self.evidence is not None:
            flag = self._late_criteria(self.evidence, files)
            if flag is not None:
                flags.append(flag)
        state = self.state if self.readable else None
        waivers = tuple(
            WaiverRecord(
                w.candidate,
                w.approver,
                w.approver_login,
                w.reason,
                w.date.isoformat(),
                self.waiver_since[w],
            )
            for w in (state.waivers if state else [])
        )
        return SelectionAudit(
            id=self.ident,
            path=self.path,
            use_case=state.use_case if state else None,
            declared=state.selected if state else None,
            candidates=tuple(c.id for c in state.candidates) if state else (),
            changes=tuple(self.changes),
            evidence=self.evidence,
            flags=tuple(f for _, f in sorted(flags, key=lambda pair: (pair[0], pair[1].kind))),
            waivers=waivers,
        )

    def _late_criteria(
        self, evidence: CommitInfo, files: list[FileChange]
    ) -> tuple[int, Flag] | None:
        """The "criteria changed after the evidence" flag (rule: ``audit/fixed.py``)."""
        edits = [
            (
                c.commit,
                Edit(
                    _moment(c.commit),
                    "policy",
                    c.before is None,
                    _where(c.commit, ", ".join(c.parts)),
                ),
            )
            for c in self.changes
            if c.kind == "policy"
        ] + [
            (
                f.commit,
                Edit(
                    _moment(f.commit),
                    f"{f.kind} {f.id}",
                    f.created,
                    _where(f.commit, "; ".join(f.summary)),
                ),
            )
            for f in files
            if f.criteria and self.ident in f.selections
        ]
        moment = _moment(evidence)
        message = criteria_after_evidence(moment, [e for _, e in edits])
        if message is None:
            return None
        counted = [c for c, e in edits if e in late_edits(moment, [e])]
        ordered = sorted(counted, key=lambda c: c.position)
        commits = tuple(dict.fromkeys(c.sha for c in ordered))
        return ordered[0].position, Flag("criteria_after_evidence", message, commits)


def _moment(commit: CommitInfo) -> Moment:
    return Moment(commit.position, commit.sha[:12], commit.committed_at)


def _where(commit: CommitInfo, what: str) -> str:
    pr = f"#{commit.pr}, " if commit.pr else ""
    return f"{commit.sha[:12]} ({pr}{commit.committed_at}: {what})"


M = TypeVar("M", bound=BaseModel)


def parse_version(data: bytes, path: str, kind: str, model: type[M]) -> M | str:
    """The ``kind`` file in ``data`` (one committed version) as ``model``, or the first
    reason it cannot be read."""
    try:
        doc = parse_yaml(data, path)
    except RegistryError as exc:
        return str(exc)
    upgraded, problems = upgrade(kind, doc)
    parsed = None
    if upgraded is not None:
        parsed, problems = validate(doc, model, upgraded)
    if parsed is None:
        return str(RegistryError(problems))
    return parsed


# ---------------------------------------------------------------- rubrics, tasks, pins, eval sets
@dataclass(frozen=True)
class _Pending:
    kind: FileKind
    id: str
    path: str
    summary: tuple[str, ...]
    created: bool
    criteria: bool


@dataclass
class _Directory:
    """One registry directory as last seen along the first-parent line."""

    kind: FileKind
    path: str
    label: str
    model: type[BaseModel]
    tree: str | None = None
    blobs: dict[str, git.Blob] = field(default_factory=dict)
    states: dict[str, BaseModel] = field(default_factory=dict)
    """Each file's last readable version."""
    parsed: dict[str, BaseModel | str] = field(default_factory=dict)


Uses = dict[tuple[str, str], set[str]]


class _Files:
    """Follows the rubrics, tasks and pins, and the eval sets tasks name, commit by commit."""

    def __init__(self, history: _History, root: Path) -> None:
        self.history = history
        self.root = root
        self.dirs = [
            _Directory("rubric", f"{REGISTRY_DIR}/rubrics", "rubrics", schema.Rubric),
            _Directory("task", f"{REGISTRY_DIR}/tasks", "tasks", schema.Task),
            _Directory("pin", f"{REGISTRY_DIR}/models", "models", schema.Pin),
        ]
        # Eval set path -> (what identifies its bytes at the last commit, that version).
        self.evalsets: dict[str, tuple[str, EvalsetVersion]] = {}
        self.versions: dict[str, EvalsetVersion] = {}
        self.changes: list[FileChange] = []
        self.uses: Uses = {}
        self.seen: tuple[int, ...] = ()

    def step(
        self, commit: git.Commit, position: int, selections: dict[str, schema.Selection | None]
    ) -> None:
        pending = [p for d in self.dirs for p in self._step_directory(d, commit)]
        tasks = self._states("task", schema.Task)
        pending += self._step_evalsets(commit, tasks)
        # What each file's change can move: recomputed only when some file changed.
        seen = tuple(id(s) for s in selections.values()) + tuple(
            id(m) for d in self.dirs for m in d.states.values()
        )
        before = self.uses
        if seen != self.seen:
            self.seen = seen
            self.uses = _uses(selections, tasks, self._states("rubric", schema.Rubric))
        if not pending:
            return
        info = self.history.info(commit, position)
        for p in pending:
            users = before.get((p.kind, p.id), set()) | self.uses.get((p.kind, p.id), set())
            self.changes.append(
                FileChange(
                    info,
                    p.kind,
                    p.id,
                    p.path,
                    p.summary,
                    tuple(sorted(users)),
                    p.created,
                    p.criteria,
                    self.history.merged_authors(commit, p.path),
                )
            )

    def _states(self, kind: FileKind, model: type[M]) -> dict[str, M]:
        [directory] = [d for d in self.dirs if d.kind == kind]
        return {k: v for k, v in directory.states.items() if isinstance(v, model)}

    def _step_directory(self, d: _Directory, commit: git.Commit) -> list[_Pending]:
        try:
            sub = commit.tree / d.path
        except KeyError:
            sub = None
        tree = sub.hexsha if isinstance(sub, git.Tree) else None
        if tree == d.tree:
            return []
        d.tree = tree
        current = _yaml_blobs(sub) if isinstance(sub, git.Tree) else {}
        out = []
        for ident in sorted(set(current) | set(d.blobs)):
            old_blob, blob = d.blobs.get(ident), current.get(ident)
            if (old_blob.hexsha if old_blob else None) == (blob.hexsha if blob else None):
                continue
            old = d.states.get(ident)
            if blob is None:
                assert old_blob is not None
                del d.blobs[ident]
                d.states.pop(ident, None)
                removed = ("removed",)
                out.append(
                    _Pending(d.kind, ident, str(old_blob.path), removed, False, d.kind == "rubric")
                )
                continue
            d.blobs[ident] = blob
            path = str(blob.path)
            if blob.hexsha not in d.parsed:
                d.parsed[blob.hexsha] = parse_version(
                    blob.data_stream.read(), path, d.label, d.model
                )
            parsed = d.parsed[blob.hexsha]
            if isinstance(parsed, str):
                out.append(
                    _Pending(d.kind, ident, path, (f"cannot be read: {parsed}",), False, False)
                )
                continue
            d.states[ident] = parsed
            summary = describe(old, parsed)
            if not summary:  # the same content, written differently
                continue
            criteria = d.kind == "rubric" or (
                isinstance(old, schema.Task)
                and isinstance(parsed, schema.Task)
                and old.rubric != parsed.rubric
            )
            out.append(_Pending(d.kind, ident, path, summary, old is None, criteria))
        return out

    def _step_evalsets(self, commit: git.Commit, tasks: dict[str, schema.Task]) -> list[_Pending]:
        out = []
        for path in sorted({p for t in tasks.values() for p in _evalset_paths(t)}):
            key, version = self._evalset(commit, path)
            known = self.evalsets.get(path)
            if known is not None and known[0] == key:
                continue
            self.evalsets[path] = (key, version)
            summary = describe_evalset(known[1] if known else None, version)
            out.append(_Pending("evalset", path, path, summary, known is None, False))
        return out

    def _evalset(self, commit: git.Commit, path: str) -> tuple[str, EvalsetVersion]:
        """The eval set at ``path``: committed itself, or as a DVC pointer beside it."""
        for rel, tracked in ((path, "git"), (f"{path}.dvc", "dvc")):
            blob = _blob(commit, rel)
            if blob is None:
                continue
            key = f"{tracked}:{blob.hexsha}"
            if key not in self.versions:
                self.versions[key] = self._version(path, tracked, blob.data_stream.read())
            return key, self.versions[key]
        return "missing", EvalsetVersion(path, "missing", None, None)

    def _version(self, path: str, tracked: str, data: bytes) -> EvalsetVersion:
        if tracked == "git":
            md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
            return EvalsetVersion(path, "git", md5, count_items(data))

        pointed = pointer_md5(data)
        # The item count needs the data; the local DVC cache has it if anything here does.
        found = cached_file(self.root, pointed) if pointed else None
        # An empty file counts no items, and says no more than a missing one.
        if found is None or not found.stat().st_size:
            return EvalsetVersion(path, "dvc", pointed, None)
        return EvalsetVersion(path, "dvc", pointed, count_items_in(found))


def _yaml_blobs(tree: git.Tree) -> dict[str, git.Blob]:
    """The registry files directly in ``tree`` by id (``.yaml`` before ``.yml``)."""
    found: dict[str, git.Blob] = {}
    for suffix in YAML_SUFFIXES:
        for blob in tree.blobs:
            stem, _, rest = blob.name.rpartition(".")
            if f".{rest}" == suffix and _ID.match(stem) and stem not in found:
                found[stem] = blob
    return found


def _blob(commit: git.Commit, rel: str) -> git.Blob | None:
    try:
        obj = commit.tree / rel
    except KeyError:
        return None
    return obj if isinstance(obj, git.Blob) else None


def _evalset_paths(task: schema.Task) -> list[str]:
    paths = []
    for rel in (task.evalset, task.holdout):
        if rel is None:
            continue
        try:
            paths.append(clean_relpath(rel))
        except PathEscapes:
            continue  # the loader reports it; history only follows paths inside the repo
    return paths


def _uses(
    selections: dict[str, schema.Selection | None],
    tasks: dict[str, schema.Task],
    rubrics: dict[str, schema.Rubric],
) -> Uses:
    """Which selections each (kind, id) can move: their task, its rubric and eval sets,
    their candidates' pins and the rubric's judge pins."""
    uses: Uses = {}
    for ident, selection in selections.items():
        if selection is None:
            continue
        keys = [("task", selection.task), *(("pin", c.pin) for c in selection.candidates)]
        task = tasks.get(selection.task)
        if task is not None:
            keys.append(("rubric", task.rubric))
            keys += [("evalset", p) for p in _evalset_paths(task)]
            rubric = rubrics.get(task.rubric)
            for criterion in rubric.criteria if rubric else []:
                pin = schema.grading_pin(criterion.grader)
                if pin is not None:
                    keys.append(("pin", pin))
        for key in keys:
            uses.setdefault(key, set()).add(ident)
    return uses


def _has_summary(commit: git.Commit, task: str, candidate: str) -> bool:
    try:
        return isinstance(commit.tree / f"{RESULTS_DIR}/{task}/{candidate}.json", git.Blob)
    except KeyError:
        return False


def _subject(message: str | bytes) -> str:
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    return text.strip().split("\n", 1)[0].strip()


def _utc(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- summaries of values
def _differences(
    old: schema.Selection | None, new: schema.Selection
) -> list[tuple[ChangeKind, str | None, str | None, tuple[str, ...]]]:
    """What changed from ``old`` (None: the file did not exist) to ``new``, in field order."""
    out: list[tuple[ChangeKind, str | None, str | None, tuple[str, ...]]] = []
    for kind in _FIELDS:
        if kind == "policy":
            before_parts = _policy_parts(old.policy) if old else {}
            after_parts = _policy_parts(new.policy)
            parts = tuple(p for p in _POLICY_PARTS if before_parts.get(p) != after_parts[p])
            if parts:
                before = "; ".join(f"{p}: {before_parts[p]}" for p in parts) if old else None
                after = "; ".join(f"{p}: {after_parts[p]}" for p in parts)
                out.append((kind, before, after, parts))
            continue
        summarise = _SUMMARIES[kind]
        previous = summarise(old) if old else None
        current = summarise(new)
        # A new file without waivers has nothing to say about them.
        if previous != current and (old or kind != "waivers" or new.waivers):
            out.append((kind, previous, current, ()))
    return out


def _candidates(selection: schema.Selection) -> str:
    return ", ".join(_candidate(c) for c in selection.candidates)


def _candidate(candidate: schema.Candidate) -> str:
    text = (
        candidate.id if candidate.pin == candidate.id else f"{candidate.id} (pin {candidate.pin})"
    )
    if candidate.prompt is not None:
        # The prompt text is long; its digest is enough to see that it changed.
        text += f" [prompt {digest(candidate.prompt.model_dump(mode='json'))[:8]}]"
    return text


def _waivers(selection: schema.Selection) -> str:
    if not selection.waivers:
        return "none"
    return "; ".join(
        f"{w.candidate} approved by {w.approver} on {w.date.isoformat()}: {w.reason}"
        for w in selection.waivers
    )


_SUMMARIES: dict[str, Callable[[schema.Selection], str]] = {
    "selected": lambda s: s.selected,
    "task": lambda s: s.task,
    "candidates": _candidates,
    "waivers": _waivers,
}


def _policy_parts(policy: schema.Policy) -> dict[str, str]:
    """Each part of a policy as text that changes exactly when the part's meaning does."""
    gates = gates_text(policy.gates)
    ni = policy.non_inferiority
    return {
        "pass_level": policy.pass_level,
        "confidence": exact(policy.confidence),
        "gates": gates,
        "objective": _objective(policy.objective),
        "non_inferiority": (
            f"{ni.metric} within {exact(ni.margin)}, then {term_text(ni.prefer, weighted=False)}"
            if ni
            else "none"
        ),
    }


def _objective(objective: schema.Objective) -> str:
    weighted = objective.weighted is not None
    kind = "weighted" if weighted else "lexicographic"
    return f"{kind} {objective_text(objective.terms, weighted=weighted)}"


# ---------------------------------------------------------------- GitHub reviews
_REVIEW_STATES = {"APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED"}


class GitHubReviews:
    """A ``ReviewSource`` reading a pull request's reviews through ``GitHubClient``.

    The client follows ``Link: rel="next"`` on the same host only (the token goes nowhere
    else) and waits out rate limits within ``max_wait_s``. Pending reviews are left out.
    """

    def __init__(
        self,
        token: str,
        repository: str,
        api_url: str = DEFAULT_API_URL,
        *,
        transport: httpx.BaseTransport | None = None,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.repository = repository
        self.api_url = api_url.rstrip("/")
        self._client = GitHubClient(
            token,
            repository,
            api_url=api_url,
            transport=transport,
            max_wait_s=max_wait_s,
            sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"GitHubReviews(repository={self.repository!r}, api_url={self.api_url!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GitHubReviews:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def reviews(self, pr: int) -> list[Review]:
        """Every submitted review of pull request ``pr``, in GitHub's (chronological) order."""
        return [r for r in map(_review, self._client.pull_reviews(pr)) if r is not None]

    def pull(self, pr: int) -> PullInfo:
        """Pull request ``pr``'s author and head commit (its final one once merged)."""
        data = self._client.pull(pr)
        user, head = data.get("user"), data.get("head")
        login = user.get("login") if isinstance(user, dict) else None
        sha = head.get("sha") if isinstance(head, dict) else None
        return PullInfo(
            pr, login if isinstance(login, str) else None, sha if isinstance(sha, str) else None
        )

    def pull_of_commit(self, sha: str) -> int | None:
        """The merged pull request commit ``sha`` came through, or None.

        A pull request whose merge commit is ``sha`` wins; else the lowest-numbered merged
        pull request GitHub associates with it (a rebase merge). Open pull requests that
        merely contain the commit do not count.
        """
        pulls = [
            p
            for p in self._client.commit_pulls(sha)
            if isinstance(p, dict)
            and isinstance(p.get("number"), int)
            and not isinstance(p.get("number"), bool)
            and isinstance(p.get("merged_at"), str)
        ]
        exact = [p for p in pulls if str(p.get("merge_commit_sha") or "").lower() == sha.lower()]
        chosen = exact or pulls
        return min(int(p["number"]) for p in chosen) if chosen else None


def _review(item: Any) -> Review | None:
    """A submitted review from GitHub's JSON, or None for a pending or malformed one."""
    if not isinstance(item, dict):
        return None
    user = item.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    state, submitted = item.get("state"), item.get("submitted_at")
    if not (isinstance(login, str) and state in _REVIEW_STATES and isinstance(submitted, str)):
        return None
    try:
        when = datetime.fromisoformat(submitted)
    except ValueError:
        return None
    commit = item.get("commit_id")
    return Review(
        reviewer=login,
        state=str(state),
        submitted_at=when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        commit=commit if isinstance(commit, str) else None,
    )


def reviews_from_environment(
    env: Mapping[str, str], *, token_env: str, repository: str | None
) -> GitHubReviews | None:
    """The review source an audit reads approvals from: GitHub, when the variable
    ``token_env`` holds a token (None otherwise: approvals are not checked), for
    ``repository`` or ``GITHUB_REPOSITORY``."""
    token = env.get(token_env, "").strip()
    if not token:
        return None
    repo = repository or env.get("GITHUB_REPOSITORY")
    if not repo:
        raise UsageError(
            "a GitHub token is set but no repository: pass --repository OWNER/NAME "
            "or set GITHUB_REPOSITORY"
        )
    return GitHubReviews(token, repo, api_url_from_environment(env))
