"""``evalreg audit REV``: who changed each selection and its criteria, when, and on what evidence.

The record is built from git history alone (first-parent order from the root commit to
REV, dates in UTC), plus, when asked, the pull requests' reviews and the ``reproduce``
verdict. It never reads the clock, so the same repository state and REV give the same record.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

import git
import httpx

from evalreg import __version__
from evalreg.canonical import digest
from evalreg.errors import EvalregError, RegistryError
from evalreg.gitops.github import DEFAULT_API_URL, GitHubClient
from evalreg.plan import RESULTS_DIR
from evalreg.registry import schema
from evalreg.registry.loader import REGISTRY_DIR, YAML_SUFFIXES
from evalreg.registry.migrations import upgrade
from evalreg.registry.tree import GitTree
from evalreg.registry.validation import validate
from evalreg.registry.yamlio import parse_yaml
from evalreg.reproduce import reproduce

SELECTIONS_DIR = f"{REGISTRY_DIR}/selections"

ChangeKind = Literal["selected", "policy", "candidates", "waivers", "task", "removed"]
FlagKind = Literal["criteria_after_evidence", "selected_without_evidence", "unreadable"]
VerdictStatus = Literal["identical", "different", "nothing", "error"]

_MERGE_PR = re.compile(r"^Merge pull request #([0-9]+) from \S")
_SQUASH_PR = re.compile(r"\(#([0-9]+)\)\s*$")
_ID = re.compile(schema.ID_PATTERN)
# The order in which one commit's changes to one selection are listed.
_FIELDS: tuple[ChangeKind, ...] = ("selected", "policy", "candidates", "waivers", "task")
_POLICY_PARTS = ("pass_level", "confidence", "gates", "objective", "non_inferiority")


# ---------------------------------------------------------------- the record
@dataclass(frozen=True)
class Person:
    name: str
    email: str


@dataclass(frozen=True)
class CommitInfo:
    """One commit on the first-parent line; ``position`` 1 is the root commit."""

    sha: str
    position: int
    subject: str
    author: Person
    authored_at: str
    committed_at: str
    """When the commit was made on this line (UTC): the date that orders events."""
    pr: int | None
    """The pull request a merge or squash commit names in its subject, if any."""
    merge: bool


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


class ReviewSource(Protocol):
    """Where the reviews of a pull request come from."""

    def reviews(self, pr: int) -> list[Review]: ...


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
        history = _History(repo)
        commits = list(repo.iter_commits(tree.rev, first_parent=True))[::-1]
        trackers = [_Tracker(ident, history) for ident in ids]
        for position, commit in enumerate(commits, 1):
            for tracker in trackers:
                tracker.step(commit, position)
        selections = tuple(t.result() for t in trackers)
        head, first = history.info(commits[-1], len(commits)), history.info(commits[0], 1)
    approvals = None
    if github is not None:
        numbers = sorted({c.commit.pr for s in selections for c in s.changes if c.commit.pr})
        approvals = tuple(_reviews_of(github, n) for n in numbers)
    return AuditRecord(
        rev=tree.rev,
        commit=head,
        root=first,
        history=len(commits),
        selections=selections,
        approvals=approvals,
        reproduction=_verify(tree.root, tree.rev) if verify else None,
    )


def _selection_ids(names: Iterable[str]) -> list[str]:
    ids = set()
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        if dot and f".{suffix}" in YAML_SUFFIXES and _ID.match(stem):
            ids.add(stem)
    return sorted(ids)


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
    """Facts about commits, worked out once and shared by every selection's tracker."""

    def __init__(self, repo: git.Repo) -> None:
        self.repo = repo
        self._infos: dict[str, CommitInfo] = {}
        self._merged: dict[tuple[str, str], tuple[Person, ...]] = {}

    def info(self, commit: git.Commit, position: int) -> CommitInfo:
        if commit.hexsha not in self._infos:
            subject = _subject(commit.message)
            found = _MERGE_PR.match(subject) or _SQUASH_PR.search(subject)
            self._infos[commit.hexsha] = CommitInfo(
                sha=commit.hexsha,
                position=position,
                subject=subject,
                author=Person(str(commit.author.name or ""), str(commit.author.email or "")),
                authored_at=_utc(commit.authored_date),
                committed_at=_utc(commit.committed_date),
                pr=int(found.group(1)) if found else None,
                merge=len(commit.parents) > 1,
            )
        return self._infos[commit.hexsha]

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


