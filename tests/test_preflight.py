"""Answers that will not change are not asked again. A pin's first request is its preflight:
refused for the whole pin (bad key, unknown model, route or method, a feature the server
lacks, no quota), the pin's other requests are not sent and the run says so once. A 400 or
422 is its item's error, unless a row of them refuses the pin before it has answered."""

from __future__ import annotations

import json

import pytest
import test_judges_human
from test_judge_spend import _candidate_requests, _judge_requests
from test_run_pipeline import with_items

from evalreg.providers.base import ProviderError
from evalreg.providers.http import REFUSED_AFTER, refuses_pin

from conftest import LIVE_KEY, Repo, items_jsonl

PIN = "registry/models/mini.yaml"
MODEL = "gpt-4o-mini-2024-07-18"
"""mini's model: a fault matching it answers every request of mini, and no other pin's."""
HEALTHY = "gpt-4.1-nano-2025-04-14"
judged = test_judges_human.judged  # the fixture: a judge pin and a judged criterion


def no_retries(repo: Repo) -> None:
    repo.write(PIN, repo.read(PIN) + "limits:\n  max_retries: 0\n")
    repo.commit("no retries")


def of_mini(request) -> bool:
    return request.body["model"] == MODEL


def of_nano(request) -> bool:
    return request.body["model"] == HEALTHY


def with_a_healthy_pin(repo: Repo) -> None:
    """A second candidate, ``nano``, on its own pin at the same server."""
    repo.write("registry/models/nano.yaml", repo.read(PIN).replace(MODEL, HEALTHY))
    selection = "registry/selections/labels.yaml"
    repo.write(
        selection,
        repo.read(selection).replace(
            "  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n  - id: nano\n    pin: nano\n",
        ),
    )
    repo.commit("a second hosted candidate")


def errors(repo: Repo, candidate: str) -> list[str]:
    """The items whose sample is an error in ``candidate``'s results."""
    path = f"reports/results/labels/{candidate}.items.jsonl"
    records = [json.loads(line) for line in repo.read(path).splitlines()]
    return [r["item"] for r in records if r["error"] is not None]


def stop_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "not sent" in line]


