"""A GitHub REST API stand-in over real HTTP on 127.0.0.1, for testing the GitHub client.

``GitHubAPI`` serves one repository from memory: issue comments (list with real pagination,
create, update), pull requests (``/pulls``, ``/pulls/{n}``), their reviews
(``/pulls/{n}/reviews``, each with the ``commit_id`` it was given on) and the pull requests
associated with a commit (``/commits/{sha}/pulls``). Callers authenticate with
``Authorization: Bearer`` and a token from ``tokens``, which maps each token to the login it
acts as. Faults (rate
limits, server and permission errors) are injected for the next matching requests, and
every request is recorded in ``GitHubAPI.requests``::

    with GitHubAPI(tokens={"ghs_bot": "github-actions[bot]"}) as gh:
        gh.add_comment(7, "looks good", login="alice")
        gh.rate_limit_next(status=403, reset_in=30)
        client = GitHubClient("ghs_bot", gh.repository, api_url=gh.url)

Behaviour worth knowing:

* Pagination honours ``per_page`` (default 30, at most 100) and ``page``, and answers with
  absolute ``Link`` URLs (``next``, ``last``, and ``first``/``prev`` after page 1), built on
  ``link_base`` (the server's own URL unless a test points it elsewhere).
* ``/commits/{sha}/pulls`` lists pull requests of any state whose head (or one of whose
  ``commits``) is ``sha``, except those opened from a fork: like GitHub, the base repository
  does not know the fork's commits. A merged pull request is also listed for its
  ``merge_commit_sha``, fork or not.
* A fault applies to the next request after authentication, optionally only to one method.
  With ``applied=True`` the request takes effect before the error is returned, like a
  gateway timing out after the write.
* Comment bodies over 65,536 characters get GitHub's 422.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = ["Comment", "GitHubAPI", "Pull", "Request", "Review"]

COMMENT_LIMIT = 65_536
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
_ROUTES = [
    ("issue_comments", re.compile(_REPO + r"/issues/(?P<number>\d+)/comments")),
    ("comment", re.compile(_REPO + r"/issues/comments/(?P<id>\d+)")),
    ("commit_pulls", re.compile(_REPO + r"/commits/(?P<sha>[0-9a-fA-F]+)/pulls")),
    ("pulls", re.compile(_REPO + r"/pulls")),
    ("pull", re.compile(_REPO + r"/pulls/(?P<number>\d+)")),
    ("pull_reviews", re.compile(_REPO + r"/pulls/(?P<number>\d+)/reviews")),
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
    fork: bool
    author: str = "octocat"
    merge_commit_sha: str | None = None
    """Set for a merged pull request (its state is then ``closed``)."""
    commits: tuple[str, ...] = ()


@dataclass(frozen=True)
class Review:
    id: int
    pull: int
    login: str
    state: str
    commit_id: str
    submitted_at: str


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


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    headers: dict[str, str]


class GitHubAPI:
    """The stand-in server; use as a context manager, or ``start()`` and ``stop()``."""

    def __init__(self, tokens: Mapping[str, str], *, repository: str = "acme/registry") -> None:
        self.tokens = dict(tokens)
        self.repository = repository
        self.requests: list[Request] = []
        self.link_base: str | None = None
        self._comments: list[Comment] = []
        self._pulls: dict[int, Pull] = {}
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
        author: str = "octocat",
        merge_commit_sha: str | None = None,
        commits: tuple[str, ...] = (),
    ) -> Pull:
        """Seed a pull request; a ``merge_commit_sha`` makes it merged (and closed)."""
        if merge_commit_sha is not None:
            state = "closed"
        pull = Pull(number, head_sha, state, fork, author, merge_commit_sha, commits)
        with self._lock:
            self._pulls[number] = pull
        return pull

    def add_review(
        self, pull: int, login: str, state: str, *, commit_id: str, submitted_at: str = ""
    ) -> Review:
        """Seed a submitted review (``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``,
        ``DISMISSED``) of ``pull`` by ``login``, given on head commit ``commit_id``; reviews
        are listed in the order they were added, as GitHub lists them chronologically."""
        with self._lock:
            review_id = self._tick()
            review = Review(
                review_id, pull, login, state, commit_id, submitted_at or _timestamp(review_id)
            )
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
        return answer if fault is None else _fault_answer(fault)

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, login: str
    ) -> _Answer:
        for name, pattern in _ROUTES:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if f"{match['owner']}/{match['name']}" != self.repository:
                return _error(404, "Not Found")
            params = match.groupdict()
            if name == "issue_comments" and method == "GET":
                issue = int(params["number"])
                listed = [self._comment_json(c) for c in self._comments if c.issue == issue]
                return self._page(listed, path, query)
            if name == "issue_comments" and method == "POST":
                return self._post_comment(int(params["number"]), body, login)
            if name == "comment" and method == "PATCH":
                return self._patch_comment(int(params["id"]), body)
            if name == "commit_pulls" and method == "GET":
                sha = params["sha"].lower()
                found = [p for p in self._sorted_pulls() if _associated(p, sha)]
                return self._page([self._pull_json(p) for p in found], path, query)
            if name == "pull_reviews" and method == "GET":
                number = int(params["number"])
                if number not in self._pulls:
                    return _error(404, "Not Found")
                listed = [self._review_json(r) for r in self._reviews if r.pull == number]
                return self._page(listed, path, query)
            if name == "pulls" and method == "GET":
                state = query.get("state", "open")
                found = [p for p in self._sorted_pulls() if state in ("all", p.state)]
                return self._page([self._pull_json(p) for p in found], path, query)
            if name == "pull" and method == "GET":
                pull = self._pulls.get(int(params["number"]))
                if pull is None:
                    return _error(404, "Not Found")
                return _Answer(200, self._pull_json(pull), {})
            return _error(404, "Not Found")
        return _error(404, "Not Found")

    def _post_comment(self, issue: int, body: Any, login: str) -> _Answer:
        problem = _invalid_comment(body)
        if problem:
            return _error(422, "Validation Failed", problem)
        return _Answer(
            201, self._comment_json(self._create_comment(issue, body["body"], login)), {}
        )

    def _patch_comment(self, comment_id: int, body: Any) -> _Answer:
        comment = next((c for c in self._comments if c.id == comment_id), None)
        if comment is None:
            return _error(404, "Not Found")
        problem = _invalid_comment(body)
        if problem:
            return _error(422, "Validation Failed", problem)
        comment.body = body["body"]
        comment.updated_at = _timestamp(self._tick())
        return _Answer(200, self._comment_json(comment), {})

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
            return _error(422, "Invalid pagination parameters")
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

    def _comment_json(self, c: Comment) -> dict[str, Any]:
        api = f"{self.url}/repos/{self.repository}"
        return {
            "id": c.id,
            "node_id": f"IC_kwDO{c.id}",
            "url": f"{api}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{self.repository}/pull/{c.issue}#issuecomment-{c.id}",
            "issue_url": f"{api}/issues/{c.issue}",
            "body": c.body,
            "user": _user_json(c.login),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "author_association": "NONE",
        }

    def _review_json(self, r: Review) -> dict[str, Any]:
        return {
            "id": r.id,
            "node_id": f"PRR_kwDO{r.id}",
            "user": _user_json(r.login),
            "body": "",
            "state": r.state,
            "html_url": f"https://github.com/{self.repository}/pull/{r.pull}#pullrequestreview-{r.id}",
            "pull_request_url": f"{self.url}/repos/{self.repository}/pulls/{r.pull}",
            "author_association": "MEMBER",
            "submitted_at": r.submitted_at,
            "commit_id": r.commit_id,
        }

    def _pull_json(self, p: Pull) -> dict[str, Any]:
        head_repo = f"contributor/{self.repository.split('/')[1]}" if p.fork else self.repository
        merged = p.merge_commit_sha is not None
        return {
            "number": p.number,
            "state": p.state,
            "user": _user_json(p.author),
            "merged_at": _timestamp(p.number) if merged else None,
            "merge_commit_sha": p.merge_commit_sha,
            "html_url": f"https://github.com/{self.repository}/pull/{p.number}",
            "head": {
                "sha": p.head_sha,
                "ref": f"branch-{p.number}",
                "repo": {"full_name": head_repo},
            },
            "base": {"ref": "main", "repo": {"full_name": self.repository}},
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


def _user_json(login: str) -> dict[str, Any]:
    return {
        "login": login,
        "id": sum(map(ord, login)),
        "type": "Bot" if login.endswith("[bot]") else "User",
    }


def _associated(pull: Pull, sha: str) -> bool:
    """Whether GitHub lists ``pull`` for commit ``sha`` (see the module docstring)."""
    if pull.merge_commit_sha is not None and pull.merge_commit_sha.lower() == sha:
        return True
    own = {pull.head_sha.lower(), *(c.lower() for c in pull.commits)}
    return sha in own and not pull.fork


def _error(status: int, message: str, detail: str | None = None) -> _Answer:
    body: dict[str, Any] = {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": str(status),
    }
    if detail:
        body["errors"] = [{"resource": "IssueComment", "code": "custom", "message": detail}]
    return _Answer(status, body, {})


def _fault_answer(fault: _Fault) -> _Answer:
    error = _error(fault.status, fault.message)
    return _Answer(error.status, error.body, fault.headers)


def _invalid_comment(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return "body is missing"
    if len(body["body"]) > COMMENT_LIMIT:
        return f"body is too long (maximum is {COMMENT_LIMIT} characters)"
    return None


def _timestamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