class _Tracker:
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
            self.parsed[blob.hexsha] = _parse_selection(blob.data_stream.read(), self.path)
        parsed = self.parsed[blob.hexsha]
        if isinstance(parsed, str):
            # Keep the last readable version: the next readable one is compared with it.
            self.readable = False
            message = f"the selection file cannot be read: {parsed}"
            self.flags.append((position, Flag("unreadable", message, (info.sha,))))
            return
        self.readable = True
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

    def result(self) -> SelectionAudit:
        flags = list(self.flags)
        evidence = self.evidence
        late = [
            c
            for c in self.changes
            if evidence and c.kind == "policy" and c.commit.position > evidence.position
        ]
        if evidence and late:
            message = (
                "criteria changed after the evidence they judge first existed: results first "
                f"in {evidence.sha[:12]} ({evidence.committed_at}); policy changed in "
                + ", ".join(_where(c) for c in late)
            )
            flag = Flag("criteria_after_evidence", message, tuple(c.commit.sha for c in late))
            flags.append((late[0].commit.position, flag))
        state = self.state if self.readable else None
        return SelectionAudit(
            id=self.ident,
            path=self.path,
            use_case=state.use_case if state else None,
            declared=state.selected if state else None,
            candidates=tuple(c.id for c in state.candidates) if state else (),
            changes=tuple(self.changes),
            evidence=evidence,
            flags=tuple(f for _, f in sorted(flags, key=lambda pair: (pair[0], pair[1].kind))),
        )


def _where(change: Change) -> str:
    pr = f"#{change.commit.pr}, " if change.commit.pr else ""
    return f"{change.commit.sha[:12]} ({pr}{change.commit.committed_at}: {', '.join(change.parts)})"


def _parse_selection(data: bytes, path: str) -> schema.Selection | str:
    """The selection in ``data``, or the first reason it cannot be read."""
    try:
        doc = parse_yaml(data, path)
    except RegistryError as exc:
        return str(exc)
    upgraded, problems = upgrade("selections", doc)
    selection = None
    if upgraded is not None:
        selection, problems = validate(doc, schema.Selection, upgraded)
    if selection is None:
        return str(RegistryError(problems))
    return selection


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
    gates = ", ".join(_gate(g) for g in policy.gates) or "none"
    ni = policy.non_inferiority
    return {
        "pass_level": policy.pass_level,
        "confidence": _num(policy.confidence),
        "gates": gates,
        "objective": _objective(policy.objective),
        "non_inferiority": (
            f"{ni.metric} within {_num(ni.margin)}, then {_term(ni.prefer, weighted=False)}"
            if ni
            else "none"
        ),
    }


def _gate(gate: schema.Gate) -> str:
    bound = f"≥ {_num(gate.min)}" if gate.min is not None else f"≤ {_num(gate.max or 0.0)}"
    on = "" if gate.on == "point" else f" on {gate.on.replace('_', ' ')}"
    return f"{gate.metric}[{gate.slice}] {bound}{on}"


def _objective(objective: schema.Objective) -> str:
    if objective.weighted is not None:
        return "weighted " + " + ".join(_term(t, weighted=True) for t in objective.terms)
    return "lexicographic " + ", then ".join(_term(t, weighted=False) for t in objective.terms)


def _term(term: schema.Term, *, weighted: bool) -> str:
    goal = "maximize" if term.maximize is not None else "minimize"
    text = f"{goal} {term.metric}"
    return f"{text} ×{_num(term.weight)}" if weighted or term.weight != 1.0 else text


def _num(value: float) -> str:
    """A number as written, without a spurious ``.0`` (so ``1`` and ``1.0`` read alike)."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


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
