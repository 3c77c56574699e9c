"""The GitHub client against a GitHub-API stand-in over loopback HTTP: the sticky comment,
rate limits, failures, pull request lookups, and the Actions environment."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalreg import __version__
from evalreg.gitops.github import (
    COMMENT_LIMIT,
    CUT_NOTE,
    CommentResult,
    GitHubClient,
    GitHubError,
    PullRequestContext,
    api_url_from_environment,
    context_from_environment,
    fit_comment_body,
    token_from_environment,
)

from support.github_api import GitHubAPI

BOT = "github-actions[bot]"
TOKEN = "ghs_bot0123456789abcdefSECRET"
MARKER = "<!-- evalreg:diff -->"
PR = 7
SHA = "a" * 40
OTHER_SHA = "b" * 40


@pytest.fixture
def gh() -> Iterator[GitHubAPI]:
    with GitHubAPI(tokens={TOKEN: BOT, "ghp_alice": "alice"}) as api:
        yield api


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(gh: GitHubAPI, sleeps: list[float]) -> Iterator[GitHubClient]:
    with GitHubClient(TOKEN, gh.repository, api_url=gh.url, sleep=sleeps.append) as c:
        yield c


def upsert(client: GitHubClient, body: str) -> CommentResult:
    return client.upsert_comment(PR, body, marker=MARKER, bot_login=BOT)


# The sticky comment


def test_creates_the_comment_when_there_is_none(gh: GitHubAPI, client: GitHubClient) -> None:
    result = client.upsert_comment(PR, f"{MARKER}\n# Diff", marker=MARKER, bot_login=BOT)

    [comment] = gh.comments(PR)
    assert (result.action, result.comment_id) == ("created", comment.id)
    assert result.url == f"https://github.com/{gh.repository}/pull/{PR}#issuecomment-{comment.id}"
    assert (comment.body, comment.login) == (f"{MARKER}\n# Diff", BOT)


def test_requests_carry_githubs_headers(gh: GitHubAPI, client: GitHubClient) -> None:
    upsert(client, f"{MARKER}\nbody")

    for request in gh.requests:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["accept"] == "application/vnd.github+json"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        assert request.headers["user-agent"] == f"evalreg/{__version__}"
    assert [(r.method, r.query.get("per_page")) for r in gh.requests] == [
        ("GET", "100"),
        ("POST", None),
    ]


def test_a_body_without_the_marker_gets_it_prepended(gh: GitHubAPI, client: GitHubClient) -> None:
    upsert(client, "# Diff")

    assert gh.comments(PR)[0].body == f"{MARKER}\n# Diff"


def test_the_second_call_updates_the_same_comment(gh: GitHubAPI, client: GitHubClient) -> None:
    first = client.upsert_comment(PR, "one", marker=MARKER, bot_login=BOT)
    second = client.upsert_comment(PR, "two", marker=MARKER, bot_login=BOT)

    [comment] = gh.comments(PR)
    assert (second.action, second.comment_id) == ("updated", first.comment_id)
    assert comment.body == f"{MARKER}\ntwo"
    assert gh.writes()[-1].method == "PATCH"
    assert gh.writes()[-1].path == f"/repos/{gh.repository}/issues/comments/{comment.id}"


def test_an_identical_body_is_left_unchanged(gh: GitHubAPI, client: GitHubClient) -> None:
    first = client.upsert_comment(PR, "same", marker=MARKER, bot_login=BOT)
    second = client.upsert_comment(PR, "same", marker=MARKER, bot_login=BOT)

    assert (second.action, second.comment_id) == ("unchanged", first.comment_id)
    assert [r.method for r in gh.writes()] == ["POST"]


def test_finds_its_comment_on_a_later_page_past_a_fake_marker(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    gh.add_comment(PR, f"{MARKER}\nnot the bot", login="mallory")
    for i in range(120):
        gh.add_comment(PR, f"review {i}", login="alice")
    mine = gh.add_comment(PR, f"{MARKER}\nold diff", login=BOT)

    result = client.upsert_comment(PR, "new diff", marker=MARKER, bot_login=BOT)

    assert (result.action, result.comment_id) == ("updated", mine.id)
    bodies = {c.login: c.body for c in gh.comments(PR) if MARKER in c.body}
    assert bodies == {"mallory": f"{MARKER}\nnot the bot", BOT: f"{MARKER}\nnew diff"}
    pages = [r.query.get("page", "1") for r in gh.requests if r.method == "GET"]
    assert pages == ["1", "2"]


def test_a_marker_only_in_other_peoples_comments_means_create(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    gh.add_comment(PR, f"{MARKER}\nfake", login="mallory")

    result = upsert(client, "diff")

    fake, mine = gh.comments(PR)
    assert (result.action, result.comment_id) == ("created", mine.id)
    assert (fake.login, fake.body) == ("mallory", f"{MARKER}\nfake")


def test_a_bot_comment_quoting_the_marker_mid_body_is_left_alone(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    quoting = gh.add_comment(PR, f"The PR description says:\n> {MARKER}\n> hi", login=BOT)

    result = upsert(client, "diff")

    quoted, mine = gh.comments(PR)
    assert (result.action, result.comment_id) == ("created", mine.id)
    assert mine.body == f"{MARKER}\ndiff"
    assert (quoted.id, quoted.body) == (quoting.id, f"The PR description says:\n> {MARKER}\n> hi")
    assert [r.method for r in gh.writes()] == ["POST"]


def test_the_oldest_of_several_sticky_comments_is_updated(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    oldest = gh.add_comment(PR, f"{MARKER}\nfirst", login=BOT)
    newer = gh.add_comment(PR, f"{MARKER}\nsecond", login=BOT)

    result = client.upsert_comment(PR, "third", marker=MARKER, bot_login=BOT)

    assert result.comment_id == oldest.id
    assert [c.body for c in gh.comments(PR) if c.id == newer.id] == [f"{MARKER}\nsecond"]


def test_the_bot_login_matches_case_insensitively(gh: GitHubAPI, client: GitHubClient) -> None:
    mine = gh.add_comment(PR, f"{MARKER}\nold", login=BOT)

    result = client.upsert_comment(PR, "new", marker=MARKER, bot_login="GitHub-Actions[bot]")

    assert (result.action, result.comment_id) == ("updated", mine.id)


# Long bodies


def test_a_long_body_is_cut_at_a_line_boundary_and_accepted(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    body = MARKER + "\n" + "".join(f"| row {i} | {'x' * 60} |\n" for i in range(2_000))
    assert len(body) > COMMENT_LIMIT

    result = client.upsert_comment(PR, body, marker=MARKER, bot_login=BOT)

    stored = gh.comments(PR)[0].body
    kept = stored.removesuffix(f"\n\n{CUT_NOTE}\n")
    assert result.action == "created"
    assert len(stored) <= COMMENT_LIMIT
    assert stored.startswith(MARKER)
    assert kept != stored
    assert body.startswith(kept)
    assert body[len(kept)] == "\n"


def test_a_marker_later_in_the_body_does_not_stand_for_the_leading_one() -> None:
    body = f"# Diff\nthe PR body quotes {MARKER}"

    assert fit_comment_body(body, MARKER) == f"{MARKER}\n{body}"


def test_a_cut_keeps_the_leading_marker_once() -> None:
    body = MARKER + "\n" + "line\n" * 20_000

    fitted = fit_comment_body(body, MARKER)

    assert fitted.startswith(f"{MARKER}\nline\n")
    assert fitted.count(MARKER) == 1
    assert len(fitted) <= COMMENT_LIMIT
    assert fitted.endswith(f"{CUT_NOTE}\n")


def test_a_single_line_longer_than_the_limit_is_dropped_not_split() -> None:
    fitted = fit_comment_body(MARKER + "\nshort line\n" + "y" * 100_000, MARKER)

    assert len(fitted) <= COMMENT_LIMIT
    assert fitted.startswith(MARKER + "\nshort line\n")
    assert "yyy" not in fitted
    assert fitted.endswith(f"{CUT_NOTE}\n")


def test_a_body_at_the_limit_is_kept_whole() -> None:
    body = MARKER + "z" * (COMMENT_LIMIT - len(MARKER))

    assert fit_comment_body(body, MARKER) == body


# Rate limits and failures


def test_a_primary_rate_limit_is_waited_out_until_its_reset(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.rate_limit_next(status=403, reset_in=30)

    result = upsert(client, "diff")

    assert result.action == "created"
    [wait] = sleeps
    assert 30 <= wait <= 33  # the reset second, plus a second's margin for clock skew
    assert [r.method for r in gh.requests] == ["GET", "GET", "POST"]


def test_a_429_with_retry_after_is_waited_out(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.rate_limit_next(status=429, retry_after=7, method="POST")

    assert upsert(client, "diff").action == "created"
    assert sleeps == [7.0]
    assert len(gh.comments(PR)) == 1


def test_a_secondary_rate_limit_403_with_retry_after_is_waited_out(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.rate_limit_next(2, status=403, retry_after=20)

    assert upsert(client, "diff").action == "created"
    assert sleeps == [20.0, 20.0]


def test_a_403_without_rate_limit_headers_is_a_permission_error(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.fail_next(403, method="POST")

    with pytest.raises(GitHubError, match="pull-requests: write") as raised:
        upsert(client, "diff")

    assert "Resource not accessible by integration" in str(raised.value)
    assert sleeps == []
    assert gh.comments(PR) == []


def test_a_wait_beyond_max_wait_is_an_error(gh: GitHubAPI, sleeps: list[float]) -> None:
    gh.rate_limit_next(status=403, reset_in=3_600)

    with (
        GitHubClient(TOKEN, gh.repository, api_url=gh.url, max_wait_s=60, sleep=sleeps.append) as c,
        pytest.raises(GitHubError, match=r"exceed the 60s allowed; re-run the job after"),
    ):
        upsert(c, "diff")
    assert sleeps == []


def test_server_errors_on_reads_are_retried_with_backoff(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.fail_next(502, times=2, method="GET")

    assert upsert(client, "diff").action == "created"
    assert sleeps == [1.0, 2.0]


def test_persistent_server_errors_give_up(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.fail_next(503, times=10, method="GET")

    with pytest.raises(GitHubError, match=r"503 to GET .*gave up after 4 attempts"):
        upsert(client, "diff")
    assert sleeps == [1.0, 2.0, 4.0]


def test_a_create_that_failed_after_writing_is_not_doubled(
    gh: GitHubAPI, client: GitHubClient, sleeps: list[float]
) -> None:
    gh.fail_next(502, method="POST", applied=True)

    result = upsert(client, "diff")

    [comment] = gh.comments(PR)
    assert (result.action, result.comment_id) == ("created", comment.id)
    assert [r.method for r in gh.requests] == ["GET", "POST", "GET"]
    assert sleeps == [1.0]


def test_an_unreachable_api_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    with (
        GitHubClient(TOKEN, "acme/registry", api_url=url, sleep=sleeps.append) as c,
        pytest.raises(GitHubError, match=f"cannot reach {url}"),
    ):
        c.pull_head_sha(PR)
    assert sleeps == [1.0, 2.0, 4.0]


def test_a_next_page_link_to_another_host_is_refused(gh: GitHubAPI, client: GitHubClient) -> None:
    for i in range(101):
        gh.add_comment(PR, f"review {i}", login="alice")
    gh.link_base = gh.url.replace("127.0.0.1", "localhost")  # same server, another host

    with pytest.raises(GitHubError, match="refusing to send the token there"):
        upsert(client, "diff")
    assert len(gh.requests) == 1


def test_a_rejected_token_says_which_variable_to_fix(gh: GitHubAPI) -> None:
    with (
        GitHubClient("ghs_wrong", gh.repository, api_url=gh.url) as c,
        pytest.raises(GitHubError, match=r"401 Bad credentials.*set GITHUB_TOKEN"),
    ):
        upsert(c, "diff")


# Pull requests


def test_pull_for_sha_finds_the_open_pull_with_that_head(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    gh.add_pull(3, SHA, state="closed")
    gh.add_pull(5, SHA)
    gh.add_pull(6, OTHER_SHA)

    assert client.pull_for_sha(SHA) == 5
    assert client.pull_for_sha("c" * 40) is None


def test_pull_for_sha_finds_a_pull_from_a_fork(gh: GitHubAPI, client: GitHubClient) -> None:
    gh.add_pull(9, SHA, fork=True)

    assert client.pull_for_sha(SHA) == 9
    assert [r.path for r in gh.requests] == [
        f"/repos/{gh.repository}/commits/{SHA}/pulls",
        f"/repos/{gh.repository}/pulls",
    ]


def test_pull_for_sha_refuses_to_guess_between_pulls(gh: GitHubAPI, client: GitHubClient) -> None:
    gh.add_pull(5, SHA)
    gh.add_pull(8, SHA)

    with pytest.raises(GitHubError, match=r"several open pull requests \(#5, #8\): pass --pr"):
        client.pull_for_sha(SHA)


def test_pull_head_sha_reads_the_current_head(gh: GitHubAPI, client: GitHubClient) -> None:
    gh.add_pull(5, SHA)

    assert client.pull_head_sha(5) == SHA
    with pytest.raises(GitHubError, match=r"404 to GET .*/pulls/6: check the repository"):
        client.pull_head_sha(6)


def test_pull_for_sha_ignores_pulls_closed_with_or_without_merging(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    gh.add_pull(3, SHA, state="closed")
    gh.add_pull(4, SHA, merged_as=OTHER_SHA)

    assert client.pull_for_sha(SHA) is None


def test_a_commits_pull_requests_are_read_past_the_first_hundred(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    for number in range(1, 131):
        gh.add_pull(number, SHA, state="closed" if number % 2 else "open")

    pulls = client.commit_pulls(SHA)

    assert sorted(p["number"] for p in pulls) == list(range(1, 131))
    assert [r.query.get("page") for r in gh.requests] == [None, "2"]


def test_a_pull_requests_reviews_are_read_past_the_first_hundred(
    gh: GitHubAPI, client: GitHubClient
) -> None:
    gh.add_pull(5, SHA)
    for _ in range(100):
        gh.add_review(5, "carol", "COMMENTED", commit_id=SHA)
    gh.add_review(5, None, "DISMISSED", commit_id=None)

    reviews = client.pull_reviews(5)

    assert len(reviews) == 101
    assert (reviews[-1]["user"], reviews[-1]["state"], reviews[-1]["commit_id"]) == (
        None,
        "DISMISSED",
        None,
    )


# The Actions environment


def event_env(tmp_path: Path, payload: object, **extra: str) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return {"GITHUB_REPOSITORY": "acme/registry", "GITHUB_EVENT_PATH": str(path), **extra}


def test_context_from_a_pull_request_event(tmp_path: Path) -> None:
    env = event_env(tmp_path, {"pull_request": {"number": 12, "head": {"sha": SHA}}})

    assert context_from_environment(env) == PullRequestContext("acme/registry", 12, SHA)


def test_context_from_a_workflow_run_event(tmp_path: Path) -> None:
    run = {"head_sha": SHA, "pull_requests": [{"number": 4, "head": {"sha": SHA}}]}
    env = event_env(tmp_path, {"workflow_run": run})

    assert context_from_environment(env) == PullRequestContext("acme/registry", 4, SHA)


def test_a_workflow_run_without_pulls_leaves_the_number_to_resolve(tmp_path: Path) -> None:
    env = event_env(tmp_path, {"workflow_run": {"head_sha": SHA, "pull_requests": []}})

    assert context_from_environment(env) == PullRequestContext("acme/registry", 0, SHA)


def test_flags_override_the_environment(tmp_path: Path) -> None:
    env = event_env(tmp_path, {"workflow_run": {"head_sha": SHA, "pull_requests": []}})

    context = context_from_environment(env, pr=21, repository="other/repo")

    assert context == PullRequestContext("other/repo", 21, SHA)
    assert context_from_environment({}, pr=3, repository="a/b") == PullRequestContext(
        "a/b", 3, None
    )


@pytest.mark.parametrize(
    ("env", "pr", "names"),
    [
        ({}, 3, ["--repository", "GITHUB_REPOSITORY"]),
        ({"GITHUB_REPOSITORY": "acme"}, 3, ["OWNER/NAME"]),
        ({"GITHUB_REPOSITORY": "acme/registry"}, None, ["--pr", "GITHUB_EVENT_PATH"]),
        ({"GITHUB_REPOSITORY": "acme/registry"}, 0, ["--pr"]),
    ],
)
def test_missing_context_names_what_to_set(
    env: dict[str, str], pr: int | None, names: list[str]
) -> None:
    with pytest.raises(GitHubError) as raised:
        context_from_environment(env, pr=pr)

    for name in names:
        assert name in str(raised.value)


def test_an_unreadable_event_payload_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    path.write_text("{not json", encoding="utf-8")
    env = {"GITHUB_REPOSITORY": "acme/registry", "GITHUB_EVENT_PATH": str(path)}

    with pytest.raises(GitHubError, match=r"GITHUB_EVENT_PATH=.* is not JSON"):
        context_from_environment(env)


def test_token_and_api_url_come_from_the_environment() -> None:
    assert token_from_environment({"GITHUB_TOKEN": " ghs_x\n"}) == "ghs_x"
    with pytest.raises(GitHubError, match="GITHUB_TOKEN is not set"):
        token_from_environment({})
    assert api_url_from_environment({}) == "https://api.github.com"
    enterprise = {"GITHUB_API_URL": "https://ghe.example.com/api/v3/"}
    assert api_url_from_environment(enterprise) == "https://ghe.example.com/api/v3"


# The token stays secret


def _echo_in_403(gh: GitHubAPI) -> None:
    gh.fail_next(403, message=f"token {TOKEN} may not write")


def _echo_in_422(gh: GitHubAPI) -> None:
    gh.fail_next(422, message=f"bad request from {TOKEN}")


def _server_errors(gh: GitHubAPI) -> None:
    gh.fail_next(500, times=4)


def _long_rate_limit(gh: GitHubAPI) -> None:
    gh.rate_limit_next(reset_in=600)


def _missing_pull(gh: GitHubAPI) -> None:
    gh.fail_next(404)


def _foreign_next_link(gh: GitHubAPI) -> None:
    for i in range(101):
        gh.add_comment(PR, f"review {i}", login="alice")
    gh.link_base = "http://elsewhere.invalid"


def _unknown_token(gh: GitHubAPI) -> None:
    gh.tokens.clear()


FAILURES: dict[str, Callable[[GitHubAPI], None]] = {
    "403 echoing the token": _echo_in_403,
    "422 echoing the token": _echo_in_422,
    "server errors": _server_errors,
    "rate limit past max wait": _long_rate_limit,
    "404": _missing_pull,
    "next link to another host": _foreign_next_link,
    "401": _unknown_token,
}


@pytest.mark.parametrize("arrange", list(FAILURES.values()), ids=list(FAILURES))
def test_errors_never_contain_the_token(
    gh: GitHubAPI, sleeps: list[float], arrange: Callable[[GitHubAPI], None]
) -> None:
    arrange(gh)

    with (
        GitHubClient(TOKEN, gh.repository, api_url=gh.url, sleep=sleeps.append, max_wait_s=5) as c,
        pytest.raises(GitHubError) as raised,
    ):
        upsert(c, "diff")
    assert TOKEN not in str(raised.value)
    assert TOKEN not in repr(raised.value)


def test_a_token_echoed_by_github_is_redacted(gh: GitHubAPI, client: GitHubClient) -> None:
    _echo_in_403(gh)

    with pytest.raises(GitHubError, match=r"403 token \[token\] may not write"):
        upsert(client, "diff")


@pytest.mark.parametrize("bad", [f"{TOKEN}\n", f"{TOKEN} x", f"{TOKEN}é", ""])
def test_a_malformed_token_is_refused_without_quoting_it(bad: str) -> None:
    with pytest.raises(GitHubError, match="set GITHUB_TOKEN to the token itself") as raised:
        GitHubClient(bad, "acme/registry")
    assert TOKEN not in str(raised.value)


def test_the_client_repr_omits_the_token(client: GitHubClient) -> None:
    assert TOKEN not in repr(client)
    assert "acme/registry" in repr(client)
