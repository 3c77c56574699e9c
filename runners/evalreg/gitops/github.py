"""The GitHub REST client that keeps one sticky eval-diff comment on a pull request.

Besides the comment (found by a hidden marker *and* its author, across every page, then
updated or created), it resolves which pull request a workflow run belongs to and reads a
pull request's head commit, so the trusted comment job can check that the diff it posts
belongs to the pull request's current head. Rate limits are waited out (``retry-after``,
``x-ratelimit-reset``) within a bound; the token never appears in a message or repr.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from evalreg._version import __version__
from evalreg.errors import EvalregError
from evalreg.providers.http import retry_after
from evalreg.text.escape import COMMENT_LIMIT, cut_to_fit

DEFAULT_API_URL = "https://api.github.com"
#: GitHub refuses comment bodies longer than this many characters.
CUT_NOTE = "… cut to fit GitHub's 65,536-character limit"

CommentAction = Literal["created", "updated", "unchanged"]

_PER_PAGE = 100
_RETRIES = 3
_MAX_MARKER_CHARS = 1_000
# The reset time has one-second resolution and the runner's clock is not GitHub's.
_RESET_MARGIN_S = 1.0
# GitHub's advice when a rate-limit answer says neither how long nor until when.
_UNSPECIFIED_RATE_LIMIT_WAIT_S = 60.0
_MIN_RATE_LIMIT_WAIT_S = 1.0
_REPOSITORY = re.compile(r"[A-Za-z0-9_-]+/(?!\.\.?$)[A-Za-z0-9_.-]+")
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
# Printable ASCII without spaces: anything else could end up quoted in an HTTP library error.
_TOKEN = re.compile(r"[\x21-\x7e]+")


class GitHubError(EvalregError):
    """A GitHub API call failed or its inputs are missing (exit 2); never contains the token."""


@dataclass(frozen=True)
class CommentResult:
    """What ``upsert_comment`` did and to which comment."""

    action: CommentAction
    comment_id: int | None
    url: str | None


@dataclass(frozen=True)
class PullRequestContext:
    """The pull request a comment belongs to; ``number`` 0 means "resolve it from ``head_sha``"."""

    repository: str
    number: int
    head_sha: str | None


class _CreateInDoubt(Exception):
    """A POST failed in a way that may or may not have created the comment."""


@dataclass
class _Waits:
    """Every pause one public call makes, bounded in total by ``limit_s``."""

    limit_s: float
    sleep: Callable[[float], None]
    spent_s: float = 0.0

    def pause(self, seconds: float, reason: str) -> None:
        if self.spent_s + seconds > self.limit_s:
            until = datetime.now(UTC) + timedelta(seconds=seconds)
            raise GitHubError(
                f"{reason}: waiting {seconds:.0f}s more would exceed the {self.limit_s:.0f}s "
                f"allowed; re-run the job after {until:%H:%M:%S} UTC"
            )
        self.spent_s += seconds
        self.sleep(seconds)


class GitHubClient:
    """Calls the GitHub REST API for one repository, waiting out rate limits and retrying.

    ``transport`` is the seam for tests. ``sleep`` receives every pause (rate limits and
    backoff between retries), and ``max_wait_s`` bounds their total within one method call.
    Server errors and lost connections are retried a few times; a create is retried by
    looking for the comment again first, so a POST that failed after writing is not doubled.
    """

    def __init__(
        self,
        token: str,
        repository: str,
        *,
        api_url: str = DEFAULT_API_URL,
        transport: httpx.BaseTransport | None = None,
        max_wait_s: float = 900.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not _TOKEN.fullmatch(token):
            raise GitHubError(
                "the GitHub token is empty or contains spaces, line breaks or non-ASCII "
                "characters: set GITHUB_TOKEN to the token itself"
            )
        _check_repository(repository)
        self.repository = repository
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._client = httpx.Client(
            base_url=self.api_url,
            transport=transport,
            headers={
                "accept": "application/vnd.github+json",
                "x-github-api-version": "2022-11-28",
                "authorization": f"Bearer {token}",
                "user-agent": f"evalreg/{__version__}",
            },
            timeout=httpx.Timeout(30.0, connect=10.0),
        )

    def __repr__(self) -> str:
        return f"GitHubClient(repository={self.repository!r}, api_url={self.api_url!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def upsert_comment(
        self, pr_number: int, body: str, *, marker: str, bot_login: str
    ) -> CommentResult:
        """Create or update the one comment on ``pr_number`` that carries ``marker``.

        The sticky comment is the oldest comment whose body starts with ``marker`` and whose
        author is ``bot_login`` (case-insensitive); the marker anywhere else, or in anyone
        else's comment, is ignored. ``body`` goes through ``fit_comment_body`` first. An
        existing comment whose body is already identical is left alone ("unchanged").
        ``report.diff_markdown.comment_body`` makes the body ``evalreg comment`` posts (and
        ``--dry-run`` prints, without calling GitHub).
        """
        _check_number(pr_number)
        text = fit_comment_body(body, marker)
        waits = self._waits()
        failures = 0
        while True:
            try:
                result = self._upsert_once(pr_number, text, marker, bot_login, waits)
            except _CreateInDoubt as exc:
                failures += 1
                if failures > _RETRIES:
                    raise GitHubError(
                        f"{exc}; gave up after {failures} attempts: re-run the job later"
                    ) from None
                waits.pause(_backoff(failures), str(exc))
                continue
            # An identical comment found after a POST of unknown outcome is that POST's work.
            if failures and result.action == "unchanged":
                return replace(result, action="created")
            return result

    def pull_for_sha(self, sha: str) -> int | None:
        """The number of the open pull request whose head commit is ``sha``, or None.

        Raises ``GitHubError`` when several open pull requests share that head.
        """
        if not _SHA.fullmatch(sha):
            raise GitHubError(f"{sha!r} is not a commit SHA")
        waits = self._waits()
        path = f"/repos/{self.repository}"
        found = _open_pulls_with_head(self._commit_pulls(sha, waits), sha)
        if not found:
            # A head commit that exists only in a fork is not associated with this repository.
            found = _open_pulls_with_head(
                self._get_all(f"{path}/pulls", {"state": "open"}, waits), sha
            )
        if len(found) > 1:
            numbers = ", ".join(f"#{n}" for n in found)
            raise GitHubError(
                f"commit {sha[:12]} is the head of several open pull requests ({numbers}): "
                "pass --pr to choose one"
            )
        return found[0] if found else None

    def commit_pulls(self, sha: str) -> list[Any]:
        """The pull requests GitHub associates with commit ``sha`` (any state), all pages.

        GitHub lists a merged pull request for its merge commit and for the commits it
        brought in; a commit that exists only in a fork is associated with nothing here.
        """
        if not _SHA.fullmatch(sha):
            raise GitHubError(f"{sha!r} is not a commit SHA")
        return self._commit_pulls(sha, self._waits())

    def pull(self, pr_number: int) -> dict[str, Any]:
        """Pull request ``pr_number`` as GitHub returns it (head, author, merge state…)."""
        _check_number(pr_number)
        path = f"/repos/{self.repository}/pulls/{pr_number}"
        pull = _json(self._send("GET", path, self._waits()))
        if not isinstance(pull, dict):
            raise GitHubError(f"GitHub's answer to GET {path} is not an object: re-run the job")
        return pull

    def pull_head_sha(self, pr_number: int) -> str:
        """The SHA of the current head commit of pull request ``pr_number``."""
        pull = self.pull(pr_number)
        path = f"/repos/{self.repository}/pulls/{pr_number}"
        head = pull.get("head")
        sha = head.get("sha") if isinstance(head, dict) else None
        if not isinstance(sha, str):
            raise GitHubError(f"GitHub's answer to GET {path} has no head.sha: re-run the job")
        return sha

    def pull_reviews(self, pr_number: int) -> list[Any]:
        """Every review of pull request ``pr_number`` as GitHub returns them, all pages."""
        _check_number(pr_number)
        path = f"/repos/{self.repository}/pulls/{pr_number}/reviews"
        return self._get_all(path, {}, self._waits())

    def pulls_from(self, branch: str, *, state: str = "open") -> list[dict[str, Any]]:
        """The pull requests (``state``: open, closed or all) whose head is ``branch`` of
        this repository, all pages."""
        owner = self.repository.split("/")[0]
        params = {"state": state, "head": f"{owner}:{branch}"}
        pulls = self._get_all(f"/repos/{self.repository}/pulls", params, self._waits())
        return [p for p in pulls if isinstance(p, dict)]

    def open_pulls(self) -> list[dict[str, Any]]:
        """Every open pull request of the repository, all pages."""
        pulls = self._get_all(f"/repos/{self.repository}/pulls", {"state": "open"}, self._waits())
        return [p for p in pulls if isinstance(p, dict)]

    def create_pull(self, *, title: str, head: str, base: str, body: str) -> dict[str, Any]:
        """Open a pull request from branch ``head`` into ``base``. A create whose outcome
        is unknown (a lost connection, a 5xx) is looked for before it is sent again, so a
        pull request is never opened twice."""
        waits = self._waits()
        path = f"/repos/{self.repository}/pulls"
        fields = {"title": title, "head": head, "base": base, "body": _fit(body)}
        failures = 0
        while True:
            try:
                return _object(_json(self._send("POST", path, waits, fields=fields)), path)
            except _CreateInDoubt as exc:
                failures += 1
                found = [p for p in self.pulls_from(head) if _base_ref(p) == base]
                if found:
                    return found[0]
                if failures > _RETRIES:
                    raise GitHubError(
                        f"{exc}; gave up after {failures} attempts: re-run the job later"
                    ) from None
                waits.pause(_backoff(failures), str(exc))

    def update_pull(self, pr_number: int, **fields: str) -> dict[str, Any]:
        """Change pull request ``pr_number``'s ``title``, ``body`` or ``state``."""
        _check_number(pr_number)
        if "body" in fields:
            fields["body"] = _fit(fields["body"])
        path = f"/repos/{self.repository}/pulls/{pr_number}"
        return _object(_json(self._send("PATCH", path, self._waits(), fields=dict(fields))), path)

    def _waits(self) -> _Waits:
        return _Waits(self._max_wait_s, self._sleep)

    def _commit_pulls(self, sha: str, waits: _Waits) -> list[Any]:
        return self._get_all(f"/repos/{self.repository}/commits/{sha}/pulls", {}, waits)

    def _upsert_once(
        self,
        pr_number: int,
        text: str,
        marker: str,
        bot_login: str,
        waits: _Waits,
    ) -> CommentResult:
        path = f"/repos/{self.repository}/issues/{pr_number}/comments"
        sticky = _find_sticky(self._get_all(path, {}, waits), marker, bot_login)
        if sticky is None:
            return _result("created", _json(self._send("POST", path, waits, body=text)))
        if sticky.get("body") == text:
            return _result("unchanged", sticky)
        comment_path = f"/repos/{self.repository}/issues/comments/{sticky['id']}"
        return _result("updated", _json(self._send("PATCH", comment_path, waits, body=text)))

    def _get_all(self, path: str, params: dict[str, str], waits: _Waits) -> list[Any]:
        """Every item of a paginated list, following ``Link: rel="next"`` on the same host."""
        items: list[Any] = []
        url = path
        query: dict[str, str] | None = {**params, "per_page": str(_PER_PAGE)}
        while True:
            response = self._send("GET", url, waits, params=query)
            page = _json(response)
            if not isinstance(page, list):
                raise GitHubError(f"GitHub's answer to GET {path} is not a list: re-run the job")
            items.extend(page)
            next_url = response.links.get("next", {}).get("url")
            if not next_url:
                return items
            self._check_same_host(next_url)
            url, query = next_url, None

    def _check_same_host(self, url: str) -> None:
        target, base = httpx.URL(url), self._client.base_url
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            raise GitHubError(
                f"GitHub's next-page link points to {target.scheme}://{target.host}, not to "
                f"{base.scheme}://{base.host}; refusing to send the token there: check "
                "GITHUB_API_URL and any proxy between this job and GitHub"
            )

    def _send(
        self,
        method: str,
        url: str,
        waits: _Waits,
        *,
        params: dict[str, str] | None = None,
        body: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """One successful response, after waiting out rate limits and retrying failures
        (``body``: a comment's; ``fields``: the JSON object sent, for other writes)."""
        where = f"{method} {httpx.URL(url).path}"
        payload = fields if fields is not None else None if body is None else {"body": body}
        failures = 0
        while True:
            try:
                response = self._client.request(method, url, params=params, json=payload)
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.api_url} for {where} ({type(exc).__name__})"
            else:
                if response.is_success:
                    return response
                status = response.status_code
                if status in (403, 429):
                    delay = _rate_limit_wait(response)
                    if delay is not None:
                        waits.pause(delay, f"GitHub rate limit on {where}")
                        continue
                if status < 500:
                    raise self._refusal(where, response)
                problem = f"GitHub answered {status} to {where}"
            if method == "POST":
                raise _CreateInDoubt(problem)
            failures += 1
            if failures > _RETRIES:
                raise GitHubError(
                    f"{problem}; gave up after {failures} attempts: re-run the job later "
                    "(https://www.githubstatus.com)"
                )
            waits.pause(_backoff(failures), problem)

    def _refusal(self, where: str, response: httpx.Response) -> GitHubError:
        status = response.status_code
        message = _github_message(response).replace(self._token, "[token]")
        if status == 401:
            return GitHubError(
                f"GitHub rejected the token for {where} (401 {message}): set GITHUB_TOKEN to "
                f"a valid token for {self.api_url}"
            )
        if status == 403:
            return GitHubError(
                f"GitHub refused {where} (403 {message}): the token lacks permission; give the "
                "job `permissions: pull-requests: write` and `issues: write` (a pull_request run "
                "from a fork only gets a read-only token, so post from a workflow_run job)"
            )
        if status == 404:
            return GitHubError(
                f"GitHub answered 404 to {where}: check the repository ({self.repository}) "
                "and the pull request number, and that the token can read the repository"
            )
        if 300 <= status < 400:
            return GitHubError(
                f"GitHub answered {status} (moved) to {where}: the repository was probably "
                "renamed or transferred; pass its current OWNER/NAME"
            )
        return GitHubError(f"GitHub answered {status} to {where}: {message}")


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GitHubError(f"GitHub's answer on {path} is not an object: re-run the job")
    return value


