"""A GitHub REST API stand-in over real HTTP on 127.0.0.1, for testing the GitHub client.

``GitHubAPI`` serves one repository from memory: issue comments (list with real pagination,
create, update), pull requests (``/pulls``, ``/pulls/{n}``; created and updated, their head
branches read from ``git_dir``, a bare repository the tests push to), their reviews
(``/pulls/{n}/reviews``, each with the ``commit_id`` it was given on) and the pull requests
associated with a commit (``/commits/{sha}/pulls``). Callers authenticate with
``Authorization: Bearer`` and a token from ``tokens``, which maps each token to the login it
acts as. Faults (rate limits, server and permission errors, a field left out) are injected
for the next matching requests, and every request is recorded in ``GitHubAPI.requests``::

    with GitHubAPI(tokens={"ghs_bot": "github-actions[bot]"}) as gh:
        gh.add_comment(7, "looks good", login="alice")
        gh.rate_limit_next(status=403, reset_in=30)
        client = GitHubClient("ghs_bot", gh.repository, api_url=gh.url)

Every body it answers with is checked against GitHub's own OpenAPI description of that
operation and status (``support.github_openapi``): the objects carry every field GitHub
always sends (users, repositories, links, timestamps), with deterministic values and API
URLs on the stand-in's own address. A body the description does not allow is still sent,
and recorded in ``GitHubAPI.violations``; leaving the ``with`` block with any recorded
fails the test, so no test passes against answers GitHub would never give.

Behaviour worth knowing:

* Pagination honours ``per_page`` (default 30, at most 100) and ``page``, and answers with
  absolute ``Link`` URLs (``next``, ``last``, and ``first``/``prev`` after page 1), built on
  ``link_base`` (the server's own URL unless a test points it elsewhere).
* A pull request is open, closed without merging, or merged (``merged_as`` names the
  commit that merged it: a merge, squash or rebased commit). As on GitHub, only a merged
  one has ``merged_at`` and ``merged: true``; ``merge_commit_sha`` is set for every pull
  request, an unmerged one's naming its test merge commit (``refs/pull/N/merge``), which is
  on no branch. An author whose account was deleted (``author=None``) reads as GitHub's
  ``ghost`` user.
* ``/commits/{sha}/pulls`` lists pull requests of any state whose head (or one of whose
  ``commits``) is ``sha``, except those opened from a fork: like GitHub, the base repository
  does not know the fork's commits. A merged pull request is also listed for the commit
  that merged it, fork or not. GitHub documents the merged pull request that introduced the
  commit, plus open ones for a commit not on the default branch, and in practice lists
  closed unmerged ones too (github/docs#21701): a client must pick, not trust the list.
* Reviews may be ``DISMISSED``, given on a commit that no longer exists
  (``commit_id: null``), by a deleted account (``user: null``), or ``PENDING`` (no
  ``submitted_at``, as GitHub shows a pending review to its author).
* A fault applies to the next request after authentication, optionally only to one method.
  With ``applied=True`` the request takes effect before the error is returned, like a
  gateway timing out after the write.
* Comment bodies over 65,536 characters get GitHub's 422.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

from support.github_openapi import OPERATIONS, description

__all__ = ["REVIEW_STATES", "Comment", "GitHubAPI", "Pull", "Request", "Review"]

COMMENT_LIMIT = 65_536
#: The states GitHub gives a review; only a PENDING one has no ``submitted_at``.
REVIEW_STATES = ("APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_DOCS = "https://docs.github.com/rest"
# The operations served, matched by the paths GitHub's description gives them.
_ROUTES = [
    (operation, method, re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path)))
    for operation, (method, path) in OPERATIONS.items()
]


@dataclass
class Comment:
    id: int
    issue: int
    body: str
    login: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Pull:
    number: int
    head_sha: str
    state: str
    """``open`` or ``closed`` (merged or not), as GitHub says it."""
    fork: bool
    author: str | None = "octocat"
    """None: the author's account was deleted."""
    merged_as: str | None = None
    """The commit that merged it: set for a merged pull request only."""
    commits: tuple[str, ...] = ()
    ref: str | None = None
    """Its head branch (None: ``branch-N``)."""
    title: str | None = None
    body: str | None = None
    base: str = "main"

    @property
    def merged(self) -> bool:
        return self.merged_as is not None

    @property
    def merge_commit_sha(self) -> str:
        """GitHub's field: the merging commit once merged, else the test merge commit."""
        return self.merged_as or _sha(f"refs/pull/{self.number}/merge")