def test_a_bad_key_is_refused_once_and_nothing_else_is_sent(live: Repo, cli, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key-0000")

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert server.count() == 1  # the preflight, and nothing after it
    assert "mini refused its first request (HTTP 401): HTTP 401: Incorrect API key" in result.err
    assert "; 3 requests not sent" in result.err
    assert "sk-not-the-right-key-0000" not in result.err + result.out

    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    assert cli(live, "run").code == 0
    assert server.count() == 1 + 4  # every item bought once the key is right


def test_an_unknown_route_is_refused_once(live: Repo, cli, server):
    live.write(PIN, live.read(PIN).replace(server.base_url, server.base_url + "/nowhere"))
    live.commit("a base_url with a typo")

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert server.count() == 1
    assert "mini refused its first request (HTTP 404)" in result.err


@pytest.mark.parametrize("status", ["401", "403", "404", "405", "501"])
def test_an_answer_for_the_whole_pin_is_sent_once_and_other_pins_are_bought(
    live: Repo, cli, server, status
):
    with_a_healthy_pin(live)
    server.fail_matching(MODEL, status)  # every request of mini, none of nano

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert server.count(of_mini) == 1  # never retried, and the pin's others never sent
    [line] = stop_lines(result.err)
    assert line.startswith(f"error: mini refused its first request (HTTP {status}): HTTP {status}:")
    assert line.endswith("; 3 requests not sent")
    kind = {"401": "auth", "403": "auth", "501": "server"}.get(status, "client")
    assert "errors: " + ", ".join(sorted([f"{kind} 1", "refused 3"])) in result.out
    # The healthy pin is bought in full, graded and written.
    assert server.count(of_nano) == 4
    assert errors(live, "nano") == []

    server.clear_faults()  # the pin is fixed: a later run buys what is missing, only that
    assert cli(live, "run").code == 0
    assert (server.count(of_mini), server.count(of_nano)) == (1 + 4, 4)


def test_the_stop_line_quotes_the_provider_redacted_and_without_terminal_escapes(
    live: Repo, cli, server
):
    server.error_text = lambda r: f"\x1b[2J\x1b[31mno {r.headers['authorization']} here"
    server.fail_matching(MODEL, "501")

    result = cli(live, "run")

    [line] = stop_lines(result.err)
    assert line == (
        "error: mini refused its first request (HTTP 501): HTTP 501: no Bearer [redacted] "
        "here; 3 requests not sent"
    )
    assert "\x1b" not in result.err and LIVE_KEY not in result.err + result.out


def test_a_refusal_after_answers_sends_only_what_was_in_flight(live: Repo, cli, server):
    live.write(PIN, live.read(PIN) + "limits:\n  concurrency: 1\n")
    live.commit("one request at a time")
    for item in ("message 1", "message 2", "message 3"):  # the key is revoked after one answer
        server.fail_matching(f'"Message: {item}"', "401")

    result = cli(live, "run")

    assert result.code == 1
    # The first answered, the second was refused; the others waited for their turn and,
    # when it came, the pin was stopped: with one request in flight, two are sent.
    assert server.count() == 2
    [line] = stop_lines(result.err)
    assert line.startswith("error: mini refused a request for the whole pin (HTTP 401)")
    assert line.endswith("; 2 requests not sent")


def test_a_spent_quota_is_not_retried_and_stops_the_pin(live: Repo, cli, server):
    server.fail_next("quota")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 1  # a 429 that waiting cannot fix: not retried either
    assert "mini refused its first request (HTTP 429)" in result.err
    assert "exceeded your current quota" in result.err


def test_anthropics_spent_credit_is_not_retried_and_stops_the_pin(live: Repo, cli, server):
    live.write("registry/models/mini.yaml", ANTHROPIC_PIN.format(url=server.root_url))
    live.commit("mini on anthropic")
    server.fail_next("quota")  # Anthropic's answer: a 400, "credit balance is too low"

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 1  # not one item's bad request: no other is sent
    assert "mini refused its first request (HTTP 400)" in result.err
    assert "credit balance is too low" in result.err


ANTHROPIC_PIN = """\
schema_version: 1
provider: anthropic
model: claude-test-1
base_url: {url}
api_key_env: OPENAI_API_KEY
params:
  max_tokens: 64
price:
  input_per_mtok: 1.0
  output_per_mtok: 5.0
  as_of: 2026-01-01
"""


def test_a_first_request_that_fails_for_itself_does_not_stop_the_others(live: Repo, cli, server):
    no_retries(live)
    server.fail_next("500")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 4  # the failed one, then the other three
    assert "refused its first request" not in result.err
    assert "server 1" in result.out


def test_a_refused_pin_leaves_the_other_pins_running(live: Repo, cli, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key-0000")

    result = cli(live, "run")

    assert result.code == 1
    # The python system answered every item, graded and written as usual.
    assert len(live.read("reports/results/labels/rules.items.jsonl").splitlines()) == 4


@pytest.mark.parametrize("status", ["400", "422", "content_filter", "context_length"])
def test_a_400_or_422_for_one_item_is_that_items_error_and_the_others_are_bought(
    live: Repo, cli, server, status
):
    server.fail_matching('"Message: message 2"', status)

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 4  # not retried, and no other request held back
    assert stop_lines(result.err) == []
    assert errors(live, "mini") == ["m-002"]
    assert "labels/mini/m-002#0: client: HTTP 4" in result.err


@pytest.mark.parametrize("status", ["400", "422"])
def test_the_same_400_or_422_for_several_items_in_a_row_stops_the_pin(
    live: Repo, cli, server, status
):
    with_items(live, cli, items_jsonl(REFUSED_AFTER + 3))
    server.fail_matching(MODEL, status)  # a parameter the model does not take, say

    result = cli(live, "run")

    assert result.code == 1 and "Traceback" not in result.err
    # In doubt after each, the pin sent its requests one at a time: exactly the row.
    assert server.count(of_mini) == REFUSED_AFTER
    [line] = stop_lines(result.err)
    expected = f"error: mini refused {REFUSED_AFTER} different requests in a row (HTTP {status})"
    assert line.startswith(expected)
    assert line.endswith("; 3 requests not sent")


@pytest.mark.parametrize("cause", ["content_filter", "context_length"])
def test_items_refused_for_their_content_never_stop_the_pin_however_many_come_first(
    live: Repo, cli, server, cause
):
    """The first items of an eval set filtered or too long, in a row: each its own error,
    and the rest are bought (run after run, they would come first again)."""
    with_items(live, cli, items_jsonl(REFUSED_AFTER + 3))
    for i in range(REFUSED_AFTER + 1):
        server.fail_matching(f'"Message: message {i}"', cause)

    result = cli(live, "run")

    assert result.code == 1
    assert server.count(of_mini) == REFUSED_AFTER + 3
    assert stop_lines(result.err) == []
    assert len(errors(live, "mini")) == REFUSED_AFTER + 1


def test_a_pin_that_has_answered_is_not_stopped_by_400s(live: Repo, cli, server):
    """A row one short, an answer, then a full row: all of them the items' own errors."""
    with_items(live, cli, items_jsonl(2 * REFUSED_AFTER))
    refused = [*range(REFUSED_AFTER - 1), *range(REFUSED_AFTER, 2 * REFUSED_AFTER)]
    for i in refused:
        server.fail_matching(f'"Message: message {i}"', "content_filter")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 2 * REFUSED_AFTER
    assert stop_lines(result.err) == []
    assert len(errors(live, "mini")) == len(refused)


def test_the_samples_of_one_refused_item_count_as_one_request(live: Repo, cli, server):
    task = "registry/tasks/labels.yaml"
    live.write(task, live.read(task).replace("repeats: 1", f"repeats: {REFUSED_AFTER}"))
    live.commit("as many samples as a row")
    server.fail_matching('"Message: message 0"', "400")

    result = cli(live, "run")

    assert result.code == 1
    assert server.count() == 4 * REFUSED_AFTER  # one body refused five times is no row
    assert stop_lines(result.err) == []


def test_a_judge_pin_refused_at_its_first_request_is_asked_nothing_more(judged: Repo, cli, server):
    server.fail_matching("You grade one response against one criterion", "501")

    result = cli(judged, "run")

    assert result.code == 1 and "Traceback" not in result.err
    assert _candidate_requests(server) == 4  # mini's, bought in full (rules is local)
    assert _judge_requests(server) == 1
    [line] = stop_lines(result.err)
    assert line.startswith("error: judge refused its first request (HTTP 501): HTTP 501:")


@pytest.mark.parametrize(
    ("kind", "status", "refuses"),
    [
        ("auth", 401, True),
        ("auth", 403, True),
        ("quota", 429, True),
        ("client", 404, True),
        ("client", 405, True),
        ("server", 501, True),  # the server does not do this at all
        ("client", 400, False),  # one item's bad request, a content filter: that item only
        ("client", 422, False),
        ("rate_limited", 429, False),
        ("server", 500, False),
        ("server", 502, False),
        ("timeout", None, False),
        ("connection", None, False),  # the breaker handles an endpoint that is down
        ("refused", 401, False),  # not an answer: a request the refusal kept back
    ],
)
def test_what_refuses_a_whole_pin(kind, status, refuses):
    assert refuses_pin(ProviderError(kind, "x", status=status)) is refuses