def _fit(body: str) -> str:
    """A pull request's body, cut as a comment's is when longer than GitHub takes."""
    return body if len(body) <= COMMENT_LIMIT else cut_to_fit(body, COMMENT_LIMIT, note=CUT_NOTE)


def _base_ref(pull: dict[str, Any]) -> str | None:
    base = pull.get("base")
    ref = base.get("ref") if isinstance(base, dict) else None
    return ref if isinstance(ref, str) else None


def fit_comment_body(body: str, marker: str) -> str:
    """``body`` starting with ``marker``, cut to ``COMMENT_LIMIT`` characters if longer.

    The marker is prepended unless ``body`` already starts with it: only a marker at the
    start identifies the sticky comment, so one elsewhere in ``body`` is just text. A cut
    keeps whole lines, closes any code fence or ``<details>`` it would leave open, and ends
    with ``CUT_NOTE``.
    """
    if not marker or len(marker) > _MAX_MARKER_CHARS:
        raise GitHubError(f"the comment marker must be 1 to {_MAX_MARKER_CHARS:,} characters")
    if not body.startswith(marker):
        body = f"{marker}\n{body}"
    if len(body) <= COMMENT_LIMIT:
        return body
    rest = body.removeprefix(marker).lstrip("\n")
    return f"{marker}\n" + cut_to_fit(rest, COMMENT_LIMIT - len(marker) - 1, note=CUT_NOTE)