@dataclass(frozen=True)
class Review:
    id: int
    pull: int
    login: str | None
    """None: the reviewer's account was deleted."""
    state: str
    commit_id: str | None
    """None: the commit the review was given on no longer exists."""
    submitted_at: str | None
    """None for a pending review."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    json: Any


@dataclass(frozen=True)
class _Fault:
    status: int
    message: str
    headers: dict[str, str]
    method: str | None
    applied: bool
    omit: str | None = None


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class GitHubAPI:
    """The stand-in server; use as a context manager (which fails on leaving it when any
    answer broke GitHub's description), or ``start()``, ``stop()`` and ``check()``."""

    def __init__(self, tokens: Mapping[str, str], *, repository: str = "acme/registry") -> None:
        self.tokens = dict(tokens)
        self.repository = repository
        self.requests: list[Request] = []
        self.violations: list[str] = []
        """Each answer whose body GitHub's description does not allow, and why."""
        self.link_base: str | None = None
        self._comments: list[Comment] = []
        self._pulls: dict[int, Pull] = {}
        #: The repository's git directory (a bare clone): where a pull request created
        #: through the API finds its head branch, as GitHub looks in the repository.
        self.git_dir: Path | None = None
        self._reviews: list[Review] = []
        self._faults: list[_Fault] = []
        self._next_id = 1_000_001
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> GitHubAPI:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> GitHubAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None:
            self.check()

    def check(self) -> None:
        """Fail when any answer so far departed from GitHub's description."""
        if self.violations:
            listed = "\n".join(f"  {v}" for v in self.violations)
            raise AssertionError(
                f"the GitHub stand-in answered with bodies GitHub's description "
                f"({description().source}) does not allow:\n{listed}"
            )

    # State

    def add_comment(self, issue: int, body: str, *, login: str) -> Comment:
        """Seed a comment on ``issue`` by ``login`` (anyone, not only a token holder)."""
        with self._lock:
            return self._create_comment(issue, body, login)

    def comments(self, issue: int) -> list[Comment]:
        """The comments on ``issue`` in creation order (copies)."""
        with self._lock:
            return [Comment(**vars(c)) for c in self._comments if c.issue == issue]

    def add_pull(
        self,
        number: int,
        head_sha: str,
        *,
        state: str = "open",
        fork: bool = False,
        author: str | None = "octocat",
        merged_as: str | None = None,
        commits: tuple[str, ...] = (),
    ) -> Pull:
        """Seed a pull request: open, ``state="closed"`` without merging, or merged by the
        commit ``merged_as`` (then closed). ``author=None`` is a deleted account."""
        if state not in ("open", "closed"):
            raise ValueError(f"GitHub's pull request states are open and closed, not {state!r}")
        if merged_as is not None:
            state = "closed"
        pull = Pull(number, head_sha, state, fork, author, merged_as, commits)
        with self._lock:
            self._pulls[number] = pull
        return pull

    def add_review(
        self,
        pull: int,
        login: str | None,
        state: str,
        *,
        commit_id: str | None,
        submitted_at: str = "",
    ) -> Review:
        """Seed a review of ``pull`` by ``login`` (None: a deleted account) in one of
        ``REVIEW_STATES``, given on head commit ``commit_id`` (None: a commit that no longer
        exists); reviews are listed in the order they were added, as GitHub lists them
        chronologically."""
        if state not in REVIEW_STATES:
            raise ValueError(f"GitHub's review states are {REVIEW_STATES}, not {state!r}")
        with self._lock:
            review_id = self._tick()
            when = None if state == "PENDING" else submitted_at or _timestamp(review_id)
            review = Review(review_id, pull, login, state, commit_id, when)
            self._reviews.append(review)
        return review

    def writes(self) -> list[Request]:
        """The recorded requests that could change state (POST, PATCH)."""
        return [r for r in self.requests if r.method in ("POST", "PATCH")]

    # Faults

    def rate_limit_next(
        self,
        times: int = 1,
        *,
        status: int = 403,
        retry_after: int | None = None,
        reset_in: float | None = None,
        method: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests with a rate limit, as GitHub does.

        ``reset_in`` makes it a primary limit (``x-ratelimit-remaining: 0`` and an epoch
        ``x-ratelimit-reset`` that many seconds ahead); ``retry_after`` a secondary limit
        with a ``retry-after`` header. With neither, a primary limit resetting in 60 s.
        """
        if retry_after is None and reset_in is None:
            reset_in = 60.0
        headers: dict[str, str] = {}
        message = "You have exceeded a secondary rate limit. Please wait a few minutes."
        if reset_in is not None:
            reset = math.ceil(time.time() + reset_in)
            headers |= {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
            message = "API rate limit exceeded for installation ID 4242."
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        self._add_faults(times, _Fault(status, message, headers, method, applied=False))

    def fail_next(
        self,
        status: int,
        times: int = 1,
        *,
        method: str | None = None,
        applied: bool = False,
        message: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests (of ``method``, if given) with ``status``.

        A 403 says "Resource not accessible by integration", GitHub's answer to a token
        without the permission; other statuses use their standard phrase.
        """
        if message is None:
            message = (
                "Resource not accessible by integration"
                if status == 403
                else HTTPStatus(status).phrase
            )
        self._add_faults(times, _Fault(status, message, {}, method, applied))

    def omit_next(self, name: str, *, method: str | None = None) -> None:
        """Leave field ``name`` out of the next answer's object (each object of a list).

        No GitHub answer lacks a field its description requires: the answer is recorded in
        ``violations``, which the test must then inspect and clear.
        """
        self._add_faults(1, _Fault(200, "", {}, method, applied=True, omit=name))

    def _add_faults(self, times: int, fault: _Fault) -> None:
        with self._lock:
            self._faults.extend([fault] * times)

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.method in (None, method):
                    return self._faults.pop(i)
        return None

    # Serving

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> _Answer:
        split = urlsplit(target)
        operation = _operation(method, split.path)
        answer = self._answer(method, split, headers, raw)
        problems = description().problems(operation and operation[0], answer.status, answer.body)
        if problems:
            with self._lock:
                self.violations.extend(f"{method} {split.path}: {p}" for p in problems)
        return answer

    def _answer(
        self, method: str, split: SplitResult, headers: dict[str, str], raw: bytes
    ) -> _Answer:
        query = dict(parse_qsl(split.query))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return _error(400, "Problems parsing JSON")
        with self._lock:
            self.requests.append(Request(method, split.path, query, headers, body))
        auth = headers.get("authorization", "")
        login = (
            self.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        )
        if login is None:
            return _error(401, "Bad credentials")
        fault = self._take_fault(method)
        if fault is not None and not fault.applied:
            return _fault_answer(fault)
        with self._lock:
            answer = self._route(method, split.path, query, body, login)
        if fault is None:
            return answer
        if fault.omit is not None:
            return _Answer(answer.status, _without(answer.body, fault.omit), answer.headers)
        return _fault_answer(fault)

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, login: str
    ) -> _Answer:
        found = _operation(method, path)
        if found is None:
            return _error(404, "Not Found")
        operation, params = found
        numbers = [v for k, v in params.items() if k.endswith(("_number", "_id"))]
        if f"{params['owner']}/{params['repo']}" != self.repository or not all(
            n.isdigit() for n in numbers
        ):
            return _error(404, "Not Found")
        if operation == "issues/list-comments":
            issue = int(params["issue_number"])
            listed = [self._comment_json(c) for c in self._comments if c.issue == issue]
            return self._page(listed, path, query)
        if operation == "issues/create-comment":
            return self._post_comment(int(params["issue_number"]), body, login)
        if operation == "issues/update-comment":
            return self._patch_comment(int(params["comment_id"]), body)
        if operation == "repos/list-pull-requests-associated-with-commit":
            sha = params["commit_sha"].lower()
            found_pulls = [p for p in self._sorted_pulls() if _associated(p, sha)]
            return self._page([self._pull_json(p) for p in found_pulls], path, query)
        if operation == "pulls/list-reviews":
            number = int(params["pull_number"])
            if number not in self._pulls:
                return _error(404, "Not Found")
            listed = [self._review_json(r) for r in self._reviews if r.pull == number]
            return self._page(listed, path, query)
        if operation == "pulls/list":
            state = query.get("state", "open")
            if state not in ("open", "closed", "all"):
                return _validation_error("PullRequest", "state", f"{state!r} is not a state")
            pulls = [p for p in self._sorted_pulls() if state in ("all", p.state)]
            if "head" in query:  # "owner:branch", as GitHub filters it
                owner, _, ref = query["head"].partition(":")
                pulls = [p for p in pulls if (owner, ref) == (self._owner, self._ref(p))]
            if "base" in query:
                pulls = [p for p in pulls if p.base == query["base"]]
            return self._page([self._pull_json(p) for p in pulls], path, query)
        if operation == "pulls/create":
            return self._create_pull(body, login)
        if operation == "pulls/update":
            return self._update_pull(int(params["pull_number"]), body)
        pull = self._pulls.get(int(params["pull_number"]))  # pulls/get
        if pull is None:
            return _error(404, "Not Found")
        return _Answer(200, self._pull_json(pull, full=True))

    def _ref(self, p: Pull) -> str:
        return p.ref or f"branch-{p.number}"

    def _branch_sha(self, ref: str) -> str | None:
        if self.git_dir is None:
            return None
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{ref}"],
            cwd=self.git_dir,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip() or None

    def _create_pull(self, body: Any, login: str) -> _Answer:
        # Called under the server's lock, as every route is.
        if not isinstance(body, dict):
            return _validation_error("PullRequest", "body", "a JSON object is expected")
        for name in ("title", "head", "base"):
            if not isinstance(body.get(name), str) or not body[name]:
                return _validation_error("PullRequest", name, f"{name} is missing")
        owner, colon, ref = body["head"].rpartition(":")
        if colon and owner != self._owner:
            return _validation_error(
                "PullRequest", "head", "head is not a branch of the repository"
            )
        sha = self._branch_sha(ref)
        if sha is None or self._branch_sha(body["base"]) is None:
            return _validation_error("PullRequest", "head", "head or base is not a branch")
        for p in self._pulls.values():
            if p.state == "open" and self._ref(p) == ref and p.base == body["base"]:
                return _validation_error(
                    "PullRequest", "head", f"A pull request already exists for {body['head']}."
                )
        number = max(self._pulls, default=0) + 1
        text = body.get("body")
        pull = Pull(
            number,
            sha,
            "open",
            False,
            author=login,
            ref=ref,
            title=body["title"],
            body=text if isinstance(text, str) else None,
            base=body["base"],
        )
        self._pulls[number] = pull
        return _Answer(201, self._pull_json(pull, full=True))

    def _update_pull(self, number: int, body: Any) -> _Answer:
        if not isinstance(body, dict):
            return _validation_error("PullRequest", "body", "a JSON object is expected")
        pull = self._pulls.get(number)
        if pull is None:
            return _error(404, "Not Found")
        changes: dict[str, Any] = {}
        for name in ("title", "body"):
            if isinstance(body.get(name), str):
                changes[name] = body[name]
        if "state" in body:
            if body["state"] not in ("open", "closed") or pull.merged:
                return _validation_error("PullRequest", "state", "state cannot be changed")
            changes["state"] = body["state"]
        head = self._branch_sha(self._ref(pull)) if self.git_dir is not None else None
        if head is not None:
            changes["head_sha"] = head  # a pushed branch moves its pull request's head
        pull = self._pulls[number] = replace(pull, **changes)
        return _Answer(200, self._pull_json(pull, full=True))

    def _post_comment(self, issue: int, body: Any, login: str) -> _Answer:
        problem = _invalid_comment(body)
        if problem:
            return _validation_error("IssueComment", "body", problem)
        return _Answer(201, self._comment_json(self._create_comment(issue, body["body"], login)))

    def _patch_comment(self, comment_id: int, body: Any) -> _Answer:
        comment = next((c for c in self._comments if c.id == comment_id), None)
        if comment is None:
            return _error(404, "Not Found")
        problem = _invalid_comment(body)
        if problem:
            return _validation_error("IssueComment", "body", problem)
        comment.body = body["body"]
        comment.updated_at = _timestamp(self._tick())
        return _Answer(200, self._comment_json(comment))

    def _create_comment(self, issue: int, body: str, login: str) -> Comment:
        comment_id = self._tick()
        stamp = _timestamp(comment_id)
        comment = Comment(comment_id, issue, body, login, stamp, stamp)
        self._comments.append(comment)
        return comment

    def _tick(self) -> int:
        self._next_id += 1
        return self._next_id

    def _sorted_pulls(self) -> list[Pull]:
        return [self._pulls[n] for n in sorted(self._pulls, reverse=True)]

    def _page(self, items: list[Any], path: str, query: dict[str, str]) -> _Answer:
        try:
            per_page = min(int(query.get("per_page", "30")), 100)
            page = max(int(query.get("page", "1")), 1)
        except ValueError:
            return _validation_error("Pagination", "page", "Invalid pagination parameters")
        per_page = per_page if per_page > 0 else 30
        last = max(1, math.ceil(len(items) / per_page))
        base = self.link_base or self.url

        def link(n: int, rel: str) -> str:
            params = {**query, "per_page": str(per_page), "page": str(n)}
            return f'<{base}{path}?{urlencode(params)}>; rel="{rel}"'

        links = []
        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        headers = {"link": ", ".join(links)} if links else {}
        start = (page - 1) * per_page
        return _Answer(200, items[start : start + per_page], headers)

    # Bodies, shaped as GitHub's description says

    def _comment_json(self, c: Comment) -> dict[str, Any]:
        api = f"{self.url}/repos/{self.repository}"
        return {
            "id": c.id,
            "node_id": f"IC_kwDO{c.id}",
            "url": f"{api}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{self.repository}/pull/{c.issue}#issuecomment-{c.id}",
            "issue_url": f"{api}/issues/{c.issue}",
            "body": c.body,
            "user": self._user_json(c.login),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "author_association": "NONE",
            "performed_via_github_app": None,
            "reactions": _reactions(f"{api}/issues/comments/{c.id}/reactions"),
        }

    def _review_json(self, r: Review) -> dict[str, Any]:
        html = f"https://github.com/{self.repository}/pull/{r.pull}#pullrequestreview-{r.id}"
        pull_url = f"{self.url}/repos/{self.repository}/pulls/{r.pull}"
        review: dict[str, Any] = {
            "id": r.id,
            "node_id": f"PRR_kwDO{r.id}",
            "user": None if r.login is None else self._user_json(r.login),
            "body": "",
            "state": r.state,
            "html_url": html,
            "pull_request_url": pull_url,
            "author_association": "NONE" if r.login is None else "MEMBER",
            "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
            "commit_id": r.commit_id,
        }
        if r.submitted_at is not None:
            review["submitted_at"] = r.submitted_at
        return review

    def _pull_json(self, p: Pull, *, full: bool = False) -> dict[str, Any]:
        """A pull request as ``pulls/get`` (``full``) or as the lists give it."""
        api = f"{self.url}/repos/{self.repository}"
        html = f"https://github.com/{self.repository}/pull/{p.number}"
        owner, name = self.repository.split("/")
        head_repo = f"contributor/{name}" if p.fork else self.repository
        author = self._user_json(p.author or "ghost")
        created = _timestamp(p.number)
        closed = _timestamp(p.number + 86_400) if p.state == "closed" else None
        pull: dict[str, Any] = {
            "url": f"{api}/pulls/{p.number}",
            "id": 2_000_000_000 + p.number,
            "node_id": f"PR_kwDO{p.number:08d}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{p.number}",
            "commits_url": f"{api}/pulls/{p.number}/commits",
            "review_comments_url": f"{api}/pulls/{p.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{p.number}/comments",
            "statuses_url": f"{api}/statuses/{p.head_sha}",
            "number": p.number,
            "state": p.state,
            "locked": False,
            "title": p.title or f"Change #{p.number}",
            "user": author,
            "body": p.body,
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": created,
            "updated_at": closed or created,
            "closed_at": closed,
            "merged_at": closed if p.merged else None,
            "merge_commit_sha": p.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": {
                "label": f"{head_repo.split('/')[0]}:{self._ref(p)}",
                "ref": self._ref(p),
                "sha": p.head_sha,
                "user": self._user_json(head_repo.split("/")[0]),
                "repo": self._repository_json(head_repo),
            },
            "base": {
                "label": f"{owner}:{p.base}",
                "ref": p.base,
                "sha": _sha(f"base of #{p.number}"),
                "user": self._user_json(owner),
                "repo": self._repository_json(self.repository),
            },
            "_links": {
                rel: {"href": href}
                for rel, href in {
                    "self": f"{api}/pulls/{p.number}",
                    "html": html,
                    "issue": f"{api}/issues/{p.number}",
                    "comments": f"{api}/issues/{p.number}/comments",
                    "review_comments": f"{api}/pulls/{p.number}/comments",
                    "review_comment": f"{api}/pulls/comments{{/number}}",
                    "commits": f"{api}/pulls/{p.number}/commits",
                    "statuses": f"{api}/statuses/{p.head_sha}",
                }.items()
            },
            "author_association": "NONE" if p.author is None else "MEMBER",
            "auto_merge": None,
            "draft": False,
        }
        if full:
            pull |= {
                "merged": p.merged,
                "mergeable": True if p.state == "open" else None,
                "rebaseable": True if p.state == "open" else None,
                "mergeable_state": "clean" if p.state == "open" else "unknown",
                "merged_by": self._user_json(owner) if p.merged else None,
                "comments": sum(c.issue == p.number for c in self._comments),
                "review_comments": 0,
                "maintainer_can_modify": p.fork and p.state == "open",
                "commits": max(len(p.commits), 1),
                "additions": 12,
                "deletions": 3,
                "changed_files": 2,
            }
        return pull

    def _user_json(self, login: str) -> dict[str, Any]:
        user_id = _number(login)
        bot = login.endswith("[bot]")
        users = f"{self.url}/users/{login}"
        return {
            "login": login,
            "id": user_id,
            "node_id": f"{'BOT' if bot else 'U'}_kgDO{user_id}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
            "gravatar_id": "",
            "url": users,
            "html_url": f"https://github.com/{login}",
            "followers_url": f"{users}/followers",
            "following_url": f"{users}/following{{/other_user}}",
            "gists_url": f"{users}/gists{{/gist_id}}",
            "starred_url": f"{users}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{users}/subscriptions",
            "organizations_url": f"{users}/orgs",
            "repos_url": f"{users}/repos",
            "events_url": f"{users}/events{{/privacy}}",
            "received_events_url": f"{users}/received_events",
            "type": "Bot" if bot else "Organization" if login == self._owner else "User",
            "user_view_type": "public",
            "site_admin": False,
        }

    @property
    def _owner(self) -> str:
        return self.repository.split("/")[0]

    def _repository_json(self, full_name: str) -> dict[str, Any]:
        owner, name = full_name.split("/")
        api = f"{self.url}/repos/{full_name}"
        html = f"https://github.com/{full_name}"
        forked = full_name != self.repository
        templated = {
            "archive_url": "/{archive_format}{/ref}",
            "assignees_url": "/assignees{/user}",
            "blobs_url": "/git/blobs{/sha}",
            "branches_url": "/branches{/branch}",
            "collaborators_url": "/collaborators{/collaborator}",
            "comments_url": "/comments{/number}",
            "commits_url": "/commits{/sha}",
            "compare_url": "/compare/{base}...{head}",
            "contents_url": "/contents/{+path}",
            "contributors_url": "/contributors",
            "deployments_url": "/deployments",
            "downloads_url": "/downloads",
            "events_url": "/events",
            "forks_url": "/forks",
            "git_commits_url": "/git/commits{/sha}",
            "git_refs_url": "/git/refs{/sha}",
            "git_tags_url": "/git/tags{/sha}",
            "hooks_url": "/hooks",
            "issue_comment_url": "/issues/comments{/number}",
            "issue_events_url": "/issues/events{/number}",
            "issues_url": "/issues{/number}",
            "keys_url": "/keys{/key_id}",
            "labels_url": "/labels{/name}",
            "languages_url": "/languages",
            "merges_url": "/merges",
            "milestones_url": "/milestones{/number}",
            "notifications_url": "/notifications{?since,all,participating}",
            "pulls_url": "/pulls{/number}",
            "releases_url": "/releases{/id}",
            "stargazers_url": "/stargazers",
            "statuses_url": "/statuses/{sha}",
            "subscribers_url": "/subscribers",
            "subscription_url": "/subscription",
            "tags_url": "/tags",
            "teams_url": "/teams",
            "trees_url": "/git/trees{/sha}",
        }
        return {
            "id": _number(full_name),
            "node_id": f"R_kgDO{_number(full_name)}",
            "name": name,
            "full_name": full_name,
            "private": False,
            "owner": self._user_json(owner),
            "html_url": html,
            "description": None,
            "fork": forked,
            "url": api,
            **{key: api + suffix for key, suffix in templated.items()},
            "git_url": f"git://github.com/{full_name}.git",
            "ssh_url": f"git@github.com:{full_name}.git",
            "clone_url": f"{html}.git",
            "svn_url": html,
            "mirror_url": None,
            "homepage": None,
            "language": "Python",
            "size": 1_024,
            "forks_count": 0 if forked else 1,
            "forks": 0 if forked else 1,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "open_issues_count": 0,
            "open_issues": 0,
            "default_branch": "main",
            "is_template": False,
            "topics": [],
            "has_issues": not forked,
            "has_projects": True,
            "has_wiki": True,
            "has_pages": False,
            "has_downloads": True,
            "has_discussions": False,
            "archived": False,
            "disabled": False,
            "visibility": "public",
            "license": None,
            "allow_forking": True,
            "web_commit_signoff_required": False,
            "created_at": _timestamp(0),
            "updated_at": _timestamp(0),
            "pushed_at": _timestamp(0),
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: GitHubAPI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = cast(_Server, self.server).api.handle(self.command, self.path, headers, raw)
        data = json.dumps(answer.body).encode()
        self.send_response(answer.status)
        reset = str(math.ceil(time.time()) + 3600)
        for name, value in {
            "content-type": "application/json; charset=utf-8",
            "x-github-api-version-selected": "2022-11-28",
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4999",
            "x-ratelimit-reset": reset,
            "x-ratelimit-used": "1",
            "x-ratelimit-resource": "core",
            **answer.headers,
            "content-length": str(len(data)),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _operation(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """GitHub's operation id for ``method`` on ``path``, and the path's parameters."""
    for operation, verb, pattern in _ROUTES:
        match = pattern.fullmatch(path)
        if match is not None and verb == method:
            return operation, match.groupdict()
    return None


def _associated(pull: Pull, sha: str) -> bool:
    """Whether GitHub lists ``pull`` for commit ``sha`` (see the module docstring)."""
    if pull.merged_as is not None and pull.merged_as.lower() == sha:
        return True
    own = {pull.head_sha.lower(), *(c.lower() for c in pull.commits)}
    return sha in own and not pull.fork


def _reactions(url: str) -> dict[str, Any]:
    kinds = ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")
    return {"url": url, "total_count": 0, **dict.fromkeys(kinds, 0)}


def _error(status: int, message: str) -> _Answer:
    return _Answer(status, {"message": message, "documentation_url": _DOCS, "status": str(status)})


def _validation_error(resource: str, name: str, problem: str) -> _Answer:
    error = {"resource": resource, "field": name, "code": "custom", "message": problem}
    body = {
        "message": "Validation Failed",
        "errors": [error],
        "documentation_url": _DOCS,
        "status": "422",
    }
    return _Answer(422, body)


def _fault_answer(fault: _Fault) -> _Answer:
    error = _error(fault.status, fault.message)
    return _Answer(error.status, error.body, fault.headers)


def _without(body: Any, name: str) -> Any:
    if isinstance(body, list):
        return [_without(item, name) for item in body]
    if isinstance(body, dict):
        return {k: v for k, v in body.items() if k != name}
    return body


def _invalid_comment(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return "body is missing"
    if len(body["body"]) > COMMENT_LIMIT:
        return f"body is too long (maximum is {COMMENT_LIMIT} characters)"
    return None


def _number(name: str) -> int:
    """A stable id for ``name`` (a login or repository), as GitHub's ids are stable."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:3], "big") + 1


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _timestamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
