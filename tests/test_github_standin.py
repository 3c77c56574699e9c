"""The GitHub stand-in answers as GitHub's own OpenAPI description says GitHub answers, and
notices when it does not: every body of every operation it serves, the shapes tests rely on
(dismissed reviews, deleted accounts, closed unmerged pull requests, pages past 100)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.github_api import GitHubAPI
from support.github_openapi import OPERATIONS, SUBSET, description, extract

TOKEN = "ghs_standin0123456789"
HEAD = "a" * 40
MERGE = "b" * 40


@pytest.fixture
def gh() -> Iterator[GitHubAPI]:
    with GitHubAPI(tokens={TOKEN: "github-actions[bot]"}) as api:
        yield api


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(headers={"authorization": f"Bearer {TOKEN}"}) as client:
        yield client


def get(http: httpx.Client, gh: GitHubAPI, path: str, **params: str) -> httpx.Response:
    return http.get(f"{gh.url}/repos/{gh.repository}{path}", params=params)


def send(http: httpx.Client, gh: GitHubAPI, method: str, path: str, body: Any) -> httpx.Response:
    return http.request(method, f"{gh.url}/repos/{gh.repository}{path}", json=body)


def seed(gh: GitHubAPI) -> None:
    """Every kind of object GitHub can answer with that the tests use."""
    gh.add_pull(1, HEAD, merged_as=MERGE, author="frank")
    gh.add_pull(2, HEAD, state="closed")
    gh.add_pull(3, HEAD, fork=True, author=None)
    gh.add_pull(4, "c" * 40)
    gh.add_review(1, "erin", "APPROVED", commit_id=HEAD)
    gh.add_review(1, "erin", "DISMISSED", commit_id=HEAD)
    gh.add_review(1, None, "APPROVED", commit_id=HEAD)
    gh.add_review(1, "carol", "COMMENTED", commit_id=None)
    gh.add_review(1, "dave", "CHANGES_REQUESTED", commit_id=HEAD)
    gh.add_review(1, "github-actions[bot]", "PENDING", commit_id=HEAD)
    gh.add_comment(1, "hello", login="alice")


def test_every_answer_of_every_operation_validates_against_githubs_description(
    gh: GitHubAPI, http: httpx.Client
) -> None:
    seed(gh)
    answers = [
        get(http, gh, "/issues/1/comments"),
        send(http, gh, "POST", "/issues/1/comments", {"body": "x"}),
        send(http, gh, "POST", "/issues/1/comments", {"body": "x" * 70_000}),
        send(http, gh, "PATCH", f"/issues/comments/{gh.comments(1)[0].id}", {"body": "y"}),
        send(http, gh, "PATCH", "/issues/comments/1", {"body": "y"}),
        get(http, gh, f"/commits/{HEAD}/pulls"),
        get(http, gh, f"/commits/{MERGE}/pulls"),
        get(http, gh, "/pulls", state="all"),
        get(http, gh, "/pulls", state="merged"),
        *(get(http, gh, f"/pulls/{n}") for n in (1, 2, 3, 4, 99)),
        get(http, gh, "/pulls/1/reviews"),
        get(http, gh, "/pulls/99/reviews"),
        http.get(f"{gh.url}/repos/{gh.repository}/pulls", headers={"authorization": ""}),
    ]
    gh.rate_limit_next(status=429, retry_after=1)
    gh.fail_next(502)
    gh.fail_next(500)
    answers += [get(http, gh, "/pulls/1"), get(http, gh, "/pulls/1"), get(http, gh, "/pulls/1")]

    statuses = sorted({a.status_code for a in answers})
    assert statuses == [200, 201, 401, 404, 422, 429, 500, 502]
    assert gh.violations == []
    served = {r.path.rsplit("/", 1)[-1] for r in gh.requests}
    assert {"comments", "pulls", "reviews", "1"} <= served


def test_a_body_missing_a_required_field_is_caught() -> None:
    review = {"id": 1, "node_id": "PRR_1", "user": None, "body": "", "state": "APPROVED"}

    problems = description().problems("pulls/list-reviews", 200, [review])

    assert "pulls/list-reviews 200: 0: 'html_url' is a required property" in problems
    assert "pulls/list-reviews 200: 0: '_links' is a required property" in problems


def test_null_is_refused_where_github_never_sends_it_and_taken_where_it_may(
    http: httpx.Client,
) -> None:
    with GitHubAPI(tokens={TOKEN: "bot"}) as gh:
        gh.add_pull(1, HEAD)
        gh.add_review(1, None, "APPROVED", commit_id=None)
        [review] = get(http, gh, "/pulls/1/reviews").json()
        pull = get(http, gh, "/pulls/1").json()
    assert (review["user"], review["commit_id"]) == (None, None)

    assert description().problems("pulls/list-reviews", 200, [review]) == []
    assert description().problems("pulls/get", 200, {**pull, "merged": None}) == [
        "pulls/get 200: merged: None is not of type 'boolean'"
    ]


def test_an_answer_github_would_never_give_is_recorded_and_fails_the_test(
    http: httpx.Client,
) -> None:
    gh = GitHubAPI(tokens={TOKEN: "bot"})
    with pytest.raises(AssertionError, match="'merged' is a required property"), gh:
        gh.add_pull(5, HEAD)
        gh.omit_next("merged")
        assert "merged" not in get(http, gh, "/pulls/5").json()
        assert gh.violations == [
            "GET /repos/acme/registry/pulls/5: pulls/get 200: (body): "
            "'merged' is a required property"
        ]


def test_a_status_github_does_not_describe_for_a_success_is_a_violation() -> None:
    assert description().problems("pulls/get", 201, {}) == [
        "pulls/get answers no 201 in GitHub's description"
    ]


def test_only_a_merged_pull_request_says_it_merged(gh: GitHubAPI, http: httpx.Client) -> None:
    gh.add_pull(1, HEAD, merged_as=MERGE)
    gh.add_pull(2, HEAD, state="closed")
    gh.add_pull(3, HEAD)

    pulls = {n: get(http, gh, f"/pulls/{n}").json() for n in (1, 2, 3)}

    shape = {
        n: (p["state"], p["merged"], p["merged_at"] is not None, p["merge_commit_sha"] == MERGE)
        for n, p in pulls.items()
    }
    assert shape == {
        1: ("closed", True, True, True),
        2: ("closed", False, False, False),
        3: ("open", False, False, False),
    }
    # An unmerged pull request still names a (test) merge commit, as on GitHub.
    assert all(isinstance(p["merge_commit_sha"], str) for p in pulls.values())


def test_a_commit_lists_its_pull_requests_of_any_state_and_the_one_it_merged(
    gh: GitHubAPI, http: httpx.Client
) -> None:
    gh.add_pull(1, "d" * 40, commits=(HEAD,), merged_as=MERGE)
    gh.add_pull(2, HEAD, state="closed")
    gh.add_pull(3, HEAD)
    gh.add_pull(4, HEAD, fork=True)

    assert [p["number"] for p in get(http, gh, f"/commits/{HEAD}/pulls").json()] == [3, 2, 1]
    assert [p["number"] for p in get(http, gh, f"/commits/{MERGE}/pulls").json()] == [1]


def test_lists_page_past_a_hundred(gh: GitHubAPI, http: httpx.Client) -> None:
    gh.add_pull(1, HEAD)
    for _ in range(130):
        gh.add_review(1, "carol", "COMMENTED", commit_id=HEAD)

    first = get(http, gh, "/pulls/1/reviews", per_page="100")
    second = http.get(first.links["next"]["url"])

    assert (len(first.json()), len(second.json())) == (100, 30)
    assert "next" not in second.links


def test_github_refuses_a_review_state_it_never_gives(gh: GitHubAPI) -> None:
    with pytest.raises(ValueError, match="review states"):
        gh.add_review(1, "erin", "approved", commit_id=HEAD)


# The vendored description


def test_the_vendored_subset_covers_exactly_the_operations_served() -> None:
    document = description().document

    assert set(document["operations"]) == set(OPERATIONS)
    assert document["source"].startswith("@octokit/openapi ")
    assert description().statuses("pulls/get") == [200, 404, 406, 500, 503]  # 304: no body


def test_the_vendored_subset_refers_to_nothing_outside_itself() -> None:
    text = SUBSET.read_text(encoding="utf-8")
    definitions = json.loads(text)["definitions"]

    refs = set(_refs(json.loads(text)))
    assert refs, "the subset has no references to check"
    assert {r.removeprefix("#/definitions/") for r in refs} <= set(definitions)
    assert '"nullable"' not in text  # OpenAPI 3.0's keyword, made JSON Schema


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_extraction_turns_openapi_nullable_into_json_schema() -> None:
    user = {"type": "object", "required": ["login"], "properties": {"login": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": ["open"], "nullable": True},
            "user": {"allOf": [{"$ref": "#/components/schemas/user"}], "nullable": True},
            "description": {"type": "string", "nullable": True},
        },
        "example": {"state": "open"},
    }
    responses = {
        "200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
        "304": {"description": "Not modified"},
    }
    paths: dict[str, dict[str, Any]] = {}
    for operation, (method, path) in OPERATIONS.items():
        paths.setdefault(path, {})[method.lower()] = {
            "operationId": operation,
            "responses": responses,
        }
    spec = {
        "paths": paths,
        "components": {"schemas": {"user": user, "basic-error": {"type": "object"}}},
    }

    subset = extract(spec, "test")

    assert list(subset["operations"]["pulls/get"]["responses"]) == ["200"]
    assert subset["operations"]["pulls/get"]["responses"]["200"] == {
        "type": "object",
        "properties": {
            "state": {"type": ["string", "null"], "enum": ["open", None]},
            "user": {"anyOf": [{"type": "null"}, {"allOf": [{"$ref": "#/definitions/user"}]}]},
            "description": {"type": ["string", "null"]},
        },
    }
    assert subset["definitions"] == {"basic-error": {"type": "object"}, "user": user}