def context_from_environment(
    env: Mapping[str, str] = os.environ,
    *,
    pr: int | None = None,
    repository: str | None = None,
    head: str | None = None,
) -> PullRequestContext:
    """The pull request to comment on, from GitHub Actions' environment and event payload.

    ``GITHUB_REPOSITORY`` names the repository; the payload at ``GITHUB_EVENT_PATH`` gives
    the number and head SHA of a ``pull_request`` event, or of a ``workflow_run`` event
    (number 0 when its ``pull_requests`` list is empty, as it is for pull requests from
    forks: resolve it with ``GitHubClient.pull_for_sha``). ``pr`` and ``repository``
    override what the environment says.
    """
    repo = repository or env.get("GITHUB_REPOSITORY", "")
    if not repo:
        raise GitHubError("no repository: pass --repository OWNER/NAME or set GITHUB_REPOSITORY")
    _check_repository(repo)
    number, head_sha = _event_pull(env.get("GITHUB_EVENT_PATH", ""))
    if pr is not None:
        if pr != 0:  # 0: resolve the pull request from the head SHA
            _check_number(pr)
        number = pr
    if number is None:
        raise GitHubError(
            "no pull request: pass --pr N, or run in a pull_request or workflow_run workflow "
            "(GITHUB_EVENT_PATH names its event payload)"
        )
    head_sha = head or head_sha
    if number == 0 and head_sha is None:
        raise GitHubError(
            "no pull request number and no head SHA to find it from: pass --pr N or --head-sha"
        )
    return PullRequestContext(repo, number, head_sha)


def api_url_from_environment(env: Mapping[str, str] = os.environ) -> str:
    """``GITHUB_API_URL`` (set by GitHub Enterprise Server runners) or the public API."""
    return (env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")


def token_from_environment(env: Mapping[str, str] = os.environ) -> str:
    """``GITHUB_TOKEN``, read when it is needed and never stored."""
    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise GitHubError(
            "GITHUB_TOKEN is not set: give the step "
            "`env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}` and the job "
            "`permissions: pull-requests: write`"
        )
    return token


def _event_pull(path: str) -> tuple[int | None, str | None]:
    """Pull request number and head SHA from the event payload at ``path``, if it has them."""
    if not path:
        return None, None
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise GitHubError(
            f"cannot read the event payload GITHUB_EVENT_PATH={path} ({exc.strerror}): "
            "unset it and pass --pr N"
        ) from None
    except ValueError:
        raise GitHubError(
            f"the event payload GITHUB_EVENT_PATH={path} is not JSON: unset it and pass --pr N"
        ) from None
    if not isinstance(payload, dict):
        return None, None
    pull = payload.get("pull_request")
    if isinstance(pull, dict):
        head = pull.get("head")
        sha = head.get("sha") if isinstance(head, dict) else None
        return _event_number(pull.get("number"), "pull_request.number"), _event_sha(sha)
    run = payload.get("workflow_run")
    if isinstance(run, dict):
        pulls = run.get("pull_requests") or []
        first = pulls[0] if isinstance(pulls, list) and pulls else None
        number = (
            _event_number(first.get("number"), "workflow_run.pull_requests[0].number")
            if isinstance(first, dict)
            else 0
        )
        return number, _event_sha(run.get("head_sha"))
    return None, None


def _event_number(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GitHubError(f"the event payload's {field} is not a pull request number: pass --pr N")
    return value


def _event_sha(value: object) -> str | None:
    return value if isinstance(value, str) and _SHA.fullmatch(value) else None


def _check_repository(repository: str) -> None:
    if not _REPOSITORY.fullmatch(repository):
        raise GitHubError(
            f"repository {repository!r} is not OWNER/NAME: pass --repository OWNER/NAME "
            "or set GITHUB_REPOSITORY"
        )


def _check_number(number: int) -> None:
    if isinstance(number, bool) or number < 1:
        raise GitHubError(f"{number!r} is not a pull request number: pass --pr N with N >= 1")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise GitHubError(
            f"GitHub's answer to {response.request.method} {response.url.path} is not JSON: "
            f"check GITHUB_API_URL ({response.url.host})"
        ) from None


def _find_sticky(comments: list[Any], marker: str, bot_login: str) -> dict[str, Any] | None:
    # The marker must open the body, as it opens every comment we post: the bot may also
    # have posted comments that merely quote it (a PR body, say), and those are not ours.
    login = bot_login.casefold()
    mine = [
        c
        for c in comments
        if isinstance(c, dict)
        and isinstance(c.get("id"), int)
        and isinstance(c.get("body"), str)
        and c["body"].startswith(marker)
        and _author(c).casefold() == login
    ]
    return min(mine, key=lambda c: int(c["id"]), default=None)


def _author(comment: dict[str, Any]) -> str:
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else ""


def _result(action: CommentAction, comment: Any) -> CommentResult:
    if not isinstance(comment, dict) or not isinstance(comment.get("id"), int):
        raise GitHubError("GitHub's answer names no comment id: check the pull request by hand")
    url = comment.get("html_url")
    return CommentResult(action, comment["id"], url if isinstance(url, str) else None)


def _open_pulls_with_head(pulls: list[Any], sha: str) -> list[int]:
    numbers = set()
    for pull in pulls:
        if not isinstance(pull, dict) or pull.get("state") != "open":
            continue
        head = pull.get("head")
        head_sha = head.get("sha") if isinstance(head, dict) else None
        number = pull.get("number")
        if (
            isinstance(head_sha, str)
            and head_sha.lower() == sha.lower()
            and isinstance(number, int)
        ):
            numbers.add(number)
    return sorted(numbers)


def _rate_limit_wait(response: httpx.Response) -> float | None:
    """Seconds to wait before retrying a 403/429, or None when it is not a rate limit."""
    after = retry_after(response.headers)
    if after is not None:
        return max(after, _MIN_RATE_LIMIT_WAIT_S)
    if response.headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(response.headers.get("x-ratelimit-reset", ""))
        except ValueError:
            return _UNSPECIFIED_RATE_LIMIT_WAIT_S
        return max(reset - time.time(), 0.0) + _RESET_MARGIN_S
    if response.status_code == 429 or "rate limit" in _github_message(response).lower():
        return _UNSPECIFIED_RATE_LIMIT_WAIT_S
    return None


def _github_message(response: httpx.Response) -> str:
    """GitHub's one-line explanation of an error answer, shortened."""
    try:
        data = response.json()
    except ValueError:
        data = None
    message = data.get("message") if isinstance(data, dict) else None
    text = message if isinstance(message, str) and message else response.reason_phrase
    errors = data.get("errors") if isinstance(data, dict) else None
    if isinstance(errors, list):
        details = [e["message"] for e in errors if isinstance(e, dict) and "message" in e]
        text = "; ".join([text, *map(str, details)])
    return " ".join(text.split())[:300]


def _backoff(failures: int) -> float:
    return float(2 ** (failures - 1))
